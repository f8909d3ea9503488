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
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, create_model
from pydantic import PrivateAttr, model_validator

from simulator.scenario.durations import DURATION_HELP, duration_json_schema, format_duration
from simulator.scenario.errors import did_you_mean
from simulator.scenario.expectation_keys import EXPECTATION_KINDS, KIND_DESCRIPTIONS, body_schema
from simulator.scenario.fields import DurationMs, Strict, end_or_duration, never_or_duration
from simulator.scenario.kinds import ACTION_KEYS, DEFAULT_HOST, FAULT_KEYS, HOSTS, SCRIPTED_KEYS, STEPS, StepKind
from simulator.scenario.labels import BLOCK_LABEL_PATTERN, LABEL_PATTERN
from simulator.scenario import replicas as replica_blocks
from simulator.scenario.policies import POLICY_DESC, POLICY_SETS, PolicyField
from simulator.scenario.replicas import MAX_REPLICAS
# The property ids (and the policies' promise ids, never listed in `properties:` but tallied beside them)
# are the catalogue's.
from simulator.verdicts import POLICY_PROMISE_IDS, PROPERTY_IDS  # noqa: F401 - read from here by other phases


# ---------------------------------------------------------------------------
# Processes, sessions, agents
# ---------------------------------------------------------------------------

AgentKind = Literal["reader", "ping-pong", "silent"]

REPLICAS_DESC = ("Copies of this block, written out at load: copy i (1 .. N) has `{i}` replaced by i in every text "
                 "of it (ids: `w{i}` gives w1, w2, ...; projects, titles).")
# A process or session label as the file may write it: in a replicated block it holds `{i}`.
BlockLabel = Annotated[str, WithJsonSchema({"type": "string", "pattern": BLOCK_LABEL_PATTERN})]


class Window(Strict):
    """A virtual-time window [from, until) during which a session is busy or compacting."""

    start: DurationMs = Field(..., alias="from", description=f"Window start ({DURATION_HELP}).")
    until: DurationMs = Field(..., description=f"Window end, exclusive ({DURATION_HELP}).")

    @model_validator(mode="after")
    def _ordered(self) -> "Window":
        if self.until <= self.start:
            raise ValueError("a window's `until` must be after its `from` — write an `until` later than "
                             f"{format_duration(self.start)}")
        return self


class Agent(Strict):
    """How the session's model behaves when a turn starts (a wake prompt or a user message)."""

    kind: AgentKind = Field(
        "reader", description="reader: reads its inbox on every wake; ping-pong: reads and "
                              "replies to every sender; silent: never reads (so it is re-nudged).")
    turn: DurationMs = Field(20_000, description=f"How long one model turn lasts in virtual time ({DURATION_HELP}).")
    busy: list[Window] = Field(
        default_factory=list, description="Windows when the session is busy with other work (no wake can land).")
    compacting: list[Window] = Field(
        default_factory=list, description="Windows when the session is compacting its context (no wake can land).")
    reply_limit: Optional[int] = Field(
        None, ge=0, description="ping-pong only: stop replying after this many replies (default: never stops).")
    aborted: list[Window] = Field(
        default_factory=list, description="Windows in which a turn that ends is aborted by the user "
                                          "(Cursor's stop hook sees status aborted: no follow-up).")


def _bare_agent_schema(schema: dict[str, Any]) -> None:
    """Editors: `agent:` also takes a bare kind (the before-validator turns it into {kind: ...})."""
    agent = schema["properties"]["agent"]
    ref = {k: agent.pop(k) for k in list(agent) if k == "$ref"}
    agent["anyOf"] = [{"enum": list(typing.get_args(AgentKind))}, ref]


