"""Point expectations: what a scenario says must be true at a virtual time (or at the end).

Each `Expectation` (simulator.scenario.model) is judged over the history up to its
time `at` (inclusive) and, for `at: end`, the final database. `{label}` in an
expected text expands to the name that session went by at `at` (for `at: end`
its final name), from samples, registered events and hook lines. The verdict
check id is `expect#<index>`. A body key the kind does not read, or a
`hook_line` its session's host cannot print, fails the verdict (the loader
refuses both earlier).

A body with `between: [from, until]` is judged over that window instead
(simulator.checks.window_expectations); the database-state kinds and
`same_name` over what the observer read at their times
(simulator.checks.store_expectations); one marked `before_catch_up` over the
history as it stood when it was observed, before a sleep's catch-up.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

from simulator.checks import store_expectations as stored
from simulator.checks import window_expectations as windowed
from simulator.checks.view import RunView, brief
from simulator.checks.window_expectations import Span, bounds_problem
from simulator.design import roster_section
from simulator.events import (
    ECHO, EXPECTATION, FORK, HOOK, MCP_SERVER, PROCESS_START, PRUNE, SAMPLE, STEP_DROPPED, TOOL_RESULT, TURN_END,
    WAKE, Event, Hook, ProcessStart, Prune, Sample, SampleRow, ToolResult,
)
from simulator.events import Expectation as ExpectationEvent
from simulator.result import Verdict
from simulator.scenario.expectation_keys import moments_of, window_of
from simulator.scenario.expectation_keys import expectation_body_problems, hook_line_host_problems
from simulator.scenario.labels import LABEL_PLACEHOLDER
from simulator.scenario.model import Expectation, ReplyExpectation, Scenario, Step, format_duration


PROMPT_HOOKS = ("SessionStart", "UserPromptSubmit")

# The text keys of a `hook_line` or `replies` body and of a step's `expect:`: how a text fails each,
# and how a failure reads (`reply '...' lacks 'x'`).
TEXT_TESTS: dict[str, tuple[Callable[[str, str], bool], str]] = {
    "equals": (lambda text, want: text != want, "!="),
    "contains": (lambda text, want: want not in text, "lacks"),
    "not_contains": (lambda text, want: want in text, "contains"),
    "matches": (lambda text, want: not re.search(want, text), "does not match"),
}
HOOK_LINE_ORDER = ("equals", "contains", "matches", "not_contains")  # the order a hook line's failure is named in
REPLY_ORDER = ("equals", "contains", "not_contains", "matches")


def _text_failure(text: str, wants: list[tuple[str, Any]]) -> Optional[tuple[str, Any]]:
    """The first (key, wanted text) of `wants` that `text` fails, in their order; None when it passes them all."""
    return next(((key, want) for key, want in wants if TEXT_TESTS[key][0](text, want)), None)


def _failure_said(what: str, failure: Optional[tuple[str, Any]]) -> Optional[str]:
    """`<what> != '...'`, `<what> lacks '...'`: a text key's failure in words (None: no failure)."""
    return None if failure is None else f"{what} {TEXT_TESTS[failure[0]][1]} {failure[1]!r}"


def _when(at: Any) -> str:
    return "end" if at == "end" else format_duration(int(at))


_bounds = bounds_problem


def _last_sample(view: RunView, at: Any) -> Optional[Sample]:
    samples = Span(at).pick(view.history.of(SAMPLE))
    return samples[-1] if samples else None


def _wakes(view: RunView, span: Span, arg: dict) -> tuple[Optional[str], list]:
    ws, at = span.pick(view.history.of(WAKE, session=arg["session"])), span.at
    want = _bounds(arg, len(ws))
    if want:
        return f"{arg['session']} got {len(ws)} wakes {span}, want {want}", ws[-4:]
    # `contains` / `not_contains`: the text of the last wake by then (the batch it announced).
    for key, negate in (("contains", False), ("not_contains", True)):
        if key in arg:
            if not ws:
                return f"{arg['session']} got no wake {span} to look in", []
            text, needle = ws[-1].text, view.names.expand(arg[key], at)
            if (needle in text) == negate:
                return (f"{arg['session']}'s last wake {'contains' if negate else 'lacks'} {needle!r}: "
                        f"{text[:200]!r}"), ws[-1:]
    if "per_hour" in arg:
        return windowed.per_hour(ws, arg, f"{arg['session']}'s wakes")
    return None, ws[-4:]


