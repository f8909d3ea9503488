"""The scenario data model: what a scenario says, validated before anything runs.

These pydantic models are the single definition of the scenario language.
The YAML loader (`simulator.scenario.loader`) is a front end to them, the JSON Schema
published for editors is generated from them, and the Python API builds them
directly. Every field carries a description because the schema is what an
author's editor shows while they type.

Sessions and processes are referred to by the author's own labels (`alice`,
`h1`); the engine maps labels to session ids and assigned names at run time,
so an author never needs to know either.
"""

from __future__ import annotations

import re
import typing
from typing import Annotated, Any, ClassVar, Literal, Optional, Union

from pydantic import (
    AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo, WithJsonSchema,
    model_serializer, model_validator,
)

from simulator.scenario.durations import (
    DURATION_HELP, UNITS_REQUIRED, duration_json_schema, format_duration, parse_duration, parse_word_or_duration,
    refuse_bare_number,
)
from simulator.scenario.errors import did_you_mean
from simulator.scenario.expectation_keys import (  # noqa: F401 - EXPECTATION_KEYS .. hook_line_host_problems re-exported
    EXPECTATION_KEYS, EXPECTATION_KINDS, HOST_HOOKS, KIND_DESCRIPTIONS, body_schema, expectation_body_problems,
    hook_line_host_problems,
)
from simulator.scenario.labels import (  # noqa: F401 - LABEL_PLACEHOLDER re-exported
    BLOCK_LABEL_PATTERN, LABEL_PATTERN, LABEL_PLACEHOLDER,
)
from simulator.scenario import replicas as replica_blocks
from simulator.scenario.policies import POLICY_DESC, REVIEW_ACTIONS, PolicyField
from simulator.scenario.replicas import MAX_REPLICAS


class _Strict(BaseModel):
    """Unknown keys are errors: a typo must never be silently ignored."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=False)


def _units_required(info: ValidationInfo) -> bool:
    """A scenario file must write every duration with its unit; Python callers may pass milliseconds."""
    return bool(info.context and info.context.get(UNITS_REQUIRED))


def _duration(value: Any, info: ValidationInfo) -> int:
    if _units_required(info):
        refuse_bare_number(value)
    return parse_duration(value)


# A duration field: parsed per field so a bad value is reported at its own key path.
DurationMs = Annotated[int, BeforeValidator(_duration), WithJsonSchema(duration_json_schema())]


def _end_or_duration(value: Any, info: ValidationInfo) -> Any:
    """An expectation's `at`: a duration or `end`."""
    if _units_required(info):
        refuse_bare_number(value)
    return parse_word_or_duration(value, "end")


def _never_or_duration(value: Any, info: ValidationInfo) -> Any:
    """A process's `start`: a duration or `never`."""
    if _units_required(info):
        refuse_bare_number(value)
    return parse_word_or_duration(value, "never")


# ---------------------------------------------------------------------------
# Processes, sessions, agents
# ---------------------------------------------------------------------------

AgentKind = Literal["reader", "ping-pong", "silent"]

REPLICAS_DESC = ("Copies of this block, written out at load: copy i (1 .. N) has `{i}` replaced by i in every text of it "
                 "(ids: `w{i}` gives w1, w2, ...; projects, titles).")
# A process or session label as the file may write it: in a replicated block it holds `{i}`.
BlockLabel = Annotated[str, WithJsonSchema({"type": "string", "pattern": BLOCK_LABEL_PATTERN})]


class Window(_Strict):
    """A virtual-time window [from, until) during which a session is busy or compacting."""

    start: DurationMs = Field(..., alias="from", description=f"Window start ({DURATION_HELP}).")
    until: DurationMs = Field(..., description=f"Window end, exclusive ({DURATION_HELP}).")

    @model_validator(mode="after")
    def _ordered(self) -> "Window":
        if self.until <= self.start:
            raise ValueError(f"a window's `until` must be after its `from` — write an `until` later than {format_duration(self.start)}")
        return self


class Agent(_Strict):
    """How the session's model behaves when a turn starts (a wake prompt or a user message)."""

    kind: AgentKind = Field("reader", description="reader: reads its inbox on every wake; ping-pong: reads and replies to every sender; silent: never reads (so it is re-nudged).")
    turn: DurationMs = Field(20_000, description=f"How long one model turn lasts in virtual time ({DURATION_HELP}).")
    busy: list[Window] = Field(default_factory=list, description="Windows when the session is busy with other work (no wake can land).")
    compacting: list[Window] = Field(default_factory=list, description="Windows when the session is compacting its context (no wake can land).")
    reply_limit: Optional[int] = Field(None, ge=0, description="ping-pong only: stop replying after this many replies (default: never stops).")
    aborted: list[Window] = Field(default_factory=list, description="Windows in which a turn that ends is aborted by the user (Cursor's stop hook sees status aborted: no follow-up).")


