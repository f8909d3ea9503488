"""The run history's event kinds, each declared once: its name and its record.

docs/history.md is the catalog a person reads; this module is the one the
code reads. Every kind has a constant (`WAKE = "wake"`) and a record: a
frozen dataclass (`Wake`) whose fields past the common header (`i`, `t`,
`dispatch`, `proc`, `session`) are the kind's data. A field made with
`optional()` is left out when it does not apply, never written as null.
`EVENT_KINDS` maps each kind to its record; `tests/sim/test_events.py` holds
it equal to the catalog.

Writing: `Recorder.emit` checks every event's data against `fields_of`
before writing it: an undeclared kind, a missing field or an extra one raises
`UndeclaredEvent`. The orchestrator and the harnesses each have their own
kinds (`ORCHESTRATOR_EVENTS`, `HARNESS_EVENTS`); a recorder accepts only its
side's. Reading: `decode` turns one history line into its record, once, at
the merge (`simulator.history.History`); the judges, the report and the
observer read records, never a line's keys. A record's required fields have
a default too: a hand-built event that leaves one out decodes, and a judge
then judges less, never crashes.

A leaf: it imports nothing of the project.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, ClassVar, Mapping, Optional

_OPTIONAL = "optional"   # field metadata: the field may be left out of an event's data
_KEY = "key"             # field metadata: the data key, where it is not the field's name
_ROWS = "rows"           # field metadata: the Row record of each value of a mapping (a sample's sessions)


class _Absent:
    """The value of an optional field an event left out, where null means something else."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = _Absent()


def optional(default: Any = None, *, key: Optional[str] = None) -> Any:
    """A field an event may leave out (`NotRequired` of the catalog): it reads `default` then."""
    return field(default=default, metadata={_OPTIONAL: True, **({_KEY: key} if key else {})})


def many(factory: Any = list, *, key: Optional[str] = None, rows: Optional[type] = None) -> Any:
    """A required field holding a list or a mapping (an empty one when a hand-built event leaves it out);
    `rows`: the Row record each value of the mapping decodes into."""
    return field(default_factory=factory, metadata={**({_KEY: key} if key else {}), **({_ROWS: rows} if rows else {})})


HEADER = ("i", "t", "dispatch", "proc", "session")


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One event of a merged history: where and when it happened, and what (its kind's fields)."""

    KIND: ClassVar[str] = ""
    i: float = 0                   # position in the merged history (a synthetic leave stands between two)
    t: int = 0                     # virtual ms from the scenario's start
    dispatch: Optional[int] = 0    # the agenda dispatch that produced it
    proc: Optional[str] = None     # the process label, or "orchestrator"
    session: Optional[str] = None  # the session label, or None

    @property
    def kind(self) -> str:
        return self.KIND

    @property
    def place(self) -> str:
        """`proc/session`, or just the process."""
        return (self.proc or "orchestrator") + (f"/{self.session}" if self.session else "")

    def data(self) -> dict[str, Any]:
        """The kind's fields as the history line writes them (an optional field left out when absent)."""
        out = {}
        for f, key in _data_fields(type(self)):
            value = getattr(self, f.name)
            if f.metadata.get(_OPTIONAL) and value is f.default:
                continue
            out[key] = _plain(value)
        return out

    def as_dict(self) -> dict[str, Any]:
        """The event as a history line (for a witness, a report, a JSON dump)."""
        return {"i": self.i, "t": self.t, "dispatch": self.dispatch, "proc": self.proc, "session": self.session,
                "kind": self.kind, "data": self.data()}


def _plain(value: Any) -> Any:
    if isinstance(value, Row):
        return value.as_dict()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, slots=True)
class Row:
    """A nested record of an event's data (a sample's directory row)."""

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in _row_field_names(type(self))}


@cache
def _row_field_names(rec: type) -> tuple[str, ...]:
    """A Row record's field names (the observer writes a row per session per sample: asked often)."""
    return tuple(f.name for f in fields(rec))


_RECORDS: dict[str, type[Event]] = {}
_SIDES: dict[str, str] = {}
_ORCH, _HARNESS = "orchestrator", "harness"


def _record(kind: str, side: str):
    """Declare `cls` as the record of `kind`, recorded by `side`."""
    def deco(cls: type[Event]) -> type[Event]:
        cls.KIND = kind
        _RECORDS[kind] = cls
        _SIDES[kind] = side
        return cls
    return deco


def orchestrator(kind: str):
    return _record(kind, _ORCH)


