"""The orchestrator: owns virtual time and the agenda, forks the harnesses, drives them.

One `Orchestrator` runs one scenario. Its agenda is a heap ordered by
`(t, priority, insertion seq)`: process starts, scripted steps, each opencode
process's poll timer, follow-ups the harnesses ask for (turn ends, windows),
samples of the directory, expectation observations, fault bookkeeping.
Popping an entry moves the virtual clock there and dispatches it: a
`Command` down the process's pipe, then a blocking wait for its `Reply`
under the real-time wall guard (this process is never frozen, so
`conn.poll(timeout)` is safe here; pitfalls: only frozen children must not).

Invariants:
- no SQLite connection is open in this process at any fork (`_fork` asserts
  it); samples use a short-lived connection closed before returning;
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

import heapq
import itertools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

import multiprocess

from simulator import clock as vclock
from simulator.child.lock_holder import LockHolder
from simulator.history import ORCHESTRATOR, Recorder, merge, read_events
from simulator.engine.processes import Live, ProcessControl, preload
from simulator.engine.observer import Observer
from simulator.protocol import OP_ACT, OP_POLL, OP_START, Command, Reply, recv_msg, send_msg
from simulator.scenario.model import FAULT_KEYS, Scenario, format_duration
from simulator.engine.world import World

# Same-time order: starts and fault bookkeeping, then the script, then what
# the harnesses asked for, then timers, then observers, then the end.
PRI_CONTROL, PRI_STEP, PRI_PHASE, PRI_FOLLOWUP, PRI_POLL, PRI_EXPECT, PRI_SAMPLE, PRI_END = range(8)
COMMAND_ITEMS = ("followup", "poll")  # plus action steps: see _batchable
STOP_GRACE_S = 2.0
LOCK_BUSY_TIMEOUT_MS = 20  # short: a writer meeting the held lock fails fast (StoreBusy) instead of stalling the run


class SimulationTimeout(RuntimeError):
    """The run outlived its wall-clock budget; every child was killed."""


class SimulationError(RuntimeError):
    """A harness failed, or the scenario asks for something the world cannot do."""


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


class Orchestrator(ProcessControl, Observer):
    def __init__(self, spec: Scenario, run_dir: Path, *, seed: Optional[int] = None, wall_timeout_s: float = 120.0,
                 overrides: Optional[dict] = None, sample_interval_ms: Optional[int] = None,
                 progress: Optional[Callable[[int, int], None]] = None, busy_timeout_ms: Optional[int] = None,
                 stop_grace_s: float = STOP_GRACE_S) -> None:
        self.spec = spec
        self.seed = spec.seed if seed is None else seed
        self.run_dir = Path(run_dir)
        has_lock = any(s.action == "lock" for s in spec.steps)
        self.world = World(spec, self.run_dir, self.seed, dict(overrides or {}),
                           busy_timeout_ms or (LOCK_BUSY_TIMEOUT_MS if has_lock else 5000))
        self.clock = vclock.VirtualClock()
        self.mp = multiprocess.get_context("fork")
        self.wall_timeout_s = wall_timeout_s
        self.stop_grace_s = stop_grace_s
        self.progress = progress
        self.concurrent = spec.dispatch == "concurrent"
        self.end_t = spec.duration + spec.drain
        self.sample_interval = sample_interval_ms or min((p.poll_interval for p in spec.processes), default=30_000)
        self.live: dict[str, Live] = {}
        self.all_lives: list[Live] = []
        self.hosting: dict[str, str] = {}          # session label -> process label hosting it now
        self.session_dir: dict[str, Path] = {}     # session label -> the directory it lives in
        self.last_activity: dict[str, int] = {}    # session label -> virtual t of its last command
        self.faults = {i: FaultState(i, s.action, getattr(s.args, "process", None))
                       for i, s in enumerate(spec.steps) if s.is_fault}
        self.sleep_until: Optional[int] = None
        self.locks: dict[int, tuple[LockHolder, int]] = {}
        self.lock_contended: set[int] = set()
        self.heap: list = []
        self._seq = itertools.count()
        self.dispatch = 0
        self._last_cmd: Optional[tuple] = None
        self.last_desc = "none yet"
        self.deadline = 0.0
        self._db_open = False
        self.recorder: Optional[Recorder] = None
        self._progress_at = 0

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

    # -- public -------------------------------------------------------------

    def run(self) -> Outcome:
        self.deadline = time.monotonic() + self.wall_timeout_s
        error = None
        try:
            try:
                self._setup()
                self._loop()
            except SimulationError as err:
                error = str(err)
            self._shutdown()
        except SimulationTimeout:
            self._kill_all()
            self._finish(partial=True)
            raise
        finally:
            self._kill_all()
        history = self._finish()
        return Outcome(history, self.faults, self.run_info(), self.clock.now, self.dispatch, error)

    def run_info(self) -> dict[str, Any]:
        return {
            "scenario": self.spec.name, "seed": self.seed, "dispatch_mode": self.spec.dispatch,
            "run_dir": str(self.run_dir), "db_path": str(self.world.db_path),
            "epoch_ms": vclock.START_EPOCH_MS, "duration_ms": self.spec.duration, "drain_ms": self.spec.drain,
            "end_ms": self.end_t, "stale_ms": 60_000, "sample_interval_ms": self.sample_interval,
            "poll_interval_ms": {p.id: p.poll_interval for p in self.spec.processes},
            "session_ids": {k: list(v) for k, v in self.world.session_ids.items()},
            "row_ids": {k: self.world.row_ids(k) for k in self.world.session_ids},
            "dispatches": self.dispatch, "virtual_ms": self.clock.now,
            "faults": {i: {"fault": f.fault, "fired": f.fired, "detail": f.detail} for i, f in self.faults.items()},
        }

    # -- setup, agenda --------------------------------------------------------

    def _setup(self) -> None:
        preload(self.spec, self.world.overrides)
        self.world.build()
        from thatch_core.db import open_db
        open_db(self.world.db_path).close()  # schema first, then nothing open before any fork
        self.recorder = Recorder.for_process(self.run_dir, ORCHESTRATOR)
        self._record("run-start", scenario=self.spec.name, seed=self.seed, dispatch_mode=self.spec.dispatch,
                     epoch_ms=vclock.START_EPOCH_MS, fresh=True)
        self._record("phase", phase="script")
        for proc in self.spec.processes:
            if proc.start != "never":
                self._push(proc.start, PRI_CONTROL, ("start-proc", proc.id))
        for idx, step in enumerate(self.spec.steps):
            self._push(step.at, PRI_STEP, ("step", idx))
        for idx, exp in enumerate(self.spec.expect):
            self._push(self.end_t if exp.at == "end" else exp.at, PRI_EXPECT, ("expect", idx))
        self._push(self.spec.duration, PRI_PHASE, ("phase", "drain"))
        self._push(0, PRI_SAMPLE, ("sample",))
        self._push(self.end_t, PRI_END, ("end",))

    def _push(self, t: int, pri: int, item: tuple) -> None:
        heapq.heappush(self.heap, (t, pri, next(self._seq), item))

    def _loop(self) -> None:
        while self.heap:
            t, pri, _, item = heapq.heappop(self.heap)
            self._check_wall()
            kind = item[0]
            if kind == "end":
                self.clock.advance_to(t)
                if self.progress is not None:
                    self.progress(t, self.end_t)
                return
            if self.sleep_until is not None and t < self.sleep_until and kind != "sleep-end":
                # The machine is asleep: timers and samples miss the window, the rest waits for the wake.
                if kind == "sample":  # missed, but the sampling clock keeps its phase
                    if t + self.sample_interval < self.end_t:
                        self._push(t + self.sample_interval, PRI_SAMPLE, item)
                elif kind == "expect":
                    # Nothing runs while asleep, so the state at t is the sleep's start state: observe it
                    # now, at its stated t, not after the wake's catch-up work (D-sim-19).
                    self.clock.advance_to(t)
                    self._expectation(t, item[1], asleep=True)
                elif kind != "poll":  # poll timers restart at the wake (_sleep_end)
                    self._push(self.sleep_until, pri, item)
                continue
            self.clock.advance_to(t)
            if kind in COMMAND_ITEMS or (kind == "step" and self._is_action(item[1])):
                batch = [item]
                while self.concurrent and self.heap and self.heap[0][0] == t and self._batchable(self.heap[0][3]):
                    batch.append(heapq.heappop(self.heap)[3])
                self._run_batch(t, batch)
            else:
                self._handle(t, item)
            if self.progress is not None and self.dispatch - self._progress_at >= 64:
                self._progress_at = self.dispatch
                self.progress(self.clock.now, self.end_t)

    def _is_action(self, idx: int) -> bool:
        step = self.spec.steps[idx]
        return step.action not in FAULT_KEYS and step.action != "start"

    def _batchable(self, item: tuple) -> bool:
        return item[0] in COMMAND_ITEMS or (item[0] == "step" and self._is_action(item[1]))

    def _handle(self, t: int, item: tuple) -> None:
        kind = item[0]
        if kind == "start-proc":
            self._start_process(t, item[1])
        elif kind == "step":
            self._step(t, item[1])
        elif kind == "phase":
            self._record("phase", phase=item[1], fresh=True)
        elif kind == "sample":
            self._sample(t)
            if t + self.sample_interval < self.end_t:
                self._push(t + self.sample_interval, PRI_SAMPLE, ("sample",))
        elif kind == "expect":
            self._expectation(t, item[1])
        elif kind == "sleep-end":
            self._sleep_end(t, item[1])
        elif kind == "lock-release":
            self._lock_release(t, item[1])
        else:  # pragma: no cover
            raise SimulationError(f"unknown agenda item {item!r}")

    # -- recording ------------------------------------------------------------

    def _next_dispatch(self) -> int:
        self.dispatch += 1
        self.recorder.current(self.dispatch, self.clock.now)
        return self.dispatch

    def _record(self, kind: str, session: Optional[str] = None, /, *, fresh: bool = False, **data: Any) -> None:
        if fresh:
            self._next_dispatch()
        self.recorder.current(self.dispatch, self.clock.now)
        self.recorder.emit(kind, session, **data)

    def _check_wall(self) -> None:
        if time.monotonic() > self.deadline:
            now = self.clock.now
            raise SimulationTimeout(
                f"scenario {self.spec.name!r} (seed {self.seed}) exceeded its wall-clock budget of "
                f"{self.wall_timeout_s:g}s at virtual time {format_duration(now)} ({now} ms); "
                f"last dispatch #{self.dispatch}: {self.last_desc}")

    # -- commands ---------------------------------------------------------------

    def _command_for(self, t: int, item: tuple) -> Optional[tuple[Live, str, Optional[str], dict]]:
        kind = item[0]
        if kind == "poll":
            _, label, inc, gen = item
            live = self.live.get(label)
            if live is None or not live.alive or live.incarnation != inc or live.poll_gen != gen:
                return None
            self._push(t + live.ctx.poll_interval_ms, PRI_POLL, ("poll", label, inc, gen))
            return live, OP_POLL, None, {}
        if kind == "followup":
            _, label, inc, fu = item
            live = self.live.get(label)
            if live is None or not live.alive or live.incarnation != inc:
                return None
            return live, fu.op, fu.session, dict(fu.args)
        idx = item[1]
        step = self.spec.steps[idx]
        if step.at > self.spec.duration:
            self._drop(idx, "after the script phase (steps must be at or before `duration`)")
            return None
        session, target = self._target_of(step)
        live = self.live.get(target) if target else None
        if live is None or not live.alive:
            who = f"session {session!r}" if session else "the step"
            self._drop(idx, f"{who} has no running host process" + (f" ({target} is not running)" if target else ""))
            return None
        return live, OP_ACT, session, _step_args(step, idx)

    def _target_of(self, step) -> tuple[Optional[str], Optional[str]]:
        args, action = step.args, step.action
        if action in ("send", "broadcast"):
            session = args.sender
        elif action == "config":
            return None, args.process
        elif action in ("cli_list", "cli_tail"):
            # The CLI runs on the machine: any running harness process can host the call.
            return None, next((p.id for p in self.spec.processes if p.id in self.live and self.live[p.id].alive), None)
        else:
            session = args.session
        return session, self.hosting.get(session)

    def _drop(self, idx: int, reason: str) -> None:
        self._record("step-dropped", fresh=True, step=idx, action=self.spec.steps[idx].action, reason=reason)

    def _run_batch(self, t: int, items: list[tuple]) -> None:
        if len(items) == 1:  # serial dispatch: one command, one wave
            c = self._command_for(t, items[0])
            if c is not None:
                self._exchange(t, self._next_dispatch(), [c])
            return
        cmds = [c for c in (self._command_for(t, it) for it in items) if c is not None]
        while cmds:
            wave, rest, used = [], [], set()
            for c in cmds:
                (rest if c[0].label in used else wave).append(c)
                used.add(c[0].label)
            self._exchange(t, self._next_dispatch(), wave)
            cmds = [c for c in rest if c[0].alive]

    def _exchange(self, t: int, d: int, wave: list[tuple[Live, str, Optional[str], dict]]) -> list[Optional[Reply]]:
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
        replies = []
        for live, cmd in sent:
            reply = self._wait(live, cmd)
            replies.append(reply)
            if reply is None:
                continue
            if reply.fatal:
                raise SimulationError(reply.error or f"{live.label} failed on {cmd.op}")
            for crash in reply.crashes:  # a child of the harness hit a crash point; the harness lives on
                self._crash_fired(live, crash, exit_recorded=False)
            for fu in reply.followups:
                self._push(max(int(fu.at), t), PRI_FOLLOWUP, ("followup", live.label, live.incarnation, fu))
        return replies

    def _wait(self, live: Live, cmd: Command) -> Optional[Reply]:
        started = time.monotonic()
        while True:
            self._check_wall()
            remaining = max(0.0, self.deadline - time.monotonic())
            if live.ready(min(remaining, 0.5)):
                try:
                    reply = recv_msg(live.conn)
                except (EOFError, OSError):
                    self._died(live)
                    return None
                if reply.dispatch != cmd.dispatch:
                    continue  # a stale answer left by an aborted wave
                if self.locks and time.monotonic() - started > self.world.busy_timeout_ms / 2000:
                    self.lock_contended.update(self.locks)  # a store call had to wait for the holder
                return reply

    # -- processes --------------------------------------------------------------

    def _start_process(self, t: int, label: str, *, extra: tuple[str, ...] = (), directory: Optional[Path] = None,
                       state_dir: Optional[Path] = None, startup=None, directory_sessions=None,
                       rehost_grace_ms: Optional[int] = None, rehost_of: Optional[str] = None,
                       resumed: Optional[str] = None, how: Optional[str] = None,
                       argv: Optional[list[str]] = None, record: Optional[dict[str, Any]] = None) -> Live:
        if label not in self.world.procs:
            raise SimulationError(f"no process labelled {label!r} in scenario {self.spec.name!r}")
        old = self.live.get(label)
        if old is not None and old.alive:
            raise SimulationError(f"process {label!r} is already running at t={t}; "
                                  f"a resume/restart/start needs a process declared with `start: never`")
        pw = self.world.procs[label]
        own = [s.id for s in pw.spec.sessions]
        sessions = own + [s for s in extra if s not in own]
        ctx = self.world.context(label, sessions, startup=startup, directory=directory, state_dir=state_dir,
                                 directory_sessions=directory_sessions, rehost_grace_ms=rehost_grace_ms)
        ctx.rehosted = [s for s in extra if s not in own] if rehost_of else []
        ctx.resumed = resumed
        ctx.argv = list(argv) if argv is not None else None
        live = self._fork(ctx)
        for s in sessions:
            self.hosting[s] = label
            self.session_dir[s] = ctx.directory
        shown = own + ([resumed] if resumed and resumed not in own else [])
        data: dict[str, Any] = {"target": label, "proc_kind": ctx.kind, "incarnation": ctx.incarnation,
                                "sessions": {s: self.world.session_id(s) for s in shown}}
        for key, value in (("resumed", resumed), ("how", how), ("argv", ctx.argv), ("rehost_of", rehost_of)):
            if value is not None:
                data[key] = value
        data.update(record or {})  # the caller's facts for the checkers (a resume's `opens`)
        d = self._next_dispatch()
        self._record("process-start", **data)
        self._exchange(t, d, [(live, OP_START, None, {})])
        if live.alive and ctx.kind == "opencode":
            self._push(t + ctx.poll_interval_ms, PRI_POLL, ("poll", label, live.incarnation, live.poll_gen))
        return live

    def _died(self, live: Live) -> None:
        """EOF on a pipe: a crash point fired, or the harness died on its own (an engine error)."""
        live.process.join(2.0)
        live.alive = False
        live.conn.close()
        crash = [e for e in read_events(self._history_file(live)) if e.get("kind") == "crash"]
        if not crash:
            raise SimulationError(f"process {live.label} died unexpectedly (exit code {live.process.exitcode}) "
                                  f"during {self.last_desc}")
        self._record("process-exit", fresh=True, target=live.label, reason="crashed")
        self._crash_fired(live, crash[-1].get("data", {}), exit_recorded=True)

    def _crash_fired(self, live: Live, data: dict, *, exit_recorded: bool) -> None:
        idx = data.get("step")
        if idx not in self.faults:
            idx = next((i for i, f in self.faults.items()
                        if f.fault == "crash" and f.process == live.label and not f.fired), None)
        if idx is not None and not self.faults[idx].fired:
            if not exit_recorded:
                self._next_dispatch()
            detail = {"point": data.get("point"), "sql": data.get("sql")}
            if not exit_recorded:
                detail["child"] = True  # the harness survived: one of its hook/MCP children died
            self._fired(idx, detail)

    # -- steps and faults -------------------------------------------------------

    def _step(self, t: int, idx: int) -> None:
        step = self.spec.steps[idx]
        if step.at > self.spec.duration:
            self._drop(idx, "after the script phase (steps must be at or before `duration`)")
            return
        if step.action == "start":
            label = step.args.process
            if self.world.procs.get(label) is None or self.world.procs[label].spec.start != "never":
                raise SimulationError(f"step {idx}: `start` needs a process declared with `start: never`, got {label!r}")
            self._start_process(t, label)
            return
        from simulator.engine import faults as fault_steps
        fault_steps.apply(self, t, idx, step)

    def _fired(self, idx: int, detail: Any) -> None:
        f = self.faults[idx]
        f.fired, f.detail = True, detail
        self._record("fault-fired", fault=f.fault, step=idx, detail=detail)

    def _sleep_end(self, t: int, idx: int) -> None:
        self.sleep_until = None
        self._record("sleep-end", fresh=True)
        # Every live poller catches up once at the wake, then beats on from there. The catch-up runs
        # here, before anything else due at the wake instant (steps deferred by the sleep or scripted
        # at it): a laptop's timers fire before its user can act (D-sim-19). Serial: one dispatch per
        # process in declaration order; concurrent: one wave.
        polls = []
        for label in self.world.proc_order():
            live = self.live.get(label)
            if live is not None and live.alive and live.kind == "opencode":
                live.poll_gen += 1
                polls.append(("poll", label, live.incarnation, live.poll_gen))
        if self.concurrent:
            self._run_batch(t, polls)
        else:
            for poll in polls:
                self._run_batch(t, [poll])

    def _lock_release(self, t: int, idx: int) -> None:
        holder, d_start = self.locks.pop(idx)
        holder.release()
        errors = []
        for live in self.all_lives:
            errors += [e for e in read_events(self._history_file(live))
                       if e.get("kind") == "store-error" and e.get("dispatch", 0) >= d_start]
        self._record("lock-released", fresh=True, step=idx)
        if errors:
            self._fired(idx, {"store_errors": len(errors)})
        elif idx in self.lock_contended:  # a wall-time observation: only when no error says it deterministically
            self._fired(idx, {"store_errors": 0, "waited": True})

    def _finish(self, partial: bool = False) -> list[dict[str, Any]]:
        if self.recorder is None:
            return []
        for idx, f in sorted(self.faults.items()):
            if not f.fired:
                self._record("fault-not-fired", fresh=True, fault=f.fault, step=idx)
        self._record("run-end", fresh=True, **({"partial": True} if partial else {}))
        self.recorder.close()
        return merge(self.run_dir, self.world.proc_order())


def _step_args(step, idx: int) -> dict[str, Any]:
    """The step's arguments under both their field names and their YAML keys (`sender` and `from`)."""
    args = step.args
    if isinstance(args, dict):
        out = dict(args)
    else:
        out = args.model_dump(mode="json")
        out.update(args.model_dump(mode="json", by_alias=True))
    out.update(action=step.action, step=idx)
    if step.name:
        out["name"] = step.name
    return out

