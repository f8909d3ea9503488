"""The scenario pytest plugin end to end, through a real pytest in a subprocess.

The engine is stood in for by a conftest in the pytester directory that
implements the plugin's `pytest_sim_run_scenario` hook, so these tests pin
collection, ids, options, the failure story, the kept report and the tally
without running a simulation.
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import sys
import xml.etree.ElementTree as ET
from importlib.metadata import entry_points
from pathlib import Path
from types import SimpleNamespace

import pytest

import repo

pytest_plugins = ["pytester"]

ROOT = repo.ROOT
HEADER = "# yaml-language-server: $schema=../../simulator/scenario/scenario.schema.json\n"

SCENARIO = """\
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
# contains "fail" breaks P3, a reach claim and each point expectation; "boom"
# raises. Every call is logged to runs.jsonl with its seed, run directory and
# wall budget, every collected item's location to locations.jsonl. P2 is
# always skipped (the tally shows no row for it). The run report is the real
# one, drawn from the one-event history written here.
FAKE_ENGINE = '''
import json
from pathlib import Path
from simulator.result import RunResult, Verdict


def pytest_collection_finish(session):
    with open(Path(__file__).parent / "locations.jsonl", "a") as log:
        log.writelines(json.dumps([item.nodeid, *item.location]) + "\\n" for item in session.items)


def pytest_sim_run_scenario(spec, run_dir, seed, wall_timeout_s):
    with open(Path(__file__).parent / "runs.jsonl", "a") as log:
        log.write(json.dumps({"name": spec.name, "seed": seed, "run_dir": str(run_dir),
                              "timeout": wall_timeout_s}) + "\\n")
    if "boom" in spec.name:
        raise RuntimeError("engine exploded")
    ok = "fail" not in spec.name
    wake = {"i": 0, "t": 90000, "dispatch": 1, "proc": "h2", "session": "bob", "kind": "wake",
            "data": {"senders": ["ba-sil-00001"], "count": 1}}
    history = Path(run_dir) / "history.jsonl"
    history.write_text(json.dumps(wake, sort_keys=True) + "\\n")
    verdicts = [
        Verdict("P1", "single-deliverer", "pass", rules=("R25",)),
        Verdict("P2", "ordering", "skipped"),
        Verdict("P3", "at-least-once", "pass" if ok else "fail", "bob had unread mail and no wake came.",
                ("R18", "R19"), [wake]),
        Verdict("reach:re-nudge", "re-nudge", "pass" if ok else "not-reached"),
    ] + [Verdict(f"expect#{i}", "wakes of bob at end", "pass" if ok else "fail",
                 "bob got 3 wakes by end, want exactly 1")
         for i, _ in enumerate(spec.expect)]
    return RunResult(spec.name, seed, Path(run_dir), Path(run_dir) / "thatch.db", history, [wake], verdicts,
                     0.1, 600000, 42)
'''


def _plugin_args() -> list[str]:
    installed = any(ep.name == "thatch_scenarios" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "simulator.pytest_plugin"]


@pytest.fixture
def sim(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.delenv("CI", raising=False)  # pytest words its short summary differently on CI
    monkeypatch.setenv("COLUMNS", "200")  # and trims it to the terminal's width
    (pytester.path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(pytester.path / "tmp"))  # the kept run directories of failing items
    pytester.makeini("[pytest]\nsim_scenario_paths = extra\n")
    pytester.makeconftest(FAKE_ENGINE)

    def write(rel: str, name: str, markers: str = "", header: str = HEADER) -> Path:
        path = pytester.path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header + SCENARIO.format(name=name, markers=markers))
        return path

    def run(*args: str):
        return pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:randomly", "-p", "no:benchmark",
                                             "-p", "no:hypothesispytest", *args)

    def runs() -> list[dict]:
        log = pytester.path / "runs.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return SimpleNamespace(path=pytester.path, write=write, run=run, runs=runs, pytester=pytester)


def _rerun_args(result) -> list[str]:
    """The printed `rerun: pytest ...` command, as arguments after `pytest`."""
    line = next(ln for ln in result.stdout.lines if ln.startswith("rerun: pytest "))
    return shlex.split(line[len("rerun: pytest "):])


