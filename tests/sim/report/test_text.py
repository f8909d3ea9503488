"""The failure story names `file:line` on each failed verdict that judges a step or claim of the file."""

from __future__ import annotations

import json

from reportkit import example_result
from scenario_builders import run, two_tabs
from simulator.report.text import format_failure


def test_each_failed_verdict_with_a_line_is_headed_by_file_and_line(tmp_path):
    result = example_result(tmp_path / "run")
    for verdict in result.verdicts:
        verdict.line = {"expect#0": 31, "reach:re-nudge": 6, "fault#2": 20}.get(verdict.check)
    lines = format_failure(result, file="scenarios/x.yaml", name=result.scenario).splitlines()
    assert "scenarios/x.yaml:31: expect#0 wakes: FAIL" in lines
    assert "scenarios/x.yaml:6: reach:re-nudge re-nudge after the crash: NOT REACHED" in lines
    assert [ln for ln in lines if ln.startswith("P3 ")] == ["P3 at-least-once [R18 R21 R23]: FAIL"]
    assert not any("fault#2" in ln for ln in lines)  # passed: not in the story


def test_a_scenario_built_in_python_gives_no_line(tmp_path):
    """No file, no positions: the run's verdicts carry no line and the story names none."""
    spec = two_tabs("no-file", [{"at": "10s", "send": {"from": "alice", "to": "bob", "body": "hi"}}],
                    expect=[{"wakes": {"session": "bob", "count": 5}}])
    result = run(spec, tmp_path / "run")
    failed = result.verdict("expect#0")
    assert failed.status == "fail" and failed.line is None
    assert all(v.line is None for v in result.verdicts)
    assert f"expect#0 {failed.title}: FAIL" in format_failure(result, file="x.yaml", name="no-file").splitlines()
    assert {v["line"] for v in json.loads(result.summary_json())["verdicts"]} == {None}