def _bare_agent_schema(schema: dict[str, Any]) -> None:
    """Editors: `agent:` also takes a bare kind (the before-validator turns it into {kind: ...})."""
    agent = schema["properties"]["agent"]
    ref = {k: agent.pop(k) for k in list(agent) if k == "$ref"}
    agent["anyOf"] = [{"enum": list(typing.get_args(AgentKind))}, ref]


class Session(_Strict):
    """One chat session hosted by a harness process, named by the author's label."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=False,
                              json_schema_extra=lambda schema, cls: _bare_agent_schema(schema))

    id: BlockLabel = Field(..., pattern=LABEL_PATTERN, description="The author's label for this session (alice, reviewer, bob2). Steps refer to it.")
    agent: Agent = Field(default_factory=Agent, description="The scripted model behaviour; a bare kind (`reader`, `ping-pong`, `silent`) is accepted.")
    title: Optional[str] = Field(None, description="The session title the auto-titler lands; faker fills one from the seed when omitted.")
    parent: Optional[str] = Field(None, description="Label of the parent session: this one is a sub-agent child (never auto-registers).")
    joins: Literal["first-prompt", "idle", "explicit", "never"] = Field("first-prompt", description="How the session enters the directory: its first user message (default), the first idle event only, an explicit chat_register step, or never.")
    start: DurationMs = Field(0, description=f"Virtual time of the session's first user message ({DURATION_HELP}).")
    replicas: int = Field(1, ge=1, le=MAX_REPLICAS, description=REPLICAS_DESC)

    @model_validator(mode="before")
    @classmethod
    def _bare_agent(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("agent"), str):
            data = {**data, "agent": {"kind": data["agent"]}}
        return data


class ChatConfigSpec(_Strict):
    """The process's thatch config file (`chat.enabled`, `chat.autoRegister`)."""

    enabled: bool = Field(True, description="chat.enabled: false makes every tool refuse and the poller never start.")
    auto_register: bool = Field(True, alias="autoRegister", description="chat.autoRegister: false stops automatic joining.")


ProcessKind = Literal["opencode", "claude-code", "cursor"]

# How the fake opencode server hands its host events (a session's status,
# chat.message) to the thatch runtime (simulator/harness/events.py).
HostEvents = Literal["queued", "synchronous"]
HOST_EVENTS_DESC = ("opencode only. queued (default): the server hands its events to the runtime after the command "
                    "that caused them. synchronous: an event stream read on the caller's thread - a prompt call first "
                    "hands over every event due at that instant (another session's turn ending: its idle status, "
                    "a busy/compacting window opening or closing), before it returns, so the poller is re-entered "
                    "while it delivers (R24).")


class Process(_Strict):
    """One fake harness: an OS process forked by the orchestrator."""

    id: BlockLabel = Field(..., pattern=LABEL_PATTERN, description="The author's label for this process (h1, laptop-tab).")
    kind: ProcessKind = Field("opencode", description="opencode: a fake server with the thatch runtime and poller; claude-code: a host whose hooks and MCP server are real child processes; cursor: one workspace process running hooks and MCP.")
    project: Optional[str] = Field(None, description="The project the harness serves (its directory's name); omitted = no project.")
    checkout: Literal["root", "worktree", "none"] = Field("root", description="The checkout kind of the serving directory: a .git dir (root), a .git file (linked worktree), or none.")
    start: Annotated[Union[Literal["never"], int], BeforeValidator(_never_or_duration), WithJsonSchema(duration_json_schema("never"))] = Field(0, description=f"When the process starts ({DURATION_HELP}), or `never`: started later by a resume or restart step.")
    config: ChatConfigSpec = Field(default_factory=ChatConfigSpec, description="The thatch config the process reads.")
    poll_interval: DurationMs = Field(30_000, description=f"The poller's interval ({DURATION_HELP}).")
    events: HostEvents = Field("queued", description=HOST_EVENTS_DESC)
    sessions: list[Session] = Field(default_factory=list, description="Sessions this harness hosts from its start.")
    replicas: int = Field(1, ge=1, le=MAX_REPLICAS, description=REPLICAS_DESC + " A replicated process's sessions are copied with it (their ids need `{i}` too).")
    policy: PolicyField = Field(None, description=POLICY_DESC + " Laid over the scenario's `policy:`; opencode processes only.")


