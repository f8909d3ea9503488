"""Durations as the language spells them, in every message, title and report text: one formatter."""

from __future__ import annotations

import pytest

from historykit import RUN_INFO, H, base_world, make_spec
from simulator.checks.expectations import check_expectations
from simulator.checks.view import RunView
from simulator.report.compare import span
from simulator.report.lanes import fmt_span
from simulator.report.text import format_offset
from simulator.scenario.durations import format_duration, parse_duration


@pytest.mark.parametrize("ms,text", [(410_000, "6m50s"), (90_000, "1m30s"), (300_000, "5m"), (3_700_000, "1h1m40s"),
                                     (1_500, "1s500ms"), (0, "0s"), (86_400_000 + 7_200_000, "1d2h")])
def test_format_duration_spells_whole_units_largest_first(ms, text):
    assert format_duration(ms) == text
    assert parse_duration(text) == ms  # what a message prints can be pasted into an `at:`


def test_titles_timelines_and_report_texts_use_the_one_formatter(tmp_path):
    """An expectation at 6m50s is titled `at 6m50s` (not 410s); the timeline, the run report's spans and the
    compare page spell durations the same way."""
    h = H(); base_world(h, end=900_000)
    spec = make_spec(expect=[{"at": "410s", "wakes": {"session": "bob", "count": 0}}])
    (v,) = check_expectations(spec, RunView(spec, h.done(), None, RUN_INFO))
    assert v.title == "wakes of bob at 6m50s"
    assert format_offset(410_000) == "+6m50s" and format_offset(61_500) == "+1m1s500ms"
    assert fmt_span(410_000) == span(410_000) == "6m50s"
