"""Harness process lifecycle for the orchestrator: fork, kill, stop, reap.

A mixin of `Orchestrator`. Invariants:
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
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import multiprocess

from simulator.protocol import OP_SAVE_COVERAGE, OP_STOP, Command, HarnessContext, decode, encode
from simulator.scenario.model import Scenario
from simulator.child.worker import child_main
from simulator.harness import make_harness


@dataclass
class Live:
    """One forked incarnation of a process label."""

    label: str
    kind: str
    incarnation: int
    process: Any
    conn: Any
    ctx: HarnessContext
    alive: bool = True
    poll_gen: int = 0
    _poller: Any = None

    def ready(self, timeout_s: float) -> bool:
        """True when a reply (or EOF) is waiting; a select.poll registered once, not a selector per wait."""
        if self._poller is None:
            self._poller = select.poll()
            self._poller.register(self.conn.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
        return bool(self._poller.poll(int(timeout_s * 1000)))


class ProcessControl:
    """Forking, killing, stopping and reaping harness processes (mixed into Orchestrator)."""

    def _fork(self, ctx: HarnessContext) -> Live:
        assert not self._db_open, "no SQLite connection may be open in the orchestrator at a fork"
        parent_end, child_end = self.mp.Pipe()
        others = [lv.conn for lv in self.live.values() if lv.alive] + [h.conn for h, _ in self.locks.values()]
        proc = self.mp.Process(target=child_main, name=f"thatch-{ctx.label}", daemon=True,
                               args=(child_end, ctx, ctx.overrides.get("harness") or make_harness, str(self.run_dir),
                                     os.getpid(), others))
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
        self.all_lives.append(live)
        return live

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

    def _history_file(self, live: Live) -> Path:
        return self.run_dir / "history" / f"{live.label}.{live.incarnation}.jsonl"

    def _kill(self, live: Live, reason: str) -> None:
        if live.alive:
            self._save_child_coverage(live)
            live.process.kill()
            live.process.join(5.0)
            live.alive = False
            live.conn.close()
            self._record("process-exit", target=live.label, reason=reason)

    def _shutdown(self) -> None:
        self._record("phase", phase="end", fresh=True)
        d = self._next_dispatch()
        stopping = [lv for lv in self._running()]
        for live in stopping:
            try:
                live.conn.send_bytes(encode(Command(d, self.clock.now, OP_STOP)))
            except (OSError, EOFError):
                pass
        for live in stopping:
            deadline = time.monotonic() + self.stop_grace_s
            while time.monotonic() < deadline:
                try:
                    if not live.conn.poll(max(0.0, deadline - time.monotonic())):
                        break
                    if decode(live.conn.recv_bytes()).dispatch == d:
                        break
                except (EOFError, OSError):
                    break
            self._reap(live, self.stop_grace_s)
            self._record("process-exit", target=live.label, reason="end")
        for idx in list(self.locks):
            holder, _ = self.locks.pop(idx)
            holder.release()

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

    def _kill_all(self) -> None:
        for live in self.all_lives:
            if live.process.is_alive():
                live.process.terminate()
        deadline = time.monotonic() + 1.0
        for live in self.all_lives:
            live.process.join(max(0.0, deadline - time.monotonic()))
            if live.process.is_alive():
                live.process.kill()
                live.process.join(5.0)
            live.alive = False
        for holder, _ in list(self.locks.values()):
            if holder.proc is not None and holder.proc.is_alive():
                holder.proc.kill()
                holder.proc.join(5.0)
        self.locks.clear()
        multiprocess.active_children()  # reaps finished children


def preload(spec: Scenario, overrides: dict) -> None:
    """Import what every child would import on its own before forking it.

    A fork inherits loaded modules for free; a child importing the harness,
    thatch_core and faker itself paid ~0.1 s each (measured), which dominated
    short runs with many processes.
    """
    import importlib

    # thatch_core's lazily imported modules too: every child imported the
    # runtime, tools, MCP and prompt modules (and _strptime) on its own.
    names = ["freezegun", "_strptime"] + [f"thatch_core.{m}" for m in _THATCH_MODULES]
    if "harness" not in overrides:
        kinds = {p.kind for p in spec.processes}
        names += ["simulator.harness", "faker"] + [
            f"simulator.harness.{k.replace('-', '_')}" for k in sorted(kinds)]
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    if "faker" in names:
        _warm_faker()
    _warm_freezegun_cache()


_THATCH_MODULES = ("db", "store", "config", "runtime", "poller", "rehost", "tools", "prompts", "osargs",
                   "mcp", "continuation", "cli", "staleness")
_faker_warm = False


def _warm_faker() -> None:
    """Build one throwaway Faker here, once per orchestrator process.

    Its provider modules get imported and faker's provider-class lookup
    (an lru_cache on the Factory) filled, so a child's own `Faker()` costs
    ~1 ms instead of ~20-40 ms (measured). Building it draws nothing from
    any random generator: the children's seeded output is unchanged.
    """
    global _faker_warm
    if _faker_warm:
        return
    try:
        from faker import Faker

        Faker()
    except Exception:  # pragma: no cover - only speed is at stake
        return
    _faker_warm = True


def _warm_freezegun_cache() -> None:
    """Fill freezegun's per-module attribute cache here, without freezing anything.

    Every child starts a freezer, which scans all loaded modules for time
    functions; with the cache inherited through the fork that start costs
    ~10 ms instead of ~40 ms (measured). Private freezegun API: a change
    there only costs speed.
    """
    import sys
    import warnings

    try:
        from freezegun import api as fz
        warm = fz._get_cached_module_attributes
    except (ImportError, AttributeError):  # pragma: no cover
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")  # dir() of some modules warns; freezegun silences it too
        for name, module in list(sys.modules.items()):
            if module is None or getattr(module, "__name__", None) in (None, "datetime", "time"):
                continue
            try:
                warm(module)
            except Exception:  # pragma: no cover - a module that resists dir()
                pass