def harness(kind: str):
    return _record(kind, _HARNESS)


_rec = dataclass(frozen=True, slots=True, kw_only=True)

# -- orchestrator events (proc "orchestrator") ------------------------------------

RUN_START = "run-start"
PROCESS_START = "process-start"
PROCESS_EXIT = "process-exit"
FAULT = "fault"
FAULT_FIRED = "fault-fired"
FAULT_NOT_FIRED = "fault-not-fired"
SLEEP_START = "sleep-start"
SLEEP_END = "sleep-end"
PHASE = "phase"
SAMPLE = "sample"
EXPECTATION = "expectation"
RUN_END = "run-end"
STEP_DROPPED = "step-dropped"
LOCK_RELEASED = "lock-released"
INTERLEAVE_RUN = "interleave-run"
DEADLOCK = "deadlock"


@orchestrator(RUN_START)
@_rec
class RunStart(Event):
    scenario: str = ""
    seed: int = 0
    dispatch_mode: str = ""
    epoch_ms: Optional[int] = None     # wall epoch ms of virtual time 0


@orchestrator(PROCESS_START)
@_rec
class ProcessStart(Event):
    target: str = ""
    proc_kind: str = ""
    incarnation: int = 0
    sessions: dict[str, str] = many(dict)  # label -> session id
    resumed: Optional[str] = optional()
    how: Optional[str] = optional()
    argv: Optional[list[str]] = optional()
    opens: Optional[str] = optional(ABSENT)  # null: the resume's command line opens no session
    rehost_of: Optional[str] = optional()


@orchestrator(PROCESS_EXIT)
@_rec
class ProcessExit(Event):
    target: str = ""
    reason: str = ""


@orchestrator(FAULT)
@_rec
class Fault(Event):
    fault: str = ""
    step: Optional[int] = None
    args: dict[str, Any] = many(dict)


@orchestrator(FAULT_FIRED)
@_rec
class FaultFired(Event):
    fault: str = ""
    step: Optional[int] = None
    detail: Any = None


@orchestrator(FAULT_NOT_FIRED)
@_rec
class FaultNotFired(Event):
    fault: str = ""
    step: Optional[int] = None


@orchestrator(SLEEP_START)
@_rec
class SleepStart(Event):
    until: Optional[int] = None


@orchestrator(SLEEP_END)
@_rec
class SleepEnd(Event):
    pass


@orchestrator(PHASE)
@_rec
class Phase(Event):
    phase: str = ""


@_rec
class SampleRow(Row):
    """One session's directory row as a sample read it."""

    registered: bool = False
    name: Optional[str] = None
    last_seen: Optional[str] = None
    stale: Optional[bool] = None
    host_kind: Optional[str] = None
    session_id: Optional[str] = None


@orchestrator(SAMPLE)
@_rec
class Sample(Event):
    sessions: dict[str, SampleRow] = many(dict, rows=SampleRow)  # label -> its row


@orchestrator(EXPECTATION)
@_rec
class Expectation(Event):
    index: int = 0
    expect_kind: str = field(default="", metadata={_KEY: "kind"})
    ok: Optional[bool] = None
    detail: Any = None
    moment: Optional[int] = optional()


@orchestrator(RUN_END)
@_rec
class RunEnd(Event):
    partial: Optional[bool] = optional()


@orchestrator(STEP_DROPPED)
@_rec
class StepDropped(Event):
    step: Optional[int] = None
    action: str = ""
    reason: str = ""


@orchestrator(LOCK_RELEASED)
@_rec
class LockReleased(Event):
    step: Optional[int] = None


@orchestrator(INTERLEAVE_RUN)
@_rec
class InterleaveRun(Event):
    step: Optional[int] = None         # the interleave step whose paused call waits meanwhile
    action: str = ""                   # a step action, or "poll"
    target: Optional[str] = None       # the process it runs in
    skipped: Optional[str] = optional()  # why it could not run (its session has no running host, or the paused one)


@orchestrator(DEADLOCK)
@_rec
class Deadlock(Event):
    step: Optional[int] = None
    paused: str = ""                   # the paused call: "<process> <call> statement N (when)"
    blocked: str = ""                  # the call that needs the lock it holds: "<process> <action>: <sql>"


# -- harness events (proc: the process label) --------------------------------------

