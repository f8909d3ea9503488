"""Crash points: a harness process SIGKILLs itself just before a chosen statement.

A harness process calls `crash_points().install(conn)` on every SQLite
connection it opens. Once the orchestrator arms a point (OP_ARM_CRASH),
SQLite's trace callback sees every statement just before it starts running;
on the nth match the process records a `crash` event, saves its coverage data
and SIGKILLs itself, so the statement never runs and its transaction is rolled
back by the next opener, exactly like a power cut at that line.

Named points match the real statements of `thatch_core/store.py` (checked
against its text). Python 3.11 hands the trace callback the *expanded* SQL
(bound values inlined), so named points are regexes over the lower-cased,
whitespace-collapsed text and a scenario's `sql:` substring is matched the
same way (write it without `?` placeholders).
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
from dataclasses import dataclass
from typing import Any, Optional

from simulator.child.hygiene import save_coverage

# name -> (regex over normalized SQL, default nth)
NAMED_POINTS: dict[str, tuple[str, int]] = {
    # the poller's stamp after a successful wake prompt (R21, R23)
    "delivered-stamp": (r"^update chat_messages set delivered_at\b", 1),
    # chat_read's scoped stamp, after its select (R10)
    "read-stamp": (r"^update chat_messages set read_at\b", 1),
    # inside a broadcast transaction: the 2nd insert leaves one row written, uncommitted (R12)
    "broadcast-insert": (r"^insert into chat_messages\b", 2),
    "register-insert": (r"^insert into chat_sessions\b", 1),
    "unregister": (r"^delete from chat_sessions where session_id\b", 1),
    # the poller's batch heartbeat (`... WHERE session_id IN (...)`), not chat_status's touch
    "heartbeat": (r"^update chat_sessions set last_seen = \S+ where session_id in\b", 1),
}

_WS = re.compile(r"\s+")


def normalize_sql(sql: str) -> str:
    return _WS.sub(" ", sql).strip().lower()


@dataclass
class _Armed:
    point: Optional[str]
    pattern: re.Pattern
    nth: int
    step: Optional[int]
    seen: int = 0


class CrashPoints:
    """The per-process crash point registry (one per process: `crash_points()`)."""

    def __init__(self) -> None:
        self._armed: list[_Armed] = []
        # sqlite3.Connection takes no weak references: a plain list, pruned when a closed one shows up.
        self._conns: list[sqlite3.Connection] = []
        self.recorder: Any = None
        self._kill = lambda: os.kill(os.getpid(), signal.SIGKILL)

    def bind(self, recorder: Any) -> None:
        self.recorder = recorder

    def install(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        """Watch `conn`. The trace callback is only set while a point is armed (it costs per statement)."""
        self._conns.append(conn)
        if self._armed:
            conn.set_trace_callback(self._trace)
        return conn

    def arm(self, point: Optional[str] = None, sql: Optional[str] = None, nth: Optional[int] = None,
            step: Optional[int] = None) -> None:
        if (point is None) == (sql is None):
            raise ValueError("arm a crash with exactly one of point= (a named step) or sql= (a statement substring)")
        if point is not None:
            if point not in NAMED_POINTS:
                raise ValueError(f"unknown crash point {point!r}; known: {', '.join(NAMED_POINTS)}")
            regex, default_nth = NAMED_POINTS[point]
            pattern = re.compile(regex)
        else:
            default_nth = 1
            pattern = re.compile(re.escape(normalize_sql(sql)))
        self._armed.append(_Armed(point, pattern, nth or default_nth, step))
        self._set_all(self._trace)

    def disarm(self) -> None:
        self._armed.clear()
        self._set_all(None)

    def snapshot(self) -> list:
        """The armed points as they stand (live objects, in arming order), for
        handing to a child process this one forks or serves (D-harness-6)."""
        return list(self._armed)

    def adopt(self, arms: list) -> None:
        """Make `arms` this process's armed set (a forked hook/MCP child takes
        its host's points; the trace callback follows whether any are armed)."""
        self._armed[:] = list(arms)
        self._set_all(self._trace if self._armed else None)

    def _set_all(self, callback) -> None:
        live = []
        for conn in self._conns:
            try:
                conn.set_trace_callback(callback)
                live.append(conn)
            except sqlite3.ProgrammingError:  # closed: forget it
                pass
        self._conns = live

    @property
    def armed(self) -> bool:
        return bool(self._armed)

    def _trace(self, sql: str) -> None:
        text = normalize_sql(sql)
        for armed in self._armed:
            if armed.pattern.search(text) if armed.point is None else armed.pattern.match(text):
                armed.seen += 1
                if armed.seen >= armed.nth:
                    self._fire(armed, sql)

    def _fire(self, armed: _Armed, sql: str) -> None:
        if self.recorder is not None:
            self.recorder.emit("crash", point=armed.point or "sql", sql=normalize_sql(sql)[:200], step=armed.step)
        save_coverage()
        self._kill()


_SINGLETON: Optional[CrashPoints] = None
_SINGLETON_PID: Optional[int] = None


def crash_points() -> CrashPoints:
    """This process's registry; a forked child gets a fresh one, never its parent's arms."""
    global _SINGLETON, _SINGLETON_PID
    if _SINGLETON is None or _SINGLETON_PID != os.getpid():
        _SINGLETON = CrashPoints()
        _SINGLETON_PID = os.getpid()
    return _SINGLETON