def test_collection_is_opt_in(sim):
    """Claimed: the schema comment anywhere, ini sim_scenario_paths; not: any YAML under a `scenarios/` dir."""
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    sim.write("deep/er/other.yaml", "other-one")
    sim.write("extra/listed.yaml", "listed-by-ini", header="")
    sim.write("scenarios/unrelated/config.yaml", "no-header-here", header="")
    sim.write("scenarios/unrelated/ci.yaml", "other-schema", header="# yaml-language-server: $schema=https://json.schemastore.org/github-workflow.json\n")
    result = sim.run("--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "deep/er/other.yaml::other-one",
        "extra/listed.yaml::listed-by-ini",
        "scenarios/basic/good.yaml::two-tabs",
        "3 tests collected*",
    ])
    result.stdout.no_fnmatch_line("*unrelated*")


def test_under_a_scenario_root_no_yaml_file_drops_out_silently(sim):
    """Under ini sim_scenario_roots a YAML file without the schema comment is an error item naming the file and
    the comment to write; one whose first line is the exclusion mark is skipped with its reason; outside the
    roots the plugin still claims nothing."""
    sim.pytester.makeini("[pytest]\nsim_scenario_roots = scenarios\n")
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    sim.write("scenarios/basic/forgot.yaml", "forgot-the-comment", header="")
    (sim.path / "scenarios/basic/seeds.yml").write_text("# thatch-sim: not a scenario — the explorer's seeds\na: 1\n")
    sim.write("elsewhere/config.yaml", "not-ours", header="")
    result = sim.run("-rs", "scenarios", "elsewhere")
    result.assert_outcomes(passed=1, skipped=1, errors=1)
    result.stdout.fnmatch_lines([
        "scenarios/basic/forgot.yaml:1: no schema comment on the first line: without it this file would silently "
        "never run — start it with `# yaml-language-server: $schema=../../*/simulator/scenario/scenario.schema.json`, "
        "or, if it is no scenario, with `# thatch-sim: not a scenario — <why>`",
    ])
    result.stdout.fnmatch_lines(["SKIPPED [1] scenarios/basic/seeds.yml: not a scenario: the explorer's seeds"])
    result.stdout.no_fnmatch_line("*elsewhere*")


def test_the_gate_fails_on_a_file_neither_run_nor_excluded(sim):
    """scripts/check_collected.py (run by scripts/main.sh after the scenario gate) names each YAML file under
    scenarios/ that has no test case in junit.xml and no exclusion mark: here one pytest was told to ignore."""
    sim.pytester.makeini("[pytest]\nsim_scenario_roots = scenarios\n")
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    sim.write("scenarios/quiet/ignored.yaml", "ignored-one")
    (sim.path / "scenarios/basic/seeds.yml").write_text("# thatch-sim: not a scenario — data\na: 1\n")
    script = [sys.executable, str(ROOT / "scripts" / "check_collected.py"), "junit.xml", "scenarios"]
    sim.run("scenarios", "--junitxml=junit.xml", "--ignore=scenarios/quiet")
    gate = sim.pytester.run(*script)
    assert gate.ret == 1
    gate.stdout.fnmatch_lines(["scenarios/quiet/ignored.yaml: neither run nor excluded: pytest never collected it*",
                               "scenario files: 3 under scenarios, 1 excluded, 1 neither run nor excluded"])
    sim.run("scenarios", "--junitxml=junit.xml")
    assert sim.pytester.run(*script).ret == 0


def test_a_file_named_on_the_command_line_is_collected_and_its_rerun_command_works(sim):
    """A file outside every scenario place, without the schema comment: the printed rerun command reruns it."""
    sim.write("elsewhere/broken-on-purpose.yaml", "named-fail", header="")
    first = sim.run("elsewhere/broken-on-purpose.yaml", "--sim-seed", "9")
    first.assert_outcomes(failed=1)
    args = _rerun_args(first)
    assert args == ["elsewhere/broken-on-purpose.yaml::named-fail", "--sim-seed", "9", "-p", "no:xdist"]
    again = sim.run(*args)
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["P3, reach:re-nudge failed in scenario named-fail with seed 9 *"])
    assert [r["seed"] for r in sim.runs()] == [9, 9]


