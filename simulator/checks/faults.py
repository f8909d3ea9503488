"""Fault verdicts: one per fault step, "pass" when it took effect, "not-reached" when it never did.

Judged from the history alone (the orchestrator records `fault-fired` when a
fault takes effect and `fault-not-fired` at the end for one that never did),
so a run without the other checks still reports its faults.
"""

from __future__ import annotations

from typing import Any

from simulator.checks.view import brief
from simulator.events import FAULT_FIRED, FAULT_NOT_FIRED, data_of, step_of
from simulator.result import Verdict
from simulator.scenario.model import Scenario, format_duration

# Why a fault of each kind can fail to take effect, for its not-reached message.
NOT_REACHED_REASONS = {
    "crash": "the process never reached the crash point's statement or step while it ran",
    "kill": "the process was not running",
    "lock": "no store call met the held lock",
    "fork": "the session's host was not running or refused the fork",
    "resume": "the resuming process did not start",
    "restart": "the daemon or its replacement did not start",
}


def crash_cut_short(crash: dict[str, Any], point: str) -> bool:
    """The `crash` event killed its process just before `point` (its statement never ran,
    its transaction never committed); a crash `after` a point left that work done."""
    data = data_of(crash)
    return data.get("point") == point and data.get("when", "before") == "before"


def crash_lost_a_stamp(crash: dict[str, Any]) -> bool:
    """The `crash` event fell between a wake prompt and its delivered stamp (R23): just
    before the stamp statement, or just after the prompt reached the session."""
    data = data_of(crash)
    return crash_cut_short(crash, "delivered-stamp") or (data.get("point") == "wake-prompt" and data.get("when") == "after")


def fault_verdicts(spec: Scenario, history: list[dict[str, Any]]) -> list[Verdict]:
    """One verdict `fault#<index>` per fault step of `spec`, from the run's history."""
    fired = {step_of(e): e for e in history if e.get("kind") == FAULT_FIRED}
    not_fired = {step_of(e): e for e in history if e.get("kind") == FAULT_NOT_FIRED}
    out = []
    for idx, step in enumerate(spec.steps):
        if not step.is_fault:
            continue
        where = f"step {idx} ({step.name + ', ' if step.name else ''}{step.action} at {format_duration(step.at)})"
        title = f"{step.action} fault"
        if idx in fired and idx not in not_fired:
            out.append(Verdict(f"fault#{idx}", title, "pass", f"{where} took effect: {fired[idx]['data'].get('detail', '')}",
                               (), [brief(fired[idx])]))
        else:
            reason = NOT_REACHED_REASONS.get(step.action)
            wit = [brief(not_fired[idx])] if idx in not_fired else []
            out.append(Verdict(f"fault#{idx}", title, "not-reached",
                               f"{where} never took effect{': ' + reason if reason else ''}", (), wit))
    return out
