"""`policy:` in the scenario language: named sets of messaging-policy options, and what a process runs under.

thatch's design and the peer product's (seed 003, Qoder CLI's cross-session
messaging) answer the same problems differently; each difference is one
option, so a scenario (or `thatch-sim compare`) can run under either set, or
under a set of its own:

    policy: qoder                          # a named set
    policy: {base: qoder, sender_cap: 5}   # a named set with options changed
    policy: {inbound: hold}                # options laid over the scenario's set (thatch at the top)

A process's `policy:` is laid over the scenario's (a `base:` replaces it).
Policies model opencode hosts: a claude-code or cursor process always runs
thatch's design (validate refuses a `policy:` on one). The options are
stated here independently of thatch_core; the config file the engine writes
for a process (`chat.policy`) is the interface between the two.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any, Iterator, Literal, Optional, Union

import yaml
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema

from simulator.design import (
    DIALOG_EXPIRY_MS, LATER_MAX_BODY_CHARS, LATER_RETRY_DEDUP_MS, LATER_SPLIT_PART_LEN, MAX_BODY_LEN,
    MAX_WAKES_PER_HOUR, QODER_SENDER_CAP,
)
from simulator.scenario.durations import DURATION_HELP, duration_json_schema, format_duration, parse_word_or_duration
from simulator.scenario.errors import did_you_mean
from simulator.scenario.kinds import DEFAULT_HOST, REVIEW_ACTIONS, hosts_with

PolicyName = Literal["thatch", "qoder", "thatch-later"]
# The host kinds messaging policies are modelled on; every other kind runs thatch's design.
POLICY_HOSTS = hosts_with("policies")
_POLICY_HOSTS_TEXT = " or ".join(POLICY_HOSTS)
_OTHER_HOSTS_TEXT = " or ".join(k for k in hosts_with("mcp") if k not in POLICY_HOSTS)


@dataclass(frozen=True)
class PolicyOptions:
    """One resolved set of options (None = off / none / never); the defaults are thatch's design."""

    sender_cap: Optional[int] = None
    inbound: str = "accept"
    repository_inbound: Optional[str] = None
    permissions: str = "ask"
    interactive: bool = True
    unregistered: str = "refuse"
    exited: str = "note"
    dialog_expiry_ms: Optional[int] = DIALOG_EXPIRY_MS
    wake_cap: Optional[int] = MAX_WAKES_PER_HOUR
    # The later design (the real thatch's cross-session-chat design doc, newer than seed 000): off by default.
    retry_dedup_ms: Optional[int] = None
    machinery_markers: bool = False
    split_part_len: Optional[int] = None
    max_body_chars: int = MAX_BODY_LEN
    paged_reads: bool = False
    name_claims: bool = False
    project_bound_as: bool = False
    mcp_project_env: bool = False

    @property
    def is_thatch(self) -> bool:
        return self == THATCH

    @property
    def later(self) -> frozenset[str]:
        """The later design's options that are on (differ from seed 000's design)."""
        return frozenset(name for name in LATER_OPTIONS if getattr(self, name) != getattr(THATCH, name))

    def to_config(self) -> dict[str, Any]:
        """`chat.policy` for the process's config file: the options that differ from thatch's."""
        return {_CONFIG_KEY[f.name]: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) != getattr(THATCH, f.name)}

    def describe(self) -> str:
        """`sender_cap=3, inbound=auto, ...` (the options that differ from thatch's), or `thatch`."""
        diff = [f"{f.name}={_shown(f.name, getattr(self, f.name))}" for f in fields(self)
                if getattr(self, f.name) != getattr(THATCH, f.name)]
        return ", ".join(diff) or "thatch"


THATCH = PolicyOptions()
# Seed 003's design as options: a sender cap of three, the permission-mode
# fallback for inbound mail, unregistered senders held, exited peers refused,
# and no receiver-side wake cap (delivery goes into the next turn).
QODER = PolicyOptions(sender_cap=QODER_SENDER_CAP, inbound="auto", unregistered="hold", exited="refuse", wake_cap=None)
LATER_OPTIONS = ("retry_dedup_ms", "machinery_markers", "split_part_len", "max_body_chars", "paged_reads",
                 "name_claims", "project_bound_as", "mcp_project_env")