def test_seed_override_repeat_and_ids_that_k_can_select(sim):
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    result = sim.run("--sim-seed", "7", "--sim-repeat", "2", "-v")
    result.stdout.fnmatch_lines(["*scenarios/basic/good.yaml::two-tabs?seed7? PASSED*",
                                 "*scenarios/basic/good.yaml::two-tabs?seed8? PASSED*"])
    assert [r["seed"] for r in sim.runs()] == [7, 8]
    picked = sim.run("--sim-seed", "7", "--sim-repeat", "2", "-k", "seed8", "-q")
    picked.assert_outcomes(passed=1, deselected=1)
    assert [r["seed"] for r in sim.runs()] == [7, 8, 8]


def test_default_seed_is_the_files_own_and_a_passing_run_leaves_no_directory(sim):
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    assert sim.run("-q").ret == 0
    (run,) = sim.runs()
    assert run["seed"] == 3 and run["timeout"] == 120
    assert not Path(run["run_dir"]).exists()
    assert not (sim.path / "reports").exists()


def test_failing_scenario_tells_the_story_the_headline_and_the_rerun(sim):
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    sim.write("scenarios/basic/fail.yaml", "two-tabs-fail")
    result = sim.run("--sim-seed", "7", "--junitxml=junit.xml", "-rf")
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
        "*= scenario checks on thatch-core =*",
        "check * checked  passed  failed  not reached  n/a  judged",
        "P1 single-deliverer * 2 * 2 * 0 * 0 * 0 * 0",
        "P3 at-least-once * 2 * 1 * 1 * 0 * 0 * 0",
        "reach:re-nudge * 2 * 1 * 0 * 1 * 0 * -",
        "*short test summary info*",
        ("FAILED scenarios/basic/fail.yaml::two-tabs-fail - "
         "P3 at-least-once: bob had unread mail and no wake came. (+1 more)"),
    ])
    result.stdout.no_fnmatch_line("P2 *")  # skipped by every run: no all-zero row
    failed_run = next(r for r in sim.runs() if r["name"] == "two-tabs-fail")
    assert (Path(failed_run["run_dir"]) / "history.jsonl").exists()  # kept, and named in the story
    assert f"run dir: {failed_run['run_dir']}" in result.stdout.lines
    # only the failed run is kept under reports/runs (default --sim-report failed), with its report page
    assert sorted(p.name for p in (sim.path / "reports" / "runs").iterdir()) == ["two-tabs-fail"]
    kept = sim.path / "reports" / "runs" / "two-tabs-fail"
    page = (kept / "index.html").read_text()
    assert "two-tabs-fail" in page and 'id="w1"' in page  # the report of this run, its witness marked
    assert (kept / "history.jsonl").read_text().count("\n") == 1
    cases = {case.get("name"): case for case in ET.parse(sim.path / "junit.xml").iter("testcase")}
    props = {name: {p.get("name"): p.get("value") for p in case.iter("property")} for name, case in cases.items()}
    assert props["two-tabs-fail"]["seed"] == "7"
    assert props["two-tabs-fail"]["rerun"] == (
        "pytest 'scenarios/basic/fail.yaml::two-tabs-fail' --sim-seed 7 -p no:xdist")
    assert props["two-tabs"] == {"seed": "7",
                                 "rerun": "pytest 'scenarios/basic/good.yaml::two-tabs' --sim-seed 7 -p no:xdist",
                                 "scenario_file": "scenarios/basic/good.yaml",
                                 "sut": "thatch-core"}  # the system under test; no verdict blob
    failure = cases["two-tabs-fail"].find("failure")
    assert failure.get("message") == "P3 at-least-once: bob had unread mail and no wake came. (+1 more)"
    assert "rerun: pytest" in failure.text


# Appended to SCENARIO: the claims a file states one by one, at lines 14-19 of the file.
CLAIMS = """\
properties:
  - P1
  - P3
reaches: [re-nudge]
expect:
  - wakes: {session: bob, count: 1}
"""


