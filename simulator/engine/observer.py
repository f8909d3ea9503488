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
from simulator.engine.agenda import Entry, Expect, ExpectFirst
from simulator.engine.dispatch_log import DispatchLog
from simulator.engine.processes import ForkGuard, Live, ProcessCommand
from simulator.engine.world import World
from simulator.events import EXPECTATION, SAMPLE, SampleRow
from simulator.protocol import OP_ACT, Reply, act_args
from simulator.scenario.expectation_keys import STORE_KINDS, moments_of, window_of
from simulator.scenario.kinds import SessionArg
from simulator.scenario.model import Scenario


def observations(spec: Scenario, end_t: int) -> list[tuple[int, Entry]]:
    """When each point expectation is observed: at its `at` (`end`: the run's end), a
    windowed one at its window's end, `same_name` at each of its two times, and one
    `before_catch_up` first of all at its instant."""
    out: list[tuple[int, Entry]] = []
    for idx, exp in enumerate(spec.expect):
        body = getattr(exp, exp.kind) or {}
        window = window_of(body)
        if exp.kind == "same_name":
            out += [(end_t if t == "end" else t, Expect(idx, m)) for m, t in enumerate(moments_of(body))]
        elif window is not None:
            out.append((window[1], Expect(idx)))
        elif exp.before_catch_up:
            out.append((exp.at, ExpectFirst(idx)))
        else:
            out.append((end_t if exp.at == "end" else exp.at, Expect(idx)))
    return out


# Sends one wave of commands at (t, dispatch) and returns the replies (the dispatcher's `exchange`).
Exchange = Callable[[int, int, list[ProcessCommand]], list[Optional[Reply]]]


