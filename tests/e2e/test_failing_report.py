"""A deliberately failing scenario, run by the real plugin and the real engine,
leaves a run report whose timeline shows the failure (issue: reports)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import xml.etree.ElementTree as ET

import pytest
import repo


pytest_plugins = ["pytester"]

FIXTURE = repo.FAILING_SCENARIOS / "renudge-never-comes.yaml"


def _rerun_args(result) -> list[str]:
    line = next(ln for ln in result.stdout.lines if ln.startswith("rerun: pytest "))
    return shlex.split(line[len("rerun: pytest "):])


@pytest.mark.rules("R18", "R21")
def test_failing_scenario_leaves_a_report_that_shows_the_failure(pytester, monkeypatch):
    """R18/R21: bob is re-nudged every 15 minutes, so an expectation of one wake
    fails; the plugin prints the story and the rerun command, and the run report
    (HTML timeline + history) highlights the wakes that break it. The file lives
    where the repository keeps it, outside every scenario directory, and the
    printed rerun command runs it again. The story names the failing expectation's file:line."""
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    # the subprocess runs this checkout's simulator, not whichever one is installed
    monkeypatch.setenv("PYTHONPATH", str(repo.ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("TMPDIR", str(pytester.mkdir("tmp")))
    pytester.makeini("[pytest]\n")
    fixture_dir = pytester.path / FIXTURE.relative_to(repo.ROOT).parent
    fixture_dir.mkdir(parents=True)
    shutil.copy(FIXTURE, fixture_dir / FIXTURE.name)

    result = pytester.runpytest_subprocess(str(FIXTURE.relative_to(repo.ROOT)), "-p", "no:xdist", "-rf")

    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "_* scenario renudge-never-comes _*",
        "expect#0 failed in scenario renudge-never-comes with seed 5*",
        "",
        # the line of `- wakes: {session: bob, count: 1}` in the file
        "tests/failing_scenarios/renudge-never-comes.yaml:25: expect#0 wakes of bob at end: FAIL",
        "  bob got 3 wakes by end, want exactly 1",
        "*+16m  h2/bob  wake*",
        ("rerun: pytest 'tests/failing_scenarios/renudge-never-comes.yaml::renudge-never-comes' "
         "--sim-seed 5 -p no:xdist"),
        ("FAILED tests/failing_scenarios/renudge-never-comes.yaml::renudge-never-comes - "
         "expect#0 *: bob got 3 wakes by end, want exactly 1"),
    ])
    again = pytester.runpytest_subprocess(*_rerun_args(result))
    again.assert_outcomes(failed=1)
    again.stdout.fnmatch_lines(["*bob got 3 wakes by end, want exactly 1*"])
    report = pytester.path / "reports" / "runs" / "renudge-never-comes"
    page = (report / "index.html").read_text()
    assert (report / "history.jsonl").stat().st_size > 0
    # Self-contained, with the failing check and its witnesses marked on the timeline.
    assert "http://" not in page.replace("http://www.w3.org", "") and "<script src" not in page
    assert "expect#0" in page and 'id="w1"' in page
    svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
    assert svgs
    for svg in svgs:
        ET.fromstring(svg)  # each drawing is well-formed markup
