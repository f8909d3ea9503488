"""Races on demand: an `interleave` step's pause, the calls that run meanwhile, the resume (D-interleave-1).

The step arms a pause in the process hosting the paused session (or the
named polling process): OP_ARM_CRASH with `pause`, at a statement boundary
of a store call (simulator/child/crash_points.py). When that call reaches it,
the process sends `Held("paused")` instead of its reply and waits. The
dispatcher, waiting for that reply, hands the message here: each `run` call
goes to its own process as a command of its own (an `interleave-run` event
first) and runs to completion, then OP_RESUME lets the paused call go on,
and the step is fired. All of it happens in the serial order of the run, so
a scenario and seed give one interleaving and one history.

Where the paused call holds the write lock, every `run` command carries
LOCK_HELD_BY: its process stops before its first statement that needs the
lock (`Held("blocked")`) instead of spending its busy timeout. That is a
deadlock: recorded with both calls (`deadlock`), the paused call is resumed
and finishes first, then the blocked one goes on; the step is not fired and
its verdict fails naming both calls. Nothing waits longer than the wall
guard, as for every pipe wait.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol

from simulator.clock import VirtualClock
from simulator.engine.dispatch_log import DispatchLog
from simulator.engine.processes import Live, ProcessCommand, Processes
from simulator.engine.world import World
from simulator.events import DEADLOCK, INTERLEAVE_RUN
from simulator.protocol import (
    LOCK_HELD_BY, OP_ACT, OP_ARM_CRASH, OP_POLL, OP_RESUME, Command, Held, Reply, act_args, send_msg,
)
from simulator.scenario.kinds import HOSTS, STEPS, InterleaveArgs, ResumeArgs
from simulator.scenario.model import Scenario


class InterleaveRun(Protocol):
    """What the interleavings use of the run (the orchestrator)."""

    spec: Scenario
    world: World
    processes: Processes
    log: DispatchLog
    clock: VirtualClock
    hosting: dict[str, str]

    def fired(self, idx: int, detail: Any) -> None: ...

    def exchange(self, t: int, d: int, wave: list[ProcessCommand]) -> list[Optional[Reply]]: ...


class Waiter(Protocol):
    """The dispatcher's raw wait for one reply (None: the process died)."""

    def wait_reply(self, live: Live, cmd: Command) -> Optional[Reply]: ...


@dataclass
class _Paused:
    step: int
    live: Live
    cmd: Command
    detail: dict
    resumed: bool = False
    reply: Optional[Reply] = None   # its reply, when a deadlock let it finish while a run call waited

    def describe(self) -> str:
        d = self.detail
        return f"{self.live.label} {d['call']} statement {d['statement']} ({d['when']})"