class Session(Strict):
    """One chat session hosted by a harness process, named by the author's label."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=False,
                              json_schema_extra=lambda schema, cls: _bare_agent_schema(schema))

    id: BlockLabel = Field(
        ..., pattern=LABEL_PATTERN,
        description="The author's label for this session (alice, reviewer, bob2). Steps refer to it.")
    agent: Agent = Field(
        default_factory=Agent,
        description="The scripted model behaviour; a bare kind (`reader`, `ping-pong`, `silent`) is accepted.")
    title: Optional[str] = Field(
        None, description="The session title the auto-titler lands; faker fills one from the seed when omitted.")
    parent: Optional[str] = Field(
        None, description="Label of the parent session: this one is a sub-agent child (never auto-registers).")
    machinery: bool = Field(
        False, description="opencode only: a child the plugin itself creates as machinery (its extraction child, "
                           "titled thatch-extraction unless `title` says otherwise) for `parent`; the plugin alone "
                           "knows its parent (the host lists it as top-level), and it has events of its own.")
    joins: Literal["first-prompt", "idle", "explicit", "never"] = Field(
        "first-prompt", description="How the session enters the directory: its first user message (default), "
                                    "the first idle event only, an explicit chat_register step, or never.")
    start: DurationMs = Field(0, description=f"Virtual time of the session's first user message ({DURATION_HELP}).")
    replicas: int = Field(1, ge=1, le=MAX_REPLICAS, description=REPLICAS_DESC)
    host_id: Optional[str] = Field(
        None, min_length=1, max_length=200,
        description="claude-code / cursor only: the host's own session id (Claude Code's session_id and "
                    "CLAUDE_CODE_SESSION_ID, Cursor's conversation_id), as written; the chat derives `mcp_` + "
                    "sha256 of it lower-cased, so `ABC-123` and `abc-123` are one chat identity. Default: a fresh "
                    "uuid from the run's generator.")

    @model_validator(mode="before")
    @classmethod
    def _bare_agent(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("agent"), str):
            data = {**data, "agent": {"kind": data["agent"]}}
        return data


class ChatConfigSpec(Strict):
    """The process's thatch config file (`chat.enabled`, `chat.autoRegister`)."""

    enabled: bool = Field(True, description="chat.enabled: false makes every tool refuse and the poller never start.")
    auto_register: bool = Field(
        True, alias="autoRegister", description="chat.autoRegister: false stops automatic joining.")


ProcessKind = Literal[tuple(HOSTS)]  # type: ignore[valid-type]
PROCESS_KIND_DESC = "; ".join(f"{h.key}: {h.description}" for h in HOSTS.values()) + "."

# How the fake opencode server hands its host events (a session's status,
# chat.message) to the thatch runtime (simulator/harness/events.py).
HostEvents = Literal["queued", "synchronous"]
HOST_EVENTS_DESC = ("opencode only. queued (default): the server hands its events to the runtime after the command "
                    "that caused them. synchronous: an event stream read on the caller's thread - a prompt call first "
                    "hands over every event due at that instant (another session's turn ending: its idle status, "
                    "a busy/compacting window opening or closing), before it returns, so the poller is re-entered "
                    "while it delivers (R24).")


class Process(Strict):
    """One fake harness: an OS process forked by the orchestrator."""

    id: BlockLabel = Field(
        ..., pattern=LABEL_PATTERN, description="The author's label for this process (h1, laptop-tab).")
    kind: ProcessKind = Field(DEFAULT_HOST, description=PROCESS_KIND_DESC)
    project: Optional[str] = Field(
        None, description="The project the harness serves (its directory's name); omitted = no project.")
    checkout: Literal["root", "worktree", "none"] = Field(
        "root", description="The checkout kind of the serving directory: a .git "
                            "dir (root), a .git file (linked worktree), or none.")
    start: Annotated[Union[Literal["never"], int], BeforeValidator(never_or_duration),
                     WithJsonSchema(duration_json_schema("never"))] = Field(
        0, description=f"When the process starts ({DURATION_HELP}), or `never`: started later by a "
                       "resume or restart step.")
    config: ChatConfigSpec = Field(default_factory=ChatConfigSpec, description="The thatch config the process reads.")
    poll_interval: DurationMs = Field(30_000, description=f"The poller's interval ({DURATION_HELP}).")
    events: HostEvents = Field("queued", description=HOST_EVENTS_DESC)
    clip: Optional[int] = Field(
        None, ge=1, description="A host that clips every tool output at this many characters (a version-skewed host "
                                "renderer): the model sees only the first N characters of each tool result.")
    sessions: list[Session] = Field(default_factory=list, description="Sessions this harness hosts from its start.")
    replicas: int = Field(
        1, ge=1, le=MAX_REPLICAS,
        description=REPLICAS_DESC + " A replicated process's sessions are copied with it (their ids need `{i}` too).")
    policy: PolicyField = Field(
        None, description=POLICY_DESC + " Laid over the scenario's `policy:`; opencode processes only.")