READY = "ready"
POLL = "poll"
STATUS = "status"
USER_PROMPT = "user-prompt"
TURN_START = "turn-start"
TURN_END = "turn-end"
WAKE = "wake"
ECHO = "echo"
TOOL_CALL = "tool-call"
TOOL_RESULT = "tool-result"
HOOK = "hook"
CRASH = "crash"
STREAM_EVENT = "stream-event"
STORE_ERROR = "store-error"
FORK = "fork"
REGISTERED = "registered"
PRUNE = "prune"
MCP_SERVER = "mcp-server"
PAUSED = "paused"
RESUMED = "resumed"
BLOCKED = "blocked"
PAUSE_MISSED = "pause-missed"


@harness(READY)
@_rec
class Ready(Event):
    pass


@harness(POLL)
@_rec
class Poll(Event):
    hosted: Optional[list[str]] = None   # a hand-built poll that lists none beat every session


@harness(STATUS)
@_rec
class Status(Event):
    status: str = ""
    compacting: bool = False


@harness(USER_PROMPT)
@_rec
class UserPrompt(Event):
    text: str = ""


@harness(TURN_START)
@_rec
class TurnStart(Event):
    cause: str = ""


@harness(TURN_END)
@_rec
class TurnEnd(Event):
    pass


@harness(WAKE)
@_rec
class Wake(Event):
    senders: list[str] = many(list)
    count: int = 0
    text: str = ""
    hosted: Optional[bool] = None


@harness(ECHO)
@_rec
class Echo(Event):
    text: str = ""


@harness(TOOL_CALL)
@_rec
class ToolCall(Event):
    tool: str = ""
    args: dict[str, Any] = many(dict)
    retry: Optional[int] = optional()  # the fault step whose host calls an earlier call again (identical arguments)


@harness(TOOL_RESULT)
@_rec
class ToolResult(Event):
    tool: str = ""
    ok: bool = False
    text: str = ""
    step: Optional[int] = optional()
    clipped_from: Optional[int] = optional()  # a clipping host: `text` is what the model saw, this the full length


@harness(HOOK)
@_rec
class Hook(Event):
    hook: str = ""
    line: Optional[str] = None
    decision: Optional[str] = None
    stop_hook_active: Optional[bool] = optional()  # Claude Code's Stop: the payload's flag
    status: Optional[str] = optional()             # Cursor's stop: the turn's status in the payload


@harness(CRASH)
@_rec
class Crash(Event):
    point: str = ""
    step: Optional[int] = None
    sql: Optional[str] = optional()
    when: Optional[str] = optional()
    call: Optional[str] = optional()
    statement: Optional[int] = optional()


@harness(STREAM_EVENT)
@_rec
class StreamEvent(Event):
    op: str = ""
    inside: str = ""
    prompted: str = ""


@harness(STORE_ERROR)
@_rec
class StoreError(Event):
    where: str = ""
    error: str = ""


@harness(FORK)
@_rec
class Fork(Event):
    old_host_id: str = ""
    new_host_id: str = ""
    older_as: Optional[str] = optional()   # the label the old id keeps running under (`fork.older_as`)


@harness(REGISTERED)
@_rec
class Registered(Event):
    session_id: Optional[str] = None
    name: str = ""
    how: str = ""


@harness(PRUNE)
@_rec
class Prune(Event):
    pruned: list[str] = many(list)               # the session ids whose auto rows the pass deleted
    expired_tombstones: list[str] = many(list)   # the session ids whose leave tombstones expired
    swept: int = 0                               # unread messages to absent recipients it deleted


@harness(MCP_SERVER)
@_rec
class McpServer(Event):
    env: dict[str, str] = many(dict)   # what the host put in the server's environment: CLAUDE_CODE_SESSION_ID


@harness(PAUSED)
@_rec
class Paused(Event):
    call: str = ""                     # the store method
    statement: int = 0
    when: str = ""
    step: Optional[int] = None         # the interleave step
    sql: str = ""
    holds_lock: bool = False           # its connection holds the write lock while it waits


@harness(RESUMED)
@_rec
class Resumed(Event):
    call: str = ""
    step: Optional[int] = None


@harness(BLOCKED)
@_rec
class Blocked(Event):
    sql: str = ""                      # the statement that needs the write lock
    by: str = ""                       # the paused call holding it


@harness(PAUSE_MISSED)
@_rec
class PauseMissed(Event):
    call: str = ""
    statement: int = 0
    step: Optional[int] = None
    calls: int = 0                     # calls of the method this process made while the pause was armed
    longest: int = 0                   # the most statements one of them ran


# -- not recorded ------------------------------------------------------------------

