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

import dataclasses
import os
import traceback
from datetime import timedelta
from typing import Any, Callable

from simulator import clock
from simulator.child import hygiene
from simulator.child.crash_points import crash_points
from simulator.history import Recorder
from simulator.protocol import OP_ARM_CRASH, OP_SAVE_COVERAGE, OP_START, OP_STOP, Command, HarnessContext, Reply, encode, recv_msg, send_frame

def child_main(conn, ctx: HarnessContext, make_harness: Callable[..., Any], run_dir: str, parent_pid: int,
               close_in_child: list) -> None:
    """The harness process: `make_harness(ctx, recorder)` builds its harness on OP_START."""
    hygiene.enter(parent_pid, close_in_child)
    from freezegun import freeze_time

    recorder = Recorder.for_process(run_dir, ctx.label, ctx.incarnation)
    points = crash_points()
    points.bind(recorder)
    freezer = freeze_time(clock.START_INSTANT, tick=False)
    move_to = _mover(freezer.start())
    _memoize_fake_time()
    harness = None
    crashes_seen = 0
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
        move_to(cmd.t)
        recorder.current(cmd.dispatch, cmd.t)
        if cmd.op == OP_STOP:
            reply = Reply(cmd.dispatch)
            if harness is not None:
                try:
                    harness.close()
                except Exception:
                    reply = Reply(cmd.dispatch, ok=False, fatal=True, error=traceback.format_exc())
            try:
                _send(conn, reply)
            except OSError:
                pass
            recorder.close()
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(os.path.join(os.environ["THATCH_SIM_PROFILE"], f"{ctx.label}.{ctx.incarnation}.prof"))
            hygiene.leave(0)
        try:
            if cmd.op == OP_ARM_CRASH:
                args = cmd.args
                points.arm(point=args.get("point"), sql=args.get("sql"), nth=args.get("nth"), step=args.get("step"))
                reply = Reply(cmd.dispatch)
            elif harness is None and cmd.op != OP_START:
                reply = Reply(cmd.dispatch, ok=False, fatal=True, error=f"{ctx.label}: {cmd.op} before start")
            else:
                if cmd.op == OP_START:
                    harness = make_harness(ctx, recorder)
                reply = harness.handle(cmd)
                if reply is None:
                    reply = Reply(cmd.dispatch)
                if cmd.op == OP_START and reply.ok and not recorder.has_emitted("ready"):
                    recorder.emit("ready")
        except Exception:
            reply = Reply(cmd.dispatch, ok=False, fatal=True,
                          error=f"{ctx.label} failed on {cmd.op} at t={cmd.t}:\n{traceback.format_exc()}")
        if len(recorder.crashes) > crashes_seen:
            reply = dataclasses.replace(reply, crashes=tuple(recorder.crashes[crashes_seen:]))
            crashes_seen = len(recorder.crashes)
        _send(conn, reply)


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
    keeps its semantics call for call: the same `_should_use_real_time`
    check (same frame depth: called straight from the caller), the same
    factory, the same expression, only remembered while the frozen datetime
    object stays the same. Installed on the `time` module only, and only
    over freezegun's own fake (private freezegun API: a change there only
    costs speed, see lifecycle._warm_freezegun_cache).
    """
    import calendar
    import time as time_mod

    try:
        from freezegun import api as fz
        should_use_real, current, real_time = fz._should_use_real_time, fz.get_current_time, fz.real_time
    except (ImportError, AttributeError):  # pragma: no cover
        return
    if time_mod.time is not getattr(fz, "fake_time", None):
        return
    memo: list = [None, 0.0]

    def fake_time() -> float:
        if should_use_real():
            return real_time()
        now = current()
        if now is not memo[0]:
            memo[0], memo[1] = now, calendar.timegm(now.timetuple()) + now.microsecond / 1000000.0
        return memo[1]

    time_mod.time = fake_time


def _profiler():
    """`THATCH_SIM_PROFILE=<dir>`: profile each harness process (bench/diagnosis only)."""
    if not os.environ.get("THATCH_SIM_PROFILE"):
        return None
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    return prof


def _send(conn, reply: Reply) -> None:
    try:
        data = encode(reply)
    except Exception:  # a result that does not pickle: keep the reply, show the result as text
        data = encode(dataclasses.replace(reply, result=repr(reply.result)))
    send_frame(conn, data)
