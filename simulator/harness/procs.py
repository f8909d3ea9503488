"""Real child processes of a harness: one-shot hook runs and long-lived servers.

The fake Claude Code host never opens the database itself: its hooks and its
MCP server are real children (so `os.getppid()` in them is the host's pid,
which the anti-spoofing anchor depends on, R32). Both kinds are plain
`os.fork()` children talking over a `multiprocess` pipe:

- `run_in_child(fn, t)` forks, runs `fn()` in the child, sends its return
  value back and `os._exit`s; the parent blocks on `recv()` (no timeout:
  waits with a timeout hang under freezegun) and reaps the child.
- `ServerChild(serve, t)` forks a child running `serve(request)` for every
  request until told to stop. The child starts its OWN freezer right after
  the fork (a forked child keeps the frozen time it had at the fork) and
  moves it to the virtual time sent with each request.

Each child runs the shared child hygiene (simulator/child/hygiene.py: it dies
with its parent, closes the parent's end of its pipe). Crash points armed in the
harness process are copied into the child (a child's registry starts empty),
and a crash event the child emits is forwarded to the parent, which records
it: the child's own pipe end is its recorder.
"""

from __future__ import annotations

import os
import traceback
from typing import Any, Callable, Optional

from freezegun import freeze_time
from multiprocess import Pipe
from multiprocess.connection import Connection

from simulator import clock
from simulator.child import hygiene
from simulator.child.crash_points import crash_points
from simulator.events import CRASH

_EVENT = "event"
_RESULT = "result"
_ERROR = "error"


class ChildCrashed(RuntimeError):
    """The child died before answering (a crash point fired, or a kill)."""


class _PipeRecorder:
    """Stands in for the Recorder inside a child: events go to the parent."""

    def __init__(self, conn) -> None:
        self.conn = conn

    def emit(self, kind: str, session: Optional[str] = None, **data: Any) -> None:
        try:
            self.conn.send((_EVENT, kind, session, data))
        except OSError:
            pass


def _armed_now() -> list:
    """The crash points armed in this process (copied, so the child's counts are its own)."""
    return [a.handed_on() for a in crash_points().snapshot()]


def _armed_keyed() -> list:
    """(key, copy) of every armed point: the server child syncs its set to these."""
    return [(id(a), a.handed_on()) for a in crash_points().snapshot()]


def _sync_arms(mine: dict, keyed: list) -> None:
    """Make this child's armed set the parent's, keeping the child's own match counts."""
    fresh = {key: mine.get(key, armed) for key, armed in keyed}
    mine.clear()
    mine.update(fresh)
    crash_points().adopt(list(fresh.values()))


def _child_setup(conn: Connection, parent_end: Connection, parent_pid: int, arms: list) -> None:
    """The first thing a hook or server child does: the shared child hygiene
    (closing the parent's end of its own pipe), then the host's crash points."""
    hygiene.enter(parent_pid, [parent_end])
    points = crash_points()  # a fresh registry in this pid
    points.adopt(arms)  # D-harness-6: the host's armed points, copied
    points.bind(_PipeRecorder(conn))


def _relay(conn, recorder, on_crash: Callable[[], None], session: Optional[str] = None) -> Any:
    """Receive until the child's answer, recording forwarded events; raises
    ChildCrashed when the pipe closes first."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            on_crash()
            raise ChildCrashed("the child process died before answering") from None
        tag = msg[0]
        if tag == _EVENT:
            _, kind, ev_session, data = msg
            if recorder is not None:
                recorder.emit(kind, ev_session or session, **data)
            if kind == CRASH:
                # The fired point is spent: never let the next child fire it again.
                crash_points().disarm()
            continue
        if tag == _ERROR:
            raise RuntimeError(f"child process failed:\n{msg[1]}")
        return msg[1]


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def run_in_child(fn: Callable[[], Any], *, recorder=None, session: Optional[str] = None) -> Any:
    """Fork, run `fn()` in the child (under the parent's frozen time, which
    the child inherits), return its result. Raises ChildCrashed if it died."""
    parent_end, child_end = Pipe()
    arms = _armed_now()
    parent_pid = os.getpid()
    pid = os.fork()
    if pid == 0:  # the child (coverage follows it: patch = fork)
        code = 0
        try:
            _child_setup(child_end, parent_end, parent_pid, arms)
            try:
                child_end.send((_RESULT, fn()))
            except Exception:
                child_end.send((_ERROR, traceback.format_exc()))
                code = 1
        finally:
            hygiene.leave(code)
    child_end.close()
    try:
        return _relay(parent_end, recorder, lambda: None, session)
    finally:
        parent_end.close()
        _reap(pid)


class ServerChild:
    """A long-lived forked child answering `serve(request)` per request.

    `serve` runs in the child; `setup()` runs there once first (open the db:
    never before the fork). Requests carry the virtual time `t`.
    """

    def __init__(self, setup: Callable[[], Callable[[Any], Any]], *, recorder=None, t: int = 0,
                 session: Optional[str] = None) -> None:
        self.recorder = recorder
        self.session = session  # the label a forwarded event is recorded under
        self.pid: Optional[int] = None
        self.conn = None
        self._setup = setup
        self.starts = 0  # how many children served so far: a new one is a new session for its client
        self._start(t)

    def _start(self, t: int) -> None:
        parent_end, child_end = Pipe()
        arms = _armed_now()
        parent_pid = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child
            try:  # whatever happens, the child never returns into the host's code
                self._child_loop(child_end, parent_end, parent_pid, arms, t)
            finally:
                hygiene.leave(1)
        child_end.close()
        self.pid, self.conn = pid, parent_end
        self.starts += 1

    def _child_loop(self, conn: Connection, parent_end: Connection, parent_pid: int, arms: list, t: int) -> None:
        _child_setup(conn, parent_end, parent_pid, arms)
        frozen = freeze_time(clock.instant(t), tick=False).start()
        try:
            serve, broken = self._setup(), None
        except Exception:
            # Answer every request with the setup failure: a harness error the
            # run must stop on, not a crash to be shrugged off.
            serve, broken = None, traceback.format_exc()
        mine: dict = {}
        while True:
            try:
                msg = conn.recv()  # no timeout, ever (freezegun)
            except (EOFError, OSError):
                break
            if msg[0] == "stop":
                break
            _, t, keyed, request = msg
            _sync_arms(mine, keyed)
            frozen.move_to(clock.instant(t))
            try:
                if broken is not None:
                    raise RuntimeError(f"the server child could not start:\n{broken}")
                conn.send((_RESULT, serve(request)))
            except Exception:
                conn.send((_ERROR, traceback.format_exc()))
        hygiene.leave(0)

    @property
    def alive(self) -> bool:
        return self.pid is not None

    def request(self, t: int, request: Any) -> Any:
        """One request at virtual time `t`. Raises ChildCrashed if the child
        died; the next request then starts a fresh child."""
        if self.pid is None:
            self._start(t)
        try:
            self.conn.send(("req", t, _armed_keyed(), request))
        except OSError:
            self._dead()
            raise ChildCrashed("the server child is gone") from None
        return _relay(self.conn, self.recorder, self._dead, self.session)

    def _dead(self) -> None:
        if self.pid is not None:
            _reap(self.pid)
        if self.conn is not None:
            self.conn.close()
        self.pid, self.conn = None, None

    def close(self) -> None:
        """Stop the child (it exits on the stop message) and reap it."""
        if self.pid is None:
            return
        try:
            self.conn.send(("stop",))
        except OSError:
            pass
        _reap(self.pid)
        self.conn.close()
        self.pid, self.conn = None, None
