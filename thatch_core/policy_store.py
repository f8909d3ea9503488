"""ChatStore's side of the messaging policies (thatch_core.policy): the tables and queries.

A mixin of :class:`thatch_core.store.ChatStore`, like the upkeep mixin: it
uses the store's connection, lock and row lookups. The ``_gate_*`` methods
run inside ``send`` / ``broadcast``'s own transaction, so a held, refused or
capped message is decided atomically with the checks before it; the public
methods are one atomic unit each.

Under thatch's design (no published standing, no sender cap, exited =
note) every gate answers "go on" and nothing is written to these tables.
"""

from __future__ import annotations

from thatch_core import clock
from thatch_core.db import immediate
from thatch_core.names import render_participant
from thatch_core.policy import (
    APPROVED, DECLINED, EXPIRED, HELD, NOTHING_HELD, Disposition, Policy, Standing, cap_reached, cap_text,
    disposition, exited_text, held_text, notice_body, refused_text, review_text, standing_of,
)
from thatch_core.staleness import is_stale
from thatch_core.store_guard import chunks, guarded, id_list, is_id, is_row_id, marks, row_id_list
from thatch_core.types import ReviewResult, SendResult

_HELD_COLS = "id, from_session, to_session, body, created_at, reason, deadline"
_STANDING_COLS = "session_id, action, prompts, source, unregistered, interactive, expiry_ms"


def _standing_row(r) -> Standing:
    return Standing(r[1], bool(r[2]), r[3], r[4], bool(r[5]), r[6])