class Interleaver:
    """Arms pauses and serves the processes that stop inside a store call."""

    def __init__(self, run: InterleaveRun, waiter: Waiter, resume: Callable[[int, ResumeArgs], None]) -> None:
        self.run = run
        self.waiter = waiter
        self.resume = resume   # starts a resumed process as the `resume` fault does, firing no step
        self.paused: Optional[_Paused] = None

    def arm(self, t: int, idx: int, d: int, args: InterleaveArgs) -> None:
        """The `interleave` fault step: arm its pause where its call runs (nothing if that process is gone)."""
        pause, run = args.pause, self.run
        live = run.processes.alive(pause.process or run.hosting.get(pause.session or ""))
        if live is None:
            return
        actor = run.world.session_id(pause.session) if pause.session else None
        run.exchange(t, d, [ProcessCommand(live, OP_ARM_CRASH, None, {
            "pause": True, "call": pause.call, "statement": pause.statement, "when": pause.when,
            "nth": pause.nth, "step": idx, "actor": actor})])

    def held(self, live: Live, cmd: Command, held: Held) -> Optional[tuple[Optional[Reply]]]:
        """`live` stopped while serving `cmd`. A 1-tuple holding its reply when it has already
        finished (a deadlock resumed it), else None: its reply is still to come."""
        if held.kind == "blocked" and self.paused is not None:
            self._deadlock(live, cmd, held)
            return None
        if held.kind != "paused" or self.paused is not None:
            self._resume(live)  # not ours to hold (a pause inside a run call): let it go on
            return None
        paused = self.paused = _Paused(held.detail["step"], live, cmd, held.detail)
        try:
            self._run_calls(paused)
        finally:
            self.paused = None
        if not paused.resumed:
            self._resume(live)
            self.run.fired(paused.step, {"paused": paused.describe(),
                                         "ran": len(self.run.spec.steps[paused.step].args.run)})
            return None
        return (paused.reply,)

    def _run_calls(self, paused: _Paused) -> None:
        """Each `run` call of the step, in order, to completion, in its own process."""
        run = self.run
        t = run.clock.now
        for entry in run.spec.steps[paused.step].args.run:
            action, args = entry.call()
            target, command, why = self._command(action, args, paused)
            d = run.log.next_dispatch()
            data: dict[str, Any] = {"step": paused.step, "action": action, "target": target}
            if why:
                data["skipped"] = why
            run.log.record(INTERLEAVE_RUN, **data)
            if why:
                continue
            if action == "resume":
                self.resume(t, args)
                continue
            if paused.detail.get("holds_lock") and not paused.resumed:
                command = command._replace(args={**command.args, LOCK_HELD_BY: paused.describe()})
            run.exchange(t, d, [command])

    def _command(self, action: str, args: Any, paused: _Paused) -> tuple[Optional[str], Any, Optional[str]]:
        """(the process a `run` call goes to, its command, why it cannot run or None)."""
        run = self.run
        if action == "resume":
            if run.processes.alive(args.process) is not None:
                return args.process, None, f"{args.process} is already running"
            if paused.detail.get("holds_lock") and not paused.resumed:
                return args.process, None, "the paused call holds the write lock its registration needs"
            return args.process, None, None
        if action == "poll":
            live = run.processes.alive(args.process)
            if live is None or not HOSTS[live.kind].polls:
                return args.process, None, f"{args.process} is not a running polling process"
            command = ProcessCommand(live, OP_POLL, None, {})
        else:
            session = STEPS[action].actor(args)
            live = run.processes.alive(run.hosting.get(session))
            if live is None:
                return None, None, f"session {session!r} has no running host process"
            command = ProcessCommand(live, OP_ACT, session, act_args(action, args))
        if live is paused.live:
            return live.label, None, f"{live.label} is the paused process"
        if paused.detail.get("holds_lock") and not paused.resumed and not HOSTS[live.kind].crash_points:
            # its store calls run in a child process, which cannot stop before the held lock (blocked)
            return live.label, None, f"{live.label}'s store calls run in child processes, and the paused call " \
                                     "holds the write lock"
        return live.label, command, None

    def _deadlock(self, blocked: Live, cmd: Command, held: Held) -> None:
        """A run call needs the write lock the paused call holds: record it, let the paused call
        finish, then let the blocked one go on."""
        paused, run = self.paused, self.run
        assert paused is not None
        action = (cmd.args.get("action") if isinstance(cmd.args, dict) else None) or cmd.op
        run.log.record(DEADLOCK, fresh=True, step=paused.step, paused=paused.describe(),
                       blocked=f"{blocked.label} {action}" + (f" by {cmd.session}" if cmd.session else "")
                       + f": {held.detail.get('sql', '')}")
        self._resume(paused.live)
        paused.resumed = True
        paused.reply = self.waiter.wait_reply(paused.live, paused.cmd)
        self._resume(blocked)

    def _resume(self, live: Live) -> None:
        run = self.run
        d = run.log.next_dispatch()
        try:
            send_msg(live.conn, Command(d, run.clock.now, OP_RESUME))
        except (OSError, EOFError):
            pass  # it died; the wait for its reply sees EOF
