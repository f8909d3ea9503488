"""ChatStore: the shared directory and inbox over one SQLite connection.

State is shared (every process on the machine reads and writes these tables),
delivery is local (the poller of the hosting process). Each public method is
one atomic unit: a single read statement, or one ``BEGIN IMMEDIATE``
transaction. That is what lets :func:`~thatch_core.store_guard.guarded` re-run a method whose
statement hit a lock, and what makes a crash mid-method leave nothing half
written. No raw ``sqlite3`` exception leaves this class: they become
:class:`~thatch_core.db.StoreError` / :class:`~thatch_core.db.StoreBusy`.
"""

from __future__ import annotations

import functools
import random
import sqlite3
import threading
from typing import Iterable, Sequence

from thatch_core import clock, later
from thatch_core.constants import MAX_BODY_LEN
from thatch_core.db import StoreError, immediate
from thatch_core.git import detect_worktree_kind
from thatch_core.names import NAME_POOL, format_name, render_participant, topic_from_title
from thatch_core.staleness import is_stale
from thatch_core.store_guard import (
    CHUNK, HOST_KINDS, ROW_COLS, IdMemo, chunks, guarded, is_id, is_text, marks, row_id_list, row_of,
    shown, text_or_none, text_problem,
)
from thatch_core.policy import DEFAULT as DEFAULT_POLICY
from thatch_core.policy import Policy
from thatch_core.policy_store import PolicyMixin
from thatch_core.store_later import LaterMixin, later_body_problem, parts_of
from thatch_core.store_upkeep import UpkeepMixin
from thatch_core.types import (
    BroadcastResult, FeedRow, InboxItem, NotificationRow, RegisterResult, SendResult,
    SessionRow, StatusResult,
)

ERR_EMPTY = "Message body cannot be empty."
ERR_TOO_LONG = f"Message too long (max {MAX_BODY_LEN} characters)."
ERR_NOT_REGISTERED = "You are not registered - call chat_register first."
ERR_SELF = "You cannot message yourself."
ERR_TOMBSTONED = "leave tombstone active"
ERR_NO_SESSION_ID = "A session id is required to register."
ERR_BODY_TYPE = "Message body must be text."


def err_body_text(problem: str) -> str:
    return f"Message body must be valid text ({problem})."


def err_id_text(problem: str) -> str:
    return f"A session id must be valid text ({problem})."


def _as_text(value) -> str:
    """A recipient as the refusal names it: the text (a lone surrogate escaped), "" for None."""
    if value is None:
        return ""
    if isinstance(value, str):
        return shown(value)
    try:
        return str(value)
    except ValueError:  # an int too long to print
        return type(value).__name__


def err_no_recipient(to: str) -> str:
    return f'No registered session named "{to}". Use chat_list to see who is available.'


def err_bad_kind(kind: str) -> str:
    return f'Unknown host kind "{kind}" (expected one of: {", ".join(HOST_KINDS)}).'


@functools.lru_cache(maxsize=None)
def _in_list(update: str, n: int) -> str:
    """``update`` completed with ``n`` placeholders: one string per shape, so
    sqlite3's statement cache (keyed by the SQL text) prepares it once."""
    return f"{update} ({marks(n)})"


@functools.lru_cache(maxsize=None)
def _pending_sql(n: int) -> str:
    """The pending-notification query for ``n`` recipients (built once per ``n``)."""
    return ("SELECT m.id, m.to_session, m.from_session, s.name FROM chat_messages m"
            " LEFT JOIN chat_sessions s ON s.session_id = m.from_session"
            f" WHERE m.read_at IS NULL AND m.to_session IN ({marks(n)})"
            " AND (m.delivered_at IS NULL OR m.delivered_at <= ?)"
            " AND EXISTS (SELECT 1 FROM chat_sessions cs WHERE cs.session_id = m.to_session)"
            " ORDER BY m.id")


