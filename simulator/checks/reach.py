"""Reach claims: the situations a scenario says it reaches must be shown to happen.

A scenario lists `reaches: [re-nudge, rate-cap, ...]` (the `Reach` literal in
simulator.scenario.model). Each claim maps to a predicate over the history (and the
final db) that returns the few events showing the situation happened, or
nothing. A claim with no witness is "not-reached": the run must never pass
vacuously (design.md, "Reach, not just pass").
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from simulator.checks.registry import sample_row
from simulator.checks.view import RunView, brief
from simulator.checks.wakes import wakes_by_incarnation
from simulator.design import HOUR_MS, MAX_WAKES_PER_HOUR
from simulator.replies import FRAMED, IDENTITY, LEFT, SENT, decode_hook_line
from simulator.events import (
    ECHO, FORK, HOOK, POLL, PROCESS_START, SAMPLE, STATUS, STORE_ERROR, STREAM_EVENT, TOOL_RESULT,
    USER_PROMPT, WAKE, Event, Hook, Status, UserPrompt, Wake,
)
from simulator.result import Verdict
from simulator.scenario.model import Scenario
from simulator.scenario.durations import format_duration as span

Witness = Optional[list[Any]]  # records (or a sample reduced to one row: registry.sample_row)
REACHES: dict[str, tuple[str, Callable[[RunView], Witness]]] = {}
RULES: dict[str, tuple[str, ...]] = {}


def reach(name: str, description: str, *, rules: tuple[str, ...] = ()):
    """Register the predicate of one reach claim (a Reach literal) and the rules it shows at work."""
    def deco(fn: Callable[[RunView], Witness]):
        REACHES[name] = (description, fn)
        RULES[name] = tuple(rules)
        return fn
    return deco


def _reads_between(view: RunView, label: str, a: float, b: float) -> bool:
    """An ok, non-empty chat_read by `label` between history positions a and b."""
    return any(a < c.i < b and c.outcome.kind == FRAMED for c in view.mail.calls_of("read", label, ok=True))


@reach("re-nudge", "a second wake for a session whose mail was already woken and not read", rules=("R21", "R23"))
def _renudge(view: RunView) -> Witness:
    by: dict[str, list[Wake]] = {}
    for w in view.history.of(WAKE):
        by.setdefault(w.session, []).append(w)
    for label, ws in by.items():
        for a, b in zip(ws, ws[1:]):
            fresh = view.mail.new_mail(label, a.i, b.i)
            if not _reads_between(view, label, a.i, b.i) and b.count > fresh:
                return [a, b]
    return None


@reach("rate-cap", "a session woken 6 times within an hour by one process while its mail stayed unread", rules=("R22",))
def _rate_cap(view: RunView) -> Witness:
    for (_, _, label), ws in wakes_by_incarnation(view).items():
        for k in range(len(ws) - MAX_WAKES_PER_HOUR + 1):
            window = ws[k:k + MAX_WAKES_PER_HOUR]
            if window[-1].t - window[0].t >= HOUR_MS:
                continue
            if not _reads_between(view, label, window[0].i, window[-1].i):
                return [window[0], window[-1]]
            held = _cap_held(view, label, ws, k, MAX_WAKES_PER_HOUR)
            if held:
                return held
    return None


def _idle_at(view: RunView, proc: Optional[str], label: str, i: float) -> bool:
    """The session's last recorded status in `proc` before position i is idle and not
    compacting (no status event yet: a tab the harness counts idle)."""
    last: Optional[Status] = None
    for e in view.history.of(STATUS, session=label, proc=proc):
        if e.i < i:
            last = e
    return last is None or (last.status == "idle" and not last.compacting)


def _cap_held(view: RunView, label: str, ws: list[Wake], k: int, cap: int) -> Witness:
    """The cap visibly held a wake back from a session that reads every wake (ping-pong):
    after its 6 wakes in an hour, a poll of the same incarnation found it idle with mail
    newer than its last non-empty read, and no wake followed until the hour ran out."""
    window = ws[k:k + cap]
    held_until = window[0].t + HOUR_MS
    if len(ws) > k + cap and ws[k + cap].t < held_until:
        return None  # not held: the cap let a seventh through (P2's business)
    inc = view.hosting.inc_of(window[-1])
    proc = window[-1].proc
    reads = [c.i for c in view.mail.calls_of("read", label, ok=True) if c.outcome.kind == FRAMED]
    for p in view.history.of(POLL, proc=proc):
        if p.i <= window[-1].i or p.t >= held_until:
            continue
        if view.hosting.inc_of(p) is not inc or label not in (p.hosted or []):
            continue
        since = max([window[-1].i] + [r for r in reads if r < p.i])
        if view.mail.new_mail(label, since, p.i) and _idle_at(view, proc, label, p.i):
            return [window[0], window[-1], p]
    return None


@reach("ping-pong", "two sessions each sent at least 2 unscripted replies to the other", rules=("R22",))
def _ping_pong(view: RunView) -> Witness:
    sent: dict[tuple, list] = {}
    for c in view.mail.calls_of("send", ok=True):
        if c.result.step is not None:
            continue  # a scripted step, not an agent's reply
        to = view.names.label_for_name(c.outcome.to) if c.outcome.kind == SENT else None
        sent.setdefault((c.session, to), []).append(c)
    for (a, b), calls in sent.items():
        back = sent.get((b, a), [])
        if a != b and len(calls) >= 2 and len(back) >= 2:
            return [calls[1].result, back[1].result]
    return None


@reach("broadcast-skip", "a broadcast result naming skipped stale sessions", rules=("R12", "R35"))
def _broadcast_skip(view: RunView) -> Witness:
    return next(([c.result] for c in view.mail.calls_of("broadcast", ok=True)
                 if c.outcome.skipped), None)


@reach("adoption", "a hook line printed after a session-id fork", rules=("R33",))
def _adoption(view: RunView) -> Witness:
    for f in view.history.of(FORK):
        h = next((h for h in view.history.of(HOOK, session=f.session)
                  if h.i > f.i and decode_hook_line(h.line).kind == IDENTITY), None)
        if h:
            return [f, h]
    return None


@reach("rehost", "a restarted daemon re-hosted a dead one's sessions", rules=("R15",))
def _rehost(view: RunView) -> Witness:
    return next(([e] for e in view.history.of(PROCESS_START) if e.rehost_of), None)


@reach("graduation", "a rehosted session showed activity (in opencode: a status event)", rules=("R15",))
def _graduation(view: RunView) -> Witness:
    for inc in view.hosting.incs:
        for e in view.history.of(*view.hosting.activity_kinds(inc), proc=inc.proc):
            if e.session in inc.rehosted and e.i > inc.start_i and view.hosting.inc_of(e) is inc:
                return [inc.start_event, e]
    return None


@reach("stale", "a sample showing a registered session stale", rules=("R14",))
def _stale(view: RunView) -> Witness:
    for s in view.history.of(SAMPLE):
        for label, row in s.sessions.items():
            if row.registered and row.stale:
                return [sample_row(s, label)]
    return None


@reach("prune", "a session vanished from the directory without leaving", rules=("R26",))
def _prune(view: RunView) -> Witness:
    for label, prev, s, _row in view.mail.vanishings():
        return [sample_row(prev, label), sample_row(s, label)]
    return None


@reach("refusal", "a tool call refused (ok=false)", rules=("R9",))
def _refusal(view: RunView) -> Witness:
    return next(([e] for e in view.history.of(TOOL_RESULT) if not e.ok), None)


@reach("echo", "a [chat] echo bubble", rules=("R27",))
def _echo(view: RunView) -> Witness:
    return next(([e] for e in view.history.of(ECHO)), None)


@reach("tombstone-gate", "a registration refused by a leave tombstone", rules=("R7",))
def _tombstone_gate(view: RunView) -> Witness:
    for h in view.history.of(HOOK):
        if decode_hook_line(h.line).kind == LEFT:
            return [h]
    for leave in view.mail.leaves():
        label = leave.session
        back = next((e.i for e in view.mail.explicit_registers(label) if e.i > leave.i), None)
        tries = [e for e in view.history.of(STATUS, USER_PROMPT, session=label)
                 if e.i > leave.i and (back is None or e.i < back)
                 and (isinstance(e, UserPrompt) or e.status == "idle")]
        for t in tries:
            after = next((s for s in view.history.of(SAMPLE) if s.i > t.i), None)
            if after and label in after.sessions and not after.sessions[label].registered:
                return [leave, t, sample_row(after, label)]
    return None


@reach("store-busy", "a store failure the poller caught", rules=("R24",))
def _store_busy(view: RunView) -> Witness:
    return next(([e] for e in view.history.of(STORE_ERROR)), None)


@reach("event-in-wake", "a host event (a session's turn ending, a window change) handed to the runtime inside a wake "
       "prompt call, re-entering the poller while it delivers (events: synchronous)", rules=("R24",))
def _event_in_wake(view: RunView) -> Witness:
    return next(([e] for e in view.history.of(STREAM_EVENT) if e.inside == "wake"), None)


def _decision(h: Hook) -> str:
    return str(h.decision or "").lower()


@reach("stop-reminder", "a Claude Code Stop hook blocked the stop with a mail reminder", rules=("R36",))
def _stop_reminder(view: RunView) -> Witness:
    return next(([h] for h in view.history.of(HOOK) if h.hook == "Stop" and "block" in _decision(h)), None)


@reach("cursor-followup", "a Cursor stop hook returned a follow-up message", rules=("R36",))
def _cursor_followup(view: RunView) -> Witness:
    return next(([h] for h in view.history.of(HOOK) if h.hook == "stop"
                 and "followup" in _decision(h).replace("_", "").replace("-", "")), None)



def _t(witness: Any) -> int:
    """When a witness happened: a record, or a sample reduced to one row (a history line)."""
    return witness.t if isinstance(witness, Event) else witness["t"]


def check_reaches(spec: Scenario, view: RunView) -> list[Verdict]:
    """One verdict per claim in spec.reaches: pass with its witness, or not-reached."""
    out = []
    for name in spec.reaches:
        description, fn = REACHES[name]
        wit = fn(view)
        if wit:
            out.append(Verdict(f"reach:{name}", description, "pass", f"reached at t={span(_t(wit[-1]))}", RULES[name],
                               [brief(e) for e in wit if e]))
        else:
            out.append(Verdict(f"reach:{name}", description, "not-reached",
                               f"the scenario claims {name} ({description}) but the run never got there", RULES[name]))
    return out