# ---------------------------------------------------------------------------
# Steps: actions and faults on the timeline
# ---------------------------------------------------------------------------


REPLY_TEXT_KEYS = ("equals", "contains", "not_contains", "matches")


class ReplyExpectation(_Strict):
    """What the tool reply (or hook line) of this step must look like. `{label}` expands to that session's assigned name."""

    ok: Optional[bool] = Field(None, description="Whether the call must succeed (false = a refusal).")
    equals: Optional[str] = Field(None, description="The exact reply text.")
    contains: Optional[str] = Field(None, description="A substring the reply must contain.")
    matches: Optional[str] = Field(None, description="A regular expression the reply must match (re.search).")
    not_contains: Optional[str] = Field(None, description="A substring the reply must NOT contain.")


MAX_REPEAT = 1_000_000


class RepeatedBody(_Strict):
    """A long body written compactly: `repeat` written `times` times, between an optional `prefix` and `suffix`."""

    repeat: str = Field(..., min_length=1, description="The text to repeat (at least one character).")
    times: int = Field(..., ge=0, le=MAX_REPEAT, description=f"How many times to repeat it (0 .. {MAX_REPEAT:_}).")
    prefix: str = Field("", description="Text before the repeated part (e.g. blanks that the store trims).")
    suffix: str = Field("", description="Text after the repeated part.")

    def text(self) -> str:
        return self.prefix + self.repeat * self.times + self.suffix


def expand_body(body: Any) -> Any:
    """A step body as the tool receives it: a `{repeat, times}` mapping (or its
    model) expanded to the string; anything else unchanged."""
    if isinstance(body, RepeatedBody):
        return body.text()
    if isinstance(body, dict) and "repeat" in body:
        return RepeatedBody.model_validate(body).text()
    return body


_REPEAT_FORM = "{repeat: TEXT, times: N} (optional prefix, suffix)"


def _body(value: Any) -> Any:
    """A step body: a string, or a mapping checked as a RepeatedBody with one
    message that names the bad key (a plain union would report both branches)."""
    if value is None or isinstance(value, (str, RepeatedBody)):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"{value!r} is not a message body — write a string (quote it) or {_REPEAT_FORM}")
    try:
        return RepeatedBody.model_validate(value)
    except ValidationError as exc:
        err = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]  # a typo first: it explains the rest
        key = ".".join(str(k) for k in err["loc"])
        if err["type"] == "extra_forbidden":
            raise ValueError(f"unknown key `{key}` in a repeated body — write {_REPEAT_FORM}") from None
        if err["type"] == "missing":
            raise ValueError(f"a repeated body needs `{key}` — write {_REPEAT_FORM}") from None
        if key == "times" and err["type"] in ("greater_than_equal", "less_than_equal"):
            raise ValueError(f"`times: {err.get('input')!r}` is out of range — write a whole number from 0 to {MAX_REPEAT}") from None
        if key == "repeat" and err["type"] == "string_too_short":
            raise ValueError("`repeat` is empty — write the text to repeat (at least one character)") from None
        raise ValueError(f"`{key}: {err.get('input')!r}` is not allowed — write {_REPEAT_FORM}: "
                         f"strings for repeat, prefix and suffix, a whole number 0 .. {MAX_REPEAT} for times") from None


StepBody = Annotated[Optional[Union[str, RepeatedBody]], BeforeValidator(_body)]

BODY_HELP = ("The message body: a string, or {repeat: TEXT, times: N} (optional prefix/suffix) for a long one; "
             "faker writes one from the seed when omitted.")


class _EitherOr(_Strict):
    """Arguments with two alternative fields: exactly one of them must be given."""

    # (one field, the other field, the message when both or neither are given)
    either_or: ClassVar[tuple[str, str, str]]

    @model_validator(mode="after")
    def _exactly_one_alternative(self) -> "_EitherOr":
        first, second, message = self.either_or
        if (getattr(self, first) is None) == (getattr(self, second) is None):
            raise ValueError(message)
        return self


class SendArgs(_EitherOr):
    sender: str = Field(..., alias="from", description="Label of the sending session.")
    to: Optional[str] = Field(None, description="Label of the recipient session.")
    to_raw: Optional[str] = Field(None, description="A literal recipient string passed as-is (to test unknown names); use instead of `to`.")
    body: StepBody = Field(None, description=BODY_HELP)
    claimed_as: Optional[str] = Field(None, alias="as", description="MCP hosts only: the `as` the model passes instead of the name its hook printed (a spoofing attempt); `{label}` expands to that session's name at the step's time.")

    either_or = ("to", "to_raw", "a send needs exactly one recipient — "
                 "write `to: <session label>` or `to_raw: <literal string>`, not both")


