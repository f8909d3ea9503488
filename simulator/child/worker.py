"""The child side of a harness process: a command loop under a frozen clock.

The orchestrator forks one process per harness with `child_main` as target.
The child:

1. dies with its parent (`PR_SET_PDEATHSIG`), and exits at once if the parent
   is already gone (the fork raced the parent's death): no orphans;
2. starts ONE freezegun freezer and moves it to each command's virtual time
   (entering `freeze_time` costs ~1.6 ms, `move_to` is cheap);
3. blocks on `conn.recv()` with no timeout: under freezegun, `multiprocess`
   waits with a timeout hang forever (time.monotonic is frozen);
4. builds the harness lazily on OP_START and answers every Command with
   exactly one Reply. OP_ARM_CRASH is served here (`crash_points()`);
   OP_STOP closes the harness, saves coverage and `os._exit(0)`s.

A harness exception becomes `Reply(ok=False, fatal=True, error=traceback)`:
the orchestrator stops the run with that error rather than guessing.
"""

from __future__ import annotations

import calendar
import cProfile
import dataclasses
import os
import sys
import time
import traceback
from datetime import timedelta
from types import SimpleNamespace
from typing import Any, Callable, NoReturn, Optional

from freezegun import api as freezegun_api
from freezegun import freeze_time
from multiprocess.connection import Connection

from simulator import clock
from simulator.child import hygiene, preload
from simulator.child.crash_points import CrashPoints, crash_points
from simulator.child.window import WindowRunner
from simulator.events import READY
from simulator.history import Recorder
from simulator.protocol import (
    LOCK_HELD_BY, OP_ARM_CRASH, OP_RESUME, OP_RUN_WINDOW, OP_SAVE_COVERAGE, OP_START, OP_STOP, Command, HarnessContext,
    Held, Reply, encode, recv_msg, send_frame,
)


def child_main(conn: Connection, ctx: HarnessContext, make_harness: Callable[..., Any], run_dir: str,
               parent_pid: int, close_in_child: list) -> None:
    """The harness process: `make_harness(ctx, recorder)` builds its harness on OP_START."""
    hygiene.enter(parent_pid, close_in_child)
    recorder = Recorder.for_process(run_dir, ctx.label, ctx.incarnation)
    points = crash_points()
    holder = _Holder(conn, recorder)
    points.bind(recorder, holder)
    move_to = _mover(_start_freezer())
    _memoize_fake_time()
    server = _CommandServer(ctx, make_harness, recorder, points)
    window = WindowRunner(server.answer, move_to, recorder)
    profiler = _profiler()
    while True:
        try:
            cmd: Command = recv_msg(conn)
        except (EOFError, OSError):
            # The orchestrator is gone without a stop: nothing left to answer.
            hygiene.leave(0)
        if cmd.op == OP_SAVE_COVERAGE:  # a SIGKILL is coming: keep the lines run so far (no event, no clock move)
            hygiene.save_coverage()
            _send(conn, Reply(cmd.dispatch))
            continue
        if cmd.op == OP_RUN_WINDOW:  # many entries, each at its own time (simulator/child/window.py)
            _send(conn, window.run(cmd))
            continue
        move_to(cmd.t)
        recorder.current(cmd.dispatch, cmd.t)
        holder.serving = cmd.dispatch
        if cmd.op == OP_STOP:
            points.missed_pauses()
            _stop(conn, server.close(cmd), recorder, profiler, ctx)
        _send(conn, server.answer(cmd))


