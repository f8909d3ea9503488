"""`thatch-sim explore` in-process: runs, budget, determinism, printing; and the campaign's bookkeeping."""

from __future__ import annotations

import argparse
import io
from collections import Counter

from simulator.explore import campaign
from simulator.explore.campaign import Settings, run_campaign
from simulator.explore.cli import arguments, main, settings_from
from simulator.explore.judge import Finding, Outcome
from simulator.explore.progress import Progress
from simulator.explore.swarm import SMALL
from simulator.scenario.loader import parse_scenario


def test_explore_checks_determinism_and_summarises_the_campaign(tmp_path, capsys):
    rc = main(["--seed", "3", "--runs", "3", "--size", "small", "--check-determinism", "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "seeds 3..5, 3 runs (size small)" in out
    assert "determinism: 3 seeds run twice, every history identical" in out
    assert "faults fired/armed:" in out and "runs in which each property judged something: P1" in out
    assert out.rstrip().endswith("no failure")


def test_print_shows_the_scenario_a_seed_names(capsys):
    assert main(["--seed", "17", "--runs", "2", "--size", "small", "--print"]) == 0
    out = capsys.readouterr().out
    first, second = out.split("---\n")
    assert first.startswith("# seed 17: hosts opencode")
    assert parse_scenario(first).spec.name == "explore-17" and parse_scenario(second).spec.name == "explore-18"


def _fake_runs(monkeypatch, outcomes):
    """run_spec answers from `outcomes` (one per call): the campaign's bookkeeping without a simulation."""
    calls = iter(outcomes)
    monkeypatch.setattr(campaign, "run_spec", lambda spec, settings, keep="failed": next(calls))


def test_a_history_difference_between_two_serial_runs_fails_the_seed(monkeypatch):
    same = [{"i": 0, "kind": "run-start"}, {"i": 1, "kind": "wake", "t": 30_000}]
    moved = [same[0], {"i": 1, "kind": "wake", "t": 31_000}]
    _fake_runs(monkeypatch, [Outcome(0, [], history=same), Outcome(0, [], history=same),
                             Outcome(1, [], history=same), Outcome(1, [], history=moved)])
    summary = run_campaign(Settings(runs=2, size=SMALL, check_determinism=True), Progress(io.StringIO(), tty=False))
    assert summary.runs == 2 and summary.failing == 1 and summary.determinism_checked == 2
    [failure] = summary.failures
    assert failure.seed == 1 and failure.check == "determinism" and failure.file is None
    assert failure.message.startswith("event 1 differs:") and '"t": 31000' in failure.message


def test_determinism_every_nth_seed_runs_only_those_twice(monkeypatch):
    """`--check-determinism 3` from seed 10: seeds 10 and 13 run twice in serial dispatch,
    11, 12 and 14 once in the dispatch their generator drew."""
    h = [{"i": 0, "kind": "run-start"}]
    dispatches = []
    real_generated = campaign.generated
    monkeypatch.setattr(campaign, "generated", lambda seed, settings, swarm=None: dispatches.append(
        (seed, campaign.checks_determinism(seed, settings))) or real_generated(seed, settings, swarm))
    _fake_runs(monkeypatch, [Outcome(10, [], history=h), Outcome(10, [], history=h), Outcome(11, [], history=h),
                             Outcome(12, [], history=h), Outcome(13, [], history=h), Outcome(13, [], history=h),
                             Outcome(14, [], history=h)])
    summary = run_campaign(Settings(seed=10, runs=5, size=SMALL, check_determinism=True, determinism_every=3),
                           Progress(io.StringIO(), tty=False))
    assert summary.runs == 5 and summary.failing == 0 and summary.determinism_checked == 2
    assert dispatches == [(10, True), (11, False), (12, False), (13, True), (14, False)]
    parser = argparse.ArgumentParser()
    arguments(parser)
    cases = ((["--check-determinism", "3"], True, 3), (["--check-determinism"], True, 1), ([], False, 1))
    for argv, checked, every in cases:
        settings = settings_from(parser.parse_args(["--seed", "10", *argv]))
        assert (settings.check_determinism, settings.determinism_every) == (checked, every), argv


def test_a_budget_and_max_failures_end_the_campaign(monkeypatch):
    failing = Outcome(0, [Finding("P3", "at-least-once", "no wake")], virtual_ms=60_000,
                      faults_fired=Counter(kill=1), faults_armed=Counter(kill=1), judged={"P3", "P4"})
    _fake_runs(monkeypatch, [Outcome(0, [], judged={"P4"}), failing, Outcome(2, [])])
    summary = run_campaign(Settings(runs=None, budget_s=3600, size=SMALL, max_failures=1, shrink=False),
                           Progress(io.StringIO(), tty=False))
    assert summary.runs == 2 and summary.failing == 1
    assert summary.judged == Counter({"P4": 2, "P3": 1}) and summary.faults_fired == Counter(kill=1)
    assert [f.check for f in summary.failures] == ["P3"] and summary.first_failure_s is not None
    assert "P9" in summary.never_judged()


def test_an_engine_error_that_does_not_come_back_is_flaky_not_a_failure(monkeypatch):
    broke = Outcome(0, [Finding("error", "engine error", "disk I/O error")])
    _fake_runs(monkeypatch, [broke, Outcome(0, []), Outcome(1, [Finding("P5", "no-loss", "lost")])])
    summary = run_campaign(Settings(runs=2, size=SMALL, shrink=False), Progress(io.StringIO(), tty=False))
    assert summary.failing == 1 and [f.check for f in summary.failures] == ["P5"]
    assert [(f.seed, f.check) for f in summary.flaky] == [(0, "error")]