class BroadcastArgs(_Strict):
    sender: str = Field(..., alias="from", description="Label of the broadcasting session.")
    body: StepBody = Field(None, description=BODY_HELP)


class SessionArg(_Strict):
    session: str = Field(..., description="Label of the session that acts.")


class ReadArgs(SessionArg):
    claimed_as: Optional[str] = Field(None, alias="as", description="MCP hosts only: the `as` the model passes instead of the name its hook printed; Cursor trusts it (R32), so the read drains that session's inbox. `{label}` expands to that session's name at the step's time.")


class PromptArgs(_Strict):
    session: str = Field(..., description="Label of the session the user types into.")
    text: Optional[str] = Field(None, description="What the user types; faker writes a line when omitted.")


class TitleArgs(_Strict):
    session: str = Field(..., description="Label of the session whose title changes.")
    title: str = Field(..., description="The new session title.")


class ConfigArgs(_Strict):
    process: str = Field(..., description="Label of the process whose config file changes.")
    enabled: Optional[bool] = Field(None, description="New chat.enabled.")
    auto_register: Optional[bool] = Field(None, alias="autoRegister", description="New chat.autoRegister.")


class ReviewArgs(_Strict):
    """The user of a session reviews its oldest held message (Qoder's `/peers approve` / `/peers deny`)."""

    session: str = Field(..., description="Label of the session whose user reviews a held message.")
    sender: Optional[str] = Field(None, alias="from", description="Label of the sender whose held message to review (default: the oldest held message).")


class ProcessArg(_Strict):
    process: str = Field(..., description="Label of the process.")


CrashPoint = Literal["delivered-stamp", "read-stamp", "broadcast-insert", "register-insert", "unregister", "heartbeat",
                     "wake-prompt"]
CrashWhen = Literal["before", "after"]

# Named crash points that are a step of the fake host, not an SQL statement,
# and the process kinds that take that step.
HOST_CRASH_POINTS: dict[str, tuple[str, ...]] = {"wake-prompt": ("opencode",)}

_CRASH_FORMS = ("write `before: <named step>`, `after: <named step>` or `sql: <statement substring>` "
                "(with `when: after` to die once its transaction commits)")
_NAMED_STEPS_HELP = ("delivered-stamp = the poller's delivered_at stamp, after the wake prompt; read-stamp = chat_read's "
                     "stamp, after its select; broadcast-insert = the inserts of a broadcast transaction (nth: 2 by default); "
                     "register-insert, unregister, heartbeat = those statements; wake-prompt = the fake opencode server "
                     "receiving a wake prompt (opencode processes only).")


class CrashArgs(_Strict):
    """Where a process dies: just before or just after a named step, or an SQL statement."""

    process: str = Field(..., description="Label of the process that dies at the crash point.")
    before: Optional[CrashPoint] = Field(None, description="A named step: the process is SIGKILLed just before it (a statement never runs; the wake prompt never reaches the session). " + _NAMED_STEPS_HELP)
    after: Optional[CrashPoint] = Field(None, description="A named step: the process is SIGKILLed just after it (a statement's transaction has committed and is durable; the wake prompt has reached the session and the poller has not stamped it). " + _NAMED_STEPS_HELP)
    sql: Optional[str] = Field(None, description="Instead of a named step: a substring of the SQL statement to die at.")
    when: Optional[CrashWhen] = Field(None, description="With `sql` only: die just `before` the statement runs (default), or just `after` its transaction commits.")
    nth: int = Field(1, ge=1, description="Die at the nth occurrence of the step (the nth matching statement) after the point is armed.")

    @model_validator(mode="after")
    def _one_point(self) -> "CrashArgs":
        given = [key for key in ("before", "after", "sql") if getattr(self, key) is not None]
        if len(given) != 1:
            found = f", found {' and '.join(f'`{k}`' for k in given)}" if given else ""
            raise ValueError(f"a crash needs exactly one crash point{found} — {_CRASH_FORMS}")
        if self.when is not None and self.sql is None:
            raise ValueError(f"`when` goes with `sql` only — write `{self.when}: {self.before or self.after}` alone")
        return self

    @model_serializer(mode="wrap")
    def _as_written(self, handler) -> dict[str, Any]:
        """`after` and `when` appear in a dump only when given, so the record
        of a `before:` crash reads as it always did."""
        data = handler(self)
        for key in ("after", "when"):
            if data.get(key) is None:
                data.pop(key, None)
        return data

    @property
    def point(self) -> Optional[str]:
        """The named step (None for an `sql` crash)."""
        return self.before or self.after

    @property
    def timing(self) -> CrashWhen:
        """`after` for `after:` and `when: after`, else `before`."""
        return "after" if self.after is not None or self.when == "after" else "before"