# ---------------------------------------------------------------------------
# Steps: actions and faults on the timeline
# ---------------------------------------------------------------------------


REPLY_TEXT_KEYS = ("equals", "contains", "not_contains", "matches")


class ReplyExpectation(Strict):
    # Implicitly joined, so the schema's description (this docstring) stays one line.
    ("What the tool reply (or hook line) of this step must look like. "
     "`{label}` expands to that session's assigned name.")

    ok: Optional[bool] = Field(None, description="Whether the call must succeed (false = a refusal).")
    equals: Optional[str] = Field(None, description="The exact reply text.")
    contains: Optional[str] = Field(None, description="A substring the reply must contain.")
    matches: Optional[str] = Field(None, description="A regular expression the reply must match (re.search).")
    not_contains: Optional[str] = Field(None, description="A substring the reply must NOT contain.")
    silent: Optional[bool] = Field(None, description=(
        "Only on a prompt to a claude-code or cursor session: true = its hooks ran and printed nothing (chat "
        "disabled, nothing to say); false = they printed a line. Not with the text keys."))




# The Step attribute of every scripted key -> (its place in SCRIPTED_KEYS, its kind).
_KIND_OF_ATTR = {STEPS[k].attr: (i, STEPS[k]) for i, k in enumerate(SCRIPTED_KEYS)}


class _KindMemo:
    """Where a step keeps the kind it found. pydantic compares private attributes in `==`: every
    memo equals every other, so whether a step's kind was asked yet never makes two steps unequal."""

    __slots__ = ("kind",)

    def __init__(self) -> None:
        self.kind: Optional[StepKind] = None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _KindMemo)

    __hash__ = None  # type: ignore[assignment]


class _StepFields(Strict):
    """One thing that happens at a virtual time: exactly one action or fault key."""

    at: DurationMs = Field(..., description=f"Virtual time of the step from the scenario start ({DURATION_HELP}). "
                                            "Steps are listed in time order.")
    name: Optional[str] = Field(None, description="A name for the step, used by expectations and reports.")
    expect: Optional[ReplyExpectation] = Field(None, description="What this step's reply must look like.")

    @model_validator(mode="after")
    def _exactly_one(self) -> "_StepFields":
        present = [k for k in SCRIPTED_KEYS if getattr(self, STEPS[k].attr) is not None]
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

    # The kind found last; `kind` trusts it only while that key is still set (a step holds one).
    _kind_seen: _KindMemo = PrivateAttr(default_factory=_KindMemo)

    @property
    def kind(self) -> StepKind:
        """The declared kind of the step's one action or fault key."""
        # The judges ask this of every step a million times a campaign: keep the kind found and
        # rescan only when its key no longer holds a value (a copy with that key replaced).
        memo = self._kind_seen
        seen = memo.kind
        if seen is not None and getattr(self, seen.attr) is not None:
            return seen
        found = [_KIND_OF_ATTR[a] for a in self.__pydantic_fields_set__
                 if a in _KIND_OF_ATTR and getattr(self, a) is not None]
        memo.kind = seen = next(kind for _, kind in sorted(found))
        return seen

    @property
    def action(self) -> str:
        return self.kind.key

    @property
    def args(self) -> Any:
        return getattr(self, self.kind.attr)

    @property
    def is_fault(self) -> bool:
        return self.kind.fault


# One optional field per scripted step kind (simulator/scenario/kinds.py), under its YAML key:
# a new kind needs no change here, and the JSON Schema lists it.
Step = create_model(
    "Step", __base__=_StepFields, __doc__=_StepFields.__doc__, __module__=__name__,
    **{STEPS[k].attr: (Optional[STEPS[k].args],
                       Field(None, alias=k if STEPS[k].attr != k else None, description=STEPS[k].description))
       for k in SCRIPTED_KEYS},
)


