"""The run's disturbances: machine sleeps, lock faults, stalled poll timers (their windows)."""

from __future__ import annotations

from typing import Any, Optional

from simulator.events import FAULT, FAULT_FIRED, SLEEP_END, SLEEP_START, STEP_DROPPED, Fault, SleepStart
from simulator.history import History


class Disturbances:
    def __init__(self, history: History, steps: list[Any]) -> None:
        self.sleeps = self._sleep_windows(history)
        # The scripted steps the engine dropped (a step on a process not running, say): they never ran.
        self.dropped = frozenset(e.step for e in history.of(STEP_DROPPED))
        self.locks = self._lock_windows(history, steps)
        self.stalls: list[tuple[Optional[str], int, int]] = [
            (detail.get("target"), e.t, int(detail.get("until") or e.t))
            for e in history.of(FAULT_FIRED) if e.fault == "stall" for detail in [e.detail or {}]]
        # (start, until, the sleep fault's step or None) of every sleep that began
        self._deferring: list[tuple[int, int, Optional[int]]] = []
        fault_step = None
        for e in history.of(FAULT, SLEEP_START):
            if isinstance(e, Fault):
                fault_step = e.step if e.fault == "sleep" else None
            elif isinstance(e, SleepStart) and e.until is not None:
                self._deferring.append((e.t, int(e.until), fault_step))

    @staticmethod
    def _sleep_windows(history: History) -> list[tuple[int, Optional[int]]]:
        """(start, end) of each machine sleep (end None: asleep at the run's end)."""
        out: list[tuple[int, Optional[int]]] = []
        start = None
        for e in history.of(SLEEP_START, SLEEP_END):
            if e.kind == SLEEP_START:
                start = e.t
            elif start is not None:
                out.append((start, e.t))
                start = None
        if start is not None:
            out.append((start, None))
        return out

    @staticmethod
    def _lock_windows(history: History, steps: list[Any]) -> list[tuple[int, int]]:
        out = []
        for e in history.of(FAULT):
            if e.fault != "lock":
                continue
            dur = e.args.get("for") or e.args.get("duration")
            if dur is None and isinstance(e.step, int) and e.step < len(steps) and steps[e.step].lock:
                dur = steps[e.step].lock.duration
            out.append((e.t, e.t + int(dur or 0)))
        return out

    def asleep(self, t: int, slack: int = 0) -> bool:
        """True inside a machine sleep, or within `slack` ms after it ends."""
        return any(start <= t and (end is None or t <= end + slack) for start, end in self.sleeps)

    def lock_windows(self) -> list[tuple[int, int]]:
        """(start, end) of every lock fault held against the database."""
        return self.locks

    def stall_windows(self) -> list[tuple[Optional[str], int, int]]:
        """(process, start, end) of every `stall` fault that took effect: its poll timer was lost."""
        return self.stalls

    def landed(self, idx: int, at: int) -> int:
        """When step `idx`, scripted at `at`, ran: a machine asleep then runs it at the wake, in
        script order with every other step it deferred, so a sleep step deferred with it and
        scripted before it may defer it again (past the run's end: it never ran). A call at
        the instant it landed may come before or after it."""
        moved = True
        while moved:
            moved = False
            for start, until, by in self._deferring:
                if start <= at < until and (start < at or by is None or by < idx):
                    at, moved = until, True
        return at
