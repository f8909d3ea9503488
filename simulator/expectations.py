"""Point expectations: what a scenario says must be true at a virtual time (or at the end).

Each `Expectation` (simulator.spec) is judged over the history up to its
time `at` (inclusive) and, for `at: end`, the final database. `{label}` in an
expected text expands to that session's assigned name (from samples and
registered events). The verdict check id is `expect#<index>`.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from simulator.checkview import RunView, brief
from simulator.result import Verdict
from simulator.spec import format_duration


PROMPT_HOOKS = ("SessionStart", "UserPromptSubmit")


def _when(at: Any) -> str:
    return "end" if at == "end" else format_duration(int(at))


def _bounds(spec: dict, got: int) -> Optional[str]:
    """None when `got` satisfies count/min/max, else what was wanted."""
    if "count" in spec and got != int(spec["count"]):
        return f"exactly {spec['count']}"
    if "min" in spec and got < int(spec["min"]):
        return f"at least {spec['min']}"
    if "max" in spec and got > int(spec["max"]):
        return f"at most {spec['max']}"
    return None


def _upto(view: RunView, at: Any, events: list[dict]) -> list[dict]:
    return events if at == "end" else [e for e in events if e["t"] <= at]


def _last_sample(view: RunView, at: Any) -> Optional[dict]:
    samples = _upto(view, at, view.of("sample"))
    return samples[-1] if samples else None


def _wakes(view: RunView, at: Any, arg: dict) -> tuple[Optional[str], list]:
    ws = _upto(view, at, view.of("wake", session=arg["session"]))
    want = _bounds(arg, len(ws))
    return (f"{arg['session']} got {len(ws)} wakes by {at}, want {want}" if want else None), ws[-4:]


def _roster_text(view: RunView, at: Any, label: str, index: int) -> tuple[Optional[str], list]:
    ev = [e for e in view.of("expectation") if e["data"].get("index") == index and isinstance(e["data"].get("detail"), str)]
    if ev:
        return ev[-1]["data"]["detail"], ev[-1:]
    lists = [c for c in view.calls_of("list", label, ok=True) if at == "end" or c.t <= at]
    if lists:
        return lists[-1].text, lists[-1].witness()
    return None, []


def _roster(view: RunView, at: Any, arg: dict, index: int) -> tuple[Optional[str], list]:
    label = arg["session"]
    sample = _last_sample(view, at)
    rows = (sample or {}).get("data", {}).get("sessions", {})
    for section, want_stale in (("active", False), ("stale", True)):
        for other in arg.get(section) or []:
            row = rows.get(other, {})
            if not row.get("registered") or bool(row.get("stale")) != want_stale:
                return f"{other} is not in {label}'s {section} section at {at}", [sample] if sample else []
    text, wit = _roster_text(view, at, label, index)
    if text is None and rows:
        text = "\n".join(f"{r.get('name')} {'stale' if r.get('stale') else 'active'}" for r in rows.values() if r.get("registered"))
        wit = [sample]
    for key, negate in (("contains", False), ("not_contains", True)):
        if key in arg:
            needle = view.expand(arg[key])
            if text is None:
                return f"no roster of {label} to look in (no chat_list result by {at})", []
            if (needle in text) == negate:
                return f"{label}'s roster {'contains' if negate else 'lacks'} {needle!r}", wit
    return None, wit


def _hook_line(view: RunView, at: Any, arg: dict) -> tuple[Optional[str], list]:
    # The identity line printed at session start / prompt time, unless `hook:` names another hook (Stop, stop).
    wanted = (arg["hook"],) if arg.get("hook") else PROMPT_HOOKS
    hooks = [h for h in _upto(view, at, view.of("hook", session=arg["session"]))
             if h["data"].get("line") and h["data"].get("hook") in wanted]
    line = str(hooks[-1]["data"]["line"]) if hooks else None
    wit = hooks[-1:]
    if arg.get("absent"):
        return (f"{arg['session']} printed a hook line: {line!r}" if line else None), wit
    if line is None:
        return f"{arg['session']} printed no hook line by {at}", []
    if "equals" in arg and line != view.expand(arg["equals"]):
        return f"hook line {line!r} != {view.expand(arg['equals'])!r}", wit
    if "contains" in arg and view.expand(arg["contains"]) not in line:
        return f"hook line {line!r} lacks {view.expand(arg['contains'])!r}", wit
    if "matches" in arg and not re.search(view.expand(arg["matches"]), line):
        return f"hook line {line!r} does not match {arg['matches']!r}", wit
    return None, wit


def _observed(view: RunView, index: int, key: str) -> Optional[dict]:
    """The orchestrator's own observation for expectation `index` (detail with `key`), if any."""
    evs = [e for e in view.of("expectation") if e["data"].get("index") == index
           and isinstance(e["data"].get("detail"), dict) and key in e["data"]["detail"]]
    return evs[-1] if evs else None