# ---------------------------------------------------------------------------
# Expectations and reach claims
# ---------------------------------------------------------------------------


def _body_type(kind: str) -> Any:
    """A dict-typed expectation body whose schema lists exactly the keys it takes (editors complete them)."""
    return Optional[Annotated[dict[str, Any], WithJsonSchema(body_schema(kind))]]


class Expectation(Strict):
    """A point expectation checked against the history (and database) at a virtual time."""

    at: Annotated[Union[Literal["end"], int], BeforeValidator(end_or_duration),
                  WithJsonSchema(duration_json_schema("end"))] = Field(
        "end", description=f"When to check ({DURATION_HELP}), or `end` after the drain.")
    before_catch_up: bool = Field(
        False, description="At the instant a machine sleep ends (`at` = the sleep's end): observe before the "
                           "pollers' catch-up beats, so the state the sleep left (everyone stale) is seen.")
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
    replies: _body_type("replies") = Field(None, description=KIND_DESCRIPTIONS["replies"])
    hooks: _body_type("hooks") = Field(None, description=KIND_DESCRIPTIONS["hooks"])
    turn_ends: _body_type("turn_ends") = Field(None, description=KIND_DESCRIPTIONS["turn_ends"])
    prunes: _body_type("prunes") = Field(None, description=KIND_DESCRIPTIONS["prunes"])
    host_id: _body_type("host_id") = Field(None, description=KIND_DESCRIPTIONS["host_id"])

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


MarkerName = Annotated[str, AfterValidator(_known_marker),
                       WithJsonSchema({"enum": [name for name, _ in KNOWN_MARKERS]})]


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


class AllExcept(Strict):
    """`properties: {exclude: [P10]}`: every property but the excluded ones; `{include: [P12]}`: every property,
    the included ones judged on any design."""

    exclude: list[PropertyId] = Field(
        default_factory=list, description="The P-ids not to check (say why in `story`).")
    include: list[PropertyId] = Field(
        default_factory=list, description="P-ids judged even where the design in force does not make their promise "
                                          "(\"would this have been caught before it shipped\").")

    @model_validator(mode="after")
    def _one_list(self) -> "AllExcept":
        if not self.exclude and not self.include:
            raise ValueError("write `exclude: [P-ids]` (all but those) or `include: [P-ids]` (all, those judged on "
                             "any design)")
        return self


# The design a run on a real thatch checkout is under: the checkout's own, whatever its era.
CHECKOUT_DESIGN = "checkout"


def _design_name(name: str) -> str:
    if name not in POLICY_SETS and name != CHECKOUT_DESIGN:
        raise ValueError(f"{name!r} is not a named design — write one of {', '.join(POLICY_SETS)} "
                         f"or {CHECKOUT_DESIGN} (a run on a real thatch checkout)")
    return name


DesignName = Annotated[str, AfterValidator(_design_name)]


class ExpectedOutcome(Strict):
    """`expect_outcome: {fails: {thatch: [P12]}}`: the properties a run fails by design under a named set."""

    fails: dict[DesignName, list[PropertyId]] = Field(
        ..., description="Named design (or `checkout`: a run on a real thatch checkout, --sut) -> the P-ids a "
                         "run under it must fail (the incident, caught); under any other design, and for every "
                         "other property, the run must pass as usual.")


class LegacyRow(Strict):
    """A 002-era directory row (a claimed name) in the database the run starts from."""

    name: str = Field(
        ..., min_length=1, description="The claimed name, as the 002-era code stored it (case "
                                       "kept; names differing only in case may both exist).")
    session: Optional[str] = Field(
        None, description="Label of the declared session this row belongs to (its pre-upgrade "
                          "row: same session id); omitted = an orphan row no process hosts.")
    topic: Optional[str] = Field(None, description="The topic the model set in 002-era code.")
    project: Optional[str] = Field(None, description="The row's project.")
    last_seen_ago: DurationMs = Field(
        0, description="How long before the scenario start the row was last "
                       f"seen ({DURATION_HELP}); registered one second earlier.")
    last_seen_raw: Optional[str] = Field(
        None, description="Instead of last_seen_ago: the literal last_seen "
                          "text of a hand-edited row (e.g. an unreadable one).")
    mail: list[str] = Field(
        default_factory=list,
        description="Bodies of unread messages waiting for this row, from a 002-era sender long gone.")


