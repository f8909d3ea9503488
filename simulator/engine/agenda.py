"""The orchestrator's agenda: what happens next in virtual time, in a fixed order.

Entries are small immutable records, one class per kind; each kind has one
`Priority` (`PRIORITY`). The agenda pops in `(t, priority, insertion order)` order, so two
entries due at the same virtual time run by priority, and two of the same
priority in the order they were pushed: a seed gives one order, always.
"""

from __future__ import annotations

import heapq
import itertools
from enum import IntEnum
from typing import NamedTuple, Optional, Union

from simulator.protocol import FollowUp


class Priority(IntEnum):
    """Same-time order: an observer asked to run first (`before_catch_up`), then
    starts and fault bookkeeping, then the script, then what the harnesses asked
    for, then timers, then observers, then the end."""

    OBSERVE_FIRST = -1
    CONTROL = 0
    STEP = 1
    PHASE = 2
    FOLLOWUP = 3
    POLL = 4
    EXPECT = 5
    SAMPLE = 6
    END = 7


class StartProcess(NamedTuple):
    """A declared process starts (its `start:` time)."""

    label: str


class SleepEnd(NamedTuple):
    """The machine wakes from the sleep fault of step `step`."""

    step: int


class LockRelease(NamedTuple):
    """The lock holder of step `step` lets the write lock go."""

    step: int


class Step(NamedTuple):
    """A scripted step (an action, a `start`, or a fault), by its index in the scenario."""

    index: int


class Phase(NamedTuple):
    """The run enters a phase (`drain` after the script's `duration`)."""

    name: str


class HarnessFollowUp(NamedTuple):
    """An entry a harness asked for in a reply, due for one incarnation of a process."""

    label: str
    incarnation: int
    followup: FollowUp


class Poll(NamedTuple):
    """An opencode process's poll timer; stale once the incarnation or the timer generation moved on."""

    label: str
    incarnation: int
    generation: int


class Expect(NamedTuple):
    """A point expectation to observe, by its index in the scenario (`moment`: which of
    its times, for a kind observed at several: `same_name`)."""

    index: int
    moment: Optional[int] = None


class ExpectFirst(NamedTuple):
    """A point expectation observed before anything else due at its time: at a sleep's
    end, before the pollers' catch-up beats (`before_catch_up`)."""

    index: int


class Sample(NamedTuple):
    """A sample of the directory (the next one is pushed when this one runs)."""


class End(NamedTuple):
    """The end of the run (`duration + drain`)."""


Entry = Union[StartProcess, SleepEnd, LockRelease, Step, Phase, HarnessFollowUp, Poll, Expect, ExpectFirst, Sample, End]

PRIORITY: dict[type, Priority] = {
    ExpectFirst: Priority.OBSERVE_FIRST,
    StartProcess: Priority.CONTROL, SleepEnd: Priority.CONTROL, LockRelease: Priority.CONTROL,
    Step: Priority.STEP, Phase: Priority.PHASE, HarnessFollowUp: Priority.FOLLOWUP, Poll: Priority.POLL,
    Expect: Priority.EXPECT, Sample: Priority.SAMPLE, End: Priority.END,
}


class Agenda:
    """A heap of entries ordered by `(t, priority, insertion seq)`; entries themselves are never compared."""

    __slots__ = ("_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, int, Entry]] = []
        self._seq = itertools.count()

    def push(self, t: int, entry: Entry) -> None:
        heapq.heappush(self._heap, (t, PRIORITY[type(entry)], next(self._seq), entry))

    def pop(self) -> tuple[int, Entry]:
        t, _, _, entry = heapq.heappop(self._heap)
        return t, entry

    def peek(self) -> Optional[tuple[int, Entry]]:
        """The next (t, entry) without taking it; None when the agenda is empty."""
        if not self._heap:
            return None
        t, _, _, entry = self._heap[0]
        return t, entry

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)
