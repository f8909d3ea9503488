"""Lint for the host-side fault forms: where a host step and the event stream exist.

A crash at a host step (`wake-prompt`) and `events: synchronous` belong to the
fake opencode server; named on another kind of process they would never take
effect (a NOT REACHED fault, a mode that changes nothing), so lint refuses
them with what to write instead (validate.py reports these with file:line).
"""

from __future__ import annotations

from typing import Iterator

from simulator.scenario.errors import KeyPath
from simulator.scenario.kinds import HOST_CRASH_POINTS, HOSTS, hosts_with
from simulator.scenario.model import Scenario

_STREAM_HOSTS = " or ".join(hosts_with("event_stream"))


def fault_problems(spec: Scenario) -> Iterator[tuple[KeyPath, str, str]]:
    """(key path, problem, what to write instead) for each host-side form on the wrong kind of process."""
    kinds = {p.id: p.kind for p in spec.processes}
    for i, proc in enumerate(spec.processes):
        if proc.events != "queued" and not HOSTS[proc.kind].event_stream:
            yield (("processes", i, "events"), f"`events: {proc.events}` on `{proc.id}`, a {proc.kind} process",
                   f"the event stream is the fake {_STREAM_HOSTS} server's: set it on an {_STREAM_HOSTS} process, "
                   "or drop it")
    for i, step in enumerate(spec.steps):
        if step.action != "crash":
            continue
        args, kind = step.args, kinds.get(step.args.process)
        allowed = HOST_CRASH_POINTS.get(args.point or "")
        # A host that takes no crash point at all is refused in validate.py.
        if allowed is None or kind is None or not HOSTS[kind].crash_points or kind in allowed:
            continue
        key = "before" if args.before is not None else "after"
        yield (("steps", i, "crash", key), f"`{key}: {args.point}` in `{args.process}`, a {kind} process",
               f"the {args.point} step happens in {' and '.join(allowed)} processes only: crash one of those, "
               "or pick a statement of this process (e.g. `before: read-stamp`)")