class _CommandServer:
    """This process's harness (built on OP_START) answering commands, one Reply each."""

    def __init__(self, ctx: HarnessContext, make_harness: Callable[..., Any], recorder: Recorder,
                 points: CrashPoints) -> None:
        self.ctx = ctx
        self.make_harness = make_harness
        self.recorder = recorder
        self.points = points
        self.harness: Any = None
        self.crashes_seen = 0

    def answer(self, cmd: Command) -> Reply:
        """The reply to `cmd`; a harness exception is a fatal reply, crash events of its children ride along."""
        held_by = cmd.args.get(LOCK_HELD_BY) if isinstance(cmd.args, dict) else None
        if held_by is not None:  # for this command only: a paused call elsewhere holds the write lock
            cmd = dataclasses.replace(cmd, args={k: v for k, v in cmd.args.items() if k != LOCK_HELD_BY})
            self.points.lock_held(held_by)
        try:
            reply = self._serve(cmd)
        except Exception:
            reply = Reply(cmd.dispatch, ok=False, fatal=True,
                          error=f"{self.ctx.label} failed on {cmd.op} at t={cmd.t}:\n{traceback.format_exc()}")
        if held_by is not None:
            self.points.lock_held(None)
        crashes = self.recorder.crashes
        if len(crashes) > self.crashes_seen:
            reply = dataclasses.replace(reply, crashes=tuple(crashes[self.crashes_seen:]))
            self.crashes_seen = len(crashes)
        return reply

    def _serve(self, cmd: Command) -> Reply:
        if cmd.op == OP_ARM_CRASH:
            args = cmd.args
            self.points.arm(point=args.get("point"), sql=args.get("sql"), nth=args.get("nth"), step=args.get("step"),
                            when=args.get("when"), call=args.get("call"), statement=args.get("statement"),
                            pause=bool(args.get("pause")), actor=args.get("actor"))
            return Reply(cmd.dispatch)
        if self.harness is None and cmd.op != OP_START:
            return Reply(cmd.dispatch, ok=False, fatal=True, error=f"{self.ctx.label}: {cmd.op} before start")
        if cmd.op == OP_START:
            self.harness = self.make_harness(self.ctx, self.recorder)
        reply = self.harness.handle(cmd)
        if reply is None:
            reply = Reply(cmd.dispatch)
        if cmd.op == OP_START and reply.ok and not self.recorder.has_emitted(READY):
            self.recorder.emit(READY)
        return reply

    def close(self, cmd: Command) -> Reply:
        """OP_STOP: close the harness (if it was built)."""
        if self.harness is not None:
            try:
                self.harness.close()
            except Exception:
                return Reply(cmd.dispatch, ok=False, fatal=True, error=traceback.format_exc())
        return Reply(cmd.dispatch)


def _stop(conn: Connection, reply: Reply, recorder: Recorder, profiler: Optional[cProfile.Profile],
          ctx: HarnessContext) -> NoReturn:
    """Answer OP_STOP, close the history file, write the profile (if any) and leave."""
    try:
        _send(conn, reply)
    except OSError:
        pass
    recorder.close()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(os.path.join(os.environ["THATCH_SIM_PROFILE"], f"{ctx.label}.{ctx.incarnation}.prof"))
    hygiene.leave(0)


class _Holder:
    """How this process stops inside a store call: `Held` down the pipe, naming the command it serves
    (`serving`, set before each), then wait for OP_RESUME, whose dispatch stamps the events from then on
    (the clock stays where it is)."""

    def __init__(self, conn: Connection, recorder: Recorder) -> None:
        self.conn, self.recorder = conn, recorder
        self.serving = 0

    def __call__(self, kind: str, detail: dict) -> None:
        _send(self.conn, Held(self.serving, kind, detail))
        while True:
            try:
                cmd = recv_msg(self.conn)
            except (EOFError, OSError):
                hygiene.leave(0)  # the orchestrator is gone: nothing will resume us
            if cmd.op == OP_RESUME:
                self.recorder.current(cmd.dispatch, cmd.t)
                return


def _start_freezer():
    """Start this process's one freezer at the scenario start, visiting only the modules the
    parent's scan before the fork found holding a time function (child/preload.py).

    freezegun's start visits every loaded module (~600) for time functions to patch; visiting
    the ones holding none patches nothing and only dirties the pages this process shares with
    its parent (D-speed-harness-6), and so does the cache check on each module visited (a
    `dir()`), which the parent's scan already made. When the loaded modules are no longer those
    the parent scanned, all are visited and checked, as freezegun would. Private freezegun API:
    freezegun reads the loaded modules through its module's `sys`, which points at the short
    list while it starts.
    """
    visit = preload.modules_for_freezer()
    real_sys, real_hash = freezegun_api.sys, freezegun_api._get_module_attributes_hash
    if visit is not None:
        freezegun_api.sys = SimpleNamespace(modules=visit)
        freezegun_api._get_module_attributes_hash = preload.scanned_hash(visit, real_hash)
    try:
        return freeze_time(clock.START_INSTANT, tick=False).start()
    finally:
        freezegun_api.sys = real_sys
        freezegun_api._get_module_attributes_hash = real_hash


