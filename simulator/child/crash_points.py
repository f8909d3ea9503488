"""Crash points: a harness process SIGKILLs itself just before, or just after, a chosen step.

A harness process calls `crash_points().install(conn)` on every SQLite
connection it opens. Once the orchestrator arms a point (OP_ARM_CRASH), the
process watches for it; at the nth occurrence it records a `crash` event,
saves its coverage data and SIGKILLs itself, exactly like a power cut there.

Two kinds of step:

- SQL statements. SQLite's trace callback sees every statement just before
  it starts running. `before`: the process dies there, so the statement never
  runs and its transaction is rolled back by the next opener. `after`: the
  process dies as soon as the statement's transaction has committed. The
  trace callback sees the COMMIT only before it runs, so at the COMMIT that
  ends the matched statement's transaction (or at the statement itself, when
  it runs outside BEGIN ... COMMIT and commits as it finishes) a one-shot
  profile hook is set on this thread: the first Python event after the
  C-level call returns (the caller's next call or return) finds the
  connection out of its transaction (the commit is durable) and fires: any
  act of the process goes through a call, so none happens between the commit
  and the crash. A COMMIT that failed (busy) leaves the
  transaction open: the hook lets it be and waits for the retried COMMIT; a
  ROLLBACK undoes the match, and the point waits for the next one.
- Statement boundaries of a store call (`call:` + `statement:`): the nth
  statement SQLite runs inside one call of a `thatch_core` store method
  (BEGIN and COMMIT count; trigger lines do not), found by walking the
  stack from the trace callback to the outermost frame of that method, so
  every boundary of every call is reachable, not only the named ones.
  `before` and `after` mean what they mean for a statement. The event names
  the call's own named point (`STORE_CALL_POINTS`) when it has one: a crash
  inside `read` before its transaction committed cuts the read's stamp as a
  crash `before: read-stamp` does, and one after it committed leaves it done.
- Host steps (`HOST_POINTS`): a step of the fake host itself, which the
  harness announces with `reached(name, when, session=...)` just before and
  just after it (the fake opencode server receiving a wake prompt).

Named SQL points match the real statements of `thatch_core/store.py` (checked
against its text). Python 3.11 hands the trace callback the *expanded* SQL
(bound values inlined), so named points are regexes over the lower-cased,
whitespace-collapsed text and a scenario's `sql:` substring is matched the
same way (write it without `?` placeholders).

The `crash` event is `{point, sql, step}` for a statement and
`{point, step}` (with the session) for a host step, plus `when: "after"`
for a crash after its step (docs/history.md).

Pauses (an `interleave` step, D-interleave-1). The same statement boundaries of a
store call can hold a pause instead of a crash: the process records `paused`
(with whether its connection holds the write lock there), tells the
orchestrator through the channel the worker binds (`hold`), and waits there,
inside the call, until the orchestrator has run the step's other calls and
resumes it (`resumed`). A process told that a paused call elsewhere holds
the write lock (`lock_held_by`) stops before its own first statement that
needs that lock (`blocked`) and waits the same way instead of spending its
busy timeout: the orchestrator calls that a deadlock. A pause never reached
is recorded at the end of the process (`pause-missed`, with the most
statements one call of that method ran) so its verdict can name it.

The seam: every decision at a statement boundary of a store call, crash or
pause, is `CrashPoints.boundary(call, statement, sql, when, in_transaction)`.
thatch_core's calls reach it from the trace callback (the statement counted
in its call from the stack; `after` through a one-shot profile hook when an
arm needs it); a system under test in another runtime (a sidecar that
wraps its SQLite statements) reports each statement before and after it
runs, numbered within its call, and calls the same method: it may kill the
process, or block in a pause until the orchestrator resumes it.
"""

from __future__ import annotations

import copy
import os
import re
import signal
import sqlite3
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from simulator.child.hygiene import save_coverage
from simulator.events import BLOCKED, CRASH, PAUSE_MISSED, PAUSED, RESUMED

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

