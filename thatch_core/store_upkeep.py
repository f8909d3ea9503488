"""ChatStore upkeep: the hourly prune, continuation adoption, host-pid anchors.

A mixin of :class:`thatch_core.store.ChatStore` (it uses the store's
connection, lock and row lookup); split out because these are the store's
maintenance paths (R26, R32, R33), not the directory and inbox every tool
call touches. Each method is one atomic unit like the rest of the store.
"""

from __future__ import annotations

from thatch_core import clock
from thatch_core.constants import AUTO_TTL_DAYS, DAY_MS, HOST_PID_FRESH_S, TOMBSTONE_TTL_DAYS
from thatch_core.db import immediate
from thatch_core.store_guard import guarded, is_id, is_row_id
from thatch_core.types import PruneResult


class UpkeepMixin:
    """Prune, continuation and host-pid methods of ChatStore."""

    @guarded
    def prune(self) -> PruneResult:
        """One hourly prune pass, one transaction (R26), as the real thatch sweeps.

        Auto rows silent for longer than the TTL leave the directory (recorded
        in ``chat_pruned``); then unread mail older than the same cutoff to any
        recipient no longer in the directory (pruned now or earlier, or gone by
        a leave) is deleted. Newer unread mail to an absent recipient waits
        for a later pass, once it ages past the moving cutoff. Read mail is
        history and stays. Counters are never touched: names are never reissued.
        """
        now_ms = clock.now_ms()
        now = clock.iso(now_ms)
        cutoff = clock.iso(now_ms - AUTO_TTL_DAYS * DAY_MS)
        with immediate(self.conn):
            pruned = [r[0] for r in self.conn.execute(
                "DELETE FROM chat_sessions WHERE auto = 1 AND last_seen < ? RETURNING session_id",
                (cutoff,)).fetchall()]
            self.conn.executemany(
                "INSERT INTO chat_pruned (session_id, pruned_at) VALUES (?, ?) "
                "ON CONFLICT(session_id) DO UPDATE SET pruned_at = excluded.pruned_at",
                [(sid, now) for sid in pruned])
            swept = self.conn.execute(
                "DELETE FROM chat_messages WHERE read_at IS NULL AND created_at < ?"
                " AND to_session NOT IN (SELECT session_id FROM chat_sessions)", (cutoff,)).rowcount
            expired = [r[0] for r in self.conn.execute(
                "DELETE FROM chat_leave_tombstones WHERE left_at < ? RETURNING session_id",
                (clock.iso(now_ms - TOMBSTONE_TTL_DAYS * DAY_MS),)).fetchall()]
        return PruneResult(pruned=tuple(sorted(pruned)), expired_tombstones=tuple(sorted(expired)),
                           swept_messages=max(swept, 0))

    @guarded
    def continue_session(self, old_id: str, new_id: str) -> bool:
        """Move ``old_id``'s identity to ``new_id`` in one transaction (R33).

        The identity is the directory row if ``old_id`` is registered
        (renamed in place: the name does not change, ``last_seen`` becomes
        now because the new id is live), or its leave tombstone if it left:
        a leave must survive the fork too, or the new id's hook would
        silently rejoin under a fresh name (R7). Either way mail in both
        columns, host-pid anchors and any tombstone follow, and both ids
        leave ``chat_pruned`` (the new id is live, not pruned).

        Returns True when an identity moved. False, changing nothing, when
        the ids are unusable or equal, when ``old_id`` has neither a row nor
        a tombstone, or when ``new_id`` is already known (registered or
        tombstoned): an existing identity is never overwritten.
        """
        if not (is_id(old_id) and is_id(new_id)) or old_id == new_id:
            return False
        c = self.conn
        with immediate(c):
            known = ("SELECT 1 FROM chat_sessions WHERE session_id = ?1 UNION ALL "
                     "SELECT 1 FROM chat_leave_tombstones WHERE session_id = ?1")
            if c.execute(known, (old_id,)).fetchone() is None or c.execute(known, (new_id,)).fetchone():
                return False
            c.execute("UPDATE chat_sessions SET session_id = ?, last_seen = ? WHERE session_id = ?",
                      (new_id, clock.iso(), old_id))
            c.execute("UPDATE chat_leave_tombstones SET session_id = ? WHERE session_id = ?",
                      (new_id, old_id))
            c.execute("UPDATE chat_messages SET to_session = ? WHERE to_session = ?", (new_id, old_id))
            c.execute("UPDATE chat_messages SET from_session = ? WHERE from_session = ?",
                      (new_id, old_id))
            c.execute("UPDATE chat_host_pids SET session_id = ? WHERE session_id = ?", (new_id, old_id))
            c.execute("DELETE FROM chat_pruned WHERE session_id IN (?, ?)", (old_id, new_id))
        return True

    @guarded
    def record_host_pid(self, pid: int, session_id: str) -> bool:
        """Anchor ``pid`` (a host process) to ``session_id`` as of now (R32).

        True when recorded; False (nothing written) for a pid that is not a
        positive int or an unusable session id.
        """
        if not is_row_id(pid) or not is_id(session_id):
            return False
        with immediate(self.conn):
            self.conn.execute(
                "INSERT INTO chat_host_pids (ppid, session_id, seen_at) VALUES (?, ?, ?) "
                "ON CONFLICT(ppid) DO UPDATE SET session_id = excluded.session_id,"
                " seen_at = excluded.seen_at", (pid, session_id, clock.iso()))
        return True

    @guarded
    def resolve_host_pid(self, pid: int) -> str | None:
        """The registered session anchored to ``pid`` if recorded within 600 s (bounds pid
        reuse). An anchor to a session no longer in the directory resolves to nothing."""
        if not is_row_id(pid):
            return None
        row = self.conn.execute(
            "SELECT p.session_id, p.seen_at FROM chat_host_pids p"
            " JOIN chat_sessions s ON s.session_id = p.session_id WHERE p.ppid = ?", (pid,)).fetchone()
        if row is None:
            return None
        try:
            age_ms = clock.now_ms() - clock.parse_iso_ms(row[1])
        except (ValueError, TypeError):
            return None
        return row[0] if age_ms <= HOST_PID_FRESH_S * 1000 else None
