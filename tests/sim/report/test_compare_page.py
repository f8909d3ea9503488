"""The compare page: a chart as wide as the page with labelled axes and values under the pointer, a
column legend as a table, failures with their titles, and the busiest rolling hour beside the cap.

Built from hand-made `PolicyRun`s, so no scenario runs; `tests/sim/test_compare.py` runs the command.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from simulator.report.compare import (COLUMN_MEANINGS, COLUMNS, PolicyRun, ScenarioComparison, chart_svg, render_page,
                                      text_table, y_ticks)

HOUR = 3_600_000


def _run(policy: str, wakes: list[int], **kw) -> PolicyRun:
    base = dict(policy=policy, options=policy, ok=False, promises={"P1": "pass"}, script_passed=1, script_total=2,
                failed=["expect#0"], failures=[("expect#0", "wakes of bob at 10m")], sent=9, delivered=9, held=0,
                refused=0, expired=0, declined=0, wakes=len(wakes), peak_hour=6, read_median_s=20.0,
                read_worst_s=600.0, unread=0, wake_times=wakes, wake_cap=6)
    return PolicyRun(**(base | kw))


def _comparison() -> ScenarioComparison:
    thatch = _run("thatch", [k * 20_000 for k in range(48)])
    qoder = _run("qoder", [k * 60_000 for k in range(6)], options="sender_cap=3", peak_hour=3, wake_cap=None,
                 failed=[], failures=[])
    return ScenarioComparison("ping-pong", "scenarios/x.yaml", 3, "a story", 3 * HOUR + 5 * 60_000, [thatch, qoder])


def test_the_chart_fills_the_width_with_labelled_axes_and_hover_values():
    svg = ET.fromstring(chart_svg(_comparison()))
    assert svg.get("width") == "100%" and svg.get("viewBox", "").startswith("0 0 ")
    texts = [t.text for t in svg.iter("text")]
    assert "virtual time since the scenario start" in texts and "wake prompts so far" in texts
    y_labels = [t.text for t in svg.iter("text") if t.get("class") == "tk" and t.get("text-anchor") == "end"]
    assert y_labels == ["0", "10", "20", "30", "40", "50"]
    titles = [t.text for t in svg.iter("title")]
    assert "thatch: wake 48 of 48 at 15m40s" in titles and "qoder: wake 6 of 6 at 5m" in titles
    assert sum(1 for c in svg.iter("circle") if c.find("title") is not None) == 48 + 6


def test_y_ticks_are_round_counts_reaching_the_top():
    assert y_ticks(48) == [0, 10, 20, 30, 40, 50]
    assert y_ticks(2) == [0, 1, 2]
    assert y_ticks(0) == [0, 1]
    assert y_ticks(700) == [0, 200, 400, 600, 800]


def test_the_columns_are_explained_in_a_table():
    html = render_page([_comparison()], ["thatch", "qoder"])
    legend = re.search(r'<table class="cols">(.*?)</table>', html, re.S).group(1)
    assert re.findall(r"<tr><td>([^<]+)</td>", legend) == list(COLUMNS)
    assert len(COLUMN_MEANINGS) == len(COLUMNS)


def test_failures_are_listed_with_their_titles():
    comp = _comparison()
    html = render_page([comp], ["thatch", "qoder"])
    assert "<li><code>expect#0</code> wakes of bob at 10m</li>" in html
    assert "  thatch failed: expect#0: wakes of bob at 10m" in text_table([comp])


def test_the_rate_is_the_busiest_rolling_hour_beside_the_cap():
    comp = _comparison()
    table = text_table([comp])
    assert "peak wakes/h" in table and "wakes/rcpt/h" not in table
    assert "6 (cap 6)" in table and "3 (no cap)" in table
