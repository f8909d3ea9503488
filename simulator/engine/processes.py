"""The run's forked children, parent side: harness processes and lock holders.

`Processes` forks, kills, stops and reaps them for the orchestrator.
Invariants:
- a fork happens only with no SQLite connection open here (asserted);
- each child gets the parent's ends of the other pipes to close (a pipe end
  held by a sibling would hide EOF);
- every way out (graceful end, error, wall guard) reaps every child: OP_STOP,
  a grace period, SIGTERM (coverage saves on it), a grace, SIGKILL, join.
"""

from __future__ import annotations

import gc
import os
import select
import sqlite3
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional

import multiprocess
import multiprocess.popen_fork  # noqa: F401 - loaded here, not by the first fork after the freezer scan
from multiprocess.connection import Connection
from multiprocess.context import ForkContext
from multiprocess.process import BaseProcess

from simulator.child.lock_holder import LockHolder
from simulator.child.worker import child_main
from simulator.clock import VirtualClock
from simulator.child import preload
from simulator.engine.dispatch_log import DispatchLog
from simulator.engine.world import World
from simulator.events import PROCESS_EXIT
from simulator.history import process_file
from simulator.protocol import OP_SAVE_COVERAGE, OP_STOP, Command, HarnessContext, decode, encode


@dataclass
class Live:
    """One forked incarnation of a process label."""

    label: str
    kind: str
    incarnation: int
    process: BaseProcess
    conn: Connection
    ctx: HarnessContext
    alive: bool = True
    released: bool = False   # its pipe and process sentinel closed (`kill_all`): nothing of it to ask any more
    poll_gen: int = 0
    _poller: Optional[select.poll] = None

    def ready(self, timeout_s: float) -> bool:
        """True when a reply (or EOF) is waiting; a select.poll registered once, not a selector per wait."""
        if self._poller is None:
            self._poller = select.poll()
            self._poller.register(self.conn.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
        return bool(self._poller.poll(int(timeout_s * 1000)))


@dataclass(frozen=True)
class Launch:
    """How one incarnation starts beyond its declaration: a resume, a restart's re-hosting."""

    extra: tuple[str, ...] = ()                    # sessions it serves besides its own
    directory: Optional[Path] = None               # default: its declared serving directory
    state_dir: Optional[Path] = None               # a restart reuses the dead daemon's
    startup: Optional[tuple[str, Optional[str]]] = None              # ("-s", id) | ("-c", None)
    directory_sessions: Optional[list[dict[str, Any]]] = None        # what `-c` lists
    rehost_grace_ms: Optional[int] = None
    rehost_of: Optional[str] = None                # the dead daemon whose open tabs are `extra`
    resumed: Optional[str] = None                  # the session a resume step names
    how: Optional[str] = None                      # "-s" | "-c" | "argv"
    argv: Optional[list[str]] = None               # the whole command line (resume `argv`)
    record: Optional[dict[str, Any]] = None        # more facts for `process-start` (a resume's `opens`)


class ForkGuard:
    """The orchestrator's one read connection to the store, kept open between forks and closed
    before each: `Processes` forks only with none open (docs/pitfalls.md: a connection open at a
    fork breaks the children's locks). The windowed engine reads the store after every lockstep
    entry; opening a connection for each read cost more than the reads (D-speed-harness-5)."""

    def __init__(self) -> None:
        self._conn: Optional[sqlite3.Connection] = None
        self._path: Optional[str] = None
        self.opened = 0   # connections opened so far: a `PRAGMA data_version` is comparable within one

    def read(self, db_path: Any, query: str, params: tuple = ()) -> list[tuple]:
        """The rows of one read-only query (autocommit: no transaction outlives it)."""
        path = str(db_path)
        if self._conn is None or self._path != path:
            self.close()
            conn = sqlite3.connect(path, timeout=10, isolation_level=None)
            conn.execute("PRAGMA query_only = 1")
            self._conn, self._path = conn, path
            self.opened += 1
        return self._conn.execute(query, params).fetchall()

    @property
    def open(self) -> bool:
        return self._conn is not None

    def close(self) -> None:
        """Before a fork, and at the run's end."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class ProcessCommand(NamedTuple):
    """A command for one live process, before it gets its dispatch number and time."""

    live: Live
    op: str
    session: Optional[str]
    args: dict[str, Any]


class Processes:
    """Harness processes by label (the live incarnation and every one so far) and lock holders by step."""

    def __init__(self, mp: ForkContext, world: World, log: DispatchLog, clock: VirtualClock, *,
                 make_harness: Callable[..., Any], stop_grace_s: float) -> None:
        self.mp = mp
        self.make_harness = make_harness      # the fake host a child builds (ctx.overrides may replace it)
        self.world = world
        self.log = log
        self.clock = clock
        self.stop_grace_s = stop_grace_s
        self.guard = ForkGuard()              # whoever reads the database in this process holds it
        self.live: dict[str, Live] = {}
        self.every: list[Live] = []
        self.locks: dict[int, tuple[LockHolder, int]] = {}   # step -> (holder, dispatch it took the lock in)

    def alive(self, label: Optional[str]) -> Optional[Live]:
        """The running incarnation of `label`, if one runs."""
        live = self.live.get(label) if label else None
        return live if live is not None and live.alive else None

    def history_file(self, live: Live) -> Path:
        return process_file(self.world.run_dir, live.label, live.incarnation)

    # -- forks ------------------------------------------------------------------

    def fork(self, ctx: HarnessContext) -> Live:
        self.guard.close()  # no SQLite connection may be open in the orchestrator at a fork
        parent_end, child_end = self.mp.Pipe()
        others = [lv.conn for lv in self.live.values() if lv.alive] + [h.conn for h, _ in self.locks.values()]
        proc = self.mp.Process(target=child_main, name=f"thatch-{ctx.label}", daemon=True,
                               args=(child_end, ctx, ctx.overrides.get("harness") or self.make_harness,
                                     str(self.world.run_dir), os.getpid(), others))
        preload.freezer_modules()  # the child's freezer visits only what this finds (D-speed-harness-6)
        # Freeze the parent's heap across the fork: the child's cyclic GC then
        # never walks (and so never copy-on-write-faults) the objects it
        # inherited, which made children of a big parent (pytest, a finished
        # run's history) several times slower per command.
        gc.freeze()
        try:
            proc.start()
        finally:
            gc.unfreeze()
        child_end.close()
        live = Live(ctx.label, ctx.kind, ctx.incarnation, proc, parent_end, ctx)
        self.live[ctx.label] = live
        self.every.append(live)
        return live

    def hold_lock(self, step: int, dispatch: int) -> None:
        """Fork a holder that takes the database write lock now (until `release_lock(step)`)."""
        self.guard.close()  # no SQLite connection may be open in the orchestrator at a fork
        others = [lv.conn for lv in self.live.values() if lv.alive]
        holder = LockHolder(self.world.db_path, self.mp, close_in_child=others)
        holder.start()
        self.locks[step] = (holder, dispatch)

    def release_lock(self, step: int) -> int:
        """Release step's lock; returns the dispatch the lock was taken in."""
        holder, taken_in = self.locks.pop(step)
        holder.release()
        return taken_in

    # -- ends -------------------------------------------------------------------

    def kill(self, live: Live, reason: str) -> None:
        if live.alive:
            self._save_child_coverage(live)
            live.process.kill()
            live.process.join(5.0)
            live.alive = False
            live.conn.close()
            self.log.record(PROCESS_EXIT, target=live.label, reason=reason)

    def lost(self, live: Live) -> None:
        """Its pipe hit EOF: the process is gone; reap it."""
        live.process.join(2.0)
        live.alive = False
        live.conn.close()

    def _save_child_coverage(self, live: Live) -> None:
        """Under coverage, ask the child to save its data before a SIGKILL would lose it (no event recorded)."""
        coverage = sys.modules.get("coverage")  # not loaded: nothing measures us (no import just to ask)
        if coverage is None or coverage.Coverage.current() is None:
            return
        try:
            live.conn.send_bytes(encode(Command(0, self.clock.now, OP_SAVE_COVERAGE)))
            if live.conn.poll(5.0):
                live.conn.recv_bytes()
        except (OSError, EOFError):
            pass

    def stop_all(self, dispatch: int) -> None:
        """The graceful end: OP_STOP to every running process (one dispatch), reap each, release the locks."""
        stopping = self._running()
        for live in stopping:
            try:
                live.conn.send_bytes(encode(Command(dispatch, self.clock.now, OP_STOP)))
            except (OSError, EOFError):
                pass
        for live in stopping:
            self._await_stop(live, dispatch)
            self._reap(live, self.stop_grace_s)
            self.log.record(PROCESS_EXIT, target=live.label, reason="end")
        for step in list(self.locks):
            self.release_lock(step)

    def _await_stop(self, live: Live, dispatch: int) -> None:
        """Wait (up to the grace) for the answer to OP_STOP, or EOF."""
        deadline = time.monotonic() + self.stop_grace_s
        while time.monotonic() < deadline:
            try:
                if not live.conn.poll(max(0.0, deadline - time.monotonic())):
                    return
                if decode(live.conn.recv_bytes()).dispatch == dispatch:
                    return
            except (EOFError, OSError):
                return

    def _running(self) -> list[Live]:
        order = {label: i for i, label in enumerate(self.world.proc_order())}
        return sorted((lv for lv in self.live.values() if lv.alive), key=lambda lv: order.get(lv.label, 0))

    def _reap(self, live: Live, grace: float) -> None:
        """Join, then SIGTERM, then SIGKILL: children get a chance to save coverage."""
        proc = live.process
        proc.join(grace)
        if proc.is_alive():
            proc.terminate()
            proc.join(grace)
        if proc.is_alive():
            proc.kill()
            proc.join(5.0)
        live.alive = False
        try:
            live.conn.close()
        except OSError:
            pass

    def kill_all(self) -> None:
        """Whatever happened: no child outlives the run."""
        ending = [live for live in self.every if not live.released]
        for live in ending:
            if live.process.is_alive():
                live.process.terminate()
        deadline = time.monotonic() + 1.0
        for live in ending:
            live.process.join(max(0.0, deadline - time.monotonic()))
            if live.process.is_alive():
                live.process.kill()
                live.process.join(5.0)
            live.alive = False
            live.released = _release(live.process, live.conn)
        for holder, _ in list(self.locks.values()):
            if holder.proc is not None and holder.proc.is_alive():
                holder.proc.kill()
                holder.proc.join(5.0)
            if holder.proc is not None:
                _release(holder.proc, holder.conn)  # dropped with the table below: never asked again
        self.locks.clear()
        multiprocess.active_children()  # reaps finished children


def _release(process: Any, conn: Any) -> bool:
    """Close a reaped child's pipe and its process sentinel now (True when done; a child still alive after
    its SIGKILL keeps its sentinel). The orchestrator's collaborators refer to each other, so without this
    the descriptors waited for a full garbage collection: a long-lived parent (a pytest worker, a campaign)
    held four more pipes per run, past the 1,024 `select` takes."""
    if conn is not None:
        conn.close()
    if process.is_alive():
        return False
    process.close()
    return True