class SleepArgs(_Strict):
    duration: DurationMs = Field(..., alias="for", description=f"How long the machine sleeps ({DURATION_HELP}).")


# What `resume.argv` may say: any strings; `{id}` is the one placeholder
# (validate.py refuses any other `{word}`, so a typo never reaches argv).
ARGV_PLACEHOLDER = "{id}"
_ARGV_SCHEMA = {"type": "array", "minItems": 1, "items": {"type": "string"}}


class ResumeArgs(_Strict):
    session: str = Field(..., description="Label of the session being resumed: the new process serves it (later steps for it go there) and `{id}` in `argv` is its id.")
    process: str = Field(..., description="Label of the new process (declared with `start: never`) that resumes it.")
    how: Literal["-s", "-c"] = Field("-s", description="-s <id> (the id on the command line) or -c (newest top-level session of the directory listing).")
    # Checked in validate.py (a list of strings, at least one; `{id}` the only
    # placeholder; not together with `how`) so each problem gets file:line and a fix.
    argv: Annotated[Optional[Any], WithJsonSchema(_ARGV_SCHEMA)] = Field(
        None, description="Instead of `how`: the whole command line the new process reports for its own pid "
                          "(what thatch reads from /proc/<pid>/cmdline), one string per argument; `{id}` expands to "
                          "the resumed session's id. E.g. [opencode, \"--session={id}\"], [opencode, --continue], "
                          "[opencode, run, -s] (a flag without its value), [opencode, -s, \"{id}\", -c] (-s wins).")
    listing: Optional[list[str]] = Field(
        None, description="The sessions opencode lists for the directory (what -c picks the newest top-level one from), "
                          "as labels; default: every session that lived in the resumed session's directory. "
                          "[] = an empty directory; [a-child] = only a sub-agent child, so -c continues nothing.")


class RestartArgs(_Strict):
    process: str = Field(..., description="Label of the opencode daemon that dies.")
    into: str = Field(..., description="Label of the new daemon (declared with `start: never`) that re-hosts its open tabs.")
    grace: Optional[DurationMs] = Field(None, description=f"Override of the rehost grace ({DURATION_HELP}); default 24h.")


class ForkArgs(_Strict):
    session: str = Field(..., description="Label of the Claude Code session whose session id forks (a continued-in record lands in the old transcript).")


class LockArgs(_Strict):
    duration: DurationMs = Field(..., alias="for", description=f"How long (virtual) another writer holds the database write lock ({DURATION_HELP}).")


class CliListArgs(_Strict):
    """`thatch chat list --db <run db> [--stale N|all]`, run through the real CLI entry point."""

    stale: Optional[Union[Literal["all"], Annotated[float, Field(ge=0)]]] = Field(
        None, description="--stale: hide stale rows last seen more than N days ago (default 1), or `all` to show every row.")


class CliTailArgs(_Strict):
    """`thatch chat tail --once --db <run db> [filters]`, run through the real CLI entry point."""

    limit: Optional[int] = Field(None, ge=0, description="--limit: how many of the last matching messages the backlog shows (default 20; 0 = none).")
    grep: Optional[Union[str, list[str]]] = Field(None, description="--grep: body regex (a list repeats the flag: any matches).")
    who: Optional[Union[str, list[str]]] = Field(None, description="--who: participant name substring, case-insensitive (a list repeats the flag); `{label}` expands to that session's name.")
    since: Optional[str] = Field(None, description="--since: ISO time, inclusive; a duration like `5m` means the scenario start + 5m.")
    until: Optional[str] = Field(None, description="--until: ISO time, exclusive; a duration like `5m` means the scenario start + 5m.")


# YAML key -> attribute name, where the key would shadow a Python name.
_ATTR = {"register": "register_", "list": "list_"}

ACTION_KEYS = ("send", "broadcast", "read", "register", "unregister", "list", "status", "prompt", "delete", "exit", "title", "config", "start", "cli_list", "cli_tail") + REVIEW_ACTIONS
FAULT_KEYS = ("kill", "crash", "sleep", "resume", "restart", "fork", "lock")
# Actions whose reply the harness records (a `tool-result` carrying the step
# index), so a step `expect:` can be judged; `prompt` too, but only on MCP hosts
# (claude-code, cursor), where it prints the identity hook line. The rest
# (delete, exit, title, config, start and every fault) leave no reply.
REPLY_ACTIONS = ("send", "broadcast", "read", "register", "unregister", "list", "status", "cli_list", "cli_tail") + REVIEW_ACTIONS
HOOK_REPLY_ACTIONS = ("prompt",)


