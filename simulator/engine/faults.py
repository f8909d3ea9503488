"""Applying a scenario's fault steps in the orchestrator (the parent's side).

Each fault step is recorded as `fault` when applied and `fault-fired` when it
took effect (docs/history.md); one that never takes effect is reported as
`fault-not-fired` at the end and fails its verdict as not reached.

- kill: SIGKILL now; the process's sessions are left unhosted.
- crash: OP_ARM_CRASH to the process (the named step or statement, `before`
  or `after` it); fired when it dies with a `crash` event.
- sleep: no dispatch in [t, t+for): polls and samples in the window are
  dropped, expectations in it are observed at once (the sleep-start state,
  recorded at their own t), everything else waits for the wake; every live
  poller beats once at the wake, before anything else due then, and goes on
  from there.
- resume: fork the named `start: never` process with `-s <id>` / `-c` (or
  the step's `argv`, `{id}` expanded) in the session's directory, listing
  the step's `listing` or every session that lived there; the session's
  hosting moves there.
- restart: SIGKILL the daemon, fork `into` with the same state dir, directory
  and open tabs (rehost grace).
- fork: OP_FORK to the Claude Code host with a fresh host id from the rng.
- lock: a holder process takes the write lock at t and releases it at t+for;
  fired if a store call failed (`store-error`) or had to wait meanwhile.
- retry: OP_RETRY to the session's host, which calls the session's last
  tool call (of `tool`) again `times` times with identical arguments (its
  first answer timed out after the transaction committed); fired when it did.
- reload: OP_RELOAD to the opencode process: a fresh thatch runtime in the
  same process (same pid), without the old one's in-memory state.
- interleave: arm a pause at a statement boundary of a store call; when it is
  reached, the step's other calls run, then the call goes on (interleave.py);
  fired then, or a deadlock verdict when a run call needs the lock it holds.

A new fault kind is declared, with its arguments model and traits, in
simulator/scenario/kinds.py, and handled here in `FAULTS`; what happens
inside a child (a crash point) is simulator/child/crash_points.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Protocol

from pydantic import BaseModel

from simulator import clock as vclock
from simulator.engine.agenda import Agenda, LockRelease, Poll, SleepEnd
from simulator.engine.dispatch_log import DispatchLog
from simulator.engine.processes import Launch, Live, ProcessCommand, Processes
from simulator.engine.world import World
from simulator.events import FAULT, SLEEP_START
from simulator.protocol import OP_ARM_CRASH, OP_FORK, OP_RELOAD, OP_RETRY, Reply
from simulator.scenario.kinds import (
    ARGV_PLACEHOLDER, HOSTS, OPENCODE, CrashArgs, ForkArgs, InterleaveArgs, LockArgs, ProcessArg, ReloadArgs,
    RestartArgs, ResumeArgs, RetryArgs, SleepArgs, StallArgs,
)


class FaultEngine(Protocol):
    """What a fault step may use of the orchestrator."""

    world: World
    processes: Processes
    agenda: Agenda
    log: DispatchLog
    hosting: dict[str, str]            # session label -> process label hosting it now
    session_dir: dict[str, Path]       # session label -> the directory it lives in
    last_activity: dict[str, int]      # session label -> virtual t of its last command
    sleep_until: Optional[int]

    def fired(self, idx: int, detail: Any) -> None: ...

    def exchange(self, t: int, d: int, wave: list[ProcessCommand]) -> list[Optional[Reply]]: ...

    def start_process(self, t: int, label: str, launch: Launch = Launch()) -> Live: ...

    def arm_pause(self, t: int, idx: int, d: int, args: InterleaveArgs) -> None: ...


def apply(engine: FaultEngine, t: int, idx: int, action: str, args: BaseModel) -> None:
    """Record the fault step `idx` (`fault`) in a new dispatch and apply it."""
    d = engine.log.next_dispatch()
    engine.log.record(FAULT, fault=action, step=idx, args=args.model_dump(mode="json", by_alias=True))
    FAULTS[action](engine, t, idx, d, args)


def _kill(engine: FaultEngine, t: int, idx: int, d: int, args: ProcessArg) -> None:
    live = engine.processes.alive(args.process)
    if live is None:
        return
    engine.processes.kill(live, "killed")
    engine.fired(idx, {"target": args.process})


def _crash(engine: FaultEngine, t: int, idx: int, d: int, args: CrashArgs) -> None:
    live = engine.processes.alive(args.process)
    if live is None:
        return
    nth = args.nth if "nth" in args.model_fields_set else None  # None: the named point's own default
    engine.exchange(t, d, [ProcessCommand(live, OP_ARM_CRASH, None, {
        "point": args.point, "sql": args.sql, "nth": nth, "step": idx, "when": args.timing,
        "call": args.call, "statement": args.statement})])


def _sleep(engine: FaultEngine, t: int, idx: int, d: int, args: SleepArgs) -> None:
    until = t + args.duration
    engine.sleep_until = until
    engine.log.record(SLEEP_START, until=until)
    engine.fired(idx, {"until": until})
    for live in engine.processes.live.values():
        live.poll_gen += 1  # the timers in the window are lost; the wake restarts them
    engine.agenda.push(until, SleepEnd(idx))


def _resume(engine: FaultEngine, t: int, idx: int, d: int, args: ResumeArgs) -> None:
    label, world = args.session, engine.world
    sid = world.session_id(label)
    directory = engine.session_dir.get(label) or world.procs[world.session_proc[label]].directory
    dir_sessions = _directory_listing(engine, args.listing, directory)
    if args.argv is not None:
        # The author's whole command line; `{id}` is the resumed session's id.
        argv, how = [a.replace(ARGV_PLACEHOLDER, sid) for a in args.argv], "argv"
        startup = None
    else:
        argv, how = None, args.how
        startup = ("-s", sid) if args.how == "-s" else ("-c", None)
    cmdline = argv if argv is not None else ([OPENCODE, "-s", sid] if args.how == "-s" else [OPENCODE, "-c"])
    opens = opened_session(cmdline, dir_sessions, world.names_by_label())
    # The session the command line opens instead is a tab of the new process too: its
    # server has it and can prompt it (a `-c` continuing the newest session).
    also = (opens,) if opens is not None and opens != label else ()
    live = engine.start_process(t, args.process, Launch(
        extra=(label, *also), directory=directory, startup=startup, directory_sessions=dir_sessions,
        resumed=label, how=how, argv=argv, record={"opens": opens}))
    if live.alive:
        detail = {"target": args.process, "session": label, "how": how}
        if argv is not None:
            detail["argv"] = argv
        engine.fired(idx, detail)


def _directory_listing(engine: FaultEngine, listing: Optional[list[str]], directory: Path) -> list[dict[str, Any]]:
    """What opencode lists for the directory: the step's own `listing` (labels,
    any directory: the author states what opencode finds), else every session
    that lived there."""
    if listing is not None:
        listed = list(dict.fromkeys(listing))
    else:
        listed = [other for other, odir in engine.session_dir.items() if odir == directory]
    out = []
    for other in listed:
        info = engine.world.session_info(other)
        out.append({"id": info.session_id, "parent_id": info.parent_id, "label": other,
                    "updated_ms": vclock.epoch_ms(engine.last_activity.get(other, info.spec.start))})
    return out


def opened_session(argv: list[str], listing: list[dict], ids: dict[str, str]) -> Optional[str]:
    """The label of the session opencode itself opens for `argv`, or None.

    The simulator's own model of opencode's command line, kept apart from
    the code under test's own parser on purpose: the checkers judge a resume
    by it (a resumed session the command line does not open is hosted only
    once it is used, D-sim-22), so it must not come from the code under test. `-s ID` /
    `--session ID` / `--session=ID` / `-s=ID` open ID (the first one wins,
    over `-c` too); a flag with no value opens nothing; `-c` / `--continue`
    opens the newest top-level session of `listing`; `--` ends the flags.
    """
    by_id = {sid: label for label, sid in ids.items()}
    session, cont = None, False
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg in ("-s", "--session"):
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            if nxt and not nxt.startswith("-"):
                session = session or nxt
        elif arg.startswith(("--session=", "-s=")):
            session = session or arg.split("=", 1)[1] or None
        elif arg in ("-c", "--continue"):
            cont = True
    if session is not None:
        return by_id.get(session)
    if cont:
        top = [s for s in listing if not s.get("parent_id")]
        return max(top, key=lambda s: s.get("updated_ms") or 0)["label"] if top else None
    return None


def _restart(engine: FaultEngine, t: int, idx: int, d: int, args: RestartArgs) -> None:
    old = engine.processes.live.get(args.process)
    if old is None:
        return
    # The new daemon re-opens every tab the old one had: the sessions it started with (one a later
    # `-c` elsewhere also opened is still open here) and those that joined it since (a fork's older id).
    tabs = list(old.ctx.sessions)
    tabs += [s for s, host in engine.hosting.items() if host == args.process and s not in tabs]
    engine.processes.kill(old, "restart")
    live = engine.start_process(t, args.into, Launch(
        extra=tuple(tabs), directory=old.ctx.directory, state_dir=old.ctx.state_dir,
        rehost_grace_ms=args.grace, rehost_of=args.process))
    if live.alive:
        engine.fired(idx, {"target": args.into, "rehost_of": args.process, "sessions": tabs})


def _fork(engine: FaultEngine, t: int, idx: int, d: int, args: ForkArgs) -> None:
    live = engine.processes.alive(engine.hosting.get(args.session))
    if live is None:
        return
    old_id = engine.world.session_id(args.session)
    new_id = engine.world.new_host_id(args.session, args.host_id)
    op_args = {"session": args.session, "new_host_id": new_id, "step": idx}
    if args.older_as:
        op_args["older_as"] = args.older_as
    replies = engine.exchange(t, d, [ProcessCommand(live, OP_FORK, args.session, op_args)])
    if replies and replies[0] is not None and replies[0].ok:
        detail = {"session": args.session, "new_host_id": new_id}
        if args.older_as:
            # The older id keeps running in the same host: its own label from now on.
            engine.world.keep_older(args.session, args.older_as, old_id)
            engine.hosting[args.older_as] = live.label
            engine.session_dir[args.older_as] = engine.session_dir.get(args.session) or live.ctx.directory
            detail["older_as"] = args.older_as
        engine.fired(idx, detail)


def _lock(engine: FaultEngine, t: int, idx: int, d: int, args: LockArgs) -> None:
    engine.processes.hold_lock(idx, d)
    engine.agenda.push(t + args.duration, LockRelease(idx))


def _stall(engine: FaultEngine, t: int, idx: int, d: int, args: StallArgs) -> None:
    """Poll jitter: the process's poll timer is lost for `for` (its event loop blocked), then it
    polls at once and every interval after: cycles in between are skipped, the next one is late."""
    live = engine.processes.alive(args.process)
    if live is None or not HOSTS[live.ctx.kind].polls:
        return
    live.poll_gen += 1
    engine.agenda.push(t + args.duration, Poll(live.label, live.incarnation, live.poll_gen))
    engine.fired(idx, {"target": args.process, "until": t + args.duration})
def _retry(engine: FaultEngine, t: int, idx: int, d: int, args: RetryArgs) -> None:
    live = engine.processes.alive(engine.hosting.get(args.session))
    if live is None:
        return
    op_args = {"session": args.session, "tool": args.tool, "times": args.times, "step": idx}
    replies = engine.exchange(t, d, [ProcessCommand(live, OP_RETRY, args.session, op_args)])
    if replies and replies[0] is not None and replies[0].ok:
        engine.fired(idx, {"session": args.session, **(replies[0].result or {})})


def _interleave(engine: FaultEngine, t: int, idx: int, d: int, args: InterleaveArgs) -> None:
    engine.arm_pause(t, idx, d, args)


def _reload(engine: FaultEngine, t: int, idx: int, d: int, args: ReloadArgs) -> None:
    live = engine.processes.alive(args.process)
    if live is None:
        return
    replies = engine.exchange(t, d, [ProcessCommand(live, OP_RELOAD, None, {"step": idx})])
    if replies and replies[0] is not None and replies[0].ok:
        engine.fired(idx, {"target": args.process})


# The fault kind of a step -> what the orchestrator does for it (a layout test holds it equal to the
# fault kinds of simulator/scenario/kinds.py).
FAULTS: dict[str, Callable[[FaultEngine, int, int, int, Any], None]] = {
    "kill": _kill,
    "crash": _crash,
    "sleep": _sleep,
    "resume": _resume,
    "restart": _restart,
    "fork": _fork,
    "lock": _lock,
    "stall": _stall,
    "retry": _retry,
    "reload": _reload,
    "interleave": _interleave,
}