def _echoes(view: RunView, span: Span, arg: dict) -> tuple[Optional[str], list]:
    """The `[chat]` bubbles a session's transcript received by then (D-props-E3):
    `contains` selects the echoes holding it (at least one unless count / min /
    max bound how many), `not_contains` must be in none of them."""
    label, at = arg["session"], span.at
    echoes = span.pick(view.history.of(ECHO, session=label))
    hits = echoes
    what = "echoes"
    if "contains" in arg:
        needle = view.names.expand(arg["contains"], at)
        hits = [e for e in echoes if needle in e.text]
        what = f"echoes containing {needle!r}"
    want = _bounds(arg, len(hits))
    if want is None and "contains" in arg and not any(k in arg for k in ("count", "min", "max")) and not hits:
        want = "at least 1"
    if want:
        return f"{label} got {len(hits)} {what} {span}, want {want}", (hits or echoes)[-4:]
    if "not_contains" in arg:
        needle = view.names.expand(arg["not_contains"], at)
        bad = [e for e in echoes if needle in e.text]
        if bad:
            return f"{label} got an echo containing {needle!r} {span}: {bad[0].text[:200]!r}", bad[:4]
    return None, hits[-4:]


def _roster_text(view: RunView, at: Any, label: str, index: int) -> tuple[Optional[str], list]:
    ev = [e for e in view.history.of(EXPECTATION) if e.index == index and isinstance(e.detail, str)]
    if ev:
        return ev[-1].detail, ev[-1:]
    lists = [c for c in view.mail.calls_of("list", label, ok=True) if at == "end" or c.t <= at]
    if lists:
        return lists[-1].text, lists[-1].witness()
    return None, []


def _roster(view: RunView, at: Any, arg: dict, index: int) -> tuple[Optional[str], list]:
    label = arg["session"]
    # The observer's own snapshot when it took one (before a sleep's catch-up), else the last sample.
    seen = _observed(view, index, "sessions")
    sample = seen or _last_sample(view, at)
    rows = _observed_rows(seen) if seen else (sample.sessions if sample else {})
    for section in ("active", "stale"):
        for other in arg.get(section) or []:
            if not windowed.in_section(rows.get(other), section):
                return f"{other} is not in {label}'s {section} section at {at}", [sample] if sample else []
    text, wit = _roster_text(view, at, label, index)
    if text is None and rows:
        text = "\n".join(f"{r.name} {roster_section(r.stale, r.host_kind)}" for r in rows.values() if r.registered)
        wit = [sample]
    for key, negate in (("contains", False), ("not_contains", True)):
        if key in arg:
            needle = view.names.expand(arg[key], at)
            if text is None:
                return f"no roster of {label} to look in (no chat_list result by {at})", []
            if (needle in text) == negate:
                return f"{label}'s roster {'contains' if negate else 'lacks'} {needle!r}", wit
    return None, wit


def _hook_line(view: RunView, span: Span, arg: dict) -> tuple[Optional[str], list]:
    # The identity line printed at session start / prompt time, unless `hook:` names another hook (Stop, stop).
    wanted, at = ((arg["hook"],) if arg.get("hook") else PROMPT_HOOKS), span.at
    hooks = [h for h in span.pick(view.history.of(HOOK, session=arg["session"])) if h.line and h.hook in wanted]
    if any(k in arg for k in ("count", "min", "max")):
        # Counting form: how many printed lines (of the wanted hooks) match.
        hits = [h for h in hooks if _text_failure(h.line, _line_wants(view, at, arg, HOOK_LINE_ORDER)) is None]
        want = _bounds(arg, len(hits))
        return (f"{arg['session']} printed {len(hits)} matching hook lines {span}, want {want}" if want else None,
                hits[-4:])
    line = hooks[-1].line if hooks else None
    wit = hooks[-1:]
    if arg.get("absent"):
        return (f"{arg['session']} printed a hook line: {line!r}" if line else None), wit
    if line is None:
        return f"{arg['session']} printed no hook line {span}", []
    return _failure_said(f"hook line {line!r}", _text_failure(line, _line_wants(view, at, arg, HOOK_LINE_ORDER))), wit


def step_index(steps: list[Step], ref: Any) -> Optional[int]:
    """The index a `step:` key names: an index into `steps:`, or the `name:` of one step."""
    if isinstance(ref, int) and not isinstance(ref, bool):
        return ref if 0 <= ref < len(steps) else None
    return next((i for i, step in enumerate(steps) if step.name == ref), None)


