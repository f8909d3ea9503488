"""Interleavings as exploration draws (`explore --interleave`, D-interleave-5).

In a serial world of two or more running processes, some tool calls of the
ordinary document get an `interleave` step just before them, at the same
instant: the call pauses at a drawn statement boundary (from 1 to the most
statements that call runs, `CALL_STATEMENTS`: a count past the call's own
is a NOT REACHED fault, never a failure) and one or two calls of sessions
hosted elsewhere, or a poll cycle of another polling process, run meanwhile.
They are drawn from a generator of their own (seeded from the run seed), so
the ordinary world a seed names stays the one it always drew. A drawn step
lint would refuse (the plan cannot see every hosting move) is dropped.
"""

from __future__ import annotations

import random
from typing import Any, Optional

from simulator.explore.plan import WorldPlan, action_of, actor_of, keep_fitting
from simulator.scenario.kinds import HOSTS
from simulator.scenario.model import Scenario
from simulator.scenario.validate import check_spec

# The tool calls that may pause, by the store call each makes, and the most statements one runs.
PAUSED_CALLS = {"send": "send", "broadcast": "broadcast", "read": "read", "register": "register",
                "unregister": "unregister", "status": "status"}
CALL_STATEMENTS = {"send": 7, "broadcast": 8, "read": 4, "register": 7, "unregister": 4, "status": 3}
# What a run call may be, with its weight: tool calls of another process's session, or its poll cycle.
RUN_CALLS = {"send": 5, "read": 3, "status": 2, "broadcast": 1, "register": 1, "poll": 2}


def interleave_rng(seed: int) -> random.Random:
    return random.Random(f"interleave-{seed}")


def add_interleavings(doc: dict[str, Any], seed: int) -> dict[str, Any]:
    """`doc` with interleave steps drawn in before some of its tool calls (unchanged where none fits)."""
    started = [p for p in doc["processes"] if p.get("start") != "never"]
    if doc.get("dispatch") == "concurrent" or len(started) < 2:
        return doc
    rng = interleave_rng(seed)
    rate = rng.uniform(0.15, 0.5)
    plan, steps = WorldPlan(doc["processes"]), []
    for step in doc["steps"]:
        if plan.problem(step) is None:
            drawn = _interleave(rng, plan, step) if rng.random() < rate else None
            if drawn is not None:
                steps.append(drawn)
            plan.apply(step)
        steps.append(step)
    return _lint_clean(keep_fitting({**doc, "steps": steps}))


def _interleave(rng: random.Random, plan: WorldPlan, step: dict[str, Any]) -> Optional[dict[str, Any]]:
    """An interleave step pausing `step`'s call, or None when it cannot pause or nothing could run."""
    action = action_of(step)
    actor = actor_of(step)
    if action not in PAUSED_CALLS or actor is None or step[action].get("as") is not None:
        return None
    owner = plan.host.get(actor)
    if not plan.runs(owner) or not HOSTS[plan.kind[owner]].crash_points:
        return None
    t = plan.effective(step.get("at", 0))
    run = [c for c in (_run_call(rng, plan, owner, t) for _ in range(rng.choice((1, 1, 2)))) if c]
    if not run:
        return None
    call = PAUSED_CALLS[action]
    pause = {"session": actor, "call": call, "statement": rng.randint(1, CALL_STATEMENTS[call]),
             "when": rng.choice(("before", "after"))}
    return {"at": step["at"], "interleave": {"pause": pause, "run": run}}


def _run_call(rng: random.Random, plan: WorldPlan, owner: str, t: int) -> Optional[dict[str, Any]]:
    # sessions of hosts whose store calls run in their own process (they see a held lock: `blocked`)
    others = [s for s, proc in plan.host.items() if proc != owner and plan.runs(proc) and plan.usable(s, t)
              and HOSTS[plan.kind[proc]].crash_points]
    kind = rng.choices(list(RUN_CALLS), weights=list(RUN_CALLS.values()))[0]
    if kind == "poll":
        polling = sorted(p for p in plan.alive if p != owner and HOSTS[plan.kind[p]].polls)
        return {"poll": {"process": rng.choice(polling)}} if polling else None
    if not others:
        return None
    session = rng.choice(sorted(others))
    if kind == "send":
        to = [s for s in sorted(plan.host) if s != session]
        return {"send": {"from": session, "to": rng.choice(to), "body": f"meanwhile {rng.randint(1, 999)}"}} \
            if to else None
    if kind == "broadcast":
        return {"broadcast": {"from": session, "body": f"all hands {rng.randint(1, 999)}"}}
    return {kind: {"session": session}}


def _lint_clean(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` without the interleave steps lint refuses (a pause whose call the session no longer makes)."""
    for _ in range(3):
        errors = check_spec(Scenario.model_validate(doc))
        bad = {e.key_path[1] for e in errors if e.key_path[:1] == ("steps",) and len(e.key_path) > 2
               and e.key_path[2] == "interleave"}
        if not bad:
            return doc
        doc = keep_fitting({**doc, "steps": [s for i, s in enumerate(doc["steps"]) if i not in bad]})
    return doc