# The later design: thatch with every later option at its later value (applies to every host kind).
THATCH_LATER = replace(THATCH, retry_dedup_ms=LATER_RETRY_DEDUP_MS, machinery_markers=True,
                       split_part_len=LATER_SPLIT_PART_LEN, max_body_chars=LATER_MAX_BODY_CHARS, paged_reads=True,
                       name_claims=True, project_bound_as=True, mcp_project_env=True)
POLICY_SETS: dict[str, PolicyOptions] = {"thatch": THATCH, "qoder": QODER, "thatch-later": THATCH_LATER}

_CONFIG_KEY = {"sender_cap": "senderCap", "inbound": "inbound", "repository_inbound": "repositoryInbound",
               "permissions": "permissions", "interactive": "interactive", "unregistered": "unregistered",
               "exited": "exited", "dialog_expiry_ms": "dialogExpiryMs", "wake_cap": "wakeCap",
               "retry_dedup_ms": "retryDedupMs", "machinery_markers": "machineryMarkers",
               "split_part_len": "splitPartLen", "max_body_chars": "maxBodyChars", "paged_reads": "pagedReads",
               "name_claims": "nameClaims", "project_bound_as": "projectBoundAs", "mcp_project_env": "mcpProjectEnv"}
_OFF_WORD = {"sender_cap": "off", "wake_cap": "off", "repository_inbound": "none", "dialog_expiry_ms": "never",
             "retry_dedup_ms": "off", "split_part_len": "off"}


def _shown(name: str, value: Any) -> str:
    if value is None:
        return _OFF_WORD.get(name, "none")
    if name == "dialog_expiry_ms":
        return format_duration(value)
    return str(value).lower() if isinstance(value, bool) else str(value)


def _expiry(value: Any) -> Any:
    parsed = parse_word_or_duration(value, "never")
    if parsed == 0:
        raise ValueError("a prompt that expires at once would drop every held message — write a duration "
                         "such as 5m, or `never`")
    return parsed


def _cap(value: Any) -> Any:
    """YAML reads a bare `off` as false: both mean no cap."""
    return "off" if value is False else value


_CAP_SCHEMA = {"anyOf": [{"type": "integer", "minimum": 1}, {"enum": ["off", False]}]}
Cap = Annotated[Union[Annotated[int, Field(ge=1)], Literal["off"]], BeforeValidator(_cap), WithJsonSchema(_CAP_SCHEMA)]
Expiry = Annotated[Union[Literal["never"], int], BeforeValidator(_expiry),
                   WithJsonSchema(duration_json_schema("never"))]


def _help(text: str) -> str:
    """A field description written as a wrapped paragraph: its words joined by single spaces."""
    return " ".join(text.split())