def _replies(view: RunView, span: Span, arg: dict, steps: list[Step]) -> tuple[Optional[str], list]:
    """The tool results a step recorded (`data.step`): a tool or CLI step's reply, or each reply of a
    `retry` fault's repeated calls; the last one must match, or count | min | max of them."""
    idx = step_index(steps, arg["step"])
    if idx is None:
        return f"no step {arg['step']!r} in this scenario", []
    results = [e for e in span.pick(view.history.of(TOOL_RESULT)) if e.step == idx]
    what = f"step {arg['step']}" if isinstance(arg["step"], str) else f"step {idx}"
    if any(k in arg for k in ("count", "min", "max")):
        hits = [e for e in results if _reply_text_problem(view, arg, e) is None]
        want = _bounds(arg, len(hits))
        return (f"{what} recorded {len(hits)} matching replies {span}, want {want}" if want else None), hits[-4:]
    if not results:
        return f"{what} recorded no reply {span}", []
    return _reply_text_problem(view, arg, results[-1]), results[-1:]


def _reply_text_problem(view: RunView, arg: dict, ev: ToolResult) -> Optional[str]:
    """A recorded reply against the text keys and `ok` of a `replies` body."""
    shown = _shown(ev.text)
    if "ok" in arg and ev.ok != arg["ok"]:
        return f"reply ok={ev.ok}, want ok={arg['ok']}: {shown!r}"
    failure = _text_failure(ev.text, [(key, _expand_at(view, arg[key], ev.i)) for key in REPLY_ORDER if key in arg])
    return None if failure is None else f"reply {shown!r} fails {failure[0]}: {failure[1]!r}"


def _hooks(view: RunView, span: Span, arg: dict) -> tuple[Optional[str], list]:
    """Hook runs of a session, printed or silent, by hook name, decision and text (Stop blocks, Cursor's
    follow-ups, crashes): how many match."""
    runs = span.pick(view.history.of(HOOK, session=arg["session"]))
    if "hook" in arg:
        runs = [h for h in runs if h.hook == arg["hook"]]
    if "decision" in arg:
        runs = [h for h in runs if (h.decision or "none") == arg["decision"]]
    for key, negate in (("contains", False), ("not_contains", True)):
        if key in arg:
            needle = view.names.expand(arg[key], span.at)
            runs = [h for h in runs if (needle in (h.line or "")) != negate]
    want = _bounds(arg, len(runs))
    said = " ".join(f"{k} {arg[k]}" for k in ("hook", "decision") if k in arg)
    return (f"{arg['session']} ran {len(runs)} hooks{' (' + said + ')' if said else ''} {span}, want {want}"
            if want else None), runs[-4:]


def _prunes(view: RunView, span: Span, arg: dict) -> tuple[Optional[str], list]:
    """The prune passes that removed something, narrowed to those that pruned a session's row or
    expired its tombstone; how many, and how much unread mail they swept together (R26)."""
    passes = span.pick(view.history.of(PRUNE))
    for key, touched in (("pruned", _pruned_ids), ("tombstone", _expired_ids)):
        if key in arg:
            ids = set(view.names.ids.get(arg[key], ()))
            passes = [p for p in passes if ids & set(touched(p))]
    said = "".join(f" that {'pruned' if k == 'pruned' else 'expired the tombstone of'} {arg[k]}"
                   for k in ("pruned", "tombstone") if k in arg)
    want = _bounds(arg, len(passes))
    if want:
        return f"{len(passes)} prune passes{said} {span}, want {want}", passes[-4:]
    swept = sum(p.swept for p in passes)
    if "swept" in arg and swept != arg["swept"]:
        return f"the prune passes{said} {span} swept {swept} messages, want {arg['swept']}", passes[-4:]
    return None, passes[-4:]


def _pruned_ids(p: Prune) -> list[str]:
    return p.pruned


def _expired_ids(p: Prune) -> list[str]:
    return p.expired_tombstones