class Observer:
    """Samples of the directory and the facts point expectations need."""

    def __init__(self, spec: Scenario, world: World, log: DispatchLog, exchange: Exchange,
                 host_of: Callable[[str], Optional[Live]], guard: ForkGuard) -> None:
        self.spec = spec
        self.world = world
        self.log = log
        self._exchange = exchange
        self._host_of = host_of
        self._guard = guard    # holds the read connection (the processes close it before they fork)

    def _read_db(self, query: str, params: tuple = ()) -> list[tuple]:
        """A read through the orchestrator's one connection (closed before every fork)."""
        return self._guard.read(self.world.db_path, query, params)

    def sample(self, t: int) -> None:
        """Record every session's row as it is now (`sample`), stale or not by the design's rule (R14)."""
        self.log.record(SAMPLE, fresh=True, sessions=self.directory(t))

    def directory(self, t: int) -> dict[str, dict[str, Any]]:
        """Every session's row at t (label -> its `SampleRow` as the sample records it)."""
        rows = {r[0]: r for r in self._read_db("SELECT session_id, name, last_seen, host_kind FROM chat_sessions")}
        now = vclock.epoch_ms(t)
        sessions = {}
        for label in self.world.session_ids:
            ids = self.world.row_ids(label)
            row = next((rows[i] for i in reversed(ids) if i in rows), None)
            if row is None:
                sample = SampleRow(session_id=ids[-1])
            else:
                stale = design.is_stale(vclock.parse_iso_ms(row[2]), now)
                sample = SampleRow(registered=True, name=row[1], last_seen=row[2], stale=stale, host_kind=row[3],
                                   session_id=row[0])
            sessions[label] = sample.as_dict()
        return sessions

    def _facts(self, kind: str, arg: dict, label: Any) -> dict[str, Any]:
        """The database facts a point expectation of `kind` is judged on, read now."""
        if kind in ("registered", "unread", "same_name") and label in self.world.session_ids:
            ids = self.world.row_ids(label)
            marks = ",".join("?" * len(ids))
            rows = self._read_db(f"SELECT session_id, name FROM chat_sessions WHERE session_id IN ({marks})",
                                 tuple(ids))
            unread = self._read_db(
                f"SELECT COUNT(*) FROM chat_messages WHERE read_at IS NULL AND to_session IN ({marks})", tuple(ids))
            detail = {"registered": bool(rows), "name": rows[0][1] if rows else None, "unread": unread[0][0]}
            if "row" in arg:  # which of its ids (oldest first) the session is registered under
                detail.update(ids=ids, rows=[i for i in ids if any(r[0] == i for r in rows)])
            return detail
        if kind in STORE_KINDS:
            try:
                return self._store_facts(kind, arg)
            except sqlite3.Error as exc:  # e.g. a 002-era database no process has migrated yet
                return {"error": f"{type(exc).__name__}: {exc}"}
        return {}

    def _ids(self, label: Any) -> tuple[str, ...]:
        return tuple(self.world.row_ids(label)) if label in self.world.session_ids else ()

    def _store_facts(self, kind: str, arg: dict) -> dict[str, Any]:
        """A name base's counters, a session's tombstones, or the count of matching message rows."""
        if kind == "counter":
            ids = self._ids(arg.get("session"))
            names = self._read_db(
                f"SELECT name FROM chat_sessions WHERE session_id IN ({','.join('?' * len(ids))})", ids)
            counters = self._read_db(design.COUNTERS_QUERY)
            return {"name": names[0][0] if names else None, "counters": dict(counters)}
        if kind == "tombstones":
            ids = self._ids(arg.get("session"))
            rows = self._read_db(f"SELECT session_id FROM chat_leave_tombstones WHERE session_id IN "
                                 f"({','.join('?' * len(ids))})", ids)
            return {"tombstones": len(rows), "ids": [r[0] for r in rows]}
        where, params = ["1"], []
        for key, column in (("from", "from_session"), ("to", "to_session")):
            if key in arg:
                ids = self._ids(arg[key])
                where.append(f"{column} IN ({','.join('?' * len(ids))})")
                params += ids
        if "via_broadcast" in arg:
            where.append("via_broadcast = ?")
            params.append(1 if arg["via_broadcast"] else 0)
        if "read" in arg:
            where.append("read_at IS NOT NULL" if arg["read"] else "read_at IS NULL")
        for key, test, value in (("body", "body = ?", arg.get("body")), ("contains", "instr(body, ?) > 0", arg.get(
                "contains")), ("parts", "substr(body, 1, ?) = ?", arg.get("parts"))):
            if key in arg:
                where.append(test)
                marker = design.first_part_marker(value) if key == "parts" else None
                params += [len(marker), marker] if marker else [value]
        rows = self._read_db(f"SELECT COUNT(*) FROM chat_messages WHERE {' AND '.join(where)}", tuple(params))
        return {"messages": rows[0][0]}

    def expectation(self, t: int, idx: int, *, asleep: bool = False, moment: Optional[int] = None,
                    before_catch_up: bool = False) -> None:
        """Observe what a point expectation needs at its time; the checkers judge it.

        `asleep`: t falls inside a machine sleep. The database facts are read
        as they are (nothing ran since the sleep began), but a roster's `list`
        is not dispatched: no process runs while the machine sleeps, so the
        checker judges it from the samples and list calls up to t.
        `before_catch_up`: t is a sleep's end and nothing due then has run yet;
        the directory as it is now (`sessions`, everyone's staleness) is
        recorded for the checkers, and nobody is asked for a roster.
        `moment`: which of the expectation's times this is (`same_name`).
        """
        exp = self.spec.expect[idx]
        kind = exp.kind
        arg = getattr(exp, kind) or {}
        label = arg.get("session")
        detail = self._facts(kind, arg, label)
        if before_catch_up:
            detail["sessions"] = self.directory(t)
        d = self.log.next_dispatch()
        self.log.record(EXPECTATION, label, index=idx, kind=kind, ok=None, detail=detail,
                        **({} if moment is None else {"moment": moment}))
        if kind == "roster" and label and not (asleep or before_catch_up or "between" in arg):
            live = self._host_of(label)
            if live is not None:
                self._exchange(t, d, [ProcessCommand(live, OP_ACT, label, act_args("list", SessionArg(session=label)))])