class ChatStore(UpkeepMixin, PolicyMixin, LaterMixin):
    """Directory (``chat_sessions``), inbox (``chat_messages``) and upkeep.

    Prune, continuation and host-pid anchors come from
    :class:`~thatch_core.store_upkeep.UpkeepMixin`; argument checks and the
    call guard from :mod:`thatch_core.store_guard` (D-store-16, D-store-17).
    ``rng`` picks the pool base of a new name; the simulator passes a seeded
    one. The default is seeded too (D-store-1): names stay unique whatever
    the draw, because the counter, not the base, makes them unique.
    """

    def __init__(self, conn: sqlite3.Connection, *, rng: random.Random | None = None):
        self.conn = conn
        self.rng = rng if rng is not None else random.Random(0)
        self._lock = threading.RLock()
        # The poll path's argument check, memoised on the hosted list (D-speed-core-4).
        self._hosted_ids = IdMemo()

    # ------------------------------------------------------------------
    # Directory
    # ------------------------------------------------------------------

    def _get(self, session_id: str) -> SessionRow | None:
        r = self.conn.execute(
            f"SELECT {ROW_COLS} FROM chat_sessions WHERE session_id = ?", (session_id,)
        ).fetchone()
        return row_of(r) if r else None

    def _by_name(self, name: str) -> SessionRow | None:
        r = self.conn.execute(
            f"SELECT {ROW_COLS} FROM chat_sessions WHERE name = ? COLLATE NOCASE", (name,)
        ).fetchone()
        return row_of(r) if r else None

    def _find(self, name_or_id: str) -> SessionRow | None:
        # Name first, as the real thatch resolves it: an assigned name never
        # contains `_` and every session id does, so neither can shadow the
        # other; a legacy free-text name spelled exactly like another
        # session's id would win (D-real-store-3).
        if not is_id(name_or_id):
            return None
        return self._by_name(name_or_id.strip()) or self._get(name_or_id)

    @guarded
    def get(self, session_id: str) -> SessionRow | None:
        """The directory row of ``session_id``, or None when not registered."""
        return self._get(session_id) if is_id(session_id) else None

    @guarded
    def find(self, name_or_id: str) -> SessionRow | None:
        """Resolve a display name (case-insensitively), else a session id."""
        return self._find(name_or_id)

    @guarded
    def list_sessions(self) -> list[SessionRow]:
        """Every registered session, by name (roster order is sort_roster's job)."""
        rows = self.conn.execute(
            f"SELECT {ROW_COLS} FROM chat_sessions ORDER BY name COLLATE NOCASE, session_id"
        ).fetchall()
        return [row_of(r) for r in rows]

    @guarded
    def has_tombstone(self, session_id: str) -> bool:
        """True while a leave tombstone suppresses re-joining (R7)."""
        if not is_id(session_id):
            return False
        return self.conn.execute(
            "SELECT 1 FROM chat_leave_tombstones WHERE session_id = ?", (session_id,)
        ).fetchone() is not None

    @guarded
    def register(self, session_id: str, *, kind: str = "opencode", project: str | None = None,
                 directory: str | None = None, title: str | None = None, auto: bool = True,
                 explicit: bool = False, policy: Policy = DEFAULT_POLICY) -> RegisterResult:
        """Join the directory, or reclaim an existing row (R1-R7).

        One ``BEGIN IMMEDIATE`` transaction holds the tombstone gate, the
        reclaim check, the counter bump and the insert, so an auto-register
        racing a ``session.deleted`` either lands before the leave (and is
        removed by it) or sees the tombstone: never resurrects a dead session.
        Under the later design's name claims (``policy.name_claims``) a new row
        records its name, and a pruned session's own id gets that name back.
        """
        if isinstance(session_id, str) and text_problem(session_id):
            return RegisterResult(ok=False, session_id=shown(session_id), error=err_id_text(text_problem(session_id)))
        if not is_id(session_id):
            return RegisterResult(ok=False, session_id=session_id, error=ERR_NO_SESSION_ID)
        if not isinstance(kind, str) or kind not in HOST_KINDS:
            return RegisterResult(ok=False, session_id=session_id, error=err_bad_kind(kind))
        # A title and a project are advisory: a non-text value is no value.
        project = text_or_none(project)
        topic = topic_from_title(text_or_none(title))
        # Filesystem probe outside the write lock: it can be slow, and the
        # worktree kind is only used when a new row is minted.
        worktree = detect_worktree_kind(directory)
        now = clock.iso()
        with immediate(self.conn):
            rejoined = False
            if explicit:
                # An explicit join is the one way back after a leave; the
                # row is gone, so the draw below mints a fresh name.
                rejoined = self.conn.execute(
                    "DELETE FROM chat_leave_tombstones WHERE session_id = ?", (session_id,)
                ).rowcount > 0
            elif self.conn.execute("SELECT 1 FROM chat_leave_tombstones WHERE session_id = ?",
                                   (session_id,)).fetchone():
                return RegisterResult(ok=False, session_id=session_id, tombstoned=True,
                                      error=ERR_TOMBSTONED)
            existing = self._get(session_id)
            if existing is not None:
                new_topic = existing.topic
                if existing.auto and topic is not None and topic != existing.topic:
                    new_topic = topic
                self.conn.execute(
                    "UPDATE chat_sessions SET last_seen = ?, topic = ? WHERE session_id = ?",
                    (now, new_topic, session_id))
                return RegisterResult(ok=True, session_id=session_id, name=existing.name,
                                      reclaimed=True, topic=new_topic)
            name, claimed = self._new_row(session_id, kind, project, topic, auto, worktree, now, policy)
            # A session that comes back after a prune leaves the prune record;
            # mail still queued for its id has a registered recipient again,
            # which no sweep touches.
            self.conn.execute("DELETE FROM chat_pruned WHERE session_id = ?", (session_id,))
        return RegisterResult(ok=True, session_id=session_id, name=name, drawn=not claimed, topic=topic,
                              rejoined=rejoined, claimed=claimed)

    def _draw(self) -> str:
        base = self.rng.choice(NAME_POOL)
        # `next` is the base's next unassigned number: a first draw hands out
        # 1 and stores 2; every draw hands out `next` and moves it on.
        # RETURNING rows must be fetched before COMMIT (docs/pitfalls.md).
        drawn = self.conn.execute(
            "INSERT INTO chat_name_counters (base, next) VALUES (?, 2) "
            "ON CONFLICT(base) DO UPDATE SET next = next + 1 RETURNING next - 1",
            (base,),
        ).fetchone()[0]
        return format_name(base, drawn)

    def _new_row(self, session_id, kind, project, topic, auto, worktree, now, policy) -> tuple[str, bool]:
        """Insert a new row: (its name, whether it is a pruned session's claimed name).
        Without name claims (seed 000's design) the name is always freshly drawn."""
        if not (isinstance(policy, Policy) and policy.name_claims):
            return self._mint_and_insert(session_id, kind, project, topic, auto, worktree, now), False
        claimed = self._claimed_name(session_id)
        if claimed is not None:
            self._insert_row(session_id, claimed, kind, project, topic, auto, worktree, now)
        name = claimed or self._mint_and_insert(session_id, kind, project, topic, auto, worktree, now)
        self._claim_name(session_id, name)
        return name, claimed is not None

    def _mint_and_insert(self, session_id, kind, project, topic, auto, worktree, now) -> str:
        # A minted name can only collide with a legacy (claimed-era) name
        # that happens to look like one; the counter moves on and that
        # number is simply never issued (still never reissued).
        for _ in range(100):
            name = self._draw()
            try:
                self._insert_row(session_id, name, kind, project, topic, auto, worktree, now)
                return name
            except sqlite3.IntegrityError:
                if self._get(session_id) is not None:  # cannot happen under the write lock
                    raise
        raise StoreError("could not mint a free name after 100 draws")

    def _insert_row(self, session_id, name, kind, project, topic, auto, worktree, now) -> None:
        self.conn.execute(
            "INSERT INTO chat_sessions (session_id, name, topic, project, host_kind, auto,"
            " worktree, registered_at, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (session_id, name, topic, project, kind, 1 if auto else 0, worktree or "", now, now))

    @guarded
    def unregister(self, session_id: str) -> bool:
        """Leave: delete the row and write a tombstone in one transaction (R7).

        The tombstone is written even when no row exists, so a leave that
        overtakes an in-flight auto-registration still sticks (seed 000; the
        real thatch writes nothing for an id without a row: D-real-store-4).
        Returns whether a row was deleted. Messages stay as history (R11). An
        unusable id (None, not a string, blank) is refused: False, no write.
        """
        if not is_id(session_id):
            return False
        with immediate(self.conn):
            deleted = self.conn.execute(
                "DELETE FROM chat_sessions WHERE session_id = ?", (session_id,)).rowcount
            self.conn.execute(
                "INSERT INTO chat_leave_tombstones (session_id, left_at) VALUES (?, ?) "
                "ON CONFLICT(session_id) DO UPDATE SET left_at = excluded.left_at",
                (session_id, clock.iso()))
        return deleted > 0

    @guarded
    def refresh_topic(self, session_id: str, title: str | None) -> None:
        """Auto rows follow the live title; placeholders and legacy rows are left alone (R3)."""
        topic = topic_from_title(text_or_none(title))
        if topic is None or not is_id(session_id):
            return
        with immediate(self.conn):
            self.conn.execute(
                "UPDATE chat_sessions SET topic = ? WHERE session_id = ? AND auto = 1 "
                "AND topic IS NOT ?", (topic, session_id, topic))

    @guarded
    def heartbeat(self, session_ids: Iterable[str]) -> None:
        """Refresh ``last_seen``; ids without a row are a silent no-op (R13).

        A bare string is one id; values that are not ids are skipped.
        """
        ids = self._hosted_ids(session_ids)
        if not ids:
            return
        self._stamp_now("UPDATE chat_sessions SET last_seen = ? WHERE session_id IN", ids)

    def _stamp_now(self, update: str, keys: Sequence) -> None:
        """Run ``update`` (ending in ``IN``) with now over every chunk of ``keys``.

        One transaction and one timestamp for all chunks, so a long id list
        stamps atomically and every row gets the same instant.
        """
        now = clock.iso()
        with immediate(self.conn):
            if len(keys) <= CHUNK:  # a poll's few hosted ids: no chunking machinery
                self.conn.execute(_in_list(update, len(keys)), (now, *keys))
                return
            for chunk in chunks(keys):
                self.conn.execute(_in_list(update, len(chunk)), (now, *chunk))

    # ------------------------------------------------------------------
    # Messages
    # ------------------------------------------------------------------

    @staticmethod
    def _check_body(body: str | None, policy: Policy = DEFAULT_POLICY) -> tuple[str | None, str | None]:
        if body is not None and not isinstance(body, str):
            return None, ERR_BODY_TYPE
        if body is not None and text_problem(body):
            return None, err_body_text(text_problem(body))
        trimmed = (body or "").strip()
        later_cap = policy.split_part_len is not None or policy.max_body_chars != MAX_BODY_LEN
        if not trimmed:
            return None, (later.empty_text(later.units(body or "")) if later_cap else ERR_EMPTY)
        if later_cap:
            problem = later_body_problem(trimmed, policy)  # the later design's cap (D-later-3)
            return (None, problem) if problem else (trimmed, None)
        if len(trimmed) > MAX_BODY_LEN:
            return None, ERR_TOO_LONG
        return trimmed, None

    @guarded
    def send(self, from_session: str, to_name_or_id: str, body: str, *,
             policy: Policy = DEFAULT_POLICY) -> SendResult:
        """Post one message (R9); the checks and the insert are one transaction.

        `policy` is the sender's messaging policy; the recipient's published
        standing applies whatever it is (thatch_core.policy_store)."""
        policy = policy if isinstance(policy, Policy) else DEFAULT_POLICY
        trimmed, err = self._check_body(body, policy)
        if err:
            return SendResult(ok=False, error=err)
        with immediate(self.conn):
            if not is_id(from_session) or self._get(from_session) is None:
                return (self._gate_unregistered(from_session, to_name_or_id, trimmed, policy)
                        or SendResult(ok=False, error=ERR_NOT_REGISTERED))
            recipient = self._find(to_name_or_id)
            if recipient is None:
                departed = self._gate_departed(to_name_or_id, policy)
                return SendResult(ok=False, error=departed or err_no_recipient(_as_text(to_name_or_id)))
            if recipient.session_id == from_session:
                return SendResult(ok=False, error=ERR_SELF)
            gated = self._gate_send(from_session, recipient, trimmed, policy)
            if gated is not None:
                return gated
            if policy.later:
                return self._send_later(from_session, recipient, trimmed, policy)
            cur = self.conn.execute(
                "INSERT INTO chat_messages (from_session, to_session, body, created_at, via_broadcast)"
                " VALUES (?, ?, ?, ?, 0)",
                (from_session, recipient.session_id, trimmed, clock.iso()))
            message_id = cur.lastrowid
        return SendResult(ok=True, message_id=message_id, recipient=recipient,
                          recipient_stale=is_stale(recipient))

    def _send_later(self, from_session: str, recipient: SessionRow, trimmed: str, policy: Policy) -> SendResult:
        """The later design's send, in send's transaction: a retry of a copy
        still unread stores nothing (D-later-1); a long body is stored as its
        parts, all or nothing (D-later-3)."""
        parts = parts_of(trimmed, policy)
        stale = is_stale(recipient)
        if self._unread_copy(from_session, recipient.session_id, parts, 0, policy.retry_dedup_ms):
            return SendResult(ok=True, recipient=recipient, recipient_stale=stale, suppressed=True, parts=len(parts))
        ids = self._insert_parts(from_session, recipient.session_id, parts, clock.iso(), 0)
        return SendResult(ok=True, message_id=ids[0], recipient=recipient, recipient_stale=stale,
                          message_ids=tuple(ids), parts=len(ids))

    @guarded
    def broadcast(self, from_session: str, body: str, *, policy: Policy = DEFAULT_POLICY) -> BroadcastResult:
        """One inbox row per other registered session, all or nothing (R12, R35).

        Stale opencode rows are skipped and reported (their harness stopped);
        mcp rows always receive (their age only means between turns). Under
        the later design each recipient's batch is the body's parts, and a
        recipient whose identical copy is still unread gets nothing new.
        """
        policy = policy if isinstance(policy, Policy) else DEFAULT_POLICY
        trimmed, err = self._check_body(body, policy)
        if err:
            return BroadcastResult(ok=False, error=err)
        recipients, skipped, ids, suppressed = [], [], [], []
        parts = parts_of(trimmed, policy)
        withheld: dict[str, list[str]] = {"held": [], "refused": []}
        with immediate(self.conn):
            if not is_id(from_session) or self._get(from_session) is None:
                return BroadcastResult(ok=False, error=ERR_NOT_REGISTERED)
            now_ms = clock.now_ms()
            now = clock.iso(now_ms)
            rows = self.conn.execute(
                f"SELECT {ROW_COLS} FROM chat_sessions WHERE session_id != ? "
                "ORDER BY name COLLATE NOCASE, session_id", (from_session,)).fetchall()
            standings = self._standings()
            for row in map(row_of, rows):
                if row.host_kind == "opencode" and is_stale(row, now_ms):
                    skipped.append(row.name)
                    continue
                gated = self._gate_broadcast(from_session, row, trimmed, standings)
                if gated is not None:
                    withheld[gated].append(row.name)
                    continue
                if policy.later:
                    if self._unread_copy(from_session, row.session_id, parts, 1, policy.retry_dedup_ms):
                        suppressed.append(row.name)
                    else:
                        ids.extend(self._insert_parts(from_session, row.session_id, parts, now, 1))
                    recipients.append(row.name)
                    continue
                cur = self.conn.execute(
                    "INSERT INTO chat_messages (from_session, to_session, body, created_at,"
                    " via_broadcast) VALUES (?, ?, ?, ?, 1)",
                    (from_session, row.session_id, trimmed, now))
                recipients.append(row.name)
                ids.append(cur.lastrowid)
        return BroadcastResult(ok=True, recipients=tuple(recipients), skipped=tuple(skipped),
                               message_ids=tuple(ids), held=tuple(withheld["held"]),
                               refused=tuple(withheld["refused"]), suppressed=tuple(suppressed), parts=len(parts))

    @guarded
    def read(self, session_id: str) -> list[InboxItem]:
        """Drain unread mail oldest-first, stamping exactly what was selected (R10).

        The stamp is scoped to the selected ids (never re-derived): mail that
        arrives between the SELECT and the UPDATE stays unread for the next
        nudge. ``AND read_at IS NULL ... RETURNING`` makes the stamp the
        claim: of two readers racing on one inbox, each message is returned
        by exactly one of them.
        """
        if not is_id(session_id):
            return []
        rows = self.conn.execute(
            "SELECT m.id, m.from_session, s.name, m.body, m.created_at FROM chat_messages m"
            " LEFT JOIN chat_sessions s ON s.session_id = m.from_session"
            " WHERE m.to_session = ? AND m.read_at IS NULL ORDER BY m.id",
            (session_id,)).fetchall()
        if not rows:
            return []
        claimed: set[int] = set()
        with immediate(self.conn):
            now = clock.iso()
            for chunk in chunks([r[0] for r in rows]):
                claimed.update(x[0] for x in self.conn.execute(
                    f"UPDATE chat_messages SET read_at = ? WHERE id IN ({marks(len(chunk))})"
                    " AND read_at IS NULL RETURNING id", (now, *chunk)).fetchall())
        return [InboxItem(id=i, from_session=f, from_name=render_participant(n, f), body=b,
                          created_at=c) for i, f, n, b, c in rows if i in claimed]

    @guarded
    def unread_count(self, session_id: str) -> int:
        """Unread mail addressed to ``session_id``."""
        if not is_id(session_id):
            return 0
        return self.conn.execute(
            "SELECT COUNT(*) FROM chat_messages WHERE to_session = ? AND read_at IS NULL",
            (session_id,)).fetchone()[0]

    @guarded
    def status(self, session_id: str) -> StatusResult:
        """Registered flag plus pending/total; touches ``last_seen`` (R34)."""
        if not is_id(session_id):
            return StatusResult(registered=False)
        with immediate(self.conn):
            row = self._get(session_id)
            if row is None:
                return StatusResult(registered=False)
            self.conn.execute("UPDATE chat_sessions SET last_seen = ? WHERE session_id = ?",
                              (clock.iso(), session_id))
            total, pending = self.conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(CASE WHEN read_at IS NULL THEN 1 ELSE 0 END), 0)"
                " FROM chat_messages WHERE to_session = ?", (session_id,)).fetchone()
        return StatusResult(registered=True, name=row.name, pending=pending, total=total)

    @guarded
    def pending_by_project(self, project: str) -> list[tuple[str, int]]:
        """``(name, unread)`` for every registered session of ``project`` with mail."""
        if not is_text(project):
            return []
        return [(n, c) for n, c in self.conn.execute(
            "SELECT cs.name, COUNT(*) FROM chat_messages m"
            " JOIN chat_sessions cs ON cs.session_id = m.to_session"
            " WHERE m.read_at IS NULL AND cs.project = ?"
            " GROUP BY cs.session_id ORDER BY cs.name COLLATE NOCASE", (project,))]

    @guarded
    def message_feed(self) -> list[FeedRow]:
        """Every message oldest-first with rendered participants (``chat tail``, R28)."""
        rows = self.conn.execute(
            "SELECT m.id, fs.name, ts.name, m.from_session, m.to_session, m.via_broadcast,"
            " m.body, m.created_at, m.read_at, fs.topic, ts.topic FROM chat_messages m"
            " LEFT JOIN chat_sessions fs ON fs.session_id = m.from_session"
            " LEFT JOIN chat_sessions ts ON ts.session_id = m.to_session ORDER BY m.id").fetchall()
        return [FeedRow(id=i, from_=render_participant(fn, f), to=render_participant(tn, t),
                        from_session=f, to_session=t, via_broadcast=bool(vb), body=b,
                        created_at=c, read_at=r, from_topic=ft, to_topic=tt)
                for i, fn, tn, f, t, vb, b, c, r, ft, tt in rows]

    @guarded
    def pending_notifications(self, session_ids: Iterable[str],
                              renudge_cutoff_iso: str) -> list[NotificationRow]:
        """Unread mail to registered ``session_ids`` never delivered or delivered
        at/before the cutoff (R18). ``from_name`` is None for a departed sender.

        A cutoff that is not an ISO string selects never-delivered mail only.
        """
        ids = self._hosted_ids(session_ids)
        if not ids:
            return []
        cutoff = renudge_cutoff_iso
        # The poller's ISO cutoff is plain ASCII text: it needs no encoding check.
        if not (type(cutoff) is str and cutoff.isascii()) and not is_text(cutoff):
            cutoff = ""
        if len(ids) <= CHUNK:  # one query, already in id order
            return [NotificationRow(id=i, to_session=t, from_session=f, from_name=n)
                    for i, t, f, n in self.conn.execute(_pending_sql(len(ids)), (*ids, cutoff))]
        out: list[NotificationRow] = []
        for chunk in chunks(ids):
            out.extend(NotificationRow(id=i, to_session=t, from_session=f, from_name=n)
                       for i, t, f, n in self.conn.execute(_pending_sql(len(chunk)), (*chunk, cutoff)))
        out.sort(key=lambda r: r.id)
        return out

    @guarded
    def mark_delivered(self, ids: Iterable[int]) -> None:
        """Stamp ``delivered_at`` (a re-stamp restarts the re-nudge timer, R21).

        Values that are not positive int message ids are skipped.
        """
        ids = row_id_list(ids)
        if not ids:
            return
        self._stamp_now("UPDATE chat_messages SET delivered_at = ? WHERE id IN", ids)