def _host_id(view: RunView, span: Span, arg: dict) -> tuple[Optional[str], list]:
    """The host session id a session goes by (its process start's, then each fork's new one, or the old
    one a fork's `older_as` keeps) and the CLAUDE_CODE_SESSION_ID its MCP server started with (R31, R33)."""
    label, ids, wit = arg["session"], [], []
    for e in span.pick(view.history.of(PROCESS_START, FORK)):
        if isinstance(e, ProcessStart):
            if label in e.sessions:
                ids, wit = ids + [e.sessions[label]], [e]
        elif e.session == label or e.older_as == label:
            ids, wit = ids + [e.new_host_id if e.session == label else e.old_host_id], [e]
    if "is" in arg and (ids[-1:] or [None])[0] != arg["is"]:
        return (f"{label} goes by host id {ids[-1]!r} {span}, want {arg['is']!r}" if ids
                else f"{label} has no host id {span}"), wit
    servers = span.pick(view.history.of(MCP_SERVER, session=label))
    if "server" in arg:
        got = str(servers[-1].env.get("CLAUDE_CODE_SESSION_ID")) if servers else None
        if got != arg["server"]:
            return (f"{label}'s MCP server has CLAUDE_CODE_SESSION_ID={got!r} {span}, want {arg['server']!r}"
                    if servers else f"{label} started no MCP server {span}"), servers[-1:]
    return None, wit + servers[-1:]


def _line_wants(view: RunView, at: Any, arg: dict, order: tuple[str, ...]) -> list[tuple[str, Any]]:
    """The text keys a hook_line body gives (all optional), in `order`, `{label}` expanded at `at`."""
    return [(key, view.names.expand(arg[key], at)) for key in order if key in arg]


def _observed(view: RunView, index: int, key: str) -> Optional[ExpectationEvent]:
    """The orchestrator's own observation for expectation `index` (detail with `key`), if any."""
    evs = [e for e in view.history.of(EXPECTATION)
           if e.index == index and isinstance(e.detail, dict) and key in e.detail]
    return evs[-1] if evs else None


def _observed_rows(seen: ExpectationEvent) -> dict[str, SampleRow]:
    """The directory the observer read for a `before_catch_up` observation: label -> its row, as a sample's."""
    return {label: SampleRow(**row) for label, row in seen.detail["sessions"].items()}


def _registered(view: RunView, at: Any, arg: dict, index: int = -1) -> tuple[Optional[str], list]:
    label = arg["session"]
    seen = _observed(view, index, "registered") if at != "end" else None
    if seen is not None:
        is_reg, name, wit = bool(seen.detail["registered"]), seen.detail["name"], [seen]
    elif at == "end":
        row = view.names.final_row(label)
        is_reg, name, wit = row is not None, row["name"] if row else None, [{"db_row": row}] if row else []
    else:
        sample = _last_sample(view, at)
        srow = sample.sessions.get(label) if sample else None
        is_reg, name, wit = bool(srow and srow.registered), srow.name if srow else None, [sample] if sample else []
    if "is" in arg and bool(arg["is"]) != is_reg:
        return f"{label} is {'registered' if is_reg else 'not registered'} at {at}, want is: {arg['is']}", wit
    if arg.get("name_kept"):
        first = (view.names.names_of(label) or [None])[0]
        if name is None or first is None or name.lower() != first.lower():
            return f"{label}'s name at {at} is {name}, first minted {first}", wit
    if arg.get("name_kept") is False:
        # A fresh name: registered under a name other than the first one minted (R2, R6).
        first = (view.names.names_of(label) or [None])[0]
        if name is None or first is None or name.lower() == first.lower():
            return f"{label}'s name at {at} is {name}, want a fresh name (first minted {first})", wit
    if "row" in arg:
        return stored.registered_row(view, at, arg, index)
    return None, wit


def _unread(view: RunView, at: Any, arg: dict, index: int = -1) -> tuple[Optional[str], list]:
    label = arg["session"]
    ids = set(view.names.ids.get(label, ()))
    mine = [m for m in view.db["messages"] if m["to_session"] in ids]
    seen = _observed(view, index, "unread") if at != "end" else None
    if seen is not None:
        n = int(seen.detail["unread"])
        want = _bounds(arg, n)
        return (f"{label} has {n} unread at {at}, want {want}" if want else None), [seen]
    if at == "end":
        n = sum(1 for m in mine if not m["read_at"])
    elif view.epoch_ms is not None:
        def open_at(m):
            c, r = view.vt(m["created_at"]), view.vt(m["read_at"]) if m["read_at"] else None
            return c is not None and c <= at and (r is None or r > at)
        n = sum(1 for m in mine if open_at(m))
    else:
        return f"cannot tell {label}'s unread count at {at}: no clock epoch in the run info", []
    want = _bounds(arg, n)
    return (f"{label} has {n} unread at {at}, want {want}" if want else None), [{"db_row": m} for m in mine[-3:]]


def _host_kind(spec: Scenario, view: RunView, label: Any) -> Optional[str]:
    """The kind of the process the scenario declares for `label` (None when undeclared)."""
    labels = spec.session_labels()
    proc = labels.get(label) if isinstance(label, str) else None
    return view.proc_kind.get(proc) if proc else None