def test_a_failure_names_the_file_and_line_of_each_broken_claim(sim):
    """Item locations are the `name:` line; each failing verdict the file states (a listed property, a reach
    claim, an expectation) is shown at its line, and `--tb=line` names the first one's, else the `name:` line."""
    listed = sim.write("scenarios/basic/listed.yaml", "listed-fail")
    listed.write_text(listed.read_text() + CLAIMS)
    sim.write("scenarios/basic/fail.yaml", "two-tabs-fail")
    result = sim.run("-p", "no:xdist")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "_* scenario listed-fail _*",
        "P3, reach:re-nudge, expect#0 failed in scenario listed-fail with seed 3 *",
        "",
        "scenarios/basic/listed.yaml:16: P3 at-least-once [[]R18 R19[]]: FAIL",
        "  bob had unread mail and no wake came.",
        "*",
        "scenarios/basic/listed.yaml:17: reach:re-nudge re-nudge: NOT REACHED",
        "",
        "scenarios/basic/listed.yaml:19: expect#0 wakes of bob at end: FAIL",
        "  bob got 3 wakes by end, want exactly 1",
        "",
        "rerun: pytest 'scenarios/basic/listed.yaml::listed-fail' --sim-seed 3 -p no:xdist",
    ])
    result.stdout.fnmatch_lines(["_* scenario two-tabs-fail _*", "*", "", "P3 at-least-once [[]R18 R19[]]: FAIL"])
    locations = {node: rest for node, *rest in map(json.loads, (sim.path / "locations.jsonl").read_text().splitlines())}
    assert locations == {
        "scenarios/basic/fail.yaml::two-tabs-fail": ["scenarios/basic/fail.yaml", 1, "scenario two-tabs-fail"],
        "scenarios/basic/listed.yaml::listed-fail": ["scenarios/basic/listed.yaml", 1, "scenario listed-fail"]}
    crashes = sim.run("-p", "no:xdist", "--tb=line")
    crashes.stdout.fnmatch_lines([
        "scenarios/basic/fail.yaml:2: P3 at-least-once: bob had unread mail and no wake came. (+1 more)",
        "scenarios/basic/listed.yaml:16: P3 at-least-once: bob had unread mail and no wake came. (+2 more)",
    ])


def test_lf_after_a_failure_reruns_the_failed_item_only(sim):
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    sim.write("scenarios/basic/fail.yaml", "two-tabs-fail")
    sim.run("-q").assert_outcomes(passed=1, failed=1)
    again = sim.run("-q", "--lf")
    again.assert_outcomes(failed=1)
    assert [r["name"] for r in sim.runs()] == ["two-tabs-fail", "two-tabs", "two-tabs-fail"]


def test_ini_defaults_for_report_report_dir_and_timeout(sim):
    sim.pytester.makeini("[pytest]\nsim_report = always\nsim_report_dir = kept/runs\nsim_timeout = 7\n")
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    assert sim.run("-q").ret == 0
    assert (sim.path / "kept" / "runs" / "two-tabs" / "index.html").exists()
    assert sim.runs()[-1]["timeout"] == 7
    # the command line wins over the ini file
    assert sim.run("-q", "--sim-report", "always", "--sim-report-dir", "elsewhere", "--sim-timeout", "3").ret == 0
    assert (sim.path / "elsewhere" / "two-tabs" / "index.html").exists()
    assert sim.runs()[-1]["timeout"] == 3
    sim.pytester.makeini("[pytest]\nsim_report = sometimes\n")
    bad = sim.run("-q")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*sim_report = 'sometimes' — write one of always, failed, never*"])


def test_malformed_file_is_an_error_for_that_file_alone(sim):
    sim.write("scenarios/basic/good.yaml", "two-tabs")
    (sim.path / "scenarios" / "basic" / "bad.yaml").write_text(
        HEADER + "name: broken\nduration: 1x\nprocesses:\n  - id: h1\n")
    result = sim.run("-rE")
    result.assert_outcomes(passed=1, errors=1)
    message = ("scenarios/basic/bad.yaml:3: duration: '1x' is not a duration — write a number with a unit: 500ms, "
               "90s, 15m, 2h, 7d, or units combined largest first: 5m30s, 2h10m, 1d2h")
    result.stdout.fnmatch_lines(["*ERROR at setup of invalid scenario file scenarios/basic/bad.yaml*", message])
    result.stdout.fnmatch_lines(
        ["ERROR scenarios/basic/bad.yaml::load-error - scenarios/basic/bad.yaml:3: duration: *"])
    result.stdout.no_fnmatch_line("*Traceback*")
    assert result.ret == 1


