"""When the engine observes each point expectation (simulator.engine.observer.observations)."""

from __future__ import annotations

import pytest

from simulator.engine.agenda import Agenda, Expect, ExpectFirst, Poll, SleepEnd, Step
from simulator.engine.observer import observations
from simulator.scenario.model import Scenario

END = 3_600_000 + 300_000


def spec(*expect, steps=()):
    return Scenario.model_validate({"name": "o", "duration": "1h", "steps": list(steps), "expect": list(expect),
                                    "processes": [{"id": "h1", "sessions": [{"id": "bob"}]}]})


def test_each_expectation_is_observed_at_its_own_time():
    """`at` (or the end), a window's end, both times of `same_name`, and `before_catch_up` first."""
    s = spec({"wakes": {"session": "bob", "count": 1}, "at": "5m"},
             {"wakes": {"session": "bob", "count": 1}},
             {"wakes": {"session": "bob", "between": ["10m", "20m"], "count": 1}},
             {"same_name": {"session": "bob", "at": ["1m", "end"]}},
             {"roster": {"session": "bob", "stale": ["bob"]}, "at": "40m", "before_catch_up": True},
             steps=[{"at": "10m", "sleep": {"for": "30m"}}])
    assert observations(s, END) == [(300_000, Expect(0)), (END, Expect(1)), (1_200_000, Expect(2)),
                                    (60_000, Expect(3, 0)), (END, Expect(3, 1)), (2_400_000, ExpectFirst(4))]


@pytest.mark.rules("R14")
def test_an_observation_before_the_catch_up_pops_before_the_wake_itself():
    """R14: at a sleep's end the `before_catch_up` observation runs before the SleepEnd
    that starts the catch-up polls; an ordinary one runs after the polls, as before."""
    agenda = Agenda()
    for entry in (Step(0), Expect(1), Poll("h1", 0, 1), SleepEnd(0), ExpectFirst(2)):
        agenda.push(100, entry)
    assert [agenda.pop()[1] for _ in range(5)] == [ExpectFirst(2), SleepEnd(0), Step(0), Poll("h1", 0, 1), Expect(1)]