class Step(_Strict):
    """One thing that happens at a virtual time: exactly one action or fault key."""

    at: DurationMs = Field(..., description=f"Virtual time of the step from the scenario start ({DURATION_HELP}). Steps are listed in time order.")
    name: Optional[str] = Field(None, description="A name for the step, used by expectations and reports.")
    expect: Optional[ReplyExpectation] = Field(None, description="What this step's reply must look like.")
    # actions
    send: Optional[SendArgs] = Field(None, description="chat_send from one session to another.")
    broadcast: Optional[BroadcastArgs] = Field(None, description="chat_broadcast from a session.")
    read: Optional[ReadArgs] = Field(None, description="chat_read by a session.")
    register_: Optional[SessionArg] = Field(None, alias="register", description="An explicit chat_register by a session.")
    unregister: Optional[SessionArg] = Field(None, description="chat_unregister by a session (a leave: tombstone).")
    list_: Optional[SessionArg] = Field(None, alias="list", description="chat_list by a session.")
    status: Optional[SessionArg] = Field(None, description="chat_status by a session.")
    prompt: Optional[PromptArgs] = Field(None, description="A user message typed into a session (a turn; hooks fire on MCP hosts).")
    delete: Optional[SessionArg] = Field(None, description="The user deletes the session in the TUI (session.deleted).")
    exit: Optional[SessionArg] = Field(None, description="A greenlit /thatch/exit of the session.")
    title: Optional[TitleArgs] = Field(None, description="The auto-titler sets the session's title.")
    config: Optional[ConfigArgs] = Field(None, description="Edit a process's thatch config file.")
    start: Optional[ProcessArg] = Field(None, description="Start a process declared with `start: never`.")
    cli_list: Optional[CliListArgs] = Field(None, description="Run `thatch chat list` through the CLI entry point (stale: N or all).")
    cli_tail: Optional[CliTailArgs] = Field(None, description="Run `thatch chat tail --once` through the CLI entry point (limit, grep, who, since, until).")
    approve: Optional[ReviewArgs] = Field(None, description="The session's user approves a held message: it is delivered on the next turn (messaging policies).")
    decline: Optional[ReviewArgs] = Field(None, description="The session's user declines a held message: it is dropped and its sender told it was refused (messaging policies).")
    # faults
    kill: Optional[ProcessArg] = Field(None, description="Fault: SIGKILL the whole harness process.")
    crash: Optional[CrashArgs] = Field(None, description="Fault: arm a crash point; the process SIGKILLs itself just before (or after) it.")
    sleep: Optional[SleepArgs] = Field(None, description="Fault: the machine sleeps (every process stops beating), then catches up.")
    resume: Optional[ResumeArgs] = Field(None, description="Fault: resume a session in a new process with -s or -c (or any command line, `argv`).")
    restart: Optional[RestartArgs] = Field(None, description="Fault: the opencode daemon dies and a new one re-hosts its open tabs (rehost grace).")
    fork: Optional[ForkArgs] = Field(None, description="Fault: Claude Code forks the session id.")
    lock: Optional[LockArgs] = Field(None, description="Fault: another writer holds the database lock.")

    @model_validator(mode="after")
    def _exactly_one(self) -> "Step":
        present = [k for k in ACTION_KEYS + FAULT_KEYS if getattr(self, _ATTR.get(k, k)) is not None]
        if not present:
            raise ValueError(
                "a step needs exactly one action or fault key, found none — write one of the actions "
                f"({', '.join(ACTION_KEYS)}) or faults ({', '.join(FAULT_KEYS)})"
            )
        if len(present) > 1:
            raise ValueError(
                f"a step needs exactly one action or fault key, found {len(present)}: {', '.join(present)} — "
                "split it into one step per key (they may share the same `at`)"
            )
        return self

    @property
    def action(self) -> str:
        return next(k for k in ACTION_KEYS + FAULT_KEYS if getattr(self, _ATTR.get(k, k)) is not None)

    @property
    def args(self) -> Any:
        return getattr(self, _ATTR.get(self.action, self.action))

    @property
    def is_fault(self) -> bool:
        return self.action in FAULT_KEYS


# ---------------------------------------------------------------------------
# Expectations and reach claims
# ---------------------------------------------------------------------------


