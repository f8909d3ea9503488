"""The orchestrator's dispatch: commands down the pipes, replies back, under the wall guard.

`Dispatcher.exchange` sends one wave of commands (distinct processes), then
collects every reply: a fatal one stops the run (`SimulationError`), the
crashes of a harness's children fire their fault steps, follow-ups go on the
agenda. A reply is awaited in polls of the pipe of at most WAIT_SLICE_S under
the wall deadline (this process is never frozen, so a real-time wait is safe
here; pitfalls: only frozen children must not); EOF instead of a reply is a
crash point that fired (`crash` in the process's history), or an engine error.
It keeps what an error message names: the last command sent, formatted only
when a message shows it.

It sees the run through explicit objects: the processes, the agenda, the
log and clock, the fault steps a crash may fire and the callback that marks
one fired (the orchestrator's `fired`).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Mapping, Optional, Protocol

from multiprocess.connection import wait as connection_wait

from simulator.clock import VirtualClock
from simulator.engine.agenda import Agenda, HarnessFollowUp
from simulator.engine.dispatch_log import DispatchLog
from simulator.engine.processes import Live, ProcessCommand, Processes
from simulator.events import CRASH, PROCESS_EXIT
from simulator.history import read_events
from simulator.protocol import Command, Held, Reply, recv_msg, send_msg
from simulator.scenario.durations import format_duration

WAIT_SLICE_S = 0.5   # the longest single poll of a pipe: the wall guard is checked at least this often


class SimulationTimeout(RuntimeError):
    """The run outlived its wall-clock budget; every child was killed."""


class SimulationError(RuntimeError):
    """A harness failed, or the scenario asks for something the world cannot do."""


class FaultStatus(Protocol):
    """A fault step as crash detection sees it (the orchestrator's FaultState)."""

    fault: str
    process: Optional[str]
    fired: bool


class Dispatcher:
    """Sends commands and collects replies; notices crashes; names the last command for errors."""

    def __init__(self, processes: Processes, agenda: Agenda, log: DispatchLog, clock: VirtualClock, *,
                 faults: Mapping[int, FaultStatus], fired: Callable[[int, Any], None],
                 busy_timeout_ms: int, scenario: str, seed: int, wall_timeout_s: float) -> None:
        self.processes = processes
        self.agenda = agenda
        self.log = log
        self.clock = clock
        self.faults = faults
        self.fired = fired
        self.busy_timeout_ms = busy_timeout_ms
        self.scenario = scenario
        self.seed = seed
        self.wall_timeout_s = wall_timeout_s
        self.deadline = 0.0
        self.last_activity: dict[str, int] = {}    # session label -> virtual t of its last command
        self.lock_contended: set[int] = set()      # lock steps a store call had to wait for
        self._last_cmd: Optional[tuple] = None
        self.last_desc = "none yet"
        # Serves a process that stopped inside a store call (`Held`): the interleavings' (interleave.py).
        # A 1-tuple back holds the process's reply, already collected; None: wait on.
        self.held: Optional[Callable[[Live, Command, Held], Optional[tuple]]] = None

    @property
    def last_desc(self) -> str:
        """The last command sent, for error messages (built only when one is shown)."""
        if self._last_cmd is None:
            return self._last_text
        op, label, session, t = self._last_cmd
        return f"{op} to {label}" + (f" for {session}" if session else "") + f" at t={t}"

    @last_desc.setter
    def last_desc(self, text: str) -> None:
        self._last_text, self._last_cmd = text, None

    # -- the wall guard -----------------------------------------------------------

    def start_wall_guard(self) -> None:
        """The run's wall-clock budget starts now."""
        self.deadline = time.monotonic() + self.wall_timeout_s

    def check_wall(self) -> None:
        if time.monotonic() > self.deadline:
            raise self._timeout()

    def _timeout(self) -> SimulationTimeout:
        now = self.clock.now
        return SimulationTimeout(
            f"scenario {self.scenario!r} (seed {self.seed}) exceeded its wall-clock budget of "
            f"{self.wall_timeout_s:g}s at virtual time {format_duration(now)} ({now} ms); "
            f"last dispatch #{self.log.dispatch}: {self.last_desc}")

    # -- commands and replies ---------------------------------------------------------

    def exchange(self, t: int, d: int, wave: list[ProcessCommand]) -> list[Optional[Reply]]:
        """Send one wave of commands (distinct processes), then collect every reply."""
        sent = []
        for live, op, session, args in wave:
            cmd = Command(d, t, op, session, args)
            self._last_cmd = (op, live.label, session, t)  # formatted only when an error names it
            if session:
                self.last_activity[session] = t
            try:
                send_msg(live.conn, cmd)
            except (OSError, EOFError):
                pass  # it died; the wait below sees EOF
            sent.append((live, cmd))
        return [self.collect(live, cmd, floor=t) for live, cmd in sent]

    def collect(self, live: Live, cmd: Command, *, floor: float = -math.inf,
                doing: Optional[str] = None) -> Optional[Reply]:
        """Wait for the reply to `cmd` and act on it: a fatal one raises (naming what the process was
        `doing`, by default `on <op>`), its children's crashes fire their fault steps, its follow-ups go
        on the agenda no earlier than `floor`. None: the process died instead of answering."""
        reply = self._wait(live, cmd)
        if reply is None:
            return None
        if reply.fatal:
            raise SimulationError(reply.error or f"{live.label} failed {doing or 'on ' + cmd.op}")
        for crash in reply.crashes:  # a child of the harness hit a crash point; the harness lives on
            self._crash_fired(live, crash, exit_recorded=False)
        for fu in reply.followups:
            self.agenda.push(max(int(fu.at), floor), HarnessFollowUp(live.label, live.incarnation, fu))
        return reply

    def wait_any(self, lives: list[Live]) -> Live:
        """The first of `lives` with a reply (or EOF) waiting, which stays unread; the wall guard holds."""
        while True:
            ready = connection_wait([live.conn for live in lives], self._slice())
            if ready:
                return next(live for live in lives if live.conn in ready)

    def _slice(self) -> float:
        """How long the next wait on a pipe may last: up to WAIT_SLICE_S, never past the wall guard."""
        now = time.monotonic()
        if now > self.deadline:
            raise self._timeout()
        return min(self.deadline - now, WAIT_SLICE_S)

    def wait_reply(self, live: Live, cmd: Command) -> Optional[Reply]:
        """The reply to `cmd`, unprocessed (`collect` acts on it), or None: the process died."""
        return self._wait(live, cmd)

    def _wait(self, live: Live, cmd: Command) -> Optional[Reply]:
        """The reply to `cmd` (stale answers of an aborted wave skipped), or None at EOF (`_died`).
        A process that stops inside a store call on the way (`Held`) is served by `held` first."""
        started = time.monotonic()
        while True:
            if live.ready(self._slice()):
                try:
                    reply = recv_msg(live.conn)
                except (EOFError, OSError):
                    self._died(live)
                    return None
                if reply.dispatch != cmd.dispatch:
                    continue  # a stale answer left by an aborted wave
                if type(reply) is Held:
                    done = self.held(live, cmd, reply) if self.held is not None else None
                    if done is not None:
                        return done[0]
                    continue
                locks = self.processes.locks
                if locks and time.monotonic() - started > self.busy_timeout_ms / 2000:
                    self.lock_contended.update(locks)  # a store call had to wait for the holder
                return reply

    # -- crashes ----------------------------------------------------------------------

    def _died(self, live: Live) -> None:
        """EOF on a pipe: a crash point fired, or the harness died on its own (an engine error)."""
        self.processes.lost(live)
        crash = [e for e in read_events(self.processes.history_file(live)) if e.get("kind") == CRASH]
        if not crash:
            raise SimulationError(f"process {live.label} died unexpectedly (exit code {live.process.exitcode}) "
                                  f"during {self.last_desc}")
        self.log.record(PROCESS_EXIT, fresh=True, target=live.label, reason="crashed")
        self._crash_fired(live, crash[-1].get("data") or {}, exit_recorded=True)  # a line of its own file

    def _crash_fired(self, live: Live, data: dict, *, exit_recorded: bool) -> None:
        """A crash event of `live` (its own death, or one of its children's): fire the crash step it was armed by."""
        idx = data.get("step")
        if idx not in self.faults:
            idx = next((i for i, f in self.faults.items()
                        if f.fault == "crash" and f.process == live.label and not f.fired), None)
        if idx is not None and not self.faults[idx].fired:
            if not exit_recorded:
                self.log.next_dispatch()
            detail = {"point": data.get("point"), "sql": data.get("sql")}
            if data.get("when"):
                detail["when"] = data["when"]  # a crash after its step (before: the default, unrecorded)
            if not exit_recorded:
                detail["child"] = True  # the harness survived: one of its hook/MCP children died
            self.fired(idx, detail)


__all__ = ["Dispatcher", "FaultStatus", "SimulationError", "SimulationTimeout"]
