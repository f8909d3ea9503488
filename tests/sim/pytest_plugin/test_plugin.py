"""The scenario pytest plugin end to end, through a real pytest in a subprocess.

The engine is stood in for by a conftest in the pytester directory that
implements the plugin's `pytest_sim_run_scenario` hook, so these tests pin
collection, ids, options, the failure story, the kept report and the tally
without running a simulation.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path
from types import SimpleNamespace

import pytest

import repo

pytest_plugins = ["pytester"]

ROOT = repo.ROOT
HEADER = "# yaml-language-server: $schema=../../simulator/scenario/scenario.schema.json\n"

SCENARIO = HEADER + """\
name: {name}
seed: 3
markers: [{markers}]
duration: 10m
processes:
  - id: h1
    sessions:
      - id: alice
      - id: bob
steps:
  - at: 1m
    send: {{from: alice, to: bob}}
"""

# A stand-in engine, answering the plugin's own hook: a scenario whose name
# contains "fail" breaks P3 and a reach claim; "boom" raises. Every call is
# logged to runs.jsonl with its seed. The run report is the real one, drawn
# from the one-event history written here.
FAKE_ENGINE = '''
import json
from pathlib import Path
from simulator.result import RunResult, Verdict


def pytest_sim_run_scenario(spec, run_dir, seed, wall_timeout_s):
    with open(Path(__file__).parent / "runs.jsonl", "a") as log:
        log.write(json.dumps({"name": spec.name, "seed": seed}) + "\\n")
    if "boom" in spec.name:
        raise RuntimeError("engine exploded")
    ok = "fail" not in spec.name
    wake = {"i": 0, "t": 90000, "dispatch": 1, "proc": "h2", "session": "bob", "kind": "wake",
            "data": {"senders": ["ba-sil-00001"], "count": 1}}
    history = Path(run_dir) / "history.jsonl"
    history.write_text(json.dumps(wake, sort_keys=True) + "\\n")
    verdicts = [
        Verdict("P1", "single-deliverer", "pass", rules=("R25",)),
        Verdict("P3", "at-least-once", "pass" if ok else "fail", "bob had unread mail and no wake came.",
                ("R18", "R19"), [wake]),
        Verdict("reach:re-nudge", "re-nudge", "pass" if ok else "not-reached"),
    ]
    return RunResult(spec.name, seed, Path(run_dir), Path(run_dir) / "thatch.db", history, [wake], verdicts,
                     0.1, 600000, 42)
'''


def _plugin_args() -> list[str]:
    installed = any(ep.name == "thatch_scenarios" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "simulator.pytest_plugin"]


@pytest.fixture
def sim(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    pytester.makeini("[pytest]\nscenario_paths = extra\n")
    pytester.makeconftest(FAKE_ENGINE)
    (pytester.path / "scenarios" / "basic").mkdir(parents=True)

    def write(rel: str, name: str, markers: str = "") -> None:
        path = pytester.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(SCENARIO.format(name=name, markers=markers))

    def run(*args: str):
        return pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider", "-p", "no:randomly",
                                             "-p", "no:benchmark", "-p", "no:hypothesispytest", *args)

    def runs() -> list[dict]:
        log = pytester.path / "runs.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return SimpleNamespace(path=pytester.path, write=write, run=run, runs=runs)


def test_collection_ids_and_where_scenarios_live(sim):
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    sim.write("scenarios/deep/er/other.yaml", "other-one")
    sim.write("extra/listed.yaml", "listed-by-ini")
    sim.write("elsewhere/ignored.yaml", "not-a-scenario-dir")
    result = sim.run("--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "extra/listed.yaml::listed-by-ini",
        "scenarios/basic/good.yaml::two-tabs",
        "scenarios/deep/er/other.yaml::other-one",
        "3 tests collected*",
    ])
    result.stdout.no_fnmatch_line("*ignored*")


def test_seed_override_and_repeat(sim):
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    result = sim.run("--sim-seed", "7", "--sim-repeat", "2", "-v")
    result.stdout.fnmatch_lines(["*scenarios/basic/good.yaml::two-tabs?seed=7? PASSED*",
                                 "*scenarios/basic/good.yaml::two-tabs?seed=8? PASSED*"])
    assert sim.runs() == [{"name": "two-tabs", "seed": 7}, {"name": "two-tabs", "seed": 8}]


def test_default_seed_is_the_files_own(sim):
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    assert sim.run("-q").ret == 0
    assert sim.runs() == [{"name": "two-tabs", "seed": 3}]


def test_failing_scenario_tells_the_story_and_the_rerun(sim):
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    sim.write("scenarios/basic/fail.yaml", "two-tabs-fail")
    result = sim.run("--sim-seed", "7", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "P3, reach:re-nudge failed in scenario two-tabs-fail with seed 7 (42 dispatches, 10m virtual, 0.1s wall)",
        "",
        "P3 at-least-once [[]R18 R19[]]: FAIL",
        "  bob had unread mail and no wake came.",
        '  +1m30s  h2/bob  wake  senders=["ba-sil-00001"] count=1',
        "",
        "reach:re-nudge re-nudge: NOT REACHED",
        "",
        "rerun: pytest 'scenarios/basic/fail.yaml::two-tabs-fail' --sim-seed 7 -p no:xdist",
        "   or: python -m simulator run scenarios/basic/fail.yaml --seed 7",
        "run dir: *",
        "report: */reports/runs/two-tabs-fail",
    ])
    result.stdout.fnmatch_lines([
        "*= scenario checks =*",
        "check * checked  passed  failed  not reached",
        "P1 single-deliverer * 2 * 2 * 0 * 0",
        "P3 at-least-once * 2 * 1 * 1 * 0",
        "reach:re-nudge * 2 * 1 * 0 * 1",
    ])
    # only the failed run is kept under reports/runs (default --sim-report failed), with its report page
    assert sorted(p.name for p in (sim.path / "reports" / "runs").iterdir()) == ["two-tabs-fail"]
    kept = sim.path / "reports" / "runs" / "two-tabs-fail"
    page = (kept / "index.html").read_text()
    assert "two-tabs-fail" in page and 'id="w1"' in page  # the report of this run, its witness marked
    assert (kept / "history.jsonl").read_text().count("\n") == 1
    props = {case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
             for case in ET.parse(sim.path / "junit.xml").iter("testcase")}
    assert props["two-tabs-fail"]["seed"] == "7"
    assert props["two-tabs-fail"]["rerun"] == "pytest 'scenarios/basic/fail.yaml::two-tabs-fail' --sim-seed 7 -p no:xdist"
    assert props["two-tabs"]["scenario_file"] == "scenarios/basic/good.yaml"


def test_malformed_file_is_an_error_for_that_file_alone(sim):
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    (sim.path / "scenarios" / "basic" / "bad.yaml").write_text(HEADER + "name: broken\nduration: 1x\nprocesses:\n  - id: h1\n")
    result = sim.run("-rE")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([
        "*ERROR at setup of invalid scenario file scenarios/basic/bad.yaml*",
        "scenarios/basic/bad.yaml:3: duration: '1x' is not a duration — write a number with a unit: 500ms, 90s, 15m, 2h, 7d, or units combined largest first: 5m30s, 2h10m, 1d2h",
    ])
    result.stdout.no_fnmatch_line("*Traceback*")
    assert result.ret == 1


def test_markers_select_scenarios_and_report_always_keeps_passing_runs(sim):
    sim.write("scenarios/basic/slow.yaml", "slow-one", markers="slow")
    sim.write("scenarios/basic/quick.yaml", "quick-one")
    result = sim.run("-q", "-m", "slow", "--sim-report", "always", "--strict-markers")
    result.assert_outcomes(passed=1, deselected=1)
    assert (sim.path / "reports" / "runs" / "slow-one" / "index.html").exists()


def test_engine_exception_keeps_its_traceback_and_gets_the_rerun_line(sim):
    sim.write("scenarios/basic/boom.yaml", "boom-one")
    result = sim.run("-q")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: engine exploded*", "*rerun*",
                                 "pytest 'scenarios/basic/boom.yaml::boom-one' --sim-seed 3 -p no:xdist"])


@pytest.mark.slow  # ~4 s: two xdist workers start a full pytest each
def test_xdist_workers_agree_on_ids_and_the_tally_sees_every_run(sim):
    pytest.importorskip("xdist")
    for i in range(3):
        sim.write(f"scenarios/basic/s{i}.yaml", f"scenario-{i}")
    sim.write("scenarios/basic/fail.yaml", "scenario-fail")
    result = sim.run("-n", "2", "--sim-repeat", "2")
    result.assert_outcomes(passed=6, failed=2)
    result.stdout.fnmatch_lines(["P1 single-deliverer * 8 * 8 * 0 * 0"])
