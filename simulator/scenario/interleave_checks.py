"""Lint for `interleave` steps: a pause the run could never reach, or run calls that could never run.

A pause is refused (validate.py reports it with file:line) when its session
never makes the call it names after the step (no later step of that action,
no agent turn or poll cycle that makes it), when its process has exited by
then (killed, restarted or crashed before, and nothing brought the session
back), when its host runs its store calls in other processes (a Claude Code
host), when the run dispatches same-time steps as one wave (`dispatch:
concurrent`: the serial order is the point), and when a run call acts from
the paused process itself (it cannot serve a call while it waits).
"""

from __future__ import annotations

from typing import Iterator, Optional

from simulator.scenario.errors import KeyPath
from simulator.scenario.kinds import (
    ACTION_STORE_CALLS, AGENT_STORE_CALLS, HOSTS, POLL_SESSION_CALLS, STEPS, InterleaveArgs, hosts_with,
)
from simulator.scenario.model import Scenario

Problem = tuple[KeyPath, str, str]
# Steps after which a process is gone until a resume or restart brings a session back.
_ENDS_PROCESS = ("kill", "restart")


def interleave_problems(spec: Scenario) -> Iterator[Problem]:
    """(key path, problem, what to write instead) for each interleave step the run could not carry out."""
    for i, step in enumerate(spec.steps):
        if step.action != "interleave":
            continue
        base: KeyPath = ("steps", i, "interleave")
        if spec.dispatch == "concurrent":
            yield (("dispatch",), "an `interleave` step in a run with `dispatch: concurrent`",
                   "drop `dispatch: concurrent`: an interleaving orders the calls itself, one at a time")
        yield from _pause_problems(spec, i, base, step.args)
        yield from _run_problems(spec, base, step.args)


def _owner(spec: Scenario, args: InterleaveArgs) -> Optional[str]:
    """The declared process the pause starts in (its session's first host, or the named process)."""
    if args.pause.process is not None:
        return args.pause.process
    return next((p.id for p in spec.processes for s in p.sessions if s.id == args.pause.session), None)


def _pause_problems(spec: Scenario, idx: int, base: KeyPath, args: InterleaveArgs) -> Iterator[Problem]:
    pause, owner = args.pause, _owner(spec, args)
    procs = {p.id: p for p in spec.processes}
    if owner not in procs:
        return  # an undefined label: validate.py names it
    key = "session" if pause.session else "process"
    kind = procs[owner].kind
    if not HOSTS[kind].crash_points:
        yield (base + ("pause", key), f"a pause in `{owner}`, a {kind} process, whose store calls run in child "
               "processes", f"pause a session of a process of kind {' or '.join(hosts_with('crash_points'))}")
        return
    if pause.process is not None and not HOSTS[kind].polls:
        yield (base + ("pause", "process"), f"a pause in the poll cycle of `{owner}`, a {kind} process",
               f"name a polling ({' or '.join(hosts_with('polls'))}) process, or `session:` for a tool call")
        return
    gone = _exit_before(spec, idx, owner, pause.session)
    if gone is not None:
        yield (base + ("pause", key), f"a pause in `{owner}`, which has exited by then (steps[{gone}] "
               f"{spec.steps[gone].action})", "move the interleave step before the process ends, or name a session "
               "of a running process")
        return
    makes = _calls_made(spec, idx, owner, pause.session)
    if pause.call not in makes:
        who = f"session `{pause.session}`" if pause.session else f"process `{owner}`"
        yield (base + ("pause", "call"), f"{who} never makes a {pause.call} call after this step",
               f"pause a call it makes ({', '.join(sorted(makes)) or 'none: add a step for it'}), or add a step "
               f"that makes a {pause.call} call at or after this one")


def _exit_before(spec: Scenario, idx: int, owner: str, session: Optional[str]) -> Optional[int]:
    """The step (at or before `idx`'s time) that ended `owner` for good before `idx`, if any."""
    at, ended = spec.steps[idx].at, None
    for j, step in enumerate(spec.steps[:idx]):
        if step.at > at:
            break
        if step.action in _ENDS_PROCESS and step.args.process == owner:
            ended = j
        elif step.action == "crash" and step.args.process == owner and step.args.point is not None:
            ended = j  # a named crash point armed earlier may already have fired
        elif step.action in ("resume", "restart") and session is not None and _brings_back(step, session):
            ended = None
    return ended


def _brings_back(step, session: str) -> bool:
    return (step.action == "resume" and step.args.session == session) or step.action == "restart"


def _calls_made(spec: Scenario, idx: int, owner: str, session: Optional[str]) -> set[str]:
    """The store calls the pause's owner makes at or after step `idx` (as lint knows them)."""
    at, made = spec.steps[idx].at, set()
    proc = next(p for p in spec.processes if p.id == owner)
    if HOSTS[proc.kind].polls:  # a session's own: the cycle's calls that name it among their arguments
        made.update(ACTION_STORE_CALLS["poll"] if session is None else POLL_SESSION_CALLS)
    for step in spec.steps[idx + 1:]:
        if step.at < at or step.is_fault:
            continue
        kind = STEPS[step.action]
        actor = kind.actor(step.args) if kind.actor_key else None
        if session is None or actor == session:
            made.update(ACTION_STORE_CALLS.get(step.action, ()))
    for sess in proc.sessions if session is None else [s for s in proc.sessions if s.id == session]:
        made.update(AGENT_STORE_CALLS.get(getattr(sess.agent, "kind", "reader"), ()))
    return made


def _run_problems(spec: Scenario, base: KeyPath, args: InterleaveArgs) -> Iterator[Problem]:
    owner = _owner(spec, args)
    hosts = {s.id: p.id for p in spec.processes for s in p.sessions}
    for n, entry in enumerate(args.run):
        action, call_args = entry.call()
        where = call_args.process if action == "poll" else hosts.get(STEPS[action].actor(call_args))
        if where is not None and where == owner:
            yield (base + ("run", n, action), f"a run call from `{where}`, the process whose call pauses",
                   "run calls of sessions hosted by other processes: the paused process cannot serve one "
                   "while it waits")