def _body_type(kind: str) -> Any:
    """A dict-typed expectation body whose schema lists exactly the keys it takes (editors complete them)."""
    return Optional[Annotated[dict[str, Any], WithJsonSchema(body_schema(kind))]]


class Expectation(_Strict):
    """A point expectation checked against the history (and database) at a virtual time."""

    at: Annotated[Union[Literal["end"], int], BeforeValidator(_end_or_duration), WithJsonSchema(duration_json_schema("end"))] = Field("end", description=f"When to check ({DURATION_HELP}), or `end` after the drain.")
    before_catch_up: bool = Field(False, description="At the instant a machine sleep ends (`at` = the sleep's end): observe before the pollers' catch-up beats, so the state the sleep left (everyone stale) is seen.")
    wakes: _body_type("wakes") = Field(None, description=KIND_DESCRIPTIONS["wakes"])
    echoes: _body_type("echoes") = Field(None, description=KIND_DESCRIPTIONS["echoes"])
    roster: _body_type("roster") = Field(None, description=KIND_DESCRIPTIONS["roster"])
    hook_line: _body_type("hook_line") = Field(None, description=KIND_DESCRIPTIONS["hook_line"])
    registered: _body_type("registered") = Field(None, description=KIND_DESCRIPTIONS["registered"])
    unread: _body_type("unread") = Field(None, description=KIND_DESCRIPTIONS["unread"])
    same_name: _body_type("same_name") = Field(None, description=KIND_DESCRIPTIONS["same_name"])
    counter: _body_type("counter") = Field(None, description=KIND_DESCRIPTIONS["counter"])
    tombstones: _body_type("tombstones") = Field(None, description=KIND_DESCRIPTIONS["tombstones"])
    messages: _body_type("messages") = Field(None, description=KIND_DESCRIPTIONS["messages"])
    store_errors: _body_type("store_errors") = Field(None, description=KIND_DESCRIPTIONS["store_errors"])

    @model_validator(mode="after")
    def _exactly_one(self) -> "Expectation":
        kinds = [k for k in EXPECTATION_KINDS if getattr(self, k) is not None]
        if len(kinds) != 1:
            raise ValueError(
                "an expectation needs exactly one kind, found " + (", ".join(kinds) if kinds else "none")
                + f" — write one of: {', '.join(EXPECTATION_KINDS)} (one expectation per list item)"
            )
        return self

    @property
    def kind(self) -> str:
        return next(k for k in EXPECTATION_KINDS if getattr(self, k) is not None)


Reach = Literal[
    "re-nudge", "rate-cap", "ping-pong", "broadcast-skip", "adoption", "rehost", "graduation",
    "stale", "prune", "refusal", "echo", "tombstone-gate", "store-busy", "stop-reminder", "cursor-followup",
    "event-in-wake",
]

PROPERTY_IDS = ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10")

# The pytest markers a scenario's `markers:` may carry, with their meaning: the
# one list the loader validates against and the pytest plugin registers.
KNOWN_MARKERS: tuple[tuple[str, str], ...] = (
    ("slow", "long-running scenario or test"),
    ("race", "exercises concurrent dispatch"),
)


def _known_marker(marker: str) -> str:
    names = [name for name, _ in KNOWN_MARKERS]
    if marker not in names:
        listing = f"known markers: {', '.join(names)}"
        raise ValueError(f"unknown marker `{marker}` — " + (did_you_mean(marker, names, listing=listing)
                                                             or f"write one of the {listing}"))
    return marker


MarkerName = Annotated[str, AfterValidator(_known_marker), WithJsonSchema({"enum": [name for name, _ in KNOWN_MARKERS]})]


def _rule_id(rule: str) -> str:
    if not re.fullmatch(r"R([1-9]|[12]\d|3[0-6])", rule):
        raise ValueError(f"{rule!r} is not a design rule id — write R1 .. R36")
    return rule


def _property_id(prop: str) -> str:
    if prop not in PROPERTY_IDS:
        raise ValueError(f"{prop!r} is not a property id — write `all` or a list of {', '.join(PROPERTY_IDS)}")
    return prop


# Checked per item so an error points at the offending list entry's own line.
RuleId = Annotated[str, AfterValidator(_rule_id)]
PropertyId = Annotated[str, AfterValidator(_property_id)]


class AllExcept(_Strict):
    """`properties: {exclude: [P10]}`: every property but the excluded ones."""

    exclude: list[PropertyId] = Field(..., min_length=1, description="The P-ids not to check (say why in `story`).")


