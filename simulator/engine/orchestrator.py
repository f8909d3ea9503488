"""The orchestrator: owns virtual time and the agenda, forks the harnesses, drives them.

One `Orchestrator` runs one scenario. Its agenda (agenda.py) is ordered by
`(t, priority, insertion seq)`: process starts, scripted steps, each opencode
process's poll timer, follow-ups the harnesses ask for (turn ends, windows),
samples of the directory, expectation observations, fault bookkeeping.
Popping an entry moves the virtual clock there and runs it; one that becomes
a command goes to the `Dispatcher` (dispatch.py): a `Command` down the
process's pipe, then a blocking wait for its `Reply` under the real-time wall
guard, crash detection, the last command for error messages.

It holds its collaborators, each given only what it uses (D-sim-29):
`Processes` (forks and reaps the children), `Dispatcher`, `Observer`
(samples, expectation facts; it sends a roster's `list` through the
dispatcher's `exchange`), `DispatchLog` (its own history lane and the
dispatch counter), `Windows` (the windowed engine, through `WindowedRun`
and the dispatcher); fault steps (faults.py) see it as a `FaultEngine`.

Invariants:
- no SQLite connection is open in this process at any fork (`Processes.fork`
  asserts it); samples use a short-lived connection closed before returning;
- serial dispatch (the default) runs one command at a time in agenda order,
  so a seed gives a byte-identical history; `dispatch: concurrent` sends all
  commands due at the same virtual time to distinct processes as one wave
  (same dispatch number) before collecting the replies;
- every event the orchestrator records that causes a dispatch carries that
  dispatch number; every reaction to a reply gets a fresh one (history.merge
  puts the orchestrator first within a dispatch);
- whatever happens, `run()` leaves no child behind (SIGTERM, grace, SIGKILL).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import multiprocess
from simulator import clock as vclock
from simulator import design
from simulator.engine import faults
from simulator.engine.agenda import (
    Agenda, End, Entry, Expect, ExpectFirst, HarnessFollowUp, LockRelease, Phase, Poll, Sample, SleepEnd, StartProcess,
    Step,
)
from simulator.engine.dispatch import Dispatcher, SimulationError, SimulationTimeout
from simulator.engine.dispatch_log import DispatchLog
from simulator.engine.interleave import Interleaver
from simulator.engine.observer import Observer, observations
from simulator.child.preload import preload
from simulator.engine.processes import Launch, Live, ProcessCommand, Processes
from simulator.engine.window import DEFAULT_ENGINE, ENGINES, Windows
from simulator.engine.world import DESIGN_BUSY_TIMEOUT_MS, World
from simulator.events import (
    FAULT_FIRED, FAULT_NOT_FIRED, LOCK_RELEASED, PHASE, PROCESS_START, RUN_END, RUN_START, SLEEP_END, STEP_DROPPED,
    STORE_ERROR,
)
from simulator.history import merge, read_events
from simulator.protocol import OP_ACT, OP_POLL, OP_START, Reply, act_args
from simulator.scenario.kinds import HARNESS, HOSTS, MACHINE, PROCESS, InterleaveArgs, ProcessArg, ResumeArgs
from simulator.scenario.model import Scenario
from simulator.scenario.model import Step as ScenarioStep
from simulator.sut import CORE, Sut

STOP_GRACE_S = 2.0
LOCK_BUSY_TIMEOUT_MS = 20  # short: a writer meeting the held lock fails fast (StoreBusy) instead of stalling the run
# A checkout keeps the design's busy timeout (world.DESIGN_BUSY_TIMEOUT_MS) under a lock fault too: it has no
# retry, so 20 ms would fail its calls on any other process's write outside the lock, which P15 then judges
# (D-sut-13).
PROGRESS_EVERY = 64        # dispatches between two progress reports


@dataclass
class FaultState:
    step: int
    fault: str
    process: Optional[str] = None
    fired: bool = False
    detail: Any = None


@dataclass
class Outcome:
    """What the orchestrator hands to `api.run_scenario`."""

    history: list[dict[str, Any]]
    faults: dict[int, FaultState]
    run_info: dict[str, Any]
    virtual_ms: int
    dispatches: int
    error: Optional[str] = None


@dataclass(frozen=True)
class SystemUnderTest:
    """What the engine runs, bound by its caller (simulator.api): the fake host a harness process
    builds, and how the run's database comes to exist. The engine, its sampler and the checkers
    never import the code under test themselves, so none of them can take its logic."""

    make_harness: Callable[..., Any]            # (ctx, recorder) -> harness, inside the fork
    create_database: Callable[[Path], None]     # schema and migrations, then closed
    sut: Sut = CORE                             # thatch_core, or the checkout each harness serves by sidecar


class Orchestrator:
    """Runs one scenario (agenda, clock, steps) with processes, dispatch, observer and log as collaborators."""

    def __init__(self, spec: Scenario, run_dir: Path, system: SystemUnderTest, *, seed: Optional[int] = None,
                 wall_timeout_s: float = 120.0,
                 overrides: Optional[dict] = None, sample_interval_ms: Optional[int] = None,
                 progress: Optional[Callable[[int, int], None]] = None, busy_timeout_ms: Optional[int] = None,
                 stop_grace_s: float = STOP_GRACE_S, engine: Optional[str] = None) -> None:
        self.spec = spec
        self.engine = engine or os.environ.get("THATCH_SIM_ENGINE") or DEFAULT_ENGINE
        if self.engine not in ENGINES:
            raise ValueError(f"unknown engine {self.engine!r}: expected one of {', '.join(ENGINES)}")
        self.seed = spec.seed if seed is None else seed
        self.run_dir = Path(run_dir)
        fails_fast = any(s.action == "lock" for s in spec.steps) and system.sut.is_core
        self.world = World(spec, self.run_dir, self.seed, dict(overrides or {}),
                           busy_timeout_ms or (LOCK_BUSY_TIMEOUT_MS if fails_fast else DESIGN_BUSY_TIMEOUT_MS),
                           system.sut.checkout)
        self.clock = vclock.VirtualClock()
        self.log = DispatchLog(self.clock)
        self.agenda = Agenda()
        self.system = system
        self.processes = Processes(multiprocess.get_context("fork"), self.world, self.log, self.clock,
                                   make_harness=system.make_harness, stop_grace_s=stop_grace_s)
        self.faults = {i: FaultState(i, s.action, getattr(s.args, "process", None))
                       for i, s in enumerate(spec.steps) if s.is_fault}
        self.dispatcher = Dispatcher(self.processes, self.agenda, self.log, self.clock, faults=self.faults,
                                     fired=self.fired, busy_timeout_ms=self.world.busy_timeout_ms,
                                     scenario=spec.name, seed=self.seed, wall_timeout_s=wall_timeout_s)
        self.interleaver = Interleaver(self, self.dispatcher, self._resume_within)
        self.dispatcher.held = self.interleaver.held
        self.observer = Observer(spec, self.world, self.log, self.dispatcher.exchange, self.running_host,
                                 self.processes.guard)
        self.progress = progress
        self.concurrent = spec.dispatch == "concurrent"
        # Concurrent dispatch keeps its waves (its races are the point); windows are a serial engine.
        self.windows = Windows(self, self.dispatcher) if self.engine == "windowed" and not self.concurrent else None
        self.end_t = spec.duration + spec.drain
        self.sample_interval = sample_interval_ms or min((p.poll_interval for p in spec.processes), default=30_000)
        self.hosting: dict[str, str] = {}          # session label -> process label hosting it now
        self.session_dir: dict[str, Path] = {}     # session label -> the directory it lives in
        self.titles: dict[str, str] = {}            # session label -> the title its last `title` step set
        self.last_activity = self.dispatcher.last_activity  # session label -> virtual t of its last command
        self.sleep_until: Optional[int] = None
        self._progress_at = 0

    # -- public -------------------------------------------------------------

    def run(self) -> Outcome:
        self.dispatcher.start_wall_guard()
        error = None
        try:
            try:
                self._setup()
                self._loop()
            except SimulationError as err:
                error = str(err)
            self._shutdown()
        except SimulationTimeout:
            self.processes.kill_all()
            self._finish(partial=True)
            raise
        finally:
            self.processes.kill_all()
            self.processes.guard.close()
        history = self._finish()
        return Outcome(history, self.faults, self.run_info(), self.clock.now, self.log.dispatch, error)

    def run_info(self) -> dict[str, Any]:
        return {
            "scenario": self.spec.name, "seed": self.seed, "dispatch_mode": self.spec.dispatch,
            "run_dir": str(self.run_dir), "db_path": str(self.world.db_path),
            "epoch_ms": vclock.START_EPOCH_MS, "duration_ms": self.spec.duration, "drain_ms": self.spec.drain,
            "end_ms": self.end_t, "stale_ms": design.STALE_MS, "sample_interval_ms": self.sample_interval,
            "poll_interval_ms": {p.id: p.poll_interval for p in self.spec.processes},
            "session_ids": {k: list(v) for k, v in self.world.session_ids.items()},
            "row_ids": {k: self.world.row_ids(k) for k in self.world.session_ids},
            "dispatches": self.log.dispatch, "virtual_ms": self.clock.now,
            "faults": {i: {"fault": f.fault, "fired": f.fired, "detail": f.detail} for i, f in self.faults.items()},
            # the system under test: thatch_core, or a checkout (which runs its own design)
            "sut": self.world.checkout and str(self.world.checkout), "sut_is_checkout": self.world.checkout is not None,
        }

    def running_host(self, session: str) -> Optional[Live]:
        """The running process hosting `session` now, if any."""
        return self.processes.alive(self.hosting.get(session))

    def exchange(self, t: int, d: int, wave: list[ProcessCommand]) -> list[Optional[Reply]]:
        """Send one wave of commands and collect the replies (the dispatcher's; a FaultEngine's)."""
        return self.dispatcher.exchange(t, d, wave)

    def arm_pause(self, t: int, idx: int, d: int, args: InterleaveArgs) -> None:
        """An `interleave` step (a FaultEngine's): the interleaver arms its pause."""
        self.interleaver.arm(t, idx, d, args)

    def _resume_within(self, t: int, args: ResumeArgs) -> None:
        """A resume among an interleaving's run calls: the `resume` fault's start, firing no step of its own."""
        faults.FAULTS["resume"](_FiringNothing(self), t, -1, self.log.dispatch, args)

    # -- setup, agenda --------------------------------------------------------

    def _setup(self) -> None:
        preload(self.world.overrides)
        self.world.build()
        self.system.create_database(self.world.db_path)  # schema first, then nothing open before any fork
        self.log.open(self.run_dir)
        self.log.record(RUN_START, scenario=self.spec.name, seed=self.seed, dispatch_mode=self.spec.dispatch,
                        epoch_ms=vclock.START_EPOCH_MS, fresh=True)
        self.log.record(PHASE, phase="script")
        for proc in self.spec.processes:
            if proc.start != "never":
                self.agenda.push(proc.start, StartProcess(proc.id))
        for idx, step in enumerate(self.spec.steps):
            self.agenda.push(step.at, Step(idx))
        for t, entry in observations(self.spec, self.end_t):
            self.agenda.push(t, entry)
        self.agenda.push(self.spec.duration, Phase("drain"))
        self.agenda.push(0, Sample())
        self.agenda.push(self.end_t, End())

    def _loop(self) -> None:
        check_wall = self.dispatcher.check_wall
        while self.agenda:
            t, entry = self.agenda.pop()
            check_wall()
            if isinstance(entry, End):
                self.clock.advance_to(t)
                if self.progress is not None:
                    self.progress(t, self.end_t)
                return
            if self.sleep_until is not None and t < self.sleep_until and not isinstance(entry, SleepEnd):
                self._while_asleep(t, entry)
                continue
            self.clock.advance_to(t)
            if self.windows is not None:
                if self.windows.try_run(t, entry):
                    self._report_progress()
                    continue
                self.windows.invalidate()
            if self._is_command(entry):
                batch = [entry]
                while self.concurrent and self._next_is_command_at(t):
                    batch.append(self.agenda.pop()[1])
                self._run_batch(t, batch)
            else:
                self._handle(t, entry)
            self._report_progress()

    def _report_progress(self) -> None:
        if self.progress is not None and self.log.dispatch - self._progress_at >= PROGRESS_EVERY:
            self._progress_at = self.log.dispatch
            self.progress(self.clock.now, self.end_t)

    def _while_asleep(self, t: int, entry: Entry) -> None:
        """The machine is asleep: timers and samples miss the window, the rest waits for the wake."""
        if isinstance(entry, Sample):  # missed, but the sampling clock keeps its phase
            # Straight to its first beat at or after the wake: every beat before it would be missed
            # too, one pop each (a night's sleep is ~1,000 of them). Only one Sample is ever on the
            # agenda, which orders by (t, priority, insertion): the jump changes no order.
            beats = -(-(self.sleep_until - t) // self.sample_interval)
            if t + beats * self.sample_interval < self.end_t:
                self.agenda.push(t + beats * self.sample_interval, entry)
        elif isinstance(entry, Expect):
            # Nothing runs while asleep, so the state at t is the sleep's start state: observe it
            # now, at its stated t, not after the wake's catch-up work (D-sim-19).
            self.clock.advance_to(t)
            self.observer.expectation(t, entry.index, asleep=True, moment=entry.moment)
        elif not isinstance(entry, Poll):  # poll timers restart at the wake (_sleep_end)
            self.agenda.push(self.sleep_until, entry)

    def _is_command(self, entry: Entry) -> bool:
        """An entry that becomes a command to a harness process (batched by concurrent dispatch)."""
        if isinstance(entry, (HarnessFollowUp, Poll)):
            return True
        if isinstance(entry, Step):
            return self.spec.steps[entry.index].kind.runs == HARNESS
        return False

    def _next_is_command_at(self, t: int) -> bool:
        nxt = self.agenda.peek()
        return nxt is not None and nxt[0] == t and self._is_command(nxt[1])

    def _handle(self, t: int, entry: Entry) -> None:
        match entry:
            case StartProcess(label):
                self.start_process(t, label)
            case Step(index):
                self._step(t, index)
            case Phase(name):
                self.log.record(PHASE, phase=name, fresh=True)
            case Sample():
                self.observer.sample(t)
                if t + self.sample_interval < self.end_t:
                    self.agenda.push(t + self.sample_interval, Sample())
            case Expect(index, moment):
                self.observer.expectation(t, index, moment=moment)
            case ExpectFirst(index):
                self.observer.expectation(t, index, before_catch_up=True)
            case SleepEnd(step):
                self._sleep_end(t, step)
            case LockRelease(step):
                self._lock_release(t, step)
            case _:  # pragma: no cover
                raise SimulationError(f"unknown agenda entry {entry!r}")

    # -- commands ---------------------------------------------------------------

    def _command_for(self, t: int, entry: Entry) -> Optional[ProcessCommand]:
        if isinstance(entry, Poll):
            live = self.processes.alive(entry.label)
            if live is None or (live.incarnation, live.poll_gen) != (entry.incarnation, entry.generation):
                return None  # a timer of an older incarnation, or one a sleep stopped
            self.agenda.push(t + live.ctx.poll_interval_ms, entry)
            return ProcessCommand(live, OP_POLL, None, {})
        if isinstance(entry, HarnessFollowUp):
            live = self.processes.alive(entry.label)
            if live is None or live.incarnation != entry.incarnation:
                return None
            fu = entry.followup
            return ProcessCommand(live, fu.op, fu.session, dict(fu.args))
        idx = entry.index
        step = self.spec.steps[idx]
        if step.at > self.spec.duration:
            self._drop(idx, "after the script phase (steps must be at or before `duration`)")
            return None
        session, target = self._target_of(step)
        live = self.processes.alive(target)
        if live is None:
            who = f"session {session!r}" if session else "the step"
            self._drop(idx, f"{who} has no running host process" + (f" ({target} is not running)" if target else ""))
            return None
        if step.action == "title" and session is not None:
            self.titles[session] = str(step.args.title)
        return ProcessCommand(live, OP_ACT, session, act_args(step.action, step.args, step=idx))

    def _target_of(self, step: ScenarioStep) -> tuple[Optional[str], Optional[str]]:
        """(the acting session, the label of the process the step goes to)."""
        kind = step.kind
        if kind.target == PROCESS:
            return None, step.args.process
        if kind.target == MACHINE:
            # The CLI runs on the machine: any running harness process can host the call.
            return None, next((p.id for p in self.spec.processes if self.processes.alive(p.id) is not None), None)
        session = kind.actor(step.args)
        return session, self.hosting.get(session)

    def _drop(self, idx: int, reason: str) -> None:
        self.log.record(STEP_DROPPED, fresh=True, step=idx, action=self.spec.steps[idx].action, reason=reason)

    def _run_batch(self, t: int, entries: list[Entry]) -> None:
        if len(entries) == 1:  # serial dispatch: one command, one wave
            c = self._command_for(t, entries[0])
            if c is not None:
                self.dispatcher.exchange(t, self.log.next_dispatch(), [c])
            return
        cmds = [c for c in (self._command_for(t, e) for e in entries) if c is not None]
        while cmds:
            wave, rest, used = [], [], set()
            for c in cmds:
                (rest if c.live.label in used else wave).append(c)
                used.add(c.live.label)
            self.dispatcher.exchange(t, self.log.next_dispatch(), wave)
            cmds = [c for c in rest if c.live.alive]

    # -- processes --------------------------------------------------------------

    def start_process(self, t: int, label: str, launch: Launch = Launch()) -> Live:
        """Fork an incarnation of `label`, record `process-start` and send it OP_START (its poll timer too)."""
        if label not in self.world.procs:
            raise SimulationError(f"no process labelled {label!r} in scenario {self.spec.name!r}")
        if self.processes.alive(label) is not None:
            raise SimulationError(f"process {label!r} is already running at t={t}; "
                                  f"a resume/restart/start needs a process declared with `start: never`")
        own = [s.id for s in self.world.procs[label].spec.sessions]
        sessions = own + [s for s in launch.extra if s not in own]
        ctx = self.world.context(label, sessions, startup=launch.startup, directory=launch.directory,
                                 state_dir=launch.state_dir, directory_sessions=launch.directory_sessions,
                                 rehost_grace_ms=launch.rehost_grace_ms)
        ctx.rehosted = [s for s in launch.extra if s not in own] if launch.rehost_of else []
        ctx.titles = {s: self.titles[s] for s in sessions if s in self.titles}
        ctx.resumed = launch.resumed
        ctx.argv = list(launch.argv) if launch.argv is not None else None
        live = self.processes.fork(ctx)
        for s in sessions:
            self.hosting[s] = label
            self.session_dir[s] = ctx.directory
        resumed = launch.resumed
        shown = own + ([resumed] if resumed and resumed not in own else [])
        data: dict[str, Any] = {"target": label, "proc_kind": ctx.kind, "incarnation": ctx.incarnation,
                                "sessions": {s: self.world.session_id(s) for s in shown}}
        for key, value in (("resumed", resumed), ("how", launch.how), ("argv", ctx.argv),
                           ("rehost_of", launch.rehost_of)):
            if value is not None:
                data[key] = value
        data.update(launch.record or {})  # the caller's facts for the checkers (a resume's `opens`)
        d = self.log.next_dispatch()
        self.log.record(PROCESS_START, **data)
        self.dispatcher.exchange(t, d, [ProcessCommand(live, OP_START, None, {})])
        if live.alive and HOSTS[ctx.kind].polls:
            self.agenda.push(t + ctx.poll_interval_ms, Poll(label, live.incarnation, live.poll_gen))
        return live

    # -- steps and faults -------------------------------------------------------

    def _step(self, t: int, idx: int) -> None:
        step = self.spec.steps[idx]
        if step.at > self.spec.duration:
            self._drop(idx, "after the script phase (steps must be at or before `duration`)")
            return
        if step.is_fault:
            faults.apply(self, t, idx, step.action, step.args)
        else:
            ENGINE_ACTIONS[step.action](self, t, idx, step.args)

    def fired(self, idx: int, detail: Any) -> None:
        """Fault step `idx` took effect (`fault-fired`)."""
        f = self.faults[idx]
        f.fired, f.detail = True, detail
        self.log.record(FAULT_FIRED, fault=f.fault, step=idx, detail=detail)

    def _sleep_end(self, t: int, idx: int) -> None:
        self.sleep_until = None
        self.log.record(SLEEP_END, fresh=True)
        # Every live poller catches up once at the wake, then beats on from there. The catch-up runs
        # here, before anything else due at the wake instant (steps deferred by the sleep or scripted
        # at it): a laptop's timers fire before its user can act (D-sim-19). Serial: one dispatch per
        # process in declaration order; concurrent: one wave.
        polls: list[Entry] = []
        for label in self.world.proc_order():
            live = self.processes.alive(label)
            if live is not None and HOSTS[live.kind].polls:
                live.poll_gen += 1
                polls.append(Poll(label, live.incarnation, live.poll_gen))
        if self.concurrent:
            self._run_batch(t, polls)
        else:
            for poll in polls:
                self._run_batch(t, [poll])

    def _lock_release(self, t: int, idx: int) -> None:
        taken_in = self.processes.release_lock(idx)
        errors = []
        # The process files as written: a window's events carry provisional (negative) numbers until
        # the merge, below any `taken_in`, and no window runs while a lock is held (D-history-3).
        for live in self.processes.every:
            errors += [e for e in read_events(self.processes.history_file(live))
                       if e.get("kind") == STORE_ERROR and e.get("dispatch", 0) >= taken_in]
        self.log.record(LOCK_RELEASED, fresh=True, step=idx)
        if errors:
            self.fired(idx, {"store_errors": len(errors)})
        elif idx in self.dispatcher.lock_contended:
            # a wall-time observation: only when no error says it deterministically
            self.fired(idx, {"store_errors": 0, "waited": True})

    # -- the end ------------------------------------------------------------------

    def _shutdown(self) -> None:
        self.log.record(PHASE, phase="end", fresh=True)
        self.processes.stop_all(self.log.next_dispatch())

    def _finish(self, partial: bool = False) -> list[dict[str, Any]]:
        if not self.log.opened:
            return []
        for idx, f in sorted(self.faults.items()):
            if not f.fired:
                self.log.record(FAULT_NOT_FIRED, fresh=True, fault=f.fault, step=idx)
        self.log.record(RUN_END, fresh=True, **({"partial": True} if partial else {}))
        self.log.close()
        return merge(self.run_dir, self.world.proc_order(),
                     self.windows.renumbering if self.windows is not None else None)


class _FiringNothing:
    """The orchestrator as a fault handler sees it, except that nothing it does fires a step."""

    def __init__(self, orch: Orchestrator) -> None:
        self._orch = orch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._orch, name)

    def fired(self, idx: int, detail: Any) -> None:
        pass


def _start_step(orch: Orchestrator, t: int, idx: int, args: ProcessArg) -> None:
    label = args.process
    if orch.world.procs.get(label) is None or orch.world.procs[label].spec.start != "never":
        raise SimulationError(f"step {idx}: `start` needs a process declared with `start: never`, got {label!r}")
    orch.start_process(t, label)


# The actions the orchestrator carries out itself, by kind (faults are engine/faults.py's FAULTS;
# a layout test holds both tables equal to the kinds that run in the orchestrator).
ENGINE_ACTIONS: dict[str, Callable[[Orchestrator, int, int, Any], None]] = {"start": _start_step}