def test_markers_are_registered_once_and_select_scenarios(sim):
    sim.write("scenarios/basic/slow.yaml", "slow-one", markers="slow")
    sim.write("scenarios/basic/quick.yaml", "quick-one")
    result = sim.run("-q", "-m", "slow", "--sim-report", "always", "--strict-markers")
    result.assert_outcomes(passed=1, deselected=1)
    assert (sim.path / "reports" / "runs" / "slow-one" / "index.html").exists()
    listed = sim.run("--markers").stdout.lines
    assert [ln for ln in listed if ln.startswith("@pytest.mark.slow")] == [
        "@pytest.mark.slow: long-running scenario or test"]
    assert len([ln for ln in listed if ln.startswith("@pytest.mark.race")]) == 1


def test_an_unknown_marker_is_a_load_error_at_its_line_not_a_pytest_warning(sim):
    sim.write("scenarios/basic/typo.yaml", "typo-marker", markers="slwo")
    result = sim.run("-rE")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["scenarios/basic/typo.yaml:4: markers[[]0[]]: unknown marker `slwo` — did you mean `slow`?*"])
    result.stdout.no_fnmatch_line("*PytestUnknownMarkWarning*")


def test_engine_exception_keeps_its_traceback_and_gets_the_rerun_line(sim):
    sim.write("scenarios/basic/boom.yaml", "boom-one")
    result = sim.run("-q", "-rf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*RuntimeError: engine exploded*", "*rerun*",
                                 "pytest 'scenarios/basic/boom.yaml::boom-one' --sim-seed 3 -p no:xdist",
                                 "python -m simulator run scenarios/basic/boom.yaml --seed 3",
                                 "run dir: *",
                                 "FAILED scenarios/basic/boom.yaml::boom-one - RuntimeError: engine exploded"])


@pytest.mark.slow  # ~4 s: two xdist workers start a full pytest each
def test_xdist_workers_agree_on_ids_and_the_controller_tallies_and_summarises(sim, monkeypatch):
    pytest.importorskip("xdist")
    monkeypatch.setenv("CI", "true")  # on CI pytest prints the whole message: it must still be one line
    for i in range(3):
        sim.write(f"scenarios/basic/s{i}.yaml", f"scenario-{i}")
    sim.write("scenarios/basic/fail.yaml", "scenario-fail")
    result = sim.run("-n", "2", "--sim-repeat", "2", "--dist", "worksteal", "-rf", "--tb=line")
    result.assert_outcomes(passed=6, failed=2)
    result.stdout.fnmatch_lines(["P1 single-deliverer * 8 * 8 * 0 * 0"])
    headline = "P3 at-least-once: bob had unread mail and no wake came. (+1 more)"
    # the crash location travels from the worker: the `name:` line, P3 being judged by default
    assert result.stdout.lines.count(f"scenarios/basic/fail.yaml:2: {headline}") == 2
    summary = [ln for ln in result.stdout.lines if ln.startswith("FAILED ")]
    assert sorted(summary) == [f"FAILED scenarios/basic/fail.yaml::scenario-fail[seed{s}] - {headline}" for s in (3, 4)]


def _private_names(tree: ast.AST):
    """Underscore attributes read anywhere, and underscore methods defined in classes (overrides)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            yield node.lineno, node.attr
        elif isinstance(node, ast.ClassDef):
            yield from ((f.lineno, f.name) for f in node.body if isinstance(f, ast.FunctionDef))


def test_the_plugin_uses_no_private_pytest_api():
    """No `config._tmp_path_factory`, no `_repr_failure_py` override: they change with any pytest release."""
    private = [f"{path.name}:{line} {name}"
               for path in sorted((ROOT / "simulator" / "pytest_plugin").glob("*.py"))
               for line, name in _private_names(ast.parse(path.read_text(encoding="utf-8")))
               if name.startswith("_") and not name.startswith("__")]
    assert private == []


def test_a_failing_file_outside_any_project_writes_nothing_into_the_working_directory(sim):
    """`pytest FILE` with no ini file: the failure names the run directory it kept, and no reports/runs/
    appears where the command ran (the option or ini key still chooses a place)."""
    (sim.path / "tox.ini").unlink()
    sim.write("stories/fail.yaml", "lonely-fail")
    result = sim.run("stories/fail.yaml", "--rootdir", str(sim.path))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["run dir: *"])
    result.stdout.no_fnmatch_line("report: *")
    assert not (sim.path / "reports").exists()
    result = sim.run("stories/fail.yaml", "--rootdir", str(sim.path), "--sim-report-dir", "kept")
    assert (sim.path / "kept" / "lonely-fail" / "history.jsonl").exists()