def _replicated(proc: BaseModel) -> bool:
    """A process built in Python that is, or holds, a replicated block."""
    return getattr(proc, "replicas", 1) > 1 or any(getattr(s, "replicas", 1) > 1 for s in getattr(proc, "sessions", []))


class Scenario(Strict):
    """A whole scenario: the world, the timeline, and what must hold."""

    name: str = Field(
        ..., pattern=r"^[a-z0-9][a-z0-9-]*$", description="Kebab-case scenario name; the pytest node id uses it.")
    story: str = Field("", description="The story the scenario tells, in a sentence or two.")
    rules: list[RuleId] = Field(default_factory=list, description="The design rules it covers (R1-R36).")
    seed: int = Field(0, description="Seed of the one random generator (names, ids, faker bodies, dispatch order).")
    markers: list[MarkerName] = Field(
        default_factory=list, description="pytest markers: " + ", ".join(f"{n} ({h})" for n, h in KNOWN_MARKERS) + ".")
    duration: DurationMs = Field(..., description=f"Length of the scripted phase ({DURATION_HELP}).")
    drain: DurationMs = Field(
        300_000,
        description=f"Fault-free quiet phase after the script; progress is judged at its end ({DURATION_HELP}).")
    dispatch: Literal["serial", "concurrent"] = Field(
        "serial",
        description="serial: one event at a time (deterministic); concurrent: same-time events run at once (races).")
    properties: Union[Literal["all"], list[PropertyId], AllExcept] = Field(
        "all", description="Properties to check: `all`, a list of P-ids, or `{exclude: [P-ids]}` (all but those); "
                           "`{include: [P-ids]}`: all, those judged on any design.")
    expect_outcome: Optional[ExpectedOutcome] = Field(
        None, description="A scenario meant to fail under a design: `{fails: {thatch: [P12]}}` (an incident "
                          "reproduced); the gate passes it when exactly those properties fail.")
    reaches: list[Reach] = Field(
        default_factory=list,
        description="Situations the scenario claims to reach; one that never happens fails the run as not reached.")
    legacy: list[LegacyRow] = Field(
        default_factory=list, description="002-era rows: the run starts from a 002-era schema database holding them "
                                          "(no auto/worktree, case-sensitive names, no via_broadcast, counters, "
                                          "tombstones or host pids), which the first process's open_db migrates.")
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
        """session label -> process label (sessions declared in processes, and the older ids forks keep
        running under `fork.older_as`, in the forked session's process)."""
        declared = {s.id: p.id for p in self.processes for s in p.sessions}
        for label, forked in self.older_labels().items():
            if label not in declared and forked in declared:
                declared[label] = declared[forked]
        return declared

    def older_labels(self) -> dict[str, str]:
        """`fork.older_as` label -> the label of the session whose fork it stands for (first fork naming it)."""
        out: dict[str, str] = {}
        for step in self.steps:
            if step.action == "fork" and step.args.older_as:
                out.setdefault(step.args.older_as, step.args.session)
        return out

    def checked_properties(self) -> tuple[str, ...]:
        if isinstance(self.properties, AllExcept):
            return tuple(p for p in PROPERTY_IDS if p not in self.properties.exclude)
        return PROPERTY_IDS if self.properties == "all" else tuple(self.properties)

    def included_properties(self) -> frozenset[str]:
        """The P-ids judged on any design (`{include: [...]}`), whatever promise the design makes."""
        return frozenset(self.properties.include) if isinstance(self.properties, AllExcept) else frozenset()

    def lists_properties(self) -> bool:
        """The scenario names the properties it checks one by one (a claim each must live up to)."""
        return isinstance(self.properties, list)
