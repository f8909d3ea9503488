"""What each point-expectation kind reads: its keys, their value types, and the
problems of a body that does not fit (checked per key, so each gets file:line).

The bodies are free-form mappings in the model (`model.Expectation`) so that
every mistake in one is reported at its own key with what to write instead:
validate.py reports them at load time, simulator/checks/expectations.py again
for scenarios built in Python. The checkers read the same helpers
(`window_of`, `moments_of`) so a body means one thing everywhere.
"""

from __future__ import annotations

from typing import Any, Optional, Union

from simulator.scenario.durations import (
    duration_json_schema, format_duration, parse_duration, parse_word_or_duration, refuse_bare_number,
)
from simulator.scenario.errors import did_you_mean
from simulator.scenario.kinds import HOSTS
from simulator.scenario.labels import LABEL_PATTERN

HOUR_MS = 3_600_000

_BOUNDS = {"count": "count", "min": "count", "max": "count"}
_TEXT = {"contains": "text", "not_contains": "text"}
_WINDOW = {"between": "window"}

# kind -> {key: value type}. New keys go at the end of a kind (messages list them in this order).
EXPECTATION_KEYS: dict[str, dict[str, str]] = {
    "wakes": {"session": "label", **_BOUNDS, **_TEXT, **_WINDOW, "per_hour": "per_hour"},
    "echoes": {"session": "label", **_BOUNDS, **_TEXT, **_WINDOW},
    "roster": {"session": "label", **_TEXT, "active": "labels", "stale": "labels", **_WINDOW},
    "hook_line": {"session": "label", "hook": "text", **_TEXT, "equals": "text", "matches": "text", "absent": "bool",
                  **_BOUNDS, **_WINDOW},
    "registered": {"session": "label", "is": "bool", "name_kept": "bool", "row": "row"},
    "unread": {"session": "label", **_BOUNDS, **_WINDOW},
    "same_name": {"session": "label", "at": "moments", "is": "bool"},
    "counter": {"session": "label", "base": "text", **_BOUNDS},
    "tombstones": {"session": "label", **_BOUNDS},
    "messages": {"from": "label", "to": "label", "via_broadcast": "bool", "read": "bool", **_BOUNDS,
                 "body": "text", "contains": "text", "parts": "count"},
    "store_errors": {"process": "process", **_BOUNDS, **_WINDOW},
    "replies": {"step": "step", "ok": "bool", **_TEXT, "equals": "text", "matches": "text", **_BOUNDS},
    "hooks": {"session": "label", "hook": "text", "decision": "decision", **_TEXT, **_BOUNDS, **_WINDOW},
    "turn_ends": {"session": "label", **_BOUNDS, **_WINDOW},
    "prunes": {"pruned": "label", "tombstone": "label", "swept": "count", **_BOUNDS, **_WINDOW},
    "host_id": {"session": "label", "is": "text", "server": "text"},
}
EXPECTATION_KINDS = tuple(EXPECTATION_KEYS)

# Keys a kind cannot do without (counter: `session` or `base`, checked on its own).
REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    kind: ("session",) for kind in ("wakes", "echoes", "roster", "hook_line", "registered", "unread", "tombstones",
                                    "hooks", "turn_ends", "host_id")
} | {"same_name": ("session", "at"), "replies": ("step",)}
# Kinds that only count: without count / min / max they would judge nothing.
COUNTING_KINDS = ("counter", "tombstones", "messages", "store_errors", "hooks", "turn_ends", "prunes")
# What a Claude Code / Cursor hook run decided (`hook` events): a Stop that blocked, a Cursor stop that
# followed up, a hook that crashed, or `none` (it let the turn end, or printed context only).
HOOK_DECISIONS = ("block", "followup", "crashed", "none")
# Kinds judged over the database state the observer reads at the expectation's time.
STORE_KINDS = ("counter", "tombstones", "messages")
ROW_WORDS = ("first", "latest")

