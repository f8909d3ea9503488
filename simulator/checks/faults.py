"""Fault verdicts: one per fault step, "pass" when it took effect, "not-reached" when it never did.

An `interleave` step whose run call needed the lock its paused call held is
"skipped" as a DEADLOCK naming both calls (`deadlock`: the design serialised
them, so the interleaving cannot happen there); one whose call never reached
its statement is NOT REACHED naming how many statements the call ran
(`pause-missed`).

Judged from the history alone (the orchestrator records `fault-fired` when a
fault takes effect and `fault-not-fired` at the end for one that never did),
so a run without the other checks still reports its faults.
"""

from __future__ import annotations

from simulator.checks.view import brief
from simulator.events import DEADLOCK, FAULT_FIRED, FAULT_NOT_FIRED, PAUSE_MISSED, Crash, Deadlock, PauseMissed
from simulator.history import History
from simulator.result import Verdict
from simulator.scenario.model import Scenario, format_duration


def crash_cut_short(crash: Crash, point: str) -> bool:
    """The `crash` event killed its process just before `point` (its statement never ran,
    its transaction never committed); a crash `after` a point left that work done."""
    return crash.point == point and (crash.when or "before") == "before"


def crash_lost_a_stamp(crash: Crash) -> bool:
    """The `crash` event fell between a wake prompt and its delivered stamp (R23): just
    before the stamp statement, or just after the prompt reached the session."""
    return crash_cut_short(crash, "delivered-stamp") or (crash.point == "wake-prompt" and crash.when == "after")


def fault_verdicts(spec: Scenario, history: History) -> list[Verdict]:
    """One verdict `fault#<index>` per fault step of `spec`, from the run's history."""
    fired = {e.step: e for e in history.of(FAULT_FIRED)}
    not_fired = {e.step: e for e in history.of(FAULT_NOT_FIRED)}
    deadlocks: dict[int, Deadlock] = {e.step: e for e in history.of(DEADLOCK)}
    missed: dict[int, PauseMissed] = {e.step: e for e in history.of(PAUSE_MISSED)}
    out = []
    for idx, step in enumerate(spec.steps):
        if not step.is_fault:
            continue
        where = f"step {idx} ({step.name + ', ' if step.name else ''}{step.action} at {format_duration(step.at)})"
        title = f"{step.action} fault"
        if idx in fired and idx not in not_fired:
            out.append(Verdict(f"fault#{idx}", title, "pass",
                               f"{where} took effect: {fired[idx].detail}",
                               (), [brief(fired[idx])]))
        elif idx in deadlocks:
            # The design serialised the two calls (the run call waited for the lock): the interleaving
            # asked for cannot happen there, which is no failure of the design (D-interleave-2).
            d = deadlocks[idx]
            out.append(Verdict(f"fault#{idx}", title, "skipped",
                               f"{where} DEADLOCK: the paused call ({d.paused}) holds the write lock that a "
                               f"run call needs ({d.blocked}); the paused call finished first, then the run "
                               "call: to interleave them, pause outside its transaction", (), [brief(deadlocks[idx])]))
        elif idx in missed:
            m = missed[idx]
            ran = (f"the longest of its {m.calls} {m.call} call(s) ran {m.longest} statement(s)" if m.calls
                   else f"no {m.call} call ran while it was armed")
            out.append(Verdict(f"fault#{idx}", title, "not-reached",
                               f"{where} NOT REACHED: statement {m.statement} of {m.call} never "
                               f"ran: {ran}", (), [brief(missed[idx])]))
        else:
            reason = step.kind.not_reached  # why a fault of its kind can fail to take effect
            wit = [brief(not_fired[idx])] if idx in not_fired else []
            out.append(Verdict(f"fault#{idx}", title, "not-reached",
                               f"{where} never took effect{': ' + reason if reason else ''}", (), wit))
    return out