def _registered(view: RunView, at: Any, arg: dict, index: int = -1) -> tuple[Optional[str], list]:
    label = arg["session"]
    seen = _observed(view, index, "registered") if at != "end" else None
    if seen is not None:
        is_reg, name, wit = bool(seen["data"]["detail"]["registered"]), seen["data"]["detail"].get("name"), [seen]
    elif at == "end":
        row = next((r for r in view.db["sessions"] if r["session_id"] in view.ids.get(label, ())), None)
        is_reg, name, wit = row is not None, row["name"] if row else None, [{"db_row": row}] if row else []
    else:
        sample = _last_sample(view, at)
        srow = ((sample or {}).get("data", {}).get("sessions") or {}).get(label, {})
        is_reg, name, wit = bool(srow.get("registered")), srow.get("name"), [sample] if sample else []
    if "is" in arg and bool(arg["is"]) != is_reg:
        return f"{label} is {'registered' if is_reg else 'not registered'} at {at}, want is: {arg['is']}", wit
    if arg.get("name_kept"):
        first = (view.names_of(label) or [None])[0]
        if name is None or first is None or name.lower() != first.lower():
            return f"{label}'s name at {at} is {name}, first minted {first}", wit
    return None, wit


def _unread(view: RunView, at: Any, arg: dict, index: int = -1) -> tuple[Optional[str], list]:
    label = arg["session"]
    ids = set(view.ids.get(label, ()))
    mine = [m for m in view.db["messages"] if m["to_session"] in ids]
    seen = _observed(view, index, "unread") if at != "end" else None
    if seen is not None:
        n = int(seen["data"]["detail"]["unread"])
        mine = [seen]
    elif at == "end":
        n = sum(1 for m in mine if not m["read_at"])
    elif view.epoch_ms is not None:
        def open_at(m):
            c, r = view.vt(m["created_at"]), view.vt(m["read_at"]) if m["read_at"] else None
            return c is not None and c <= at and (r is None or r > at)
        n = sum(1 for m in mine if open_at(m))
    else:
        return f"cannot tell {label}'s unread count at {at}: no clock epoch in the run info", []
    want = _bounds(arg, n)
    return (f"{label} has {n} unread at {at}, want {want}" if want else None), [m if "kind" in m else {"db_row": m} for m in mine[-3:]]


def check_expectations(spec: Any, view: RunView) -> list[Verdict]:
    out = []
    for index, exp in enumerate(getattr(spec, "expect", []) or []):
        kind, arg, at = exp.kind, getattr(exp, exp.kind), exp.at
        title = f"{kind} of {arg.get('session')} at {_when(at)}"
        try:
            if kind == "wakes":
                problem, wit = _wakes(view, at, arg)
            elif kind == "roster":
                problem, wit = _roster(view, at, arg, index)
            elif kind == "hook_line":
                problem, wit = _hook_line(view, at, arg)
            elif kind == "registered":
                problem, wit = _registered(view, at, arg, index)
            else:
                problem, wit = _unread(view, at, arg, index)
        except (KeyError, TypeError, ValueError) as exc:
            problem, wit = f"cannot evaluate: {type(exc).__name__}: {exc}", []
        wit = [brief(e) if "kind" in e else e for e in wit if e][:8]
        if problem and at != "end":
            problem = problem.replace(f" at {at}", f" at {_when(at)}").replace(f" by {at}", f" by {_when(at)}")
        out.append(Verdict(f"expect#{index}", title, "fail" if problem else "pass", problem or "as expected", (), wit))
    return out
