"""Every verdict that judges a step or a claim the file states gets that line (`place_verdicts`)."""

from __future__ import annotations

from simulator.result import Verdict
from simulator.scenario.loader import parse_scenario
from simulator.scenario.positions import place_verdicts, verdict_key_path

LISTED = """\
name: placed
duration: 10m
reaches: [re-nudge]
properties:
  - P1
  - P3
processes:
  - {id: h1, sessions: [{id: alice}, {id: bob}, {id: carol}]}
steps:
  - {at: 1m, send: {from: alice, to: bob}}
  - at: 2m
    read: {session: bob}
    expect: {ok: true}
  - at: 3m
    kill: {process: h1}
expect:
  - wakes: {session: bob, count: 1}
  - wakes:
      session: carol
      count: 0
"""

DEFAULTS = """\
name: by-default
duration: 10m
processes:
  - id: h1
    sessions:
      - id: alice
expect:
  - wakes: {session: alice, count: 0}
"""


def _lines(text: str, checks: list[str]) -> dict[str, object]:
    verdicts = [Verdict(check, "title", "fail") for check in checks]
    place_verdicts(verdicts, parse_scenario(text, file="placed.yaml"))
    return {v.check: v.line for v in verdicts}


def test_each_step_expectation_and_listed_claim_gets_its_line():
    lines = _lines(LISTED, ["P1", "P3", "reach:re-nudge", "step#1", "fault#2", "expect#0", "expect#1"])
    assert lines == {"P1": 5, "P3": 6, "reach:re-nudge": 3, "step#1": 13, "fault#2": 14, "expect#0": 17,
                     "expect#1": 18}


def test_what_the_file_does_not_state_one_by_one_gets_no_line():
    """A property judged by default, a policy's promise, an index the file does not have."""
    assert _lines(DEFAULTS, ["P3", "Q1", "expect#0", "expect#1", "step#0", "fault#0", "reach:re-nudge",
                             "expect#x"]) == {
        "P3": None, "Q1": None, "expect#0": 8, "expect#1": None, "step#0": None, "fault#0": None,
        "reach:re-nudge": None, "expect#x": None}


def test_key_paths_name_the_judged_entry():
    spec = parse_scenario(LISTED).spec
    assert [verdict_key_path(c, spec) for c in ("expect#1", "step#1", "fault#2", "reach:re-nudge", "P3", "P2")] == [
        ("expect", 1), ("steps", 1, "expect"), ("steps", 2), ("reaches", 0), ("properties", 1), None]