def _title(exp: Expectation, arg: Any) -> str:
    """`wakes of bob at 3h`, `wakes of bob between 1h and 2h`, `same_name of bob at 1h and 3h`, `messages at end`."""
    if exp.kind == "messages" and isinstance(arg, dict):
        who = "".join(f" {word} {arg[key]}" for key, word in (("from", "from"), ("to", "to")) if key in arg)
    else:
        who = next((arg[k] for k in ("session", "process", "base", "step") if isinstance(arg, dict) and k in arg),
                   None)
        who = f" of {who}" if who is not None else ("" if isinstance(arg, dict) else f" of {arg}")
    window = (window_of(arg)
              if isinstance(arg, dict) and exp.kind in ("wakes", "echoes", "roster", "unread", "store_errors",
                                                        "hook_line", "hooks", "turn_ends", "prunes")
              else None)
    if window is not None:
        return f"{exp.kind}{who} {Span(window[1], window)}"
    if exp.kind == "same_name" and isinstance(arg, dict) and isinstance(arg.get("at"), list):
        return f"{exp.kind}{who} at {' and '.join(_when(t) for t in moments_of(arg))}"
    return f"{exp.kind}{who} at {_when(exp.at)}" + (" before the catch-up" if exp.before_catch_up else "")


def _judge(view: RunView, exp: Expectation, arg: dict, index: int) -> tuple[Optional[str], list]:
    """One expectation whose body is well formed, judged over `view`."""
    kind, at, window = exp.kind, exp.at, window_of(arg)
    span = Span(at, None) if window is None else Span(window[1], window)
    if kind == "wakes":
        return _wakes(view, span, arg)
    if kind == "echoes":
        return _echoes(view, span, arg)
    if kind == "store_errors":
        return windowed.store_errors(view, span, arg)
    if kind == "roster":
        return (_roster(view, at, arg, index) if window is None
                else windowed.roster_throughout(view, arg, window, view.names.expand))
    if kind == "unread":
        return _unread(view, at, arg, index) if window is None else windowed.unread_throughout(view, arg, window)
    if kind == "hook_line":
        return _hook_line(view, span, arg)
    if kind == "replies":
        return _replies(view, span, arg, view.steps)
    if kind == "hooks":
        return _hooks(view, span, arg)
    if kind == "prunes":
        return _prunes(view, span, arg)
    if kind == "host_id":
        return _host_id(view, span, arg)
    if kind == "turn_ends":
        turns = span.pick(view.history.of(TURN_END, session=arg["session"]))
        want = _bounds(arg, len(turns))
        return (f"{arg['session']} ended {len(turns)} turns {span}, want {want}" if want else None), turns[-4:]
    if kind == "registered":
        return _registered(view, at, arg, index)
    if kind == "same_name":
        return stored.same_name(view, arg, index)
    return {"counter": stored.counter, "tombstones": stored.tombstones,
            "messages": stored.messages}[kind](view, at, arg, index)


def check_expectations(spec: Scenario, view: RunView) -> list[Verdict]:
    out = []
    for index, exp in enumerate(spec.expect):
        kind, arg, at = exp.kind, getattr(exp, exp.kind), exp.at
        try:
            bad = expectation_body_problems(kind, arg)
            if not bad and kind == "hook_line":
                bad = hook_line_host_problems(_host_kind(spec, view, arg.get("session")), arg)
            if bad:
                # Normally refused at load time (validate.py); a scenario built in Python lands here.
                sub, problem, hint = bad[0]
                problem, wit = f"{'.'.join([kind, *map(str, sub)])}: {problem} — {hint}", []
            else:
                problem, wit = _judge(_before_catch_up(view, index) if exp.before_catch_up else view, exp, arg, index)
        except (KeyError, TypeError, ValueError) as exc:
            problem, wit = f"cannot evaluate: {type(exc).__name__}: {exc}", []
        wit = [brief(e) if isinstance(e, Event) else e for e in wit if e][:8]
        if problem and at != "end":
            problem = problem.replace(f" at {at}", f" at {_when(at)}").replace(f" by {at}", f" by {_when(at)}")
        out.append(Verdict(f"expect#{index}", _title(exp, arg), "fail" if problem else "pass", problem or "as expected",
                           (), wit))
    return out + check_step_replies(spec, view)


