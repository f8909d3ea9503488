"""ChatStore's part of the later design's options (thatch_core.later, D-later-*).

A mixin of :class:`thatch_core.store.ChatStore`: machinery markers, name
claims, paging one message, and the retry and split helpers the store's
send and broadcast call inside their own transaction. Under seed 000's
design none of these is called, and none of their tables is written.
"""

from __future__ import annotations

from thatch_core import clock
from thatch_core.constants import AUTO_TTL_DAYS, DAY_MS
from thatch_core.db import immediate
from thatch_core.later import MACHINERY_REASON, max_body, part_len, split_body, too_long_text, units
from thatch_core.names import render_participant
from thatch_core.store_guard import guarded, is_id, is_row_id, marks
from thatch_core.types import InboxItem


def later_body_problem(trimmed: str, policy) -> str | None:
    """The later design's whole-body cap, counted in UTF-16 units; the refusal names the count."""
    limit = max_body(policy.max_body_chars)
    count = units(trimmed)
    return too_long_text(count, limit) if count > limit else None


def parts_of(trimmed: str, policy) -> list[str]:
    """The rows one send stores: the body, or its parts when splitting is on and it is over budget."""
    return split_body(trimmed, part_len(policy.split_part_len))


class LaterMixin:
    """The later design's store methods of ChatStore."""

    # -- retry de-duplication and split batches (inside the caller's transaction) --

    def _unread_copy(self, from_session: str, to_session: str, parts: list[str], via_broadcast: int,
                     window_ms: int | None) -> bool:
        """Is a copy of this batch (every one of ``parts``) in the recipient's
        inbox from this sender by the same delivery kind within the window,
        with any of its parts still unread? A split retry stays suppressed
        while any part is unread; a different body that only shares a part
        (the same first page) is no copy and is stored (D-later-9)."""
        if window_ms is None:
            return False
        cutoff = clock.iso(clock.now_ms() - window_ms)
        bodies = sorted(set(parts))
        found, unread = self.conn.execute(
            "SELECT COUNT(DISTINCT body), COALESCE(MAX(read_at IS NULL), 0) FROM chat_messages"
            " WHERE from_session = ? AND to_session = ? AND via_broadcast = ? AND created_at >= ?"
            f" AND body IN ({marks(len(bodies))})",
            (from_session, to_session, via_broadcast, cutoff, *bodies)).fetchone()
        return bool(unread) and found == len(bodies)

    def _insert_parts(self, from_session: str, to_session: str, parts: list[str], now: str,
                      via_broadcast: int) -> list[int]:
        """Insert one send's rows in order, in the caller's transaction (all or nothing)."""
        ids = []
        for part in parts:
            cur = self.conn.execute(
                "INSERT INTO chat_messages (from_session, to_session, body, created_at, via_broadcast)"
                " VALUES (?, ?, ?, ?, ?)", (from_session, to_session, part, now, via_broadcast))
            ids.append(cur.lastrowid)
        return ids

    # -- paged reads ------------------------------------------------------------

    @guarded
    def message_for(self, session_id: str, message_id: int) -> InboxItem | None:
        """One message addressed to ``session_id``, read or not; marks nothing."""
        if not is_id(session_id) or not is_row_id(message_id):
            return None
        r = self.conn.execute(
            "SELECT m.id, m.from_session, s.name, m.body, m.created_at FROM chat_messages m"
            " LEFT JOIN chat_sessions s ON s.session_id = m.from_session"
            " WHERE m.id = ? AND m.to_session = ?", (message_id, session_id)).fetchone()
        if r is None:
            return None
        i, f, n, b, c = r
        return InboxItem(id=i, from_session=f, from_name=render_participant(n, f), body=b, created_at=c)

    # -- machinery sessions -------------------------------------------------------

    @guarded
    def mark_machinery(self, session_id: str, reason: str = MACHINERY_REASON) -> bool:
        """Write the durable marker of a session the plugin created itself."""
        if not is_id(session_id):
            return False
        with immediate(self.conn):
            self.conn.execute(
                "INSERT INTO chat_machinery (session_id, reason, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT(session_id) DO NOTHING", (session_id, str(reason), clock.iso()))
        return True

    @guarded
    def is_machinery(self, session_id: str) -> bool:
        if not is_id(session_id):
            return False
        return self.conn.execute("SELECT 1 FROM chat_machinery WHERE session_id = ?",
                                 (session_id,)).fetchone() is not None

    @guarded
    def drop_machinery_row(self, session_id: str) -> bool:
        """Delete the directory row of a marked session (a corpse); True when one went."""
        if not is_id(session_id) or not self.conn.execute(
                "SELECT 1 FROM chat_machinery WHERE session_id = ?", (session_id,)).fetchone():
            return False  # the common case, a participant: no write transaction
        with immediate(self.conn):
            return self.conn.execute(
                "DELETE FROM chat_sessions WHERE session_id = ?"
                " AND EXISTS (SELECT 1 FROM chat_machinery WHERE session_id = ?)",
                (session_id, session_id)).rowcount > 0

    @guarded
    def age_machinery(self) -> int:
        """Markers older than the auto-row TTL go (session ids are never reused)."""
        cutoff = clock.iso(clock.now_ms() - AUTO_TTL_DAYS * DAY_MS)
        with immediate(self.conn):
            return max(self.conn.execute("DELETE FROM chat_machinery WHERE created_at < ?",
                                         (cutoff,)).rowcount, 0)

    # -- name claims (inside register's transaction) ---------------------------------

    def _claim_name(self, session_id: str, name: str) -> None:
        self.conn.execute("INSERT INTO chat_name_claims (name, session_id) VALUES (?, ?)"
                          " ON CONFLICT(name) DO UPDATE SET session_id = excluded.session_id", (name, session_id))

    def _claimed_name(self, session_id: str) -> str | None:
        """The name a pruned session claimed, when it is free again (None otherwise)."""
        pruned = self.conn.execute("SELECT 1 FROM chat_pruned WHERE session_id = ?", (session_id,)).fetchone()
        if pruned is None:
            return None
        row = self.conn.execute(
            "SELECT c.name FROM chat_name_claims c WHERE c.session_id = ?"
            " AND NOT EXISTS (SELECT 1 FROM chat_sessions s WHERE s.name = c.name COLLATE NOCASE)"
            " ORDER BY c.rowid DESC LIMIT 1", (session_id,)).fetchone()
        return row[0] if row else None

