"""The agenda's order: (virtual time, priority, insertion order), one priority per entry kind."""

from __future__ import annotations

import random
import typing

from simulator.engine.agenda import (
    PRIORITY, Agenda, End, Entry, Expect, HarnessFollowUp, LockRelease, Phase, Poll, Priority, Sample, SleepEnd,
    StartProcess, Step,
)
from simulator.protocol import FollowUp


def drain(agenda: Agenda) -> list:
    out = []
    while agenda:
        out.append(agenda.pop())
    return out


def test_same_time_entries_run_in_priority_order_whatever_the_push_order():
    kinds = [End(), Sample(), Expect(0), Poll("h1", 0, 0),
             HarnessFollowUp("h1", 0, FollowUp(0, "turn-end", "alice", {})),
             Phase("drain"), Step(0), StartProcess("h1")]
    for seed in range(5):
        shuffled = list(kinds)
        random.Random(seed).shuffle(shuffled)
        agenda = Agenda()
        for entry in shuffled:
            agenda.push(1_000, entry)
        assert [type(e) for _, e in drain(agenda)] == [type(e) for e in reversed(kinds)]


def test_time_first_then_priority_then_insertion_order():
    agenda = Agenda()
    agenda.push(500, End())
    agenda.push(100, Step(2))
    agenda.push(100, Step(1))
    agenda.push(100, SleepEnd(4))
    agenda.push(100, LockRelease(5))
    agenda.push(0, Sample())
    assert [(t, type(e), e) for t, e in drain(agenda)] == [
        (0, Sample, Sample()), (100, SleepEnd, SleepEnd(4)), (100, LockRelease, LockRelease(5)),
        (100, Step, Step(2)), (100, Step, Step(1)), (500, End, End())]


def test_peek_shows_the_next_entry_without_taking_it():
    agenda = Agenda()
    assert agenda.peek() is None and not agenda and len(agenda) == 0
    agenda.push(30_000, Poll("h1", 0, 1))
    agenda.push(30_000, Step(0))
    t, entry = agenda.peek()
    assert (t, type(entry), entry) == (30_000, Step, Step(0)) and len(agenda) == 2
    assert agenda.pop() == (t, entry)
    t, entry = agenda.peek()
    assert (t, type(entry), entry) == (30_000, Poll, Poll("h1", 0, 1))


def test_every_entry_kind_has_its_priority_and_fault_ends_share_the_starts_one():
    assert set(PRIORITY) == set(typing.get_args(Entry))
    assert PRIORITY[SleepEnd] == PRIORITY[LockRelease] == PRIORITY[StartProcess] == Priority.CONTROL