def _before_catch_up(view: RunView, index: int) -> Any:
    """The view as the `before_catch_up` observation of expectation `index` saw it."""
    ev = stored.observed(view, index)
    return view if ev is None else view.cut(ev.i)


# -- step reply expectations (`steps[i].expect`) ---------------------------------


def _prompt_hooks(view: RunView, step: Step) -> list[Hook]:
    """The hooks a `prompt` step ran (SessionStart, UserPromptSubmit), whatever they printed."""
    return [h for h in view.history.of(HOOK, session=step.args.session) if h.t == step.at and h.hook in PROMPT_HOOKS]


def _silence_problem(view: RunView, step: Step) -> tuple[Optional[str], list]:
    """`expect: {silent: ...}` of a prompt step: did its hooks run, and print nothing (true) or a line (false)?"""
    hooks = _prompt_hooks(view, step)
    if not hooks:
        return "no hook ran for this prompt (dropped, or its process was gone)", []
    crashed = [h for h in hooks if h.decision == "crashed"]
    if crashed:
        return f"the {crashed[0].hook} hook crashed, so it printed nothing by accident", crashed[:1]
    lines = [h for h in hooks if h.line]
    if step.expect.silent and lines:
        return f"the {lines[0].hook} hook printed {lines[0].line!r}, want nothing", lines[:1]
    if not step.expect.silent and not lines:
        return "the prompt's hooks printed nothing, want a line", hooks[-1:]
    return None, (lines or hooks)[-1:]


def _step_reply(view: RunView, idx: int, step: Step) -> Optional[ToolResult | Hook]:
    """The recorded reply of step `idx`: its `tool-result` (tools and CLI steps
    carry `data.step`), or for a `prompt` step the hook line it printed."""
    results = [e for e in view.history.of(TOOL_RESULT) if e.step == idx]
    if results:
        return results[-1]
    if step.action == "prompt":
        hooks = [h for h in _prompt_hooks(view, step) if h.line]
        return hooks[-1] if hooks else None
    return None


def _expand_at(view: RunView, text: Any, i: float) -> Any:
    """`{label}` -> the name the label went by at event `i` (else its last name)."""
    if not isinstance(text, str):
        return text
    names = view.names
    return LABEL_PLACEHOLDER.sub(lambda m: names.name_at(m.group(1), i) or names.name_at(m.group(1)) or m.group(0),
                                 text)


def _reply_problem(view: RunView, exp: ReplyExpectation, ev: ToolResult | Hook) -> Optional[str]:
    text, ok = (ev.text, ev.ok) if isinstance(ev, ToolResult) else (ev.line or "", True)
    shown = _shown(text)
    if exp.ok is not None and ok != exp.ok:
        return f"reply ok={ok}, want ok={exp.ok}: {shown!r}"
    wants = [(key, _expand_at(view, getattr(exp, key), ev.i)) for key in REPLY_ORDER if getattr(exp, key) is not None]
    return _failure_said(f"reply {shown!r}", _text_failure(text, wants))


def _shown(text: str) -> str:
    """A reply as a failure quotes it: its first 300 characters."""
    return text if len(text) <= 300 else text[:297] + "..."


def check_step_replies(spec: Scenario, view: RunView) -> list[Verdict]:
    """One verdict `step#<index>` per step with an `expect:`: its recorded reply
    must satisfy it; a step that left no reply (dropped, its process dead, an
    action with no reply) fails, never passes vacuously."""
    out = []
    for idx, step in enumerate(spec.steps):
        exp = step.expect
        if exp is None:
            continue
        title = (f"reply of step {idx} ({step.name + ', ' if step.name else ''}{step.action} "
                 f"at {format_duration(step.at)})")
        if exp.silent is not None and step.action == "prompt":
            problem, wit = _silence_problem(view, step)
            out.append(Verdict(f"step#{idx}", title, "fail" if problem else "pass", problem or "as expected", (),
                               [brief(e) for e in wit]))
            continue
        ev = _step_reply(view, idx, step)
        if ev is None:
            dropped = [e for e in view.history.of(STEP_DROPPED) if e.step == idx]
            why = f": dropped ({dropped[-1].reason})" if dropped else ""
            out.append(Verdict(f"step#{idx}", title, "fail", f"no reply recorded{why}", (),
                               [brief(e) for e in dropped[-1:]]))
            continue
        problem = _reply_problem(view, exp, ev)
        out.append(Verdict(f"step#{idx}", title, "fail" if problem else "pass", problem or "as expected", (),
                           [brief(ev)]))
    return out
