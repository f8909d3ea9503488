"""Every kind the scenario language knows, declared once: host kinds, crash points, steps.

A step of a scenario is one action (something a session, a user or the
machine does) or one fault (something that goes wrong). A process is one of
a few host kinds. Each kind is declared here with its traits, and every phase
reads them from here rather than keeping its own list:

- validation (simulator/scenario/validate.py, fault_checks.py, policies.py)
  refuses a step on a host kind that lacks the trait it needs;
- the model (simulator/scenario/model.py) builds `Step` and the published
  JSON Schema from `STEPS` (one optional field per kind, its arguments model);
- the engine (simulator/engine/) knows from `runs` whether a step goes down a
  harness pipe or is the orchestrator's own, from `target` where it goes,
  and applies faults through its handler table keyed by these kinds;
- each fake host (simulator/harness/) answers the actions its kind accepts
  through an explicit handler table (a layout test holds both complete);
- the checks read why a fault may not take effect (`not_reached`);
- exploration (simulator/explore/) draws host kinds, fault rates and action
  families from the tables at the end, and plans against the same traits.

Adding a fault kind: its arguments model and `StepKind` here, its handler in
simulator/engine/faults.py, and (to explore it) a draw in
simulator/explore/generator.py. Adding a host kind: its `HostKind` here, its
harness class in simulator/harness/, and its entry in HARNESSES there.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, Field, WithJsonSchema, create_model, model_serializer, model_validator

from simulator.scenario.durations import DURATION_HELP, parse_duration
from simulator.scenario.fields import BODY_HELP, DurationMs, EitherOr, StepBody, Strict
from simulator.scenario.labels import LABEL_PATTERN

# ---------------------------------------------------------------------------
# Host kinds
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HostKind:
    """A kind of harness process (`processes[].kind`) and what it can do."""

    key: str
    description: str
    polls: bool                  # runs thatch's poller in-process: poll timers, heartbeats, wakes (R14, R20)
    mcp: bool                    # its sessions reach chat through an MCP server: mcp_ ids, `as`, hook lines (R31)
    hooks: tuple[str, ...]       # the hooks it runs; a prompt prints a hook line (a step reply) when any
    crash_points: bool           # crash points can be armed in its process (its store calls run there)
    resumes: bool                # a session of it can be resumed in a new process (`-s` / `-c`)
    restarts: bool               # a daemon that a `restart` replaces, re-hosting its open tabs (R15)
    forks: bool                  # its host forks session ids (Claude Code, R33)
    trusts_as: bool              # its MCP server trusts a claimed `as` (Cursor, R32)
    leaves: bool                 # a session can be deleted in its UI or exit with /thatch/exit (R7, R17)
    event_stream: bool           # `events: synchronous` exists (the fake opencode server's event stream)
    policies: bool               # messaging policies and held-message reviews are modelled for it
    lock_safe: bool              # a held database lock fails its store calls without stopping the harness
    aborts: bool                 # a user can abort a turn and its stop hook sees it (`agent.aborted`)
    row_kind: str                # chat_sessions.host_kind of the rows its sessions write
    processes_per_session: int   # OS processes it forks per session besides itself (MCP server children)
    # exploration: label prefix, copies in the draw of process kinds, always drawn, sessions per process
    # (None: the world's bound), sub-agent children and join kinds drawn for it
    explore_prefix: str
    explore_copies: int = 1
    explore_always: bool = False
    explore_max_sessions: Optional[int] = None
    explore_children: bool = False
    explore_join_kinds: bool = False

    def has(self, trait: Optional[str]) -> bool:
        """The host has boolean trait `trait` (None: any host)."""
        return trait is None or bool(getattr(self, trait))


OPENCODE, CLAUDE_CODE, CURSOR = "opencode", "claude-code", "cursor"

HOSTS: dict[str, HostKind] = {h.key: h for h in (
    HostKind(OPENCODE, "a fake server with the thatch runtime and poller", polls=True, mcp=False, hooks=(),
             crash_points=True, resumes=True, restarts=True, forks=False, trusts_as=False, leaves=True,
             event_stream=True, policies=True, lock_safe=True, aborts=False, row_kind="opencode",
             processes_per_session=0, explore_prefix="oc", explore_copies=2, explore_always=True,
             explore_children=True, explore_join_kinds=True),
    HostKind(CLAUDE_CODE, "a host whose hooks and MCP server are real child processes", polls=False, mcp=True,
             hooks=("SessionStart", "UserPromptSubmit", "Stop"), crash_points=False, resumes=False, restarts=False,
             forks=True, trusts_as=False, leaves=False, event_stream=False, policies=False, lock_safe=False,
             aborts=False, row_kind="mcp", processes_per_session=1, explore_prefix="cc",
             # One conversation per Claude Code process: its sessions would share the host pid
             # that anchors MCP identity (D-harness-12).
             explore_max_sessions=1),
    HostKind(CURSOR, "one workspace process running hooks and MCP", polls=False, mcp=True,
             hooks=("SessionStart", "UserPromptSubmit", "stop"), crash_points=True, resumes=False, restarts=False,
             forks=False, trusts_as=True, leaves=False, event_stream=False, policies=False, lock_safe=False,
             aborts=True, row_kind="mcp", processes_per_session=0, explore_prefix="cu", explore_max_sessions=2),
)}
DEFAULT_HOST = OPENCODE
# chat_sessions.host_kind of a row whose age is its liveness (beaten by a poller), and of a row that
# names none (a 002-era schema's default).
BEATING_ROW_KINDS = frozenset(h.row_kind for h in HOSTS.values() if h.polls)
DEFAULT_ROW_KIND = HOSTS[DEFAULT_HOST].row_kind


def hosts_with(trait: str) -> tuple[str, ...]:
    """The host kinds that have boolean trait `trait`, in declaration order."""
    return tuple(key for key, host in HOSTS.items() if host.has(trait))


def host(kind: Optional[str]) -> HostKind:
    """The declared host kind `kind` (the default kind when None)."""
    return HOSTS[kind or DEFAULT_HOST]


# ---------------------------------------------------------------------------
# Crash points
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CrashPointKind:
    """A named crash point: a store statement (matched in simulator/child/crash_points.py) or a host step."""

    key: str
    help: str
    host_step: bool = False      # a step of the fake host, not an SQL statement
    inside_leave: bool = False   # fires inside a leave (session.deleted, /thatch/exit)


CRASH_POINTS: dict[str, CrashPointKind] = {c.key: c for c in (
    CrashPointKind("delivered-stamp", "the poller's delivered_at stamp, after the wake prompt"),
    CrashPointKind("read-stamp", "chat_read's stamp, after its select"),
    CrashPointKind("broadcast-insert", "the inserts of a broadcast transaction (nth: 2 by default)"),
    CrashPointKind("register-insert", "a registration's insert"),
    CrashPointKind("unregister", "a leave's delete", inside_leave=True),
    CrashPointKind("heartbeat", "the poller's batch heartbeat"),
    CrashPointKind("wake-prompt", "the fake opencode server receiving a wake prompt (opencode processes only)",
                   host_step=True),
)}
CrashPoint = Literal[tuple(CRASH_POINTS)]  # type: ignore[valid-type]
# Host steps are the fake host's own: the host kinds that take them (the ones with a wake prompt of their own).
HOST_CRASH_POINTS: dict[str, tuple[str, ...]] = {c.key: hosts_with("polls")
                                                 for c in CRASH_POINTS.values() if c.host_step}
_NAMED_STEPS_HELP = "; ".join(f"{c.key} = {c.help}" for c in CRASH_POINTS.values()) + "."

# ---------------------------------------------------------------------------
# Step arguments: one model per step kind (the YAML spelling is each field's alias)
# ---------------------------------------------------------------------------


class SendArgs(EitherOr):
    sender: str = Field(..., alias="from", description="Label of the sending session.")
    to: Optional[str] = Field(None, description="Label of the recipient session.")
    to_raw: Optional[str] = Field(
        None, description="A literal recipient string passed as-is (to test unknown names); use instead of `to`.")
    body: StepBody = Field(None, description=BODY_HELP)
    claimed_as: Optional[str] = Field(
        None, alias="as", description="MCP hosts only: the `as` the model passes instead of the "
                                      "name its hook printed (a spoofing attempt); `{label}` "
                                      "expands to that session's name at the step's time.")

    either_or = ("to", "to_raw", "a send needs exactly one recipient — "
                 "write `to: <session label>` or `to_raw: <literal string>`, not both")


class BroadcastArgs(Strict):
    sender: str = Field(..., alias="from", description="Label of the broadcasting session.")
    body: StepBody = Field(None, description=BODY_HELP)


class SessionArg(Strict):
    session: str = Field(..., description="Label of the session that acts.")


class ReadArgs(SessionArg):
    claimed_as: Optional[str] = Field(
        None, alias="as", description="MCP hosts only: the `as` the model passes instead of the name its hook "
                                      "printed; Cursor trusts it (R32), so the read drains that session's "
                                      "inbox. `{label}` expands to that session's name at the step's time.")
    message: Optional[int] = Field(
        None, ge=1, description="The later design's paged read: the id of one message to show a page of, without "
                                "draining or marking anything read (a design without paged reads drains as usual).")
    offset: Optional[int] = Field(
        None, ge=0, description="With `message`: the character offset of the page to show.")


class PromptArgs(Strict):
    session: str = Field(..., description="Label of the session the user types into.")
    text: Optional[str] = Field(None, description="What the user types; faker writes a line when omitted.")


class TitleArgs(Strict):
    session: str = Field(..., description="Label of the session whose title changes.")
    title: str = Field(..., description="The new session title.")


class ConfigArgs(Strict):
    process: str = Field(..., description="Label of the process whose config file changes.")
    enabled: Optional[bool] = Field(None, description="New chat.enabled.")
    auto_register: Optional[bool] = Field(None, alias="autoRegister", description="New chat.autoRegister.")


class ReviewArgs(Strict):
    """The user of a session reviews its oldest held message (Qoder's `/peers approve` / `/peers deny`)."""

    session: str = Field(..., description="Label of the session whose user reviews a held message.")
    sender: Optional[str] = Field(
        None, alias="from",
        description="Label of the sender whose held message to review (default: the oldest held message).")


class ProcessArg(Strict):
    process: str = Field(..., description="Label of the process.")


CrashWhen = Literal["before", "after"]

# The store calls (thatch_core's ChatStore methods, checked against it by a test) a crash may name
# by statement count: `call: send, statement: 3` dies at the 3rd statement SQLite runs inside
# one send (BEGIN and COMMIT count), at any boundary of the call, not only the named ones.
STORE_CALLS = ("send", "broadcast", "read", "register", "unregister", "heartbeat", "mark_delivered",
               "pending_notifications", "refresh_topic", "status", "unread_count", "prune", "note_user_prompt",
               "record_host_pid", "resolve_host_pid", "list_sessions")
StoreCall = Literal[STORE_CALLS]  # type: ignore[valid-type]

_CRASH_FORMS = ("write `before: <named step>`, `after: <named step>`, `sql: <statement substring>` "
                "or `call: <store call>` with `statement: N` (with `when: after` to die once its "
                "transaction commits)")


class CrashArgs(Strict):
    """Where a process dies: just before or just after a named step, or an SQL statement."""

    process: str = Field(..., description="Label of the process that dies at the crash point.")
    before: Optional[CrashPoint] = Field(
        None, description="A named step: the process is SIGKILLed just before it (a "
                          "statement never runs; the wake prompt never reaches the session). " + _NAMED_STEPS_HELP)
    after: Optional[CrashPoint] = Field(
        None, description="A named step: the process is SIGKILLed just after it (a "
                          "statement's transaction has committed and is durable; the wake "
                          "prompt has reached the session and the poller has not stamped it). " + _NAMED_STEPS_HELP)
    sql: Optional[str] = Field(None, description="Instead of a named step: a substring of the SQL statement to die at.")
    call: Optional[StoreCall] = Field(
        None, description="Instead of a named step or `sql`: a store call (" + ", ".join(STORE_CALLS) + "), "
                          "with `statement`: die at that statement of the call.")
    statement: Optional[int] = Field(
        None, ge=1, description="With `call` only: the number of the statement within one call (1 = its first, "
                                "BEGIN and COMMIT included) to die at.")
    when: Optional[CrashWhen] = Field(
        None, description="With `sql` or `call` only: die just `before` the statement runs "
                          "(default), or just `after` its transaction commits.")
    nth: int = Field(
        1, ge=1,
        description="Die at the nth occurrence of the step (the nth matching statement; with `call`, the nth "
                    "call reaching that statement) after the point is armed.")

    @model_validator(mode="after")
    def _one_point(self) -> "CrashArgs":
        given = [key for key in ("before", "after", "sql", "call") if getattr(self, key) is not None]
        if len(given) != 1:
            found = f", found {' and '.join(f'`{k}`' for k in given)}" if given else ""
            raise ValueError(f"a crash needs exactly one crash point{found} — {_CRASH_FORMS}")
        if (self.call is None) != (self.statement is None):
            raise ValueError("`call` and `statement` go together — write e.g. `call: send, statement: 2`")
        if self.when is not None and self.sql is None and self.call is None:
            raise ValueError(f"`when` goes with `sql` or `call` only — write `{self.when}: "
                             f"{self.before or self.after}` alone")
        return self

    @model_serializer(mode="wrap")
    def _as_written(self, handler) -> dict[str, Any]:
        """`after`, `when`, `call` and `statement` appear in a dump only when given, so the record
        of a `before:` crash reads as it always did."""
        data = handler(self)
        for key in ("after", "when", "call", "statement"):
            if data.get(key) is None:
                data.pop(key, None)
        return data

    @property
    def point(self) -> Optional[str]:
        """The named step (None for an `sql` or `call` crash)."""
        return self.before or self.after

    @property
    def timing(self) -> CrashWhen:
        """`after` for `after:` and `when: after`, else `before`."""
        return "after" if self.after is not None or self.when == "after" else "before"


class SleepArgs(Strict):
    duration: DurationMs = Field(..., alias="for", description=f"How long the machine sleeps ({DURATION_HELP}).")


# What `resume.argv` may say: any strings; `{id}` is the one placeholder
# (validate.py refuses any other `{word}`, so a typo never reaches argv).
ARGV_PLACEHOLDER = "{id}"
_ARGV_SCHEMA = {"type": "array", "minItems": 1, "items": {"type": "string"}}


class ResumeArgs(Strict):
    session: str = Field(
        ..., description="Label of the session being resumed: the new process serves it "
                         "(later steps for it go there) and `{id}` in `argv` is its id.")
    process: str = Field(..., description="Label of the new process (declared with `start: never`) that resumes it.")
    how: Literal["-s", "-c"] = Field(
        "-s",
        description="-s <id> (the id on the command line) or -c (newest top-level session of the directory listing).")
    # Checked in validate.py (a list of strings, at least one; `{id}` the only
    # placeholder; not together with `how`) so each problem gets file:line and a fix.
    argv: Annotated[Optional[Any], WithJsonSchema(_ARGV_SCHEMA)] = Field(
        None, description="Instead of `how`: the whole command line the new process reports for its own pid "
                          "(what thatch reads from /proc/<pid>/cmdline), one string per argument; `{id}` expands to "
                          "the resumed session's id. E.g. [opencode, \"--session={id}\"], [opencode, --continue], "
                          "[opencode, run, -s] (a flag without its value), [opencode, -s, \"{id}\", -c] (-s wins).")
    listing: Optional[list[str]] = Field(
        None, description="The sessions opencode lists for the directory (what -c picks the newest top-level one "
                          "from), as labels; default: every session that lived in the resumed session's directory. "
                          "[] = an empty directory; [a-child] = only a sub-agent child, so -c continues nothing.")


class RestartArgs(Strict):
    process: str = Field(..., description="Label of the opencode daemon that dies.")
    into: str = Field(
        ..., description="Label of the new daemon (declared with `start: never`) that re-hosts its open tabs.")
    grace: Optional[DurationMs] = Field(
        None, description=f"Override of the rehost grace ({DURATION_HELP}); default 24h.")


class ForkArgs(Strict):
    session: str = Field(
        ..., description="Label of the Claude Code session whose session id forks "
                         "(a continued-in record lands in the old transcript).")
    host_id: Optional[str] = Field(
        None, min_length=1, max_length=200,
        description="The new host session id (default: a fresh uuid from the run's generator); the old id in "
                    "another case (`ABC-123` -> `abc-123`) is the same chat identity.")
    older_as: Optional[str] = Field(
        None, pattern=LABEL_PATTERN,
        description="A new session label for the OLDER id, which keeps running in the same host after the fork "
                    "(the forked label goes on under the new id). Steps after the fork may target it like any "
                    "session of that process.")


class StallArgs(Strict):
    process: str = Field(..., description="Label of the polling process whose poll timer stalls.")
    duration: DurationMs = Field(
        ..., alias="for",
        description=f"How long its poll timer is lost ({DURATION_HELP}): the cycles in it are skipped and it "
                    "polls at the end, late. Keep `for` + the poll interval within 60 s to stay within the "
                    "staleness rule (R14).")


class RetryArgs(Strict):
    """The host timed out the session's last tool call after its transaction committed, and calls it again."""

    session: str = Field(..., description="Label of the session whose host retries its last tool call.")
    tool: Optional[Literal["send", "broadcast", "read", "register", "unregister", "list", "status"]] = Field(
        None, description="Retry the session's last call of this tool (default: its last tool call, any tool).")
    times: int = Field(1, ge=1, le=5, description="How many times the host calls it again, with identical arguments.")


class ReloadArgs(Strict):
    """The plugin (or daemon) reloads in the same process: in-memory state is forgotten, the sessions live on."""

    process: str = Field(..., description="Label of the opencode process whose thatch runtime reloads.")


class LockArgs(Strict):
    duration: DurationMs = Field(
        ..., alias="for",
        description=f"How long (virtual) another writer holds the database write lock ({DURATION_HELP}).")


class CliListArgs(Strict):
    """`thatch chat list --db <run db> [--stale N|all]`, run through the real CLI entry point."""

    stale: Optional[Union[Literal["all"], Annotated[float, Field(ge=0)]]] = Field(
        None, description="--stale: hide stale rows last seen more than N days ago (default 1), "
                          "or `all` to show every row.")


_BOUND_HELP = ('a duration in whole minutes (`5m` means the scenario start + 5m, written as the CLI reads it: '
               '"YYYY-MM-DD HH:MM" local time), or literal text passed as is')


class CliTailArgs(Strict):
    """`thatch chat tail --once --db <run db> [filters]`, run through the real CLI entry point."""

    limit: Optional[Union[Literal["all"], Annotated[int, Field(ge=1)]]] = Field(
        None, description="--limit: how many of the last matching messages the backlog shows "
                          "(default 20), or `all`.")
    match: Optional[Union[str, list[str]]] = Field(
        None, description="--match: body regex (a list repeats the flag: every one must match).")
    sender: Optional[str] = Field(
        None, alias="from", description="--from: sender name substring, case-insensitive; "
                                        "`{label}` expands to that session's name.")
    to: Optional[str] = Field(
        None, description="--to: recipient name substring, case-insensitive; `{label}` expands to "
                          "that session's name.")
    since: Optional[str] = Field(None, description=f"--since (inclusive): {_BOUND_HELP}.")
    until: Optional[str] = Field(None, description=f"--until (exclusive): {_BOUND_HELP}.")

    @model_validator(mode="after")
    def _whole_minutes(self):
        for key in ("since", "until"):
            value = getattr(self, key)
            try:
                ms = parse_duration(value) if value is not None else 0
            except ValueError:
                continue  # literal text: the CLI judges it
            if ms % 60_000:
                raise ValueError(f"cli_tail {key} {value!r} is not whole minutes — the CLI's bounds are "
                                 f"\"YYYY-MM-DD HH:MM\"; write e.g. {max(1, ms // 60_000)}m")
        return self


# ---------------------------------------------------------------------------
# Step kinds
# ---------------------------------------------------------------------------

# Where a step acts. SENDER / SESSION: the process hosting that session now (the acting
# session is `args.sender` / `args.session`); PROCESS: the process `args.process`; MACHINE:
# any running process (the CLI runs on the machine); ENGINE: the orchestrator itself.
SENDER, SESSION, PROCESS, MACHINE, ENGINE = "sender", "session", "process", "machine", "engine"
# The argument keys (YAML spellings) that name a declared session or process, in any step's arguments.
SESSION_ARG_KEYS = ("session", "from", "to")
PROCESS_ARG_KEYS = ("process", "into")
# Where a step runs: down a harness pipe as an OP_ACT command, or in the orchestrator.
HARNESS, ORCHESTRATOR = "harness", "orchestrator"
# What a step leaves to judge with a step `expect:`: a tool result, a hook line (on a host with hooks), nothing.
TOOL_REPLY, HOOK_REPLY = "tool", "hook"


@dataclass(frozen=True)
class StepKind:
    """An action or a fault of the timeline (one YAML key of a step) and its traits."""

    key: str
    args: type[BaseModel]
    description: str
    fault: bool = False
    target: str = SESSION
    runs: str = HARNESS
    # The HostKind trait its target's host must have (None: any host); for a step of the whole machine
    # (a lock), the trait every host of the world must have.
    needs: Optional[str] = None
    reply: Optional[str] = None        # TOOL_REPLY, HOOK_REPLY or None
    not_reached: Optional[str] = None  # a fault: why it may not take effect, for its not-reached verdict
    family: Optional[str] = None       # an action: the exploration family that draws it (EXPLORE_ACTIONS)
    scripted: bool = True              # False: a harness-internal action no scenario writes

    @cached_property
    def attr(self) -> str:
        """The `Step` attribute holding its arguments (a trailing `_` where the key shadows a Python name)."""
        return self.key + "_" if self.key in ("register", "list") else self.key

    @property
    def actor_key(self) -> Optional[str]:
        """The YAML key of the argument naming the acting session (`from`, `session`), if any."""
        if self.target not in (SENDER, SESSION):
            return None
        return self.args.model_fields[self.target].alias or self.target

    def actor(self, args: Any) -> Optional[str]:
        """The label of the session that acts in a step of this kind (None: a process or the machine)."""
        return args.sender if self.target == SENDER else args.session if self.target == SESSION else None

    def accepts(self, host_kind: Optional[str]) -> bool:
        """A host of kind `host_kind` can carry this step out."""
        return host(host_kind).has(self.needs)


_ACTIONS = (
    StepKind("send", SendArgs, "chat_send from one session to another.", target=SENDER, reply=TOOL_REPLY,
             family="send"),
    StepKind("broadcast", BroadcastArgs, "chat_broadcast from a session.", target=SENDER, reply=TOOL_REPLY,
             family="broadcast"),
    StepKind("read", ReadArgs, "chat_read by a session.", reply=TOOL_REPLY, family="read"),
    StepKind("register", SessionArg, "An explicit chat_register by a session.", reply=TOOL_REPLY, family="churn"),
    StepKind("unregister", SessionArg, "chat_unregister by a session (a leave: tombstone).", reply=TOOL_REPLY,
             family="churn"),
    StepKind("list", SessionArg, "chat_list by a session.", reply=TOOL_REPLY, family="query"),
    StepKind("status", SessionArg, "chat_status by a session.", reply=TOOL_REPLY, family="query"),
    StepKind("prompt", PromptArgs, "A user message typed into a session (a turn; hooks fire on MCP hosts).",
             reply=HOOK_REPLY, family="prompt"),
    StepKind("delete", SessionArg, "The user deletes the session in the TUI (session.deleted).", needs="leaves",
             family="churn"),
    StepKind("exit", SessionArg, "A greenlit /thatch/exit of the session.", needs="leaves", family="churn"),
    StepKind("title", TitleArgs, "The auto-titler sets the session's title.", family="title"),
    StepKind("config", ConfigArgs, "Edit a process's thatch config file.", target=PROCESS, family="config"),
    StepKind("start", ProcessArg, "Start a process declared with `start: never`.", target=PROCESS, runs=ORCHESTRATOR),
    StepKind("cli_list", CliListArgs, "Run `thatch chat list` through the CLI entry point (stale: N or all).",
             target=MACHINE, reply=TOOL_REPLY, family="cli"),
    StepKind("cli_tail", CliTailArgs,
             "Run `thatch chat tail --once` through the CLI entry point (limit, match, from, to, since, until).",
             target=MACHINE, reply=TOOL_REPLY, family="cli"),
    StepKind("approve", ReviewArgs, "The session's user approves a held message: it is delivered on the next turn "
             "(messaging policies).", needs="policies", reply=TOOL_REPLY),
    StepKind("decline", ReviewArgs, "The session's user declines a held message: it is dropped and its sender told "
             "it was refused (messaging policies).", needs="policies", reply=TOOL_REPLY),
    # A session that shows up without a user message (`joins: idle`): asked for by the harness itself.
    StepKind("appear", SessionArg, "An open tab or conversation with no message yet.", scripted=False),
)

# ---------------------------------------------------------------------------
# Interleavings: a store call paused at a statement boundary while other calls run
# ---------------------------------------------------------------------------

# The store calls each action (and a poll cycle) of a session makes for certain, in thatch_core and
# as lint assumes them: a pause names one of these for the session to reach it (validate.py).
ACTION_STORE_CALLS: dict[str, tuple[str, ...]] = {
    "send": ("send",), "broadcast": ("broadcast",), "read": ("read",), "register": ("register",),
    "unregister": ("unregister",), "list": ("list_sessions", "unread_count"), "status": ("status",),
    "poll": ("heartbeat", "pending_notifications", "mark_delivered", "prune"),
}
# The calls of a poll cycle that name a hosted session among their arguments (a session's pause reaches them).
POLL_SESSION_CALLS = ("heartbeat", "pending_notifications")
# Agents whose turns call tools on their own: the store calls a woken one of each kind makes.
AGENT_STORE_CALLS: dict[str, tuple[str, ...]] = {"reader": ("read",), "ping-pong": ("read", "send")}
# Actions an interleaving may run while the paused call waits: one session's tool calls.
INTERLEAVE_ACTIONS = ("send", "broadcast", "read", "register", "unregister", "list", "status")


class PauseArgs(Strict):
    """Where a store call stops: a statement boundary of one call, in the process hosting a session."""

    session: Optional[str] = Field(
        None, description="Label of the session whose store call pauses (it runs in the process hosting it, and "
                          "names the session among its arguments).")
    process: Optional[str] = Field(
        None, description="Instead of `session`: label of a polling process whose poll cycle's call pauses "
                          "(heartbeat, pending_notifications, mark_delivered, prune).")
    call: StoreCall = Field(..., description="The store call (" + ", ".join(STORE_CALLS) + ") that pauses.")
    statement: int = Field(..., ge=1, description="The statement of the call (1 = its first, BEGIN and COMMIT "
                                                  "included) at which it pauses.")
    when: CrashWhen = Field(
        "before", description="Pause just `before` the statement runs (default) or just `after` it returned "
                              "(inside its transaction where it has one: a write holds the lock while paused).")
    nth: int = Field(1, ge=1, description="Pause the nth call reaching that statement after the step.")

    @model_validator(mode="after")
    def _one_owner(self) -> "PauseArgs":
        if (self.session is None) == (self.process is None):
            raise ValueError("a pause names exactly one of `session: <label>` (its tool call) or "
                             "`process: <label>` (its poll cycle)")
        return self


class PollArgs(Strict):
    process: str = Field(..., description="Label of the polling process that runs one poll cycle.")


class _OneCall(Strict):
    """One call that runs to completion while the paused call waits: exactly one key."""

    @model_validator(mode="after")
    def _exactly_one(self) -> "_OneCall":
        given = [k for k, attr in _CALL_ATTRS.items() if getattr(self, attr) is not None]
        if len(given) != 1:
            raise ValueError(f"each `run` entry is exactly one call, found {len(given) or 'none'}"
                             f"{': ' + ', '.join(given) if given else ''} — write one of "
                             f"{', '.join(_CALL_ATTRS)} per entry")
        return self

    @model_serializer(mode="wrap")
    def _as_written(self, handler) -> dict[str, Any]:
        """Only the one call it holds, as written."""
        return {k: v for k, v in handler(self).items() if v is not None}

    def call(self) -> tuple[str, BaseModel]:
        """(its action or "poll", its arguments)."""
        key = next(k for k, attr in _CALL_ATTRS.items() if getattr(self, attr) is not None)
        return key, getattr(self, _CALL_ATTRS[key])


# run entry key -> its attribute (a trailing `_` where the key shadows a Python name, as in `Step`)
_CALL_ATTRS = {key: key + "_" if key in ("register", "list") else key
               for key in (*INTERLEAVE_ACTIONS, "poll", "resume")}
_CALL_ARGS = {**{k.key: (k.args, k.description) for k in _ACTIONS if k.key in INTERLEAVE_ACTIONS},
              "poll": (PollArgs, "One poll cycle of a polling process."),
              "resume": (ResumeArgs, "A session resumed in a new process (as the `resume` fault): its start runs "
                                     "to completion, registration included.")}
InterleaveCall = create_model(
    "InterleaveCall", __base__=_OneCall, __doc__=_OneCall.__doc__, __module__=__name__,
    **{attr: (Optional[_CALL_ARGS[key][0]],
              Field(None, alias=key if attr != key else None, description=_CALL_ARGS[key][1]))
       for key, attr in _CALL_ATTRS.items()},
)


class InterleaveArgs(Strict):
    """A race on demand: one store call pauses at a statement boundary, other calls run, then it goes on."""

    pause: PauseArgs = Field(..., description="The store call that stops, and where.")
    run: list[InterleaveCall] = Field(  # type: ignore[valid-type]
        ..., min_length=1, description="The calls that run to completion, in order, in other processes while it "
                                       "waits (session tool calls: send, broadcast, read, ...; `poll: {process}`; "
                                       "`resume: {session, process}`).")

    @property
    def process(self) -> Optional[str]:
        """The process the pause names (None: the one hosting its session, found when the step runs)."""
        return self.pause.process


_FAULTS = (
    StepKind("kill", ProcessArg, "Fault: SIGKILL the whole harness process.", fault=True, target=PROCESS,
             runs=ORCHESTRATOR, not_reached="the process was not running"),
    StepKind("crash", CrashArgs, "Fault: arm a crash point; the process SIGKILLs itself just before (or after) it.",
             fault=True, target=PROCESS, runs=ORCHESTRATOR, needs="crash_points",
             not_reached="the process never reached the crash point's statement or step while it ran"),
    StepKind("sleep", SleepArgs, "Fault: the machine sleeps (every process stops beating), then catches up.",
             fault=True, target=ENGINE, runs=ORCHESTRATOR),
    StepKind("resume", ResumeArgs,
             "Fault: resume a session in a new process with -s or -c (or any command line, `argv`).",
             fault=True, runs=ORCHESTRATOR, needs="resumes", not_reached="the resuming process did not start"),
    StepKind("restart", RestartArgs,
             "Fault: the opencode daemon dies and a new one re-hosts its open tabs (rehost grace).", fault=True,
             target=PROCESS, runs=ORCHESTRATOR, needs="restarts",
             not_reached="the daemon or its replacement did not start"),
    StepKind("fork", ForkArgs, "Fault: Claude Code forks the session id.", fault=True, runs=ORCHESTRATOR,
             needs="forks", not_reached="the session's host was not running or refused the fork"),
    StepKind("lock", LockArgs, "Fault: another writer holds the database lock.", fault=True, target=ENGINE,
             runs=ORCHESTRATOR, needs="lock_safe", not_reached="no store call met the held lock"),
    StepKind("stall", StallArgs, "Fault: poll jitter: a polling process's timer is lost for a while (its cycles "
             "skipped), then it polls late.", fault=True, target=PROCESS, runs=ORCHESTRATOR, needs="polls",
             not_reached="the process was not running"),
    StepKind("retry", RetryArgs, "Fault: the host times out the session's last tool call after it committed and "
             "calls it again with identical arguments.", fault=True, runs=ORCHESTRATOR,
             not_reached="the session's host was not running or the session had made no such tool call"),
    StepKind("reload", ReloadArgs, "Fault: the plugin reloads in the same process (same pid): a fresh runtime "
             "without the old one's in-memory state (child maps, the hosted set); its sessions live on.",
             fault=True, target=PROCESS, runs=ORCHESTRATOR, needs="polls",
             not_reached="the process was not running"),
    StepKind("interleave", InterleaveArgs, "Fault: a race on demand: a store call pauses at a statement boundary "
             "while other processes' calls run to completion, then goes on.", fault=True, target=ENGINE,
             runs=ORCHESTRATOR, needs="crash_points",
             not_reached="the paused call never reached its statement (pause-missed names its statement count)"),
)

# Every step kind by its YAML key: the scripted actions, the harness-internal ones, the faults.
STEPS: dict[str, StepKind] = {k.key: k for k in _ACTIONS + _FAULTS}
ACTION_KEYS = tuple(k.key for k in _ACTIONS if k.scripted)
FAULT_KEYS = tuple(k.key for k in _FAULTS)
SCRIPTED_KEYS = ACTION_KEYS + FAULT_KEYS
# Actions whose reply the harness records (a `tool-result` carrying the step index), so a step
# `expect:` can be judged; `prompt` too, but only on hosts with hooks, where it prints the identity
# hook line. The rest (delete, exit, title, config, start and every fault) leave no reply.
REPLY_ACTIONS = tuple(k for k in ACTION_KEYS if STEPS[k].reply == TOOL_REPLY)
HOOK_REPLY_ACTIONS = tuple(k for k in ACTION_KEYS if STEPS[k].reply == HOOK_REPLY)
REVIEW_ACTIONS = tuple(k for k in ACTION_KEYS if STEPS[k].needs == "policies")


def harness_actions(host_kind: str) -> frozenset[str]:
    """The actions a harness of `host_kind` serves (its handler table must hold exactly these)."""
    return frozenset(k.key for k in STEPS.values() if k.runs == HARNESS and k.accepts(host_kind))


# ---------------------------------------------------------------------------
# Exploration (simulator/explore/): what a generated world may draw, in draw order
# ---------------------------------------------------------------------------

# Action families and their weight when on. `send` is always on: without
# mail nothing is delivered and most properties judge nothing.
EXPLORE_ACTIONS: dict[str, int] = {
    "send": 10, "broadcast": 3, "read": 3, "query": 2, "prompt": 4, "title": 1, "churn": 2, "cli": 1,
    "config": 1,
}
EXPLORE_ALWAYS_ACTIONS = ("send",)
# Fault families: the fault kind each draws and the range of its rate (the chance that one scripted
# step is that fault), drawn per run when the family is on. `prune` is a machine sleep just around
# the 7-day TTLs.
EXPLORE_FAULTS: dict[str, tuple[str, tuple[float, float]]] = {
    "kill": ("kill", (0.03, 0.12)), "crash": ("crash", (0.03, 0.12)), "sleep": ("sleep", (0.02, 0.08)),
    "resume": ("resume", (0.05, 0.2)), "restart": ("restart", (0.02, 0.08)), "fork": ("fork", (0.05, 0.2)),
    "lock": ("lock", (0.02, 0.08)), "prune": ("sleep", (0.01, 0.03)), "jitter": ("stall", (0.03, 0.12)),
}
# The later design's incidents: a host that retries a committed call, a plugin reload. Drawn only by a
# campaign that judges the later design's properties (their own rng stream), so every other seed's world
# stays the one it always drew.
EXPLORE_LATER_FAULTS: dict[str, tuple[str, tuple[float, float]]] = {
    "retry": ("retry", (0.25, 0.5)), "reload": ("reload", (0.02, 0.08)),
}
