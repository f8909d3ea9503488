"""What the orchestrator observes between dispatches: directory samples, expectation facts.

Every read opens a short-lived connection and closes it before returning, so
no SQLite connection is ever open in the orchestrator when it forks
(docs/pitfalls.md: a parent connection at fork time silently breaks the
children's file locks). Staleness is judged by the design's rule
(simulator.design), never by the code under test.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Callable, Optional

from simulator import clock as vclock
from simulator import design
from simulator.engine.dispatch_log import DispatchLog
from simulator.engine.processes import Live, ProcessCommand
from simulator.engine.world import World
from simulator.protocol import OP_ACT, Reply
from simulator.scenario.model import Scenario

# Sends one wave of commands at (t, dispatch) and returns the replies (the orchestrator's `exchange`).
Exchange = Callable[[int, int, list[ProcessCommand]], list[Optional[Reply]]]


class Observer:
    """Samples of the directory and the facts point expectations need."""

    def __init__(self, spec: Scenario, world: World, log: DispatchLog, exchange: Exchange,
                 host_of: Callable[[str], Optional[Live]]) -> None:
        self.spec = spec
        self.world = world
        self.log = log
        self._exchange = exchange
        self._host_of = host_of
        self.reading = False   # a connection is open right now (never at a fork)

    def _read_db(self, query: str, params: tuple = ()) -> list[tuple]:
        """A short-lived read: opened and closed here, so no connection outlives it into a fork."""
        self.reading = True
        conn = sqlite3.connect(str(self.world.db_path), timeout=10, isolation_level=None)
        try:
            conn.execute("PRAGMA query_only = 1")
            return conn.execute(query, params).fetchall()
        finally:
            conn.close()
            self.reading = False

    def sample(self, t: int) -> None:
        """Record every session's row as it is now (`sample`), stale or not by the design's rule (R14)."""
        rows = {r[0]: r for r in self._read_db("SELECT session_id, name, last_seen, host_kind FROM chat_sessions")}
        now = vclock.epoch_ms(t)
        sessions = {}
        for label in self.world.session_ids:
            ids = self.world.row_ids(label)
            row = next((rows[i] for i in reversed(ids) if i in rows), None)
            if row is None:
                sessions[label] = {"registered": False, "name": None, "last_seen": None, "stale": None,
                                   "host_kind": None, "session_id": ids[-1]}
            else:
                stale = design.is_stale(vclock.parse_iso_ms(row[2]), now)
                sessions[label] = {"registered": True, "name": row[1], "last_seen": row[2],
                                   "stale": stale, "host_kind": row[3], "session_id": row[0]}
        self.log.record("sample", fresh=True, sessions=sessions)

    def expectation(self, t: int, idx: int, *, asleep: bool = False) -> None:
        """Observe what a point expectation needs at its time; the checkers judge it.

        `asleep`: t falls inside a machine sleep. The database facts are read
        as they are (nothing ran since the sleep began), but a roster's `list`
        is not dispatched: no process runs while the machine sleeps, so the
        checker judges it from the samples and list calls up to t.
        """
        exp = self.spec.expect[idx]
        kind = exp.kind
        arg = getattr(exp, kind) or {}
        label = arg.get("session")
        detail: dict[str, Any] = {}
        if kind in ("registered", "unread") and label in self.world.session_ids:
            ids = self.world.row_ids(label)
            marks = ",".join("?" * len(ids))
            rows = self._read_db(f"SELECT session_id, name FROM chat_sessions WHERE session_id IN ({marks})", tuple(ids))
            unread = self._read_db(
                f"SELECT COUNT(*) FROM chat_messages WHERE read_at IS NULL AND to_session IN ({marks})", tuple(ids))
            detail = {"registered": bool(rows), "name": rows[0][1] if rows else None, "unread": unread[0][0]}
        d = self.log.next_dispatch()
        self.log.record("expectation", label, index=idx, kind=kind, ok=None, detail=detail)
        if kind == "roster" and label and not asleep:
            live = self._host_of(label)
            if live is not None:
                self._exchange(t, d, [ProcessCommand(live, OP_ACT, label,
                                                     {"action": "list", "session": label, "expectation": idx})])