class LegacyRow(_Strict):
    """A 002-era directory row (a claimed name) in the database the run starts from."""

    name: str = Field(..., min_length=1, description="The claimed name, as the 002-era code stored it (case kept; names differing only in case may both exist).")
    session: Optional[str] = Field(None, description="Label of the declared session this row belongs to (its pre-upgrade row: same session id); omitted = an orphan row no process hosts.")
    topic: Optional[str] = Field(None, description="The topic the model set in 002-era code.")
    project: Optional[str] = Field(None, description="The row's project.")
    last_seen_ago: DurationMs = Field(0, description=f"How long before the scenario start the row was last seen ({DURATION_HELP}); registered one second earlier.")
    last_seen_raw: Optional[str] = Field(None, description="Instead of last_seen_ago: the literal last_seen text of a hand-edited row (e.g. an unreadable one).")
    mail: list[str] = Field(default_factory=list, description="Bodies of unread messages waiting for this row, from a 002-era sender long gone.")


def _replicated(proc: BaseModel) -> bool:
    """A process built in Python that is, or holds, a replicated block."""
    return getattr(proc, "replicas", 1) > 1 or any(getattr(s, "replicas", 1) > 1 for s in getattr(proc, "sessions", []))


class Scenario(_Strict):
    """A whole scenario: the world, the timeline, and what must hold."""

    name: str = Field(..., pattern=r"^[a-z0-9][a-z0-9-]*$", description="Kebab-case scenario name; the pytest node id uses it.")
    story: str = Field("", description="The story the scenario tells, in a sentence or two.")
    rules: list[RuleId] = Field(default_factory=list, description="The design rules it covers (R1-R36).")
    seed: int = Field(0, description="Seed of the one random generator (names, ids, faker bodies, dispatch order).")
    markers: list[MarkerName] = Field(default_factory=list, description="pytest markers: " + ", ".join(f"{n} ({h})" for n, h in KNOWN_MARKERS) + ".")
    duration: DurationMs = Field(..., description=f"Length of the scripted phase ({DURATION_HELP}).")
    drain: DurationMs = Field(300_000, description=f"Fault-free quiet phase after the script; progress is judged at its end ({DURATION_HELP}).")
    dispatch: Literal["serial", "concurrent"] = Field("serial", description="serial: one event at a time (deterministic); concurrent: same-time events run at once (races).")
    properties: Union[Literal["all"], list[PropertyId], AllExcept] = Field(
        "all", description="Properties to check: `all`, a list of P-ids, or `{exclude: [P-ids]}` (all but those).")
    reaches: list[Reach] = Field(default_factory=list, description="Situations the scenario claims to reach; one that never happens fails the run as not reached.")
    legacy: list[LegacyRow] = Field(default_factory=list, description="002-era rows: the run starts from a 002-era schema database holding them (no auto/worktree, case-sensitive names, no via_broadcast, counters, tombstones or host pids), which the first process's open_db migrates.")
    processes: list[Process] = Field(..., min_length=1, description="The harness processes.")
    steps: list[Step] = Field(default_factory=list, description="The timeline, in time order.")
    expect: list[Expectation] = Field(default_factory=list, description="Point expectations.")
    policy: PolicyField = Field(None, description=POLICY_DESC + " Omitted: thatch's design.")


    @model_validator(mode="before")
    @classmethod
    def _written_out(cls, data: Any) -> Any:
        """`replicas: N` blocks as N copies (the loader has already done it, keeping lines)."""
        if not isinstance(data, dict) or not isinstance(data.get("processes"), list):
            return data
        procs = [p.model_dump(by_alias=True, exclude_unset=True) if isinstance(p, BaseModel) and _replicated(p) else p
                 for p in data["processes"]]
        expansion = replica_blocks.expand({**data, "processes": procs})
        if expansion.problems:
            path, problem, hint = expansion.problems[0]
            raise ValueError(f"{'.'.join(map(str, path))}: {problem} — {hint}")
        return expansion.data

    # Cross-reference checks (undefined labels, steps out of order) live in
    # simulator.scenario.validate so they can point at the exact step with file:line.

    def session_labels(self) -> dict[str, str]:
        """session label -> process label (sessions declared in processes)."""
        return {s.id: p.id for p in self.processes for s in p.sessions}

    def checked_properties(self) -> tuple[str, ...]:
        if isinstance(self.properties, AllExcept):
            return tuple(p for p in PROPERTY_IDS if p not in self.properties.exclude)
        return PROPERTY_IDS if self.properties == "all" else tuple(self.properties)

    def lists_properties(self) -> bool:
        """The scenario names the properties it checks one by one (a claim each must live up to)."""
        return isinstance(self.properties, list)
