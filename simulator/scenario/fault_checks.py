"""Lint for the host-side fault forms: where a host step and the event stream exist.

A crash at a host step (`wake-prompt`) and `events: synchronous` belong to the
fake opencode server; named on another kind of process they would never take
effect (a NOT REACHED fault, a mode that changes nothing), so lint refuses
them with what to write instead (validate.py reports these with file:line).
"""

from __future__ import annotations

from typing import Iterator

from simulator.scenario.errors import KeyPath
from simulator.scenario.model import HOST_CRASH_POINTS, Scenario

# Kinds whose crash points are refused elsewhere (validate.py: claude-code runs none).
_CRASH_POINT_KINDS = ("opencode", "cursor")


def fault_problems(spec: Scenario) -> Iterator[tuple[KeyPath, str, str]]:
    """(key path, problem, what to write instead) for each host-side form on the wrong kind of process."""
    kinds = {p.id: p.kind for p in spec.processes}
    for i, proc in enumerate(spec.processes):
        if proc.events != "queued" and proc.kind != "opencode":
            yield (("processes", i, "events"), f"`events: {proc.events}` on `{proc.id}`, a {proc.kind} process",
                   "the event stream is the fake opencode server's: set it on an opencode process, or drop it")
    for i, step in enumerate(spec.steps):
        if step.action != "crash":
            continue
        args, kind = step.args, kinds.get(step.args.process)
        allowed = HOST_CRASH_POINTS.get(args.point or "")
        if allowed is None or kind is None or kind not in _CRASH_POINT_KINDS or kind in allowed:
            continue
        key = "before" if args.before is not None else "after"
        yield (("steps", i, "crash", key), f"`{key}: {args.point}` in `{args.process}`, a {kind} process",
               f"the {args.point} step happens in {' and '.join(allowed)} processes only: crash one of those, "
               "or pick a statement of this process (e.g. `before: read-stamp`)")