# The judges' indexes stand one in for a `delete` / `exit` step, which records no result of its own
# (simulator/checks/view.py).
LEAVE = "leave"


@_rec
class Leave(Event):
    step: Optional[int] = None
    action: str = ""


Leave.KIND = LEAVE


@_rec
class Undeclared(Event):
    """An event of a kind this module does not declare (a test double's own), kept as written."""

    other_kind: str = ""
    raw: dict[str, Any] = many(dict)

    @property
    def kind(self) -> str:  # type: ignore[override]
        return self.other_kind

    def data(self) -> dict[str, Any]:
        return dict(self.raw)


ORCHESTRATOR_EVENTS: dict[str, type[Event]] = {k: r for k, r in _RECORDS.items() if _SIDES[k] == _ORCH}
HARNESS_EVENTS: dict[str, type[Event]] = {k: r for k, r in _RECORDS.items() if _SIDES[k] == _HARNESS}
EVENT_KINDS: dict[str, type[Event]] = dict(_RECORDS)


@cache
def _data_fields(rec: type) -> tuple[tuple[Any, str], ...]:
    """(field, its data key) of each of a record's data fields."""
    return tuple((f, f.metadata.get(_KEY, f.name)) for f in fields(rec) if f.name not in HEADER)


def declared_fields(rec: type[Event]) -> dict[str, bool]:
    """A record's data keys, each True when optional."""
    return {key: bool(f.metadata.get(_OPTIONAL)) for f, key in _data_fields(rec)}


# kind -> (required fields, every declared field): what `check` compares an event's data with.
Fields = Mapping[str, tuple[frozenset, frozenset]]


def fields_of(records: Mapping[str, type]) -> dict[str, tuple[frozenset, frozenset]]:
    out = {}
    for kind, rec in records.items():
        declared = declared_fields(rec)
        out[kind] = (frozenset(k for k, opt in declared.items() if not opt), frozenset(declared))
    return out


ORCHESTRATOR_FIELDS = fields_of(ORCHESTRATOR_EVENTS)
HARNESS_FIELDS = fields_of(HARNESS_EVENTS)
EVENT_FIELDS = fields_of(EVENT_KINDS)


class UndeclaredEvent(ValueError):
    """An event whose kind or data fields are not the ones its record declares."""


def check(kind: str, data: Mapping[str, Any], fields: Fields = EVENT_FIELDS) -> None:
    """Raise UndeclaredEvent unless `kind` is declared in `fields` with exactly these data fields
    (every required one, optional ones at will, nothing else)."""
    declared = fields.get(kind)
    if declared is not None and declared[0] <= data.keys() <= declared[1]:
        return
    if declared is None:
        raise UndeclaredEvent(f"undeclared event kind {kind!r} (simulator/events.py)")
    missing, extra = sorted(declared[0] - data.keys()), sorted(data.keys() - declared[1])
    raise UndeclaredEvent(f"{kind!r} event: missing fields {missing}, undeclared fields {extra} "
                          f"(simulator/events.py)")


# -- decoding ----------------------------------------------------------------------

def _rows_of(row: type) -> Any:
    """A converter of a mapping's values into `row` records (keys `row` does not declare dropped)."""
    keys = frozenset(f.name for f in fields(row))
    return lambda values: {label: row(**{k: v for k, v in (value or {}).items() if k in keys})
                           for label, value in (values or {}).items()}


def _decoders(rec: type) -> tuple[tuple[str, str, Any], ...]:
    """(field name, data key, converter or None) of each data field of `rec`."""
    return tuple((f.name, key, _rows_of(f.metadata[_ROWS]) if _ROWS in f.metadata else None)
                 for f, key in _data_fields(rec))


_DECODERS = {kind: _decoders(rec) for kind, rec in {**_RECORDS, LEAVE: Leave}.items()}


def decode(line: Mapping[str, Any], i: Optional[float] = None) -> Event:
    """One history line (or a hand-built event) as its record; `i` when the line has none."""
    kind = line.get("kind")
    data = line.get("data") or {}
    rec = _RECORDS.get(kind) if kind != LEAVE else Leave
    if rec is None:
        rec, kw = Undeclared, {"other_kind": str(kind), "raw": dict(data)}
    else:
        kw = {name: (conv(data[key]) if conv else data[key]) for name, key, conv in _DECODERS[kind] if key in data}
    return rec(i=line.get("i", i if i is not None else 0), t=line.get("t", 0), dispatch=line.get("dispatch", 0),
               proc=line.get("proc"), session=line.get("session"), **kw)
