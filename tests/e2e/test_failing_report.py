"""A deliberately failing scenario, run by the real plugin and the real engine,
leaves a run report whose timeline shows the failure (issue: reports)."""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import repo


pytest_plugins = ["pytester"]

FIXTURE = repo.FAILING_SCENARIOS / "renudge-never-comes.yaml"
SCHEMA = repo.SCHEMA


@pytest.mark.rules("R18", "R21")
def test_failing_scenario_leaves_a_report_that_shows_the_failure(pytester):
    """R18/R21: bob is re-nudged every 15 minutes, so an expectation of one wake
    fails; the plugin prints the story and the rerun command, and the run report
    (HTML timeline + history) highlights the wakes that break it."""
    (pytester.path / "simulator" / "schema").mkdir(parents=True)
    shutil.copy(SCHEMA, pytester.path / "simulator" / "schema" / SCHEMA.name)
    scenario_dir = pytester.path / "scenarios" / "demo"
    scenario_dir.mkdir(parents=True)
    shutil.copy(FIXTURE, scenario_dir / FIXTURE.name)

    result = pytester.runpytest_subprocess("scenarios", "-p", "no:cacheprovider", "-p", "no:xdist")

    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "*expect#0*failed in scenario renudge-never-comes with seed 5*",
        "*bob got 3 wakes by end, want exactly 1*",
        "*+16m  h2/bob  wake*",
        "*rerun: pytest 'scenarios/demo/renudge-never-comes.yaml::renudge-never-comes' --sim-seed 5*",
    ])
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