class PolicySpec(BaseModel):
    """Messaging-policy options; every option left out keeps the value of the set below it."""

    model_config = ConfigDict(extra="forbid")

    base: Optional[PolicyName] = Field(None, description=_help("""
        The named set the options are laid over: thatch (its design, R1-R36) or qoder (seed 003's). Omitted: the
        scenario's policy (for a process) or thatch (at the top)."""))
    sender_cap: Optional[Cap] = Field(None, description=_help("""
        After this many messages to the same session with no message from the sender's user in between, further sends to
        it are refused until the user writes again; `off` = no cap (thatch)."""))
    inbound: Optional[Literal["accept", "hold", "refuse", "auto"]] = Field(None, description=_help("""
        What the session does with incoming messages: accept (deliver into its next turn; thatch), hold (park for its
        user's approval, without a prompt), refuse (decline everything and tell the sender), auto (unset: hold with a
        prompt when `permissions: bypass`, else accept)."""))
    repository_inbound: Optional[Literal["hold", "refuse", "none"]] = Field(None, description=_help("""
        A repository's checked-in setting: it may only tighten (accept -> hold -> refuse); a hold it causes prompts.
        `none` = no repository setting."""))
    permissions: Optional[Literal["ask", "bypass"]] = Field(None, description=_help("""
        The host session's permission mode, the input of `inbound: auto`: bypass (skips permission checks: mail is held)
        or ask."""))
    interactive: Optional[bool] = Field(None, description=_help("""
        false: nobody reviews anything (a non-interactive run): a message a prompt would have held is refused instead,
        so the sender is told at once."""))
    unregistered: Optional[Literal["refuse", "hold"]] = Field(None, description=_help("""
        A sender with no directory row: refused (thatch, R8) or held for the recipient's approval (with a prompt)."""))
    exited: Optional[Literal["note", "refuse"]] = Field(None, description=_help("""
        A send to a peer that exited (a stale opencode harness, or a session id that left): stored with a liveness note
        (thatch, R9) or refused with a reply that says it exited."""))
    dialog_expiry: Optional[Expiry] = Field(None, description=_help(f"""
        How long an approval prompt waits before the held message is dropped and its sender told it expired
        ({DURATION_HELP}), or `never`. Default 5m. `never` lifts other dialogs' deadlines but not this prompt's, which
        keeps the default 5m (seed 003)."""))
    wake_cap: Optional[Cap] = Field(None, description=_help("""
        thatch's receiver-side cap on wake prompts per recipient per rolling hour (6, R22); `off` = none."""))

    def options_over(self, below: PolicyOptions) -> PolicyOptions:
        """These options laid over `below` (or over the named `base`)."""
        start = POLICY_SETS[self.base] if self.base is not None else below
        changes: dict[str, Any] = {}
        for key in ("sender_cap", "wake_cap"):
            value = getattr(self, key)
            if value is not None:
                changes[key] = None if value == "off" else value
        for key in ("inbound", "permissions", "interactive", "unregistered", "exited"):
            if getattr(self, key) is not None:
                changes[key] = getattr(self, key)
        if self.repository_inbound is not None:
            changes["repository_inbound"] = None if self.repository_inbound == "none" else self.repository_inbound
        if self.dialog_expiry is not None:
            changes["dialog_expiry_ms"] = None if self.dialog_expiry == "never" else self.dialog_expiry
        return replace(start, **changes)


def _named(value: Any) -> Any:
    """`policy: qoder` is `policy: {base: qoder}`; an unknown name is refused with the known ones."""
    if not isinstance(value, str):
        return value
    if value not in POLICY_SETS:
        listing = f"named sets: {', '.join(POLICY_SETS)}"
        raise ValueError(f"unknown policy `{value}` — " + (did_you_mean(value, list(POLICY_SETS), listing=listing)
                                                          or f"write one of the {listing}, or a mapping of options"))
    return {"base": value}


# Declared as name-or-options for the schema editors read; the validator makes it options.
PolicyField = Annotated[Optional[Union[PolicyName, PolicySpec]], BeforeValidator(_named)]
POLICY_DESC = ("The messaging policy: a named set (`thatch`, `qoder`) or options ({base: qoder, sender_cap: 5}); "
               "see docs/authoring-scenarios.md, \"Messaging policies\".")


def scenario_options(spec: Any) -> PolicyOptions:
    """The scenario-wide options (`policy:` at the top; thatch when absent)."""
    top = getattr(spec, "policy", None)
    return top.options_over(THATCH) if top is not None else THATCH


def process_options(spec: Any, proc: Any) -> PolicyOptions:
    """What one process runs under: its own `policy:` over the scenario's; thatch on a host policies do not model."""
    if getattr(proc, "kind", DEFAULT_HOST) not in POLICY_HOSTS:
        return THATCH
    below = scenario_options(spec)
    own = getattr(proc, "policy", None)
    return own.options_over(below) if own is not None else below


def options_by_process(spec: Any) -> dict[str, PolicyOptions]:
    return {p.id: process_options(spec, p) for p in getattr(spec, "processes", [])}


def uses_policies(spec: Any) -> bool:
    """Does any process run under options other than thatch's?"""
    return any(not o.is_thatch for o in options_by_process(spec).values())


