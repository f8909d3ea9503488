"""The virtual clock, and that every harness process sees the orchestrator's time, frozen."""

from __future__ import annotations

import time
from datetime import datetime, timezone

import pytest

from engine_harness import TinyHarness
from simulator import Scenario, run_scenario
from simulator.clock import START_EPOCH_MS, START_INSTANT, VirtualClock, epoch_ms, instant, virtual_ms


def test_clock_starts_at_zero_and_moves_forward():
    c = VirtualClock()
    assert c.now == 0
    assert c.advance_to(30_000) == 30_000
    c.advance_to(30_000)  # staying put is allowed
    assert c.now == 30_000
    assert c.epoch_ms() == START_EPOCH_MS + 30_000


def test_clock_refuses_to_go_backwards():
    c = VirtualClock(5)
    with pytest.raises(ValueError, match=r"^time can't go backwards$"):
        c.advance_to(4)
    assert c.now == 5


def test_start_instant_is_fixed_and_maps_both_ways():
    assert START_INSTANT == datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
    assert instant(90_000) == datetime(2026, 1, 5, 9, 1, 30, tzinfo=timezone.utc)
    assert virtual_ms(epoch_ms(123_456)) == 123_456


def _spec(**extra) -> Scenario:
    return Scenario.model_validate({
        "name": "clock", "duration": "2m", "drain": "0s",
        "processes": [
            {"id": "h1", "sessions": [{"id": "alice"}]},
            {"id": "h2", "start": "45s", "poll_interval": "20s", "sessions": [{"id": "bob"}]},
        ],
        **extra,
    })


def test_children_see_the_orchestrators_virtual_time_frozen(tmp_path):
    result = run_scenario(_spec(), run_dir=tmp_path / "run", overrides={"harness": TinyHarness}, check=False)
    assert result.error is None
    starts = {e["proc"]: e for e in result.events("clock")}
    assert starts["h1"]["data"]["now"] == START_EPOCH_MS / 1000
    assert starts["h2"]["data"]["now"] == (START_EPOCH_MS + 45_000) / 1000
    polls = result.events("poll")
    assert polls, "no poll ran"
    for e in polls:
        # Exactly the dispatch's virtual time: frozen, no tick between commands.
        assert e["data"]["now"] * 1000 == START_EPOCH_MS + e["t"]
    assert [e["t"] for e in polls if e["proc"] == "h2"] == [65_000, 85_000, 105_000]
    # the end runs after same-time polls
    assert [e["t"] for e in polls if e["proc"] == "h1"] == [30_000, 60_000, 90_000, 120_000]


def test_the_orchestrator_itself_is_never_frozen(tmp_path):
    run_scenario(_spec(), run_dir=tmp_path / "run", overrides={"harness": TinyHarness}, check=False)
    first = time.time()
    time.sleep(0.01)
    assert time.time() > first  # real time still ticks here: freezegun lives only in the children
    assert abs(time.time() - START_EPOCH_MS / 1000) > 1  # and it is not the scenario's frozen instant