class PolicyMixin:
    """Published standings, held messages, sender counts and their gates."""

    # -- what a host publishes -------------------------------------------------

    @guarded
    def publish_inbound(self, session_id: str, policy: Policy) -> None:
        """Record what `session_id` does with incoming mail, so every sender's
        process applies it (the recipient decides, the sender is told at once)."""
        if not is_id(session_id) or not isinstance(policy, Policy):
            return
        st = standing_of(policy)
        with immediate(self.conn):
            self.conn.execute(
                "INSERT INTO chat_inbound (session_id, action, prompts, source, unregistered, interactive, expiry_ms)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(session_id) DO UPDATE SET action = excluded.action,"
                " prompts = excluded.prompts, source = excluded.source, unregistered = excluded.unregistered,"
                " interactive = excluded.interactive, expiry_ms = excluded.expiry_ms",
                (session_id, st.action, int(st.prompts), st.source, st.unregistered, int(st.interactive),
                 st.expiry_ms))

    @guarded
    def note_user_prompt(self, session_id: str) -> None:
        """The user wrote in `session_id`: its sender counts start again."""
        if not is_id(session_id):
            return
        with immediate(self.conn):
            self.conn.execute("DELETE FROM chat_send_counts WHERE from_session = ?", (session_id,))

    def _standing(self, session_id: str) -> Standing | None:
        r = self.conn.execute(f"SELECT {_STANDING_COLS} FROM chat_inbound WHERE session_id = ?",
                              (session_id,)).fetchone()
        return None if r is None else _standing_row(r)

    # -- gates inside send / broadcast -----------------------------------------

    def _gate_send(self, from_session: str, recipient, body: str, policy: Policy, *,
                   registered: bool = True) -> SendResult | None:
        """The policies' answer to a send, or None: store it as thatch does (or, for an
        unregistered sender, refuse it as thatch does, R8)."""
        name = recipient.name
        if registered and policy.exited == "refuse" and recipient.host_kind == "opencode" and is_stale(recipient):
            return SendResult(ok=False, error=exited_text(name, left=False))
        if policy.sender_cap is not None and cap_reached(self._sent(from_session, recipient.session_id), policy):
            return SendResult(ok=False, error=cap_text(name, policy.sender_cap))
        st = self._standing(recipient.session_id)
        d = disposition(st, sender_registered=registered)
        if d.action == "refuse":
            return None if d.reason == "unregistered" else SendResult(ok=False, error=refused_text(name, d))
        if policy.sender_cap is not None:
            self.conn.execute(
                "INSERT INTO chat_send_counts (from_session, to_session, sent) VALUES (?, ?, 1)"
                " ON CONFLICT(from_session, to_session) DO UPDATE SET sent = sent + 1",
                (from_session, recipient.session_id))
        if d.action == "hold":
            held_id, deadline = self._hold(from_session, recipient.session_id, body, d, st)
            expiry = st.expiry_ms if deadline is not None else None
            return SendResult(ok=True, recipient=recipient, held_id=held_id, reply=held_text(name, d, expiry))
        return None

    def _sent(self, from_session: str, to_session: str) -> int:
        row = self.conn.execute("SELECT sent FROM chat_send_counts WHERE from_session = ? AND to_session = ?",
                                (from_session, to_session)).fetchone()
        return row[0] if row else 0

    def _gate_unregistered(self, from_session, to_name_or_id, body: str, policy: Policy) -> SendResult | None:
        """A send from a session with no directory row: held when its recipient holds
        unregistered senders, else None (the store's R8 refusal)."""
        if not is_id(from_session):
            return None
        recipient = self._find(to_name_or_id)
        if recipient is None or recipient.session_id == from_session:
            return None
        return self._gate_send(from_session, recipient, body, policy, registered=False)

    def _gate_departed(self, to_name_or_id, policy: Policy) -> str | None:
        """Under `exited: refuse`, a send to a session id that left says it exited."""
        if policy.exited != "refuse" or not is_id(to_name_or_id):
            return None
        left = self.conn.execute("SELECT 1 FROM chat_leave_tombstones WHERE session_id = ?",
                                 (to_name_or_id,)).fetchone()
        return exited_text(f'session "{to_name_or_id}"', left=True) if left else None

    def _standings(self) -> dict[str, Standing]:
        """Every published standing (one query for a broadcast's recipients)."""
        return {r[0]: _standing_row(r) for r in self.conn.execute(f"SELECT {_STANDING_COLS} FROM chat_inbound")}

    def _gate_broadcast(self, from_session: str, row, body: str, standings: dict[str, Standing]) -> str | None:
        """A broadcast recipient's standing: "held" or "refused", or None to deliver."""
        st = standings.get(row.session_id)
        d = disposition(st, sender_registered=True)
        if d.action == "hold":
            self._hold(from_session, row.session_id, body, d, st)
            return "held"
        return "refused" if d.action == "refuse" else None

    def _hold(self, from_session: str, to_session: str, body: str, d: Disposition,
              st: Standing) -> tuple[int, str | None]:
        """Park one message: (its id, its prompt's deadline). A prompting hold opens the
        recipient's one approval prompt when none is open; otherwise it waits for a review."""
        now_ms = clock.now_ms()
        deadline = None
        if d.prompts and st.expiry_ms is not None:
            open_prompt = self.conn.execute(
                "SELECT 1 FROM chat_held WHERE to_session = ? AND state = ? AND deadline > ?",
                (to_session, HELD, clock.iso(now_ms))).fetchone()
            if open_prompt is None:
                deadline = clock.iso(now_ms + st.expiry_ms)
        held_id = self.conn.execute(
            "INSERT INTO chat_held (from_session, to_session, body, created_at, reason, deadline, state)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (from_session, to_session, body, clock.iso(now_ms), d.reason, deadline, HELD)).lastrowid
        return held_id, deadline

    # -- review and expiry -----------------------------------------------------

    @guarded
    def review_held(self, session_id: str, decision: str, *, from_session: str | None = None,
                    held_id: int | None = None) -> ReviewResult:
        """The user approves or declines the oldest held message to `session_id`
        (or the one from `from_session`, or `held_id`). Approving puts it in the
        inbox (delivered on the next turn); declining drops it and tells the sender."""
        if decision not in (APPROVED, DECLINED) or not is_id(session_id):
            return ReviewResult(ok=False, text=NOTHING_HELD)
        if from_session is not None and not is_id(from_session):
            return ReviewResult(ok=False, text=NOTHING_HELD)
        query = f"SELECT {_HELD_COLS} FROM chat_held WHERE to_session = ? AND state = ?"
        args: list = [session_id, HELD]
        if from_session is not None:
            query, args = query + " AND from_session = ?", args + [from_session]
        if is_row_id(held_id):
            query, args = query + " AND id = ?", args + [held_id]
        with immediate(self.conn):
            r = self.conn.execute(query + " ORDER BY id LIMIT 1", args).fetchone()
            if r is None:
                return ReviewResult(ok=False, text=NOTHING_HELD)
            hid, sender, to, body = r[0], r[1], r[2], r[3]
            now = clock.iso()
            message_id = None
            if decision == APPROVED:
                message_id = self.conn.execute(
                    "INSERT INTO chat_messages (from_session, to_session, body, created_at, via_broadcast)"
                    " VALUES (?, ?, ?, ?, 0)", (sender, to, body, now)).lastrowid
            else:
                self._notify(hid, sender, to, body, DECLINED, None, now)
            self.conn.execute("UPDATE chat_held SET state = ?, decided_at = ?, message_id = ? WHERE id = ?",
                              (decision, now, message_id, hid))
            who = self._sender_label(sender, r[5])
        return ReviewResult(ok=True, text=review_text(decision, hid, who), held_id=hid, message_id=message_id)

    @guarded
    def expire_held(self, session_ids) -> int:
        """Drop every held message to `session_ids` whose approval prompt ran out,
        telling each sender it expired (not that it was refused)."""
        ids = id_list(session_ids)
        if not ids:
            return 0
        now = clock.iso()
        with immediate(self.conn):
            due = sorted(r for chunk in chunks(ids) for r in self.conn.execute(
                f"SELECT {_HELD_COLS} FROM chat_held WHERE state = ? AND deadline IS NOT NULL AND deadline <= ?"
                f" AND to_session IN ({marks(len(chunk))})", (HELD, now, *chunk)))
            for hid, sender, to, body, created, _reason, deadline in due:
                expiry = clock.parse_iso_ms(deadline) - clock.parse_iso_ms(created)
                self._notify(hid, sender, to, body, EXPIRED, expiry, now)
                self.conn.execute("UPDATE chat_held SET state = ?, decided_at = ? WHERE id = ?", (EXPIRED, now, hid))
        return len(due)

    def _notify(self, held_id: int, sender: str, to: str, body: str, outcome: str, expiry_ms, now: str) -> None:
        """Tell the sender: a message from the recipient's host, delivered like any other."""
        row = self._get(to)
        to_name = render_participant(row.name if row else None, to)
        self.conn.execute(
            "INSERT INTO chat_messages (from_session, to_session, body, created_at, via_broadcast)"
            " VALUES (?, ?, ?, ?, 0)", (to, sender, notice_body(held_id, to_name, body, outcome, expiry_ms), now))

    def _sender_label(self, sender: str, reason: str) -> str:
        row = self._get(sender)
        if row is not None:
            return row.name
        return f"{sender[:12]} (unregistered)" if reason == "unregistered" else render_participant(None, sender)

    @guarded
    def unregistered_message_ids(self, message_ids) -> set[int]:
        """Of `message_ids`, those approved from a sender that was unregistered when it wrote."""
        ids = row_id_list(message_ids)
        return {r[0] for chunk in chunks(ids) for r in self.conn.execute(
            f"SELECT message_id FROM chat_held WHERE reason = 'unregistered' AND message_id IN ({marks(len(chunk))})",
            chunk)}
