"""The scenario-language forms end to end: written as YAML, loaded, run through the
real simulator (forked harnesses, the WAL database, the real checkers), and judged.

Each test pairs the form with what it exists to tell: a per-rolling-hour bound
that catches a poller ignoring the cap even when its properties are excluded,
replicated blocks that run as the processes and sessions they stand for, and an
observation at a sleep's end that sees the state before the catch-up beats.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from scenario_builders import explain
from simulator import run_scenario
from simulator.scenario.loader import parse_scenario
from thatch_core.poller import ChatPoller


class UncappedPoller(ChatPoller):
    """Ignores the rate cap (breaks R22)."""

    def __init__(self, store, **kw):
        super().__init__(store, **{**kw, "max_nudges_per_hour": 10**6})


def run_yaml(text: str, run_dir: Path, **overrides):
    spec = parse_scenario(textwrap.dedent(text), file="test.yaml").spec
    return run_scenario(spec, run_dir=run_dir, overrides=overrides or None, wall_timeout_s=60)


def statuses(result) -> dict[str, str]:
    return {v.check: v.status for v in result.verdicts}


PING_PONG = """\
    name: capped-ping-pong
    story: Two ping-pong agents; the cap paces them to six wakes per rolling hour.
    seed: 3
    duration: 2h
    drain: 1m
    properties: {exclude: [P2, P10]}
    processes:
      - id: h1
        sessions: [{id: alice, agent: ping-pong}]
      - id: h2
        sessions: [{id: bob, agent: ping-pong}]
    steps:
      - at: 1m
        send: {from: alice, to: bob, body: ping}
    expect:
      - wakes: {session: bob, between: [0, 2h], per_hour: {max: 6}}
    """


@pytest.mark.rules("R22")
def test_excluded_properties_are_not_checked_and_per_hour_still_catches_the_cap(tmp_path):
    """R22: `properties: {exclude: [P2, P10]}` checks every other property and
    drops those two (no verdict); a `per_hour` bound catches a poller that
    ignores the cap on its own, where the correct poller passes."""
    good = run_yaml(PING_PONG, tmp_path / "real")
    assert good.ok, explain(good)
    checked = statuses(good)
    assert "P2" not in checked and "P10" not in checked and checked["P1"] == "pass"
    assert checked["P8"] == "skipped"  # nothing to judge, and not claimed one by one: not NOT REACHED
    bad = run_yaml(PING_PONG, tmp_path / "broken", poller=UncappedPoller)
    v = bad.verdict("expect#0")
    assert v.status == "fail" and "in the hour from" in v.message and "want at most 6" in v.message, explain(bad)


@pytest.mark.rules("R12")
def test_replicated_blocks_run_as_the_processes_and_sessions_they_stand_for(tmp_path):
    """R12: three replicated processes of two sessions each and two replicated tabs:
    alice's broadcast reaches all eight, one stored row each."""
    result = run_yaml("""\
        name: replicated-world
        duration: 2m
        drain: 30s
        processes:
          - id: lead
            sessions:
              - id: alice
              - id: tab{i}
                replicas: 2
          - id: h{i}
            replicas: 3
            project: "p{i}"
            sessions:
              - id: a{i}
              - id: b{i}
                agent: silent
        steps:
          - at: 1m
            broadcast: {from: alice, body: hello}
            expect: {ok: true, contains: "[broadcast] to 8 sessions\\n"}
        expect:
          - messages: {from: alice, via_broadcast: true, count: 8}
          - wakes: {session: b3, count: 1}
        """, tmp_path / "run")
    assert result.ok, explain(result)
    starts = [e["data"]["target"] for e in result.history if e["kind"] == "process-start"]
    assert starts == ["lead", "h1", "h2", "h3"]
    hosted = {e["data"]["target"]: sorted(e["data"]["sessions"])
              for e in result.history if e["kind"] == "process-start"}
    assert hosted["lead"] == ["alice", "tab1", "tab2"] and hosted["h2"] == ["a2", "b2"]


SLEEPY = """\
    name: stale-at-the-wake
    seed: 19
    duration: 130m
    drain: 2m
    processes:
      - id: h1
        sessions: [{id: alice}]
      - id: h2
        sessions: [{id: bob}]
    steps:
      - at: 290s
        send: {from: alice, to: bob, body: later}
      - at: 5m
        sleep: {for: 2h}
    expect:
      - roster: {session: alice, stale: [alice, bob]}
        at: 7500s
        before_catch_up: true
      - wakes: {session: bob, count: 0}
        at: 7500s
        before_catch_up: true
      - wakes: {session: bob, count: 1}
        at: 7500s
    """


@pytest.mark.rules("R14", "R19")
def test_before_catch_up_observes_the_wake_instant_before_the_pollers_beat(tmp_path):
    """R14, R19: at a sleep's end the observation runs first: both rows are stale and
    bob has no wake yet; the catch-up at that same instant then wakes him."""
    result = run_yaml(SLEEPY, tmp_path / "run")
    assert result.ok, explain(result)
    at_wake = [e for e in result.history if e["t"] == 7_500_000]
    kinds = [e["kind"] for e in at_wake]
    assert kinds[:2] == ["expectation", "expectation"], kinds  # the two observations come first ...
    assert kinds[2] == "sleep-end" and "wake" in kinds[3:], kinds  # ... then the wake and its catch-up
    snapshot = at_wake[0]["data"]["detail"]["sessions"]
    assert snapshot["alice"]["stale"] and snapshot["bob"]["stale"]
