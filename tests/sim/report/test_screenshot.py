"""The run report as headless Chromium draws it: a held/expired qoder run and a run with long labels.

Each page is rendered twice: to a PNG (the screenshot), and as a copy with a measuring script
appended whose results Chromium prints with the DOM (the report itself carries no script). The
measured text boxes must fit: a lane's titles in its column, a group's name in its box, a mark's
label before the next lane, everything inside the SVG, and no text wider than the drawing's own
estimate of it (which is what spaced the lanes). Skipped without Chromium, except on CI
(`.ci/run` installs it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import repo
from reportkit import long_label_example
from simulator.api import run_scenario
from simulator.report.html import render_html, write_run_report
from simulator.report.svg import label_width, render_timeline
from simulator.scenario.loader import load_file

HOLD_QUEUE = repo.ROOT / "scenarios" / "policies" / "hold-queue-expires.yaml"
INCIDENTS = repo.ROOT / "scenarios" / "incidents"
TOLERANCE = 0.5  # px: rounding between the layout's integers and the browser's boxes
ALONG = {"al", "brkt"}  # labels that run along an arrow or across a break band, not in one lane

# Every <text> of both SVGs with its box in the SVG's own units (the SVGs' viewBox is their size in px).
MEASURE = """<script>
const out = [];
for (const svg of document.querySelectorAll('svg.lanes, svg.tl')) {
  for (const t of svg.querySelectorAll('text')) {
    const b = t.getBBox();
    out.push({svg: svg.getAttribute('class'), cls: t.getAttribute('class') || '', text: t.textContent,
              anchor: t.getAttribute('text-anchor') || 'start', x: b.x, w: b.width, at: +t.getAttribute('x')});
  }
}
const groups = [...document.querySelectorAll('svg.lanes rect.grp')].map(r => {
  const b = r.getBBox(); return {x: b.x, w: b.width};
});
const pre = document.createElement('pre');
pre.id = 'measured';
pre.textContent = JSON.stringify({texts: out, groups: groups});
document.body.appendChild(pre);
</script>"""


def _screenshot_module():
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        (pytest.fail if os.environ.get("CI") else pytest.skip)("chromium not installed (apt-get install -y chromium)")
    spec = importlib.util.spec_from_file_location("screenshot_report", repo.ROOT / "scripts" / "screenshot_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _measure(shots, index: Path) -> dict:
    """Chromium's boxes of the page's texts (run on a copy of the page with MEASURE appended)."""
    probe = index.with_name("measure.html")
    probe.write_text(index.read_text(encoding="utf-8").replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="report-measure-") as profile:
        cmd = [shots.find_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={profile}", "--window-size=1400,1000", "--dump-dom", probe.as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    found = re.search(r'<pre id="measured">(.*?)</pre>', proc.stdout, re.S)
    assert found, proc.stderr[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                      .replace("&amp;", "&"))


def _check_fit(measured: dict, layout, width: float) -> None:
    """Every text inside its box (see the module docstring)."""
    lane_xs = sorted(lane.x for lane in layout.lanes.values())
    cells = {lane.x: (lane.left, lane.right) for lane in layout.lanes.values()}
    assert measured["texts"]
    for t in measured["texts"]:
        what = f"{t['svg']} {t['text']!r}"
        left, right = t["x"], t["x"] + t["w"]
        assert left >= -TOLERANCE and right <= width + TOLERANCE, what
        assert t["w"] <= label_width(t["text"], t["cls"]) + TOLERANCE, f"{what}: wider than its estimate"
        if t["svg"] == "lanes" and t["anchor"] == "middle" and t["at"] in cells:
            lo, hi = cells[t["at"]]
            assert lo - TOLERANCE <= left and right <= hi + TOLERANCE, f"{what} outside its lane [{lo}, {hi}]"
        elif t["svg"] == "lanes" and "gn" in t["cls"].split():
            box = next(g for g in measured["groups"] if g["x"] <= left <= g["x"] + g["w"])
            assert right <= box["x"] + box["w"] + TOLERANCE, f"{what} outside its group's box"
        elif t["svg"] == "tl" and t["anchor"] == "start" and t["cls"].startswith("lb") and not ALONG & set(
                t["cls"].split()):
            nxt = min([x for x in lane_xs if x > t["at"]] + [width])
            assert right <= nxt + TOLERANCE, f"{what} runs past the next lane at {nxt}"


def _render_and_check(tmp_path: Path, result, name: str) -> str:
    shots = _screenshot_module()
    index = write_run_report(result, tmp_path / name)
    end_t = max(result.virtual_ms, max((e.t for e in result.typed), default=0))
    _, body, layout = render_timeline(result.typed, result.verdicts, end_t, result.db_path)
    width = float(re.search(r'width="(\d+)"', body).group(1))
    _check_fit(_measure(shots, index), layout, width)
    png = shots.screenshot(index, tmp_path / f"{name}.png", "1200,900")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return index.read_text(encoding="utf-8")


@pytest.mark.slow
def test_a_held_and_expired_qoder_run_renders_with_its_marks_and_legend(tmp_path):
    """hold-queue-expires: a message held behind a prompt that expires, one parked and approved."""
    result = run_scenario(load_file(HOLD_QUEUE).spec, run_dir=tmp_path / "run")
    html = _render_and_check(tmp_path, result, "hold")
    assert set(re.findall(r'data-outcome="([a-z]+)"', html)) == {"held", "parked", "refused", "suppressed", "expired",
                                                                "declined"}
    assert "url(#ah-held)" in html and "url(#ah-parked)" in html and "url(#ah-notice)" in html
    assert "held #1 expired → notice" in html and "approved held #2" in html


@pytest.mark.slow
def test_long_labels_fit_their_lanes_as_rendered(tmp_path):
    result = long_label_example(tmp_path / "run")
    html = _render_and_check(tmp_path, result, "long")
    assert "registered sorrel-meadow-basil00001" in html and "integration-reviewer-alice" in html
    assert "…" not in re.search(r'<svg class="lanes".*?</svg>', render_html(result), re.S).group(0)


def _arrow_markers(html: str) -> list[str]:
    diagram = re.search(r'<svg class="tl".*?</svg>', html, re.S).group(0)
    return re.findall(r'marker-end="url\(#([a-z-]+)\)"', diagram)


@pytest.mark.slow
def test_a_suppressed_retry_stops_short_of_the_inbox(tmp_path):
    """retry-duplicate-later: the host's retry of a committed send is suppressed by the later design; it is
    drawn stopping short with its mark, not as a second message arrow (one stored row, one arrow)."""
    result = run_scenario(load_file(INCIDENTS / "retry-duplicate-later.yaml").spec, run_dir=tmp_path / "run")
    html = _render_and_check(tmp_path, result, "retry")
    assert _arrow_markers(html).count("ah-msg") == 1
    assert "suppressed (its copy unread)" in html and 'data-outcome="suppressed"' in html


@pytest.mark.slow
def test_a_split_send_is_one_message_in_parts(tmp_path):
    """clipped-read-later: the 4,800-character handoff is stored as 3 parts; the report draws one message
    arrow labelled with its part count."""
    result = run_scenario(load_file(INCIDENTS / "clipped-read-later.yaml").spec, run_dir=tmp_path / "run")
    html = _render_and_check(tmp_path, result, "split")
    assert _arrow_markers(html).count("ah-msg") == 1
    assert "msg in 3 parts" in html
