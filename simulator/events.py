"""The run history's event kinds, each declared once: its name and the fields of its data.

docs/history.md is the catalog a person reads; this module is the one the
code reads. Every kind has a constant (`WAKE = "wake"`) and a record, the
`TypedDict` of its `data` (a field marked `NotRequired` is left out when it
does not apply, never written as null). `EVENT_KINDS` maps each kind to its
record; `tests/sim/test_events.py` holds it equal to the catalog.

`Recorder.emit` checks every event against `fields_of` before writing it: an
undeclared kind, a missing field or an extra one raises `UndeclaredEvent`
(two subset tests per event, far below a microsecond). The orchestrator and
the harnesses each have their own kinds (`ORCHESTRATOR_EVENTS`,
`HARNESS_EVENTS`); a recorder accepts only its side's.

A leaf: it imports nothing of the project. No `from __future__ import
annotations` here: `TypedDict` reads `NotRequired` from live annotations only.
"""

from typing import Any, Mapping, NotRequired, Optional, TypedDict

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


class RunStartData(TypedDict):
    scenario: str
    seed: int
    dispatch_mode: str
    epoch_ms: int            # wall epoch ms of virtual time 0


class ProcessStartData(TypedDict):
    target: str
    proc_kind: str
    incarnation: int
    sessions: dict[str, str]  # label -> session id
    resumed: NotRequired[str]
    how: NotRequired[str]
    argv: NotRequired[list[str]]
    opens: NotRequired[Optional[str]]
    rehost_of: NotRequired[str]


class ProcessExitData(TypedDict):
    target: str
    reason: str


class FaultData(TypedDict):
    fault: str
    step: int
    args: dict[str, Any]


class FaultFiredData(TypedDict):
    fault: str
    step: int
    detail: Any


class FaultNotFiredData(TypedDict):
    fault: str
    step: int


class SleepStartData(TypedDict):
    until: int


class SleepEndData(TypedDict):
    pass


class PhaseData(TypedDict):
    phase: str


class SampleData(TypedDict):
    sessions: dict[str, dict[str, Any]]  # label -> {registered, name, last_seen, stale, host_kind, session_id}


class ExpectationData(TypedDict):
    index: int
    kind: str
    ok: Optional[bool]
    detail: Any
    moment: NotRequired[int]


class RunEndData(TypedDict):
    partial: NotRequired[bool]


class StepDroppedData(TypedDict):
    step: int
    action: str
    reason: str


class LockReleasedData(TypedDict):
    step: int


class InterleaveRunData(TypedDict):
    step: int                      # the interleave step whose paused call waits meanwhile
    action: str                    # a step action, or "poll"
    target: Optional[str]          # the process it runs in
    skipped: NotRequired[str]      # why it could not run (its session has no running host, or the paused one)


class DeadlockData(TypedDict):
    step: int
    paused: str                    # the paused call: "<process> <call> statement N (when)"
    blocked: str                   # the call that needs the lock it holds: "<process> <action>: <sql>"


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


class ReadyData(TypedDict):
    pass


class PollData(TypedDict):
    hosted: list[str]


class StatusData(TypedDict):
    status: str
    compacting: bool


class UserPromptData(TypedDict):
    text: str


class TurnStartData(TypedDict):
    cause: str


class TurnEndData(TypedDict):
    pass


class WakeData(TypedDict):
    senders: list[str]
    count: int
    text: str
    hosted: bool


class EchoData(TypedDict):
    text: str


class ToolCallData(TypedDict):
    tool: str
    args: dict[str, Any]
    retry: NotRequired[int]        # the fault step whose host calls an earlier call again (identical arguments)


class ToolResultData(TypedDict):
    tool: str
    ok: bool
    text: str
    step: NotRequired[int]
    clipped_from: NotRequired[int]  # a clipping host: `text` is what the model saw, this the full length


class HookData(TypedDict):
    hook: str
    line: Optional[str]
    decision: Optional[str]
    stop_hook_active: NotRequired[bool]   # Claude Code's Stop: the payload's flag
    status: NotRequired[str]              # Cursor's stop: the turn's status in the payload


class CrashData(TypedDict):
    point: str
    step: Optional[int]
    sql: NotRequired[str]
    when: NotRequired[str]
    call: NotRequired[str]
    statement: NotRequired[int]


