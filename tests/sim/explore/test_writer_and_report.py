"""The YAML writer (the loader's inverse), the found-file story, progress lines, history diffs, the summary."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pytest

import repo
from simulator.explore.campaign import Settings, Summary
from simulator.explore.determinism import first_difference
from simulator.explore.progress import Progress
from simulator.explore.report import format_summary
from simulator.explore.story import tell
from simulator.explore.writer import document, scenario_yaml, spell_duration
from simulator.scenario.durations import parse_duration
from simulator.scenario.loader import load_scenario, parse_scenario
from simulator.scenario.model import Scenario


@pytest.mark.parametrize("ms", [0, 1, 999, 1000, 61_000, 465_000, 93_600_000, 90_061_001])
def test_durations_are_spelled_as_authors_write_them(ms):
    assert parse_duration(spell_duration(ms)) == ms
    assert spell_duration(465_000) == "7m45s" and spell_duration(0) == "0s"


def test_every_library_scenario_survives_the_writer():
    """The writer is the loader's inverse on everything the language says, not just on generated worlds."""
    files = sorted((repo.ROOT / "scenarios").rglob("*.yaml"))
    assert files
    for path in files:
        spec = load_scenario(path)
        back = parse_scenario(scenario_yaml(spec, schema_from=path.parent), file=str(path)).spec
        assert back == spec and document(back) == document(spec), path


def test_only_the_keys_given_are_written():
    """`crash.nth` given as 1 and left out mean different things: the writer keeps the difference."""
    base = {"name": "n", "duration": "5m", "processes": [{"id": "h1", "sessions": [{"id": "a"}]}]}
    crash = {"process": "h1", "before": "heartbeat"}
    given = Scenario.model_validate({**base, "steps": [{"at": "1m", "crash": {**crash, "nth": 1}}]})
    default = Scenario.model_validate({**base, "steps": [{"at": "1m", "crash": crash}]})
    assert "nth: 1" in scenario_yaml(given) and "nth" not in scenario_yaml(default)
    text = scenario_yaml(given, comments=("two\nlines",), schema_from=repo.ROOT / "scenarios" / "found")
    assert text.splitlines()[:3] == ["# yaml-language-server: $schema=../../simulator/scenario/scenario.schema.json",
                                     "# two", "# lines"]
    assert "  crash: {process: h1, before: heartbeat, nth: 1}" in text and "duration: 5m" in text


def test_the_story_tells_the_world_the_timeline_and_the_broken_property():
    doc = {"processes": [{"id": "oc1", "sessions": [{"id": "alice"}, {"id": "bob", "agent": {"kind": "silent"}}]},
                         {"id": "oc2", "start": "never", "sessions": []}],
           "steps": [{"at": 60_000, "send": {"from": "alice", "to": "bob"}},
                     {"at": 90_000, "kill": {"process": "oc1"}}]}
    story = tell(doc, "P3", "at-least-once", "bob had unread mail")
    assert story == ("oc1 (opencode) hosts alice (reader), bob (silent). At 1m alice sends bob a message; "
                     "at 1m30s oc1 is killed. Then P3 (at-least-once) fails: bob had unread mail")


def test_first_difference_names_the_event_where_two_histories_part():
    a = [{"i": 0, "kind": "run-start"}, {"i": 1, "kind": "wake", "t": 5}]
    assert first_difference(a, list(a)) is None
    diff = first_difference(a, [a[0], {"i": 1, "kind": "wake", "t": 6}])
    assert diff.startswith("event 1 differs:") and '"t": 5' in diff and '"t": 6' in diff
    assert "the history ended" in first_difference(a, a[:1])


def test_progress_draws_a_bar_on_a_terminal_and_plain_lines_elsewhere():
    tty = io.StringIO()
    bar = Progress(tty, total=4, tty=True)
    bar.update(1, 0)
    bar.note("seed 3: P3 fails")
    bar.update(2, 1)
    bar.close()
    out = tty.getvalue()
    assert "\r" in out and "[######" in out and "1/4 runs" in out and "explore: seed 3: P3 fails\n" in out
    log = io.StringIO()
    plain = Progress(log, total=4, tty=False, every_s=0.0)
    plain.update(1, 0)
    plain.update(2, 0)
    assert "\r" not in log.getvalue() and log.getvalue().count("explore: ") == 2


def test_the_summary_flags_a_property_that_never_judged_anything():
    summary = Summary(runs=3, explore_s=6.0, virtual_ms=3 * 3_600_000, first_seed=0, last_seed=2,
                      faults_fired=Counter(kill=2), faults_armed=Counter(kill=2, crash=1),
                      judged=Counter({p: 3 for p in ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P10")}))
    text = format_summary(summary, Settings(out=Path("x")))
    assert "3 runs" in text and "30 runs/min" in text and "virtual time: 3.0 h" in text
    assert "crash 0/1, kill 2/2" in text
    assert "NEVER JUDGED in this campaign: P9" in text and text.endswith("no failure")