def policy_problems(spec: Any) -> Iterator[tuple[tuple, str, str]]:
    """(key path, problem, fix) for `policy:` uses the engine cannot honour."""
    for i, proc in enumerate(getattr(spec, "processes", [])):
        if getattr(proc, "policy", None) is not None and proc.kind not in POLICY_HOSTS:
            yield (("processes", i, "policy"), f"`policy:` on `{proc.id}`, a {proc.kind} process",
                   f"messaging policies are modelled on {_POLICY_HOSTS_TEXT} processes: move the policy to an "
                   f"{_POLICY_HOSTS_TEXT} process (a {_OTHER_HOSTS_TEXT} process runs thatch's design)")
    kinds = {s.id: p.kind for p in getattr(spec, "processes", []) for s in p.sessions}
    for i, step in enumerate(getattr(spec, "steps", [])):
        if step.action in REVIEW_ACTIONS and kinds.get(step.args.session, DEFAULT_HOST) not in POLICY_HOSTS:
            yield (("steps", i, step.action, "session"), f"`{step.action}` in `{step.args.session}`, a session of a "
                   f"{kinds[step.args.session]} process",
                   f"held messages are reviewed in an {_POLICY_HOSTS_TEXT} session: "
                   f"name a session of an {_POLICY_HOSTS_TEXT} process")



# -- policy sets for `thatch-sim compare` ----------------------------------------------


class PolicySetError(ValueError):
    """A `--policies` entry that names no set, or a file that holds no policy."""


def parse_policy_set(text: str) -> tuple[str, PolicyOptions]:
    """(label, options) of one `--policies` entry: a named set (`qoder`), a named
    set with options changed (`qoder+wake_cap=6+dialog_expiry=never`), or a YAML
    file holding a `policy:` mapping (its `name:` or file stem labels it)."""
    path = Path(text)
    if text.endswith((".yaml", ".yml")):
        return _policy_file(path)
    name, *changes = text.split("+")
    if name not in POLICY_SETS:
        raise PolicySetError(f"unknown policy set `{name}` — write one of {', '.join(POLICY_SETS)}, "
                             "a set with options (qoder+wake_cap=6), or a .yaml file with a `policy:` mapping")
    raw: dict[str, Any] = {"base": name}
    for change in changes:
        key, sep, value = change.partition("=")
        if not sep:
            raise PolicySetError(f"`{change}` in `{text}` is not an option change — "
                                 "write OPTION=VALUE, e.g. wake_cap=6")
        raw[key.strip()] = yaml.safe_load(value)
    return text, _spec_of(raw, text).options_over(THATCH)


def _policy_file(path: Path) -> tuple[str, PolicyOptions]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise PolicySetError(f"{path}: cannot read a policy from it ({exc})") from None
    if not isinstance(data, dict) or "policy" not in data:
        raise PolicySetError(f"{path}: write a mapping with `policy:` (and an optional `name:`)")
    label = str(data.get("name") or path.stem)
    return label, _spec_of(_named(data["policy"]), str(path)).options_over(THATCH)


def _spec_of(raw: Any, where: str) -> PolicySpec:
    try:
        return PolicySpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(k) for k in err["loc"]) or "policy"
        raise PolicySetError(f"{where}: `{key}`: {err['msg']}") from None


def policy_spec_of(options: PolicyOptions) -> PolicySpec:
    """A `policy:` that states every option of `options` (the seed-003 ones over thatch, the later design's
    through the named set that holds them as `options` has them)."""
    later = {name: getattr(options, name) for name in LATER_OPTIONS}
    base = next((name for name, o in POLICY_SETS.items() if name != "qoder"
                 and {k: getattr(o, k) for k in LATER_OPTIONS} == later), "thatch")
    return PolicySpec(
        base=base, sender_cap=options.sender_cap or "off", inbound=options.inbound,
        repository_inbound=options.repository_inbound or "none", permissions=options.permissions,
        interactive=options.interactive, unregistered=options.unregistered, exited=options.exited,
        dialog_expiry=options.dialog_expiry_ms if options.dialog_expiry_ms is not None else "never",
        wake_cap=options.wake_cap or "off")
