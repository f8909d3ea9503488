"""Machine sleep in the orchestrator: the wake's catch-up order and observations inside a sleep (D-sim-19)."""

from __future__ import annotations

import pytest

from engine_harness import TinyHarness
from simulator import Scenario, run_scenario

TINY = {"harness": TinyHarness}
WAKE = 7_500_000  # a 2 h sleep from 5m


def scenario(steps, expect=(), **extra) -> Scenario:
    return Scenario.model_validate({
        "name": "sleep", "duration": "130m", "drain": "1m", "seed": 19,
        "processes": [
            {"id": "h1", "project": "notes", "sessions": [{"id": "alice"}]},
            {"id": "h2", "project": "notes", "sessions": [{"id": "bob"}]},
        ],
        "steps": steps, "expect": list(expect), **extra,
    })


def at_wake(r):
    return [(e["proc"], e["kind"]) for e in r.history if e["t"] == WAKE and e["proc"] != "orchestrator"]


def test_catch_up_polls_run_before_a_step_at_the_wake_instant(tmp_path):
    steps = [{"at": "5m", "sleep": {"for": "2h"}}, {"at": "7500s", "status": {"session": "alice"}}]
    r = run_scenario(scenario(steps), run_dir=tmp_path, overrides=TINY, check=False)
    assert r.error is None, r.error
    assert at_wake(r) == [("h1", "poll"), ("h2", "poll"), ("h1", "tool-call"), ("h1", "tool-result")]
    # the timers beat on from the wake; nothing ran inside the sleep
    polls = [(e["t"], e["proc"]) for e in r.events("poll")]
    assert not [p for p in polls if 300_000 <= p[0] < WAKE] and (WAKE + 30_000, "h1") in polls


def test_a_step_deferred_by_the_sleep_also_waits_for_the_catch_up(tmp_path):
    steps = [{"at": "5m", "sleep": {"for": "2h"}}, {"at": "1h", "status": {"session": "bob"}}]
    r = run_scenario(scenario(steps), run_dir=tmp_path, overrides=TINY, check=False)
    assert at_wake(r) == [("h1", "poll"), ("h2", "poll"), ("h2", "tool-call"), ("h2", "tool-result")]


def test_concurrent_catch_up_is_one_wave_before_the_step(tmp_path):
    steps = [{"at": "5m", "sleep": {"for": "2h"}}, {"at": "7500s", "status": {"session": "alice"}}]
    r = run_scenario(scenario(steps, dispatch="concurrent"), run_dir=tmp_path, overrides=TINY, check=False)
    assert r.error is None, r.error
    waves = {}
    for e in r.history:
        if e["t"] == WAKE and e["proc"] != "orchestrator":
            waves.setdefault(e["dispatch"], []).append((e["proc"], e["kind"]))
    assert list(waves.values()) == [[("h1", "poll"), ("h2", "poll")], [("h1", "tool-call"), ("h1", "tool-result")]]


def test_expectations_inside_a_sleep_read_the_sleep_start_state(tmp_path):
    """Mail at 5m, a 2 h sleep from 5m, bob reads at the wake: at 7499s the mail is still unread."""
    steps = [{"at": "5m", "send": {"from": "alice", "to": "bob", "body": "hi"}},
             {"at": "5m", "sleep": {"for": "2h"}},
             {"at": "7500s", "read": {"session": "bob"}}]
    expect = [{"at": "7499s", "unread": {"session": "bob", "count": 1}},
              {"at": "7500s", "unread": {"session": "bob", "count": 0}},
              {"at": "1h", "roster": {"session": "alice"}},
              {"at": "5m", "registered": {"session": "bob", "is": True}}]
    r = run_scenario(scenario(steps, expect), run_dir=tmp_path, overrides=TINY, check=False)
    assert r.error is None, r.error
    seen = {e["data"]["index"]: e for e in r.events("expectation")}
    assert [(i, seen[i]["t"]) for i in range(4)] == [(0, 7_499_000), (1, WAKE), (2, 3_600_000), (3, 300_000)]
    assert seen[0]["data"]["detail"]["unread"] == 1 and seen[1]["data"]["detail"]["unread"] == 0
    # observed inside the sleep: between sleep-start and sleep-end in the history, and no process ran for them
    start, end = (r.events(k)[0]["i"] for k in ("sleep-start", "sleep-end"))
    assert all(start < seen[i]["i"] < end for i in (0, 2, 3))
    assert not [e for e in r.history[start:end] if e["proc"] != "orchestrator"]
    assert seen[2]["data"]["detail"] == {}  # no `list` dispatched to a sleeping machine
    assert [e["t"] for e in r.history if e["kind"] in ("sleep-start", "sleep-end")] == [300_000, WAKE]
    dispatches = [e["dispatch"] for e in r.history]
    assert dispatches == sorted(dispatches) and [e["t"] for e in r.history] == sorted(e["t"] for e in r.history)


@pytest.mark.rules("R14", "R18")
def test_unread_and_wakes_inside_a_sleep_agree_with_the_real_harness(tmp_path):
    """R14, R18: mail at 5m then a 2 h sleep: at 7499s bob has no wake and 1 unread
    (the state at that time); the wake's catch-up delivers and bob reads."""
    steps = [{"at": "5m", "send": {"from": "alice", "to": "bob", "body": "after lunch"}},
             {"at": "5m", "sleep": {"for": "2h"}},
             {"at": "7500s", "broadcast": {"from": "alice", "body": "back online"},
              "expect": {"ok": True, "matches": "^\\[broadcast\\] to 1 session\nrecipients: {bob}\n\n"}}]
    expect = [{"at": "7499s", "unread": {"session": "bob", "count": 1}},
              {"at": "7499s", "wakes": {"session": "bob", "count": 0}},
              {"unread": {"session": "bob", "count": 0}}]
    r = run_scenario(scenario(steps, expect), run_dir=tmp_path)
    assert r.error is None, r.error
    bad = [(v.check, v.message) for v in r.verdicts if v.check.startswith(("expect#", "step#")) and v.status != "pass"]
    assert not bad