def _mover(frozen) -> Callable[[int], None]:
    """Move the started freezer to virtual time t.

    freezegun's `move_to(instant(t))` parses the aware instant, makes it
    naive UTC and ticks by the difference: it ends with `time_to_freeze ==
    START (naive) + t`. Setting exactly that value skips the parsing, which
    ran on every command. Any other factory shape keeps `move_to`.
    """
    # The class from an instance made before the freeze: freezegun swaps the
    # module-level `datetime` names for its fake class once started.
    if type(getattr(frozen, "time_to_freeze", None)) is not type(clock.START_INSTANT):
        return lambda t: frozen.move_to(clock.instant(t))
    naive_start = clock.START_INSTANT.replace(tzinfo=None)

    def move(t: int) -> None:
        frozen.time_to_freeze = naive_start + timedelta(milliseconds=t)

    return move


def _memoize_fake_time() -> None:
    """Serve `time.time()` from freezegun's own answer, converted once per frozen instant.

    freezegun's `fake_time` turns the frozen datetime into a float on every
    call (timegm of a timetuple), and a poll reads the clock ~6 times. This
    keeps its semantics call for call: the same factory, the same expression,
    only remembered while the frozen datetime object stays the same; and
    `_uses_real_time`, freezegun's own caller check. Installed on the `time`
    module only, and only over freezegun's own fake (private freezegun API:
    a change there only costs speed, see child/preload.py's
    _warm_freezegun_cache).
    """
    fz = freezegun_api
    try:
        current, real_time = fz.get_current_time, fz.real_time
    except AttributeError:  # pragma: no cover
        return
    if time.time is not getattr(fz, "fake_time", None) or not hasattr(fz, "_should_use_real_time"):
        return
    uses_real_time = _caller_check(fz)
    memo: list = [None, 0.0]

    def fake_time() -> float:
        if uses_real_time(sys._getframe(1)):
            return real_time()
        now = current()
        if now is not memo[0]:
            memo[0], memo[1] = now, calendar.timegm(now.timetuple()) + now.microsecond / 1000000.0
        return memo[1]

    time.time = fake_time


def _caller_check(fz) -> Callable[[Any], bool]:
    """freezegun's `_should_use_real_time` for a given caller frame, each module's answer remembered.

    The same rule on the same frames: no inspection limit means fake time, no
    freezer means real time, an empty ignore list means fake time, else real
    time when one of the `call_stack_inspection_limit` frames from the caller
    up belongs to a module whose name starts with an ignored prefix. Only the
    `startswith` answer per module name is kept (for the current ignore
    tuple): the walk itself runs on every call, as freezegun's does.
    """
    answers: dict = {}
    seen: list = [None]

    def uses_real_time(frame) -> bool:
        limit = fz.call_stack_inspection_limit
        if not limit:
            return False
        lists = fz.ignore_lists
        if not lists:
            return True
        prefixes = lists[-1]
        if not prefixes:
            return False
        if prefixes is not seen[0]:
            answers.clear()
            seen[0] = prefixes
        for _ in range(limit):
            name = frame.f_globals.get("__name__")
            if name:
                hit = answers.get(name)
                if hit is None:
                    hit = answers[name] = name.startswith(prefixes)
                if hit:
                    return True
            frame = frame.f_back
            if frame is None:
                break
        return False

    return uses_real_time


def _profiler() -> Optional[cProfile.Profile]:
    """`THATCH_SIM_PROFILE=<dir>`: profile each harness process (bench/diagnosis only)."""
    if not os.environ.get("THATCH_SIM_PROFILE"):
        return None
    prof = cProfile.Profile()
    prof.enable()
    return prof


def _send(conn: Connection, reply: Any) -> None:
    try:
        data = encode(reply)
    except Exception:  # a result that does not pickle: keep the reply, show the result as text
        data = encode(dataclasses.replace(reply, result=repr(reply.result)))
    send_frame(conn, data)