# Steps of the fake host, announced by the harness (`reached`), with what they are.
HOST_POINTS: dict[str, str] = {
    # before: the prompt never reaches the session; after: it did, and the poller has not stamped it (R21, R23)
    "wake-prompt": "the fake opencode server receives a synthetic wake prompt (harness/opencode.py)",
}

WHENS = ("before", "after")

# The named point a statement crash inside a store call stands for (the call's own write), so the
# judges read a crash at any boundary of that call as they read its named point.
STORE_CALL_POINTS: dict[str, str] = {
    "mark_delivered": "delivered-stamp", "read": "read-stamp", "broadcast": "broadcast-insert",
    "register": "register-insert", "unregister": "unregister", "heartbeat": "heartbeat",
}
_BEGIN = re.compile(r"^begin\b")
_STORE_MODULE = "thatch_core."

_WS = re.compile(r"\s+")
_COMMIT = re.compile(r"^(?:commit|end)\b")
_ROLLBACK = re.compile(r"^rollback\b(?! to)")
# a statement that takes (or needs) the write lock: an immediate or exclusive BEGIN, or a write
_TAKES_LOCK = re.compile(r"^(?:begin (?:immediate|exclusive)|insert|update|delete|replace)\b")
_THIS_FILE = os.path.normcase(os.path.abspath(__file__))


def normalize_sql(sql: str) -> str:
    return _WS.sub(" ", sql).strip().lower()


@dataclass
class _Armed:
    point: Optional[str]
    pattern: Optional[re.Pattern]   # None for a host step
    nth: int
    step: Optional[int]
    seen: int = 0
    when: str = "before"
    # `after` a statement: the connection whose transaction holds the match, until it commits
    open_tx: Optional[sqlite3.Connection] = None
    matched_sql: str = ""
    # a statement of a store call: the method, the statement's number in it
    call: Optional[str] = None
    statement: int = 0
    # `after` a statement of a call, inside its transaction: fire at the boundary where it committed
    awaiting_commit: bool = False
    fired_point: Optional[str] = None
    fired_when: Optional[str] = None
    # an interleaving's pause instead of a crash: only in a call naming `actor` (a session id) if set
    pause: bool = False
    actor: Optional[str] = None
    done: bool = False

    def handed_on(self) -> "_Armed":
        """A copy for another process: its own counts, no transaction of ours."""
        twin = copy.copy(self)
        twin.open_tx, twin.awaiting_commit = None, False
        return twin


@dataclass
class _Call:
    """The call of one store method being counted: its frame (thatch_core), its statements so far."""

    frame: Any = None
    texts: list = field(default_factory=list)   # normalized, in order
    actors: frozenset = frozenset()
    began: bool = False
    durable: bool = False     # the call committed a transaction before the current statement
    # the connection was inside a transaction when the current statement started: an `after` crash
    # waits for its commit; otherwise (a BEGIN, an autocommit statement) it fires once the statement returned
    opened_before: bool = False
    calls: int = 0            # calls of the method seen since the first arm
    longest: int = 0          # the most statements one of them ran