_BOUNDS_SCHEMA = {"type": "integer", "minimum": 0}
_TWO_TIMES = {"type": "array", "minItems": 2, "maxItems": 2}
KEY_SCHEMA: dict[str, dict[str, Any]] = {
    "label": {"type": "string", "pattern": LABEL_PATTERN},
    "process": {"type": "string", "pattern": LABEL_PATTERN},
    "labels": {"type": "array", "items": {"type": "string", "pattern": LABEL_PATTERN}},
    "count": _BOUNDS_SCHEMA,
    "text": {"type": "string"},
    "bool": {"type": "boolean"},
    "window": {**_TWO_TIMES, "items": duration_json_schema()},
    "moments": {**_TWO_TIMES, "items": duration_json_schema("end")},
    "per_hour": {"type": "object", "additionalProperties": False, "minProperties": 1,
                 "properties": {k: _BOUNDS_SCHEMA for k in _BOUNDS}},
    "row": {"anyOf": [{"enum": list(ROW_WORDS)}, {"type": "integer", "minimum": 1}]},
    "step": {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": LABEL_PATTERN}]},
    "decision": {"enum": list(HOOK_DECISIONS)},
}

TYPE_HINT = {
    "label": "a session label", "process": "a process label", "labels": "a list of session labels",
    "count": "a whole number, 0 or more", "text": "a string (quote it)", "bool": "true or false",
    "window": "[from, until]: two times, e.g. [1h, 2h] (from inclusive, until exclusive)",
    "moments": "[earlier, later]: two times to compare, e.g. [1h, 3h] (`end` for the end of the run)",
    "per_hour": "{count | min | max}: how many in every rolling hour, e.g. {min: 5, max: 6}",
    "row": "`first` (the session's original id), `latest` (its newest id, after forks) or N (its Nth id)",
    "step": "a step's index in `steps:` (0 is the first) or its `name:`",
    "decision": f"one of {', '.join(HOOK_DECISIONS)}",
}

Problem = tuple[tuple, str, str]  # (key path inside the body, problem, what to write instead)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _time_problem(value: Any, word: Optional[str], units_required: bool) -> Optional[tuple[str, str]]:
    """(problem, hint) when `value` is not a time (a duration, or `word` itself)."""
    try:
        if units_required:
            refuse_bare_number(value)
        if word is None:
            parse_duration(value)
        else:
            parse_word_or_duration(value, word)
    except ValueError as exc:
        problem, _, hint = str(exc).partition(" — ")
        return problem, hint
    return None


def _two_times_problems(key: str, value: Any, word: Optional[str], units_required: bool) -> list[Problem]:
    """A `[t1, t2]` list whose first time is the earlier (`between`, `same_name.at`)."""
    want = "window" if word is None else "moments"
    if not isinstance(value, list) or len(value) != 2:
        return [((key,), f"{value!r} is not two times", f"write {TYPE_HINT[want]}")]
    out = [((key, j), *bad) for j, item in enumerate(value) if (bad := _time_problem(item, word, units_required))]
    if out:
        return out
    first, second = (_as_time(v) for v in value)
    if second != "end" and (first == "end" or second <= first):
        shown = [v if v == "end" else format_duration(v) for v in (first, second)]
        return [((key,), f"{shown[1]} is not after {shown[0]}", "write the earlier time first, then a later one")]
    return []


def _as_time(value: Any) -> Union[int, str]:
    return "end" if value == "end" else parse_duration(value)


def _value_problems(key: str, want: str, value: Any, units_required: bool) -> list[Problem]:
    if want in ("window", "moments"):
        return _two_times_problems(key, value, None if want == "window" else "end", units_required)
    if want == "per_hour":
        return _per_hour_problems(key, value)
    ok = {"label": isinstance(value, str), "process": isinstance(value, str), "text": isinstance(value, str),
          "bool": isinstance(value, bool), "count": _is_count(value),
          "labels": isinstance(value, list) and all(isinstance(v, str) for v in value),
          "row": value in ROW_WORDS or (_is_count(value) and value >= 1),
          "step": _is_count(value) or isinstance(value, str), "decision": value in HOOK_DECISIONS}[want]
    return [] if ok else [((key,), f"{value!r} is not allowed here", f"write {TYPE_HINT[want]}")]


def _per_hour_problems(key: str, value: Any) -> list[Problem]:
    if not isinstance(value, dict) or not value:
        return [((key,), f"{value!r} is not allowed here", f"write {TYPE_HINT['per_hour']}")]
    out: list[Problem] = []
    for k, v in value.items():
        if k not in _BOUNDS:
            out.append(((key, k), f"unknown key `{k}` in `per_hour`",
                        did_you_mean(str(k), list(_BOUNDS)) or "write count, min or max"))
        elif not _is_count(v):
            out.append(((key, k), f"{v!r} is not allowed here", f"write {TYPE_HINT['count']}"))
    return out


def expectation_body_problems(kind: str, body: Any, *, units_required: bool = False) -> list[Problem]:
    """(key path inside the body, problem, what to write instead) for each key a
    `kind` expectation does not read, each value of the wrong type, and each key
    combination that could judge nothing. `units_required`: times written in a
    file need their unit (`between: [0, 3h]`, not `[0, 10800000]`)."""
    keys = EXPECTATION_KEYS[kind]
    if not isinstance(body, dict):
        return [((), f"expected a mapping, got {body!r}", f"write {{{', '.join(keys)}}}")]
    out: list[Problem] = []
    for key, value in body.items():
        if key not in keys:
            hint = did_you_mean(str(key), list(keys)) or f"a `{kind}` expectation takes: {', '.join(keys)}"
            if key == "at":  # the time of a point expectation sits beside its body, not in it
                hint = (f"move `at` beside it: `- {kind}: {{...}}` with `at: 5m` on the next line, level with "
                        f"`{kind}:`" + (" (inside, `between: [from, until]` judges a window)" if "between" in keys
                                        else ""))
            out.append(((key,), f"unknown key `{key}` in a `{kind}` expectation", hint))
        else:
            out += _value_problems(key, keys[key], value, units_required)
    return out or _combination_problems(kind, body)


def _combination_problems(kind: str, body: dict) -> list[Problem]:
    """Keys that are each fine but together cannot judge anything."""
    if kind in COUNTING_KINDS and not any(k in body for k in _BOUNDS):
        return [((), f"a `{kind}` expectation says no number", "add count, min or max (count: 0 for none)")]
    if kind == "counter" and ("session" in body) == ("base" in body):
        return [((), "a `counter` expectation needs exactly one of `session` and `base`",
                 "write `session: <label>` (the base of its name) or `base: <name base>`, not both")]
    if "per_hour" in body:
        window = window_of(body)
        if window is None:
            return [(("per_hour",), "`per_hour` without `between`",
                     "add `between: [from, until]`: the stretch whose every rolling hour is judged")]
        if window[1] - window[0] < HOUR_MS:
            return [(("between",), f"the window {format_duration(window[0]) if window[0] else 0} .. "
                     f"{format_duration(window[1])} is shorter than an hour, so it holds no rolling hour",
                     "make it at least 1h long")]
    return []


def window_of(body: Any) -> Optional[tuple[int, int]]:
    """A body's `between: [from, until]` in milliseconds (None when absent)."""
    value = body.get("between") if isinstance(body, dict) else None
    if value is None:
        return None
    return parse_duration(value[0]), parse_duration(value[1])


def moments_of(body: Any) -> list[Union[int, str]]:
    """A `same_name` body's two times (milliseconds, or `end`)."""
    return [_as_time(v) for v in body["at"]]


def body_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of a `kind` body: exactly the keys it takes (editors complete them)."""
    return {"type": "object", "required": list(REQUIRED_KEYS.get(kind, ())), "additionalProperties": False,
            "properties": {key: dict(KEY_SCHEMA[t]) for key, t in EXPECTATION_KEYS[kind].items()}}


# The hooks each host kind runs (simulator/scenario/kinds.py), exactly as its harness
# records them in `hook` events: a `hook_line`'s `hook:` must name one, or `absent: true` /
# `count: 0` would pass on a typo. A host with no hooks prints no hook line.
HOST_HOOKS: dict[str, tuple[str, ...]] = {key: h.hooks for key, h in HOSTS.items() if h.hooks}


def hook_line_host_problems(host_kind: Optional[str], body: Any) -> list[Problem]:
    """(key path inside the body, problem, what to write instead) when a `hook_line`
    expectation cannot match anything on the session's host: the host prints no
    hook line (opencode), or `hook:` is not one of the hooks it runs.
    `host_kind` None (an undefined session) is reported elsewhere."""
    if host_kind is None or not isinstance(body, dict):
        return []
    label = body.get("session")
    if host_kind not in HOST_HOOKS:
        return [(("session",), f"`{label}` is a session of an {host_kind} process, which prints no hook line",
                 f"hook_line checks {' or '.join(HOST_HOOKS)} sessions; for an {host_kind} session check "
                 "`wakes`, `echoes` or `registered` instead")]
    hook, names = body.get("hook"), HOST_HOOKS[host_kind]
    if not isinstance(hook, str) or hook in names:
        return []
    listing = f"a {host_kind} session runs: {', '.join(names)}"
    hint = (did_you_mean(hook, names, listing=listing, case_insensitive=True)
            or f"write one of the hooks {listing} (case-sensitive)")
    return [(("hook",), f"unknown hook `{hook}` for `{label}`, a session of a {host_kind} process", hint)]


_WINDOWED = ("`between: [from, until]` counts only what falls in that window (from inclusive, until exclusive)")
KIND_DESCRIPTIONS: dict[str, str] = {
    "wakes": ("Wake prompts a session received by then: {session, count | min | max, contains | not_contains}; "
              f"contains / not_contains look in the text of the last wake. {_WINDOWED}; with it, "
              "`per_hour: {count | min | max}` bounds every rolling hour inside the window."),
    "echoes": ("The `[chat]` echo bubbles in a session's transcript by then: {session, count | min | max, contains | "
               "not_contains}; contains selects the echoes whose text contains it (at least one, or count | min | "
               f"max of them), not_contains: no echo contains it. {_WINDOWED}."),
    "roster": ("chat_list as seen by a session: {session, active: [labels], stale: [labels], contains | not_contains}; "
               "with `between: [from, until]` it holds at every sample and in every chat_list reply of the window."),
    "hook_line": ("The last hook line a Claude Code/Cursor session printed: {session, hook: the host's hook name, "
                  "exactly (claude-code: SessionStart, UserPromptSubmit, Stop; cursor: SessionStart, UserPromptSubmit, "
                  "stop; default: the identity hooks), contains | not_contains | equals | matches | absent: true}; "
                  "with count | min | max it counts the printed lines that match instead; with `between: [from, "
                  "until]` only lines printed in that window."),
    "registered": ("Directory state: {session, is: true|false, name_kept: true (same name as first minted) | false (a "
                   "fresh name), row: first | latest | N (the session id it is registered under: its original one, its "
                   "newest after forks, its Nth)}."),
    "unread": ("Unread mail count: {session, count | min | max}; with `between: [from, until]` the bound holds at "
               "every instant of the window."),
    "same_name": ("A session's name at two times: {session, at: [earlier, later], is: true (default: the same name, "
                  "registered at both) | false (not the same name)}."),
    "counter": ("A name base's counter in the directory: "
                "{session (the base of its name by then) | base, count | min | max}."),
    "tombstones": "Leave tombstones held against a session's ids: {session, count | min | max}.",
    "messages": ("Stored messages: {from, to, via_broadcast: true|false, read: true|false, body: the whole stored "
                 "body, contains: text in the stored body, parts: N (the first part of a body split into N), "
                 "count | min | max}; each given key filters the rows (a split body is one row per part)."),
    "store_errors": ("Store calls that failed (store-error events) by then: {process, count | min | max}; "
                     f"{_WINDOWED}."),
    "replies": ("The replies a step recorded by then, a fault's too (a `retry` records each repeated call's reply): "
                "{step: index or name, ok, contains | not_contains | equals | matches}: the last reply; with "
                "count | min | max, how many of its replies match."),
    "hooks": ("The hook runs of a Claude Code/Cursor session, printed or silent: {session, hook, decision: block | "
              "followup | crashed | none, contains | not_contains (the printed line or reason), count | min | max}. "
              f"{_WINDOWED}."),
    "turn_ends": f"The turns of a session that ended: {{session, count | min | max}}. {_WINDOWED}.",
    "host_id": ("A Claude Code/Cursor session's host session id by then: {session, is: the id it goes by (after "
                "forks, the newest), server: the CLAUDE_CODE_SESSION_ID its MCP server was started with}; exact, "
                "case included."),
    "prunes": ("Hourly prune passes that removed something (`prune` events): {pruned: a session whose row the pass "
               "deleted, tombstone: a session whose leave tombstone expired, swept: N (the unread messages the "
               f"matching passes swept, together), count | min | max (how many passes)}}. {_WINDOWED}."),
}

__all__ = [
    "COUNTING_KINDS", "EXPECTATION_KEYS", "EXPECTATION_KINDS", "HOOK_DECISIONS", "HOST_HOOKS", "KEY_SCHEMA",
    "KIND_DESCRIPTIONS", "REQUIRED_KEYS", "STORE_KINDS", "body_schema", "expectation_body_problems",
    "hook_line_host_problems", "moments_of", "window_of",
]
