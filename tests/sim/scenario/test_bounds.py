"""The bounds of a world: each refusal names file:line, the key and the limit; the limit itself is fine (D-bounds-1)."""

from __future__ import annotations

import pytest

from simulator.scenario import bounds
from simulator.scenario.errors import BadValueError, ScenarioError
from simulator.scenario.loader import parse_scenario
from simulator.scenario.model import Scenario
from simulator.scenario.validate import check_spec

WORLD = """\
name: w
duration: 10m
processes:
  - id: h1
    sessions:
      - id: alice
      - id: bob
"""


def load(text: str):
    return parse_scenario(text, file="b.yaml")


def refusal(text: str) -> str:
    with pytest.raises(ScenarioError) as info:
        load(text)
    [error] = info.value.errors
    assert isinstance(error, BadValueError)
    return error.format()


@pytest.mark.parametrize("edit,message", [
    (("duration: 10m", "duration: 0s"),
     "b.yaml:2: duration: a duration of 0 means nothing here — write a length above 0, at most 30d (e.g. 10m)"),
    (("duration: 10m", "duration: 365000d"),
     "b.yaml:2: duration: a duration 365000d is over the limit of 30d — write at most 30d"),
    (("  - id: h1\n", "  - id: h1\n    poll_interval: 0s\n"),
     "b.yaml:5: processes[0].poll_interval: poll interval 0s is under the limit of 1s "
     "— write 1s or more (the default is 30s)"),
    (("  - id: h1\n", "  - id: h1\n    poll_interval: 999ms\n"),
     "b.yaml:5: processes[0].poll_interval: poll interval 999ms is under the limit of 1s "
     "— write 1s or more (the default is 30s)"),
    (("      - id: bob\n", "      - id: bob\n        agent: {turn: 99999999999d}\n"),
     "b.yaml:8: processes[0].sessions[1].agent.turn: a turn 99999999999d is over the limit of 1d — write at most 1d"),
    (("      - id: bob\n", "      - id: bob\n        agent: {turn: 0s}\n"),
     "b.yaml:8: processes[0].sessions[1].agent.turn: a turn of 0 means nothing here — write a length above 0, "
     "at most 1d (e.g. 20s)"),
])
def test_a_value_out_of_bounds_is_refused_with_its_line_and_limit(edit, message):
    assert refusal(WORLD.replace(*edit)) == message


@pytest.mark.parametrize("seed,shown", [(10**33, str(10**33)), (-1, "-1"), (2**32, str(2**32))])
def test_a_seed_out_of_range_is_refused(seed, shown):
    assert refusal(WORLD + f"seed: {seed}\n") == (
        f"b.yaml:8: seed: seed {shown} is out of range — write a whole number from 0 to 4294967295")


def test_the_limits_themselves_are_accepted():
    text = WORLD.replace("duration: 10m", "duration: 29d").replace("  - id: h1\n",
                                                                    "  - id: h1\n    poll_interval: 1s\n")
    text = text.replace("      - id: bob\n", "      - id: bob\n        agent: {turn: 1d}\n")
    spec = load(text + "drain: 1d\nseed: 4294967295\n").spec
    assert spec.seed == bounds.MAX_SEED and spec.duration + spec.drain == bounds.MAX_RUN_MS


def test_duration_and_drain_together_are_bounded():
    assert refusal(WORLD.replace("10m", "20d") + "drain: 11d\n") == (
        "b.yaml:8: drain: duration 20d plus drain 11d is over the limit of 30d of virtual time — "
        "shorten one: a run lasts at most 30d")


def test_too_many_processes_are_refused_at_the_processes_key():
    procs = "".join(f"  - id: p{i}\n" for i in range(bounds.MAX_PROCESSES + 1))
    assert refusal(f"name: w\nduration: 10m\nprocesses:\n{procs}") == (
        "b.yaml:3: processes: 101 processes, over the limit of 100 — write at most 100 processes: "
        "each is an OS process of about 11 MB")
    assert len(load(f"name: w\nduration: 10m\nprocesses:\n{procs[:procs.rindex('  - id')]}").spec.processes) == 100


def test_too_many_sessions_and_steps_are_refused():
    sessions = "".join(f"      - id: s{i}\n" for i in range(bounds.MAX_SESSIONS + 1))
    text = f"name: w\nduration: 10m\nprocesses:\n  - id: h1\n    sessions:\n{sessions}"
    assert "1001 sessions, over the limit of 1000" in refusal(text)
    steps = "steps:\n" + "".join("  - {at: 1m, read: {session: alice}}\n" for _ in range(bounds.MAX_STEPS + 1))
    assert refusal(WORLD + steps).startswith("b.yaml:8: steps: 2001 steps, over the limit of 2000 — ")


@pytest.mark.parametrize("fault", ["sleep", "lock"])
def test_a_zero_length_sleep_or_lock_is_refused(fault):
    text = WORLD + f"steps:\n  - at: 1m\n    {fault}: {{for: 0s}}\n"
    assert refusal(text) == (f"b.yaml:10: steps[0].{fault}.for: a {fault} of 0 means nothing here — "
                             "write a length above 0, at most 30d (e.g. 5m)")


def test_a_repeated_body_that_expands_past_a_million_characters_is_refused():
    text = WORLD + "steps:\n  - at: 1m\n    send: {from: alice, to: bob, body: {repeat: '0123456789', times: 100001}}\n"
    assert refusal(text) == ("b.yaml:10: steps[0].send.body: the body is 1000010 characters, "
                             "over the limit of 1000000 — "
                             "the store refuses anything over 10000 characters: a little more shows the refusal")


def test_a_legacy_row_may_be_years_old_but_not_millennia():
    row = "legacy:\n  - {name: Kirk, last_seen_ago: %s}\n"
    assert load(WORLD + row % "3650d").spec.legacy[0].last_seen_ago == bounds.MAX_AGO_MS
    assert "last_seen_ago 3651d is over the limit of 3650d" in refusal(WORLD + row % "3651d")


def test_check_spec_applies_the_bounds_to_a_scenario_built_in_python():
    spec = Scenario.model_validate({"name": "w", "duration": 60_000, "processes": [{"id": "h1", "poll_interval": 0}]})
    [error] = check_spec(spec)
    assert error.format() == ("<scenario>: processes[0].poll_interval: poll interval 0s is under the limit of 1s "
                              "— write 1s or more (the default is 30s)")