class CrashPoints:
    """The per-process crash point registry (one per process: `crash_points()`)."""

    def __init__(self) -> None:
        self._armed: list[_Armed] = []
        # sqlite3.Connection takes no weak references: a plain list, pruned when a closed one shows up.
        self._conns: list[sqlite3.Connection] = []
        self._calls: dict[str, _Call] = {}
        self.recorder: Any = None
        self._hold: Optional[Callable[[str, dict], None]] = None
        # a paused call in another process holds the write lock (who, for the `blocked` event), or None
        self.lock_held_by: Optional[str] = None
        self._kill = lambda: os.kill(os.getpid(), signal.SIGKILL)

    def bind(self, recorder: Any, hold: Optional[Callable[[str, dict], None]] = None) -> None:
        """The recorder for this process's events; `hold(kind, detail)` tells the orchestrator that this
        process stopped inside a store call and returns once it is told to go on (the worker's pipe)."""
        self.recorder = recorder
        self._hold = hold

    def install(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        """Watch `conn`. The trace callback is only set while a point is armed (it costs per statement)."""
        self._conns.append(conn)
        if self._armed or self.lock_held_by:
            conn.set_trace_callback(self._tracer(conn))
        return conn

    def arm(self, point: Optional[str] = None, sql: Optional[str] = None, nth: Optional[int] = None,
            step: Optional[int] = None, when: Optional[str] = None, call: Optional[str] = None,
            statement: Optional[int] = None, pause: bool = False, actor: Optional[str] = None) -> None:
        if [point, sql, call].count(None) != 2 or (pause and call is None):
            raise ValueError("arm a crash with exactly one of point= (a named step), sql= (a statement substring) "
                             "or call= (a store call, with statement=); a pause with call=")
        when = when or "before"
        if when not in WHENS:
            raise ValueError(f"a crash comes before or after its step, not {when!r}")
        if call is not None:
            if not call.isidentifier() or statement is None or statement < 1:
                raise ValueError(f"a statement crash names a store method and a statement from 1, "
                                 f"not {call!r} / {statement!r}")
            self._armed.append(_Armed(None, None, nth or 1, step, when=when, call=call, statement=statement,
                                      pause=pause, actor=actor))
            self._set_all(True)
            return
        pattern: Optional[re.Pattern]
        if point is not None and point in HOST_POINTS:
            pattern, default_nth = None, 1
        elif point is not None:
            if point not in NAMED_POINTS:
                raise ValueError(f"unknown crash point {point!r}; known: {', '.join([*NAMED_POINTS, *HOST_POINTS])}")
            regex, default_nth = NAMED_POINTS[point]
            pattern = re.compile(regex)
        else:
            default_nth = 1
            pattern = re.compile(re.escape(normalize_sql(sql)))
        self._armed.append(_Armed(point, pattern, nth or default_nth, step, when=when))
        self._set_all(True)

    def disarm(self) -> None:
        self._armed.clear()
        self._set_all(bool(self.lock_held_by))

    def snapshot(self) -> list:
        """The armed crash points as they stand (live objects, in arming order), for handing to a child
        process this one forks or serves (D-harness-6). Pauses stay: only this process talks to the
        orchestrator."""
        return [a for a in self._armed if not a.pause]

    def adopt(self, arms: list) -> None:
        """Make `arms` this process's armed set (a forked hook/MCP child takes
        its host's points; the trace callback follows whether any are armed)."""
        self._armed[:] = list(arms)
        self._set_all(bool(self._armed))

    def lock_held(self, by: Optional[str]) -> None:
        """While the next command runs, `by` (a paused call elsewhere) holds the write lock, or no
        longer (None): a statement that needs the lock stops as `blocked` instead of waiting."""
        self.lock_held_by = by
        self._set_all(bool(self._armed or by))

    def _set_all(self, on: bool) -> None:
        live = []
        for conn in self._conns:
            try:
                conn.set_trace_callback(self._tracer(conn) if on else None)
                live.append(conn)
            except sqlite3.ProgrammingError:  # closed: forget it
                pass
        self._conns = live

    @property
    def armed(self) -> bool:
        return bool(self._armed)

    def missed_pauses(self) -> None:
        """At the end of the process: record each pause it never reached (`pause-missed`), with the
        calls of its method this process made and the most statements one of them ran."""
        for armed in self._armed:
            if armed.pause and not armed.done and self.recorder is not None:
                seen = self._calls.get(armed.call or "", _Call())
                self.recorder.emit(PAUSE_MISSED, None, call=armed.call, statement=armed.statement,
                                   step=armed.step, calls=seen.calls, longest=seen.longest)

    # -- host steps --------------------------------------------------------------

    def reached(self, point: str, when: str, *, session: Optional[str] = None) -> None:
        """The harness is just `when` (before/after) host step `point` (one of HOST_POINTS)."""
        for armed in self._armed:
            if armed.point == point and armed.when == when:
                armed.seen += 1
                if armed.seen >= armed.nth:
                    self._fire(armed, session=session)

    # -- statements ----------------------------------------------------------------

    def _tracer(self, conn: sqlite3.Connection) -> Callable[[str], None]:
        return lambda sql: self._trace(conn, sql)

    def _trace(self, conn: sqlite3.Connection, sql: str) -> None:
        text = normalize_sql(sql)
        if self.lock_held_by and not text.startswith("--"):
            self._wait_for_lock(text)
        counted: set[str] = set()
        for armed in self._armed:
            if armed.open_tx is conn:
                self._transaction_moves(armed, conn, text)
            elif armed.call is not None:
                if armed.call not in counted:
                    counted.add(armed.call)
                    self._trace_call(armed.call, conn, sql)
            elif armed.pattern is not None and self._matches(armed, text):
                armed.seen += 1
                if armed.seen < armed.nth:
                    continue
                if armed.when == "before":
                    self._fire(armed, sql=sql)
                elif conn.in_transaction:
                    armed.open_tx, armed.matched_sql = conn, sql  # it commits with its transaction
                else:
                    self._fire_once_returned(armed, conn, sql, committing=False)  # it commits as it finishes

    def _trace_call(self, call: str, conn: sqlite3.Connection, sql: str) -> None:
        """Number `sql` within the call of store method `call` it runs in (found on the stack), and
        report its boundary before it runs and, when an arm waits for it, after it returned."""
        if sql.lstrip().startswith("--"):
            return  # a trigger's sub-statement: part of the statement that fired it
        frame = _outermost_call(call)
        if frame is None:
            return
        state = self._calls.setdefault(call, _Call())
        if frame is not state.frame:  # a new call of the method
            state.frame, state.texts = frame, []
            state.actors = _actors(frame) if any(a.actor for a in self._armed if a.call == call) else frozenset()
        statement = len(state.texts) + 1
        actors = state.actors
        self._arms_at(call, statement, sql, "before", conn.in_transaction, actors)
        if any(a.call == call and not a.done and (a.awaiting_commit or (a.statement == statement and a.when == "after"))
               for a in self._armed):
            self._once_returned(lambda: self._arms_at(call, statement, sql, "after", conn.in_transaction, actors))

    def boundary(self, call: str, statement: int, sql: str, when: str, in_transaction: bool, *,
                 actors: frozenset = frozenset()) -> None:
        """Statement `statement` (from 1 within one call, BEGIN and COMMIT included) of a call of store
        method `call` is about to run (`when="before"`) or has returned (`"after"`), its connection now
        `in_transaction` or not; `actors` are the session ids among the call's arguments. Any armed
        crash there kills this process; a pause there blocks until the orchestrator resumes it; a
        statement that needs the write lock a paused call elsewhere holds blocks as a deadlock."""
        if when == "before" and self.lock_held_by:
            self._wait_for_lock(normalize_sql(sql))
        self._arms_at(call, statement, sql, when, in_transaction, actors)

    def reported(self, call: str, statement: int, sql: str, when: str, in_transaction: bool, *,
                 actors: frozenset = frozenset()) -> None:
        """A statement a system in another runtime ran, reported before and after it ran (a checkout's
        sidecar, simulator/harness/sidecar.py): the named and `sql:` points match its text as the trace
        callback matches thatch_core's (its `?` placeholders unexpanded), then `boundary` decides for
        the call's own arms. An `after` point fires once the statement's transaction has committed."""
        text = normalize_sql(sql)
        for armed in [a for a in self._armed if a.pattern is not None and not a.done]:
            if armed.awaiting_commit:
                if when == "after" and not in_transaction:
                    armed.awaiting_commit = False  # a ROLLBACK undid the match: the point waits for the next
                    if not _ROLLBACK.match(text):
                        self._fire(armed, sql=armed.matched_sql)
                continue
            if when != "before" or not self._matches(armed, text):
                continue
            armed.seen += 1
            if armed.seen < armed.nth:
                continue
            if armed.when == "before":
                self._fire(armed, sql=sql)
            else:
                armed.awaiting_commit, armed.matched_sql = True, sql
        self.boundary(call, statement, sql, when, in_transaction, actors=actors)

    def _arms_at(self, call: str, statement: int, sql: str, when: str, in_transaction: bool,
                 actors: frozenset) -> None:
        """The decision at one boundary, for every arm on `call` (the body of `boundary`)."""
        state = self._calls.setdefault(call, _Call())
        text = normalize_sql(sql)
        if when == "before":
            if statement == 1:
                state.texts, state.began = [], False
                state.calls += 1
            state.durable = state.began and not in_transaction and not _BEGIN.match(text)
            state.opened_before = in_transaction
            state.began = state.began or bool(_BEGIN.match(text))
            state.texts.append(text)
            state.longest = max(state.longest, statement)
        for armed in [a for a in self._armed if a.call == call and not a.done]:
            if armed.awaiting_commit:
                if when == "after" and not in_transaction:
                    if _ROLLBACK.match(text):
                        armed.awaiting_commit = False  # undone: the point waits for the next one
                    else:
                        self._fire(armed, sql=armed.matched_sql)
                continue
            if armed.statement != statement or armed.when != when or (armed.actor and armed.actor not in actors):
                continue
            armed.seen += 1
            if armed.seen < armed.nth:
                continue
            if armed.pause:
                self._pause(armed, sql, state, in_transaction)
                continue
            armed.fired_point = STORE_CALL_POINTS.get(call) or "sql"
            armed.fired_when = "after" if state.durable or when == "after" else "before"
            if when == "after" and in_transaction and state.opened_before:
                armed.awaiting_commit, armed.matched_sql = True, sql
            else:
                self._fire(armed, sql=sql)

    def _pause(self, armed: _Armed, sql: str, state: _Call, in_transaction: bool) -> None:
        """Stop here until the orchestrator has run the interleaving's other calls (`paused`, `resumed`)."""
        armed.done = True
        ran = state.texts if armed.when == "after" else state.texts[:-1]
        holds = in_transaction and holds_write_lock(ran)
        detail = {"call": armed.call, "statement": armed.statement, "when": armed.when, "step": armed.step,
                  "sql": normalize_sql(sql)[:200], "holds_lock": holds}
        if self.recorder is not None:
            self.recorder.emit(PAUSED, None, **detail)
        if self._hold is not None:
            self._hold("paused", detail)
        if self.recorder is not None:
            self.recorder.emit(RESUMED, None, call=armed.call, step=armed.step)

    def _wait_for_lock(self, text: str) -> None:
        """A statement that needs the write lock while a paused call elsewhere holds it: stop (`blocked`)
        until the orchestrator lets the paused call finish, instead of spending the busy timeout."""
        if not _TAKES_LOCK.match(text):
            return
        by, self.lock_held_by = self.lock_held_by, None
        detail = {"sql": text[:200], "by": by}
        if self.recorder is not None:
            self.recorder.emit(BLOCKED, None, **detail)
        if self._hold is not None:
            self._hold("blocked", detail)

    @staticmethod
    def _matches(armed: _Armed, text: str) -> bool:
        return bool(armed.pattern.search(text) if armed.point is None else armed.pattern.match(text))

    def _transaction_moves(self, armed: _Armed, conn: sqlite3.Connection, text: str) -> None:
        """A statement in the transaction holding an `after` match: its COMMIT arms the
        post-commit hook; a ROLLBACK undoes the match (wait for the next one)."""
        if _COMMIT.match(text):
            self._fire_once_returned(armed, conn, armed.matched_sql, committing=True)
        elif _ROLLBACK.match(text):
            armed.open_tx = None

    def _fire_once_returned(self, armed: _Armed, conn: sqlite3.Connection, sql: str, *, committing: bool) -> None:
        """Fire once the statement being traced returned. A COMMIT that left the transaction
        open failed: no crash, the retry is traced again."""
        def fire() -> None:
            if committing and conn.in_transaction:
                return
            armed.open_tx = None
            self._fire(armed, sql=sql)

        self._once_returned(fire)

    @staticmethod
    def _once_returned(then: Callable[[], None]) -> None:
        """Run `then` at the first Python event after the statement being traced returns (a profile
        hook on this thread, removed at that event): any act of the process goes through a call, so
        nothing happens in between."""
        previous = sys.getprofile()

        def on_event(frame, event, arg) -> None:
            if os.path.normcase(os.path.abspath(frame.f_code.co_filename)) == _THIS_FILE:
                return  # still unwinding the trace callback, inside the statement's call
            sys.setprofile(previous)
            then()

        sys.setprofile(on_event)

    def _fire(self, armed: _Armed, *, sql: Optional[str] = None, session: Optional[str] = None) -> None:
        if self.recorder is not None:
            data: dict[str, Any] = {"point": armed.fired_point or armed.point or "sql"}
            if sql is not None:
                data["sql"] = normalize_sql(sql)[:200]
            data["step"] = armed.step
            when = armed.fired_when or armed.when
            if when != "before":
                data["when"] = when
            if armed.call is not None:
                data["call"], data["statement"] = armed.call, armed.statement
            self.recorder.emit(CRASH, session, **data)
        save_coverage()
        self._kill()


def holds_write_lock(statements: list) -> bool:
    """Whether a connection inside a transaction holds the write lock after `statements` (normalized, in
    order): its last BEGIN was IMMEDIATE or EXCLUSIVE, or a write ran since it."""
    begins = [i for i, text in enumerate(statements) if _BEGIN.match(text)]
    since = statements[begins[-1]:] if begins else statements
    return any(_TAKES_LOCK.match(text) for text in since)


def _actors(frame: Any) -> frozenset:
    """The strings among a store call's arguments, flattened one level (the session ids it names)."""
    code = frame.f_code
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    out: set[str] = set()
    for name in names:
        value = frame.f_locals.get(name)
        if isinstance(value, str):
            out.add(value)
        elif isinstance(value, (list, tuple, set, frozenset)):
            out.update(v for v in value if isinstance(v, str))
    return frozenset(out)


def _outermost_call(method: Optional[str]) -> Any:
    """The outermost frame running store method `method` (a `thatch_core` module's function of
    that name, or that method of a subclass of a `thatch_core` class: a test's planted store) on
    this thread's stack, or None: the call a statement belongs to."""
    frame, found = sys._getframe(2), None
    while frame is not None:
        if frame.f_code.co_name == method and _in_store(frame):
            found = frame
        frame = frame.f_back
    return found


def _in_store(frame: Any) -> bool:
    if str(frame.f_globals.get("__name__", "")).startswith(_STORE_MODULE):
        return True
    owner = frame.f_locals.get("self")
    return owner is not None and any(c.__module__.startswith(_STORE_MODULE) for c in type(owner).__mro__)


_SINGLETON: Optional[CrashPoints] = None
_SINGLETON_PID: Optional[int] = None


def crash_points() -> CrashPoints:
    """This process's registry; a forked child gets a fresh one, never its parent's arms."""
    global _SINGLETON, _SINGLETON_PID
    if _SINGLETON is None or _SINGLETON_PID != os.getpid():
        _SINGLETON = CrashPoints()
        _SINGLETON_PID = os.getpid()
    return _SINGLETON