class StreamEventData(TypedDict):
    op: str
    inside: str
    prompted: str


class StoreErrorData(TypedDict):
    where: str
    error: str


class PruneData(TypedDict):
    pruned: list[str]               # the session ids whose auto rows the pass deleted
    expired_tombstones: list[str]   # the session ids whose leave tombstones expired
    swept: int                      # unread messages to absent recipients it deleted


class McpServerData(TypedDict):
    env: dict[str, str]   # what the host put in the server's environment: CLAUDE_CODE_SESSION_ID


class ForkData(TypedDict):
    old_host_id: str
    new_host_id: str
    older_as: NotRequired[str]   # the label the old id keeps running under (`fork.older_as`)


class RegisteredData(TypedDict):
    session_id: Optional[str]
    name: str
    how: str


class PausedData(TypedDict):
    call: str                      # the store method
    statement: int
    when: str
    step: Optional[int]            # the interleave step
    sql: str
    holds_lock: bool               # its connection holds the write lock while it waits


class ResumedData(TypedDict):
    call: str
    step: Optional[int]


class BlockedData(TypedDict):
    sql: str                       # the statement that needs the write lock
    by: str                        # the paused call holding it


class PauseMissedData(TypedDict):
    call: str
    statement: int
    step: Optional[int]
    calls: int                     # calls of the method this process made while the pause was armed
    longest: int                   # the most statements one of them ran


ORCHESTRATOR_EVENTS: dict[str, type] = {
    RUN_START: RunStartData, PROCESS_START: ProcessStartData, PROCESS_EXIT: ProcessExitData,
    FAULT: FaultData, FAULT_FIRED: FaultFiredData, FAULT_NOT_FIRED: FaultNotFiredData,
    SLEEP_START: SleepStartData, SLEEP_END: SleepEndData, PHASE: PhaseData, SAMPLE: SampleData,
    EXPECTATION: ExpectationData, RUN_END: RunEndData, STEP_DROPPED: StepDroppedData,
    LOCK_RELEASED: LockReleasedData, INTERLEAVE_RUN: InterleaveRunData, DEADLOCK: DeadlockData,
}
HARNESS_EVENTS: dict[str, type] = {
    READY: ReadyData, POLL: PollData, STATUS: StatusData, USER_PROMPT: UserPromptData,
    TURN_START: TurnStartData, TURN_END: TurnEndData, WAKE: WakeData, ECHO: EchoData,
    TOOL_CALL: ToolCallData, TOOL_RESULT: ToolResultData, HOOK: HookData, CRASH: CrashData,
    STREAM_EVENT: StreamEventData, STORE_ERROR: StoreErrorData, FORK: ForkData, REGISTERED: RegisteredData,
    PRUNE: PruneData, MCP_SERVER: McpServerData,
    PAUSED: PausedData, RESUMED: ResumedData, BLOCKED: BlockedData, PAUSE_MISSED: PauseMissedData,
}
EVENT_KINDS: dict[str, type] = {**ORCHESTRATOR_EVENTS, **HARNESS_EVENTS}

# Not recorded: the checkers' view stands one in for a `delete` / `exit` step, which records
# no result of its own (simulator/checks/view.py).
LEAVE = "leave"

# kind -> (required fields, every declared field): what `check` compares an event's data with.
Fields = Mapping[str, tuple[frozenset, frozenset]]


def fields_of(records: Mapping[str, type]) -> dict[str, tuple[frozenset, frozenset]]:
    return {kind: (frozenset(rec.__required_keys__), frozenset(rec.__required_keys__ | rec.__optional_keys__))
            for kind, rec in records.items()}


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


def data_of(event: Mapping[str, Any]) -> dict[str, Any]:
    """An event's data (empty for a hand-built event that has none)."""
    return event.get("data") or {}


def step_of(event: Mapping[str, Any]) -> Any:
    """The scripted step an event names (a tool result, a fault, a dropped step, a crash), or None."""
    return data_of(event).get("step")


def sample_rows(event: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A sample's directory rows, label -> {registered, name, last_seen, stale, host_kind, session_id}."""
    return data_of(event).get("sessions") or {}


def hook_line(event: Mapping[str, Any]) -> str:
    """The line a hook event printed ("" for none)."""
    return str(data_of(event).get("line") or "")
