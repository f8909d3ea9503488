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


def crash_cut_short(crash: dict[str, Any], point: str) -> bool:
    """The `crash` event killed its process just before `point` (its statement never ran,
    its transaction never committed); a crash `after` a point left that work done."""
    data = data_of(crash)
    return data.get("point") == point and data.get("when", "before") == "before"


def crash_lost_a_stamp(crash: dict[str, Any]) -> bool:
    """The `crash` event fell between a wake prompt and its delivered stamp (R23): just
    before the stamp statement, or just after the prompt reached the session."""
    data = data_of(crash)
    return (crash_cut_short(crash, "delivered-stamp")
            or (data.get("point") == "wake-prompt" and data.get("when") == "after"))


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
            out.append(Verdict(f"fault#{idx}", title, "pass",
                               f"{where} took effect: {fired[idx]['data'].get('detail', '')}",
                               (), [brief(fired[idx])]))
        else:
            reason = step.kind.not_reached  # why a fault of its kind can fail to take effect
            wit = [brief(not_fired[idx])] if idx in not_fired else []
            out.append(Verdict(f"fault#{idx}", title, "not-reached",
                               f"{where} never took effect{': ' + reason if reason else ''}", (), wit))
    return out
