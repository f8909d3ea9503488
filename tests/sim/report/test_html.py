"""The run report: files written, self-contained HTML, lanes, arrows, witnesses, scale.

Built from the hand-made failing history in `reportkit` (the
documented history format), so it needs neither the engine nor (except the
screenshot test, skipped without it) a browser.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import xml.etree.ElementTree as ET

import pytest

from reportkit import CAROL, example_result, long_example
from simulator.report.lanes import MAX_ROWS, build_layout, fmt_t
from simulator.report.svg import C_WITNESS, render_timeline
from simulator.report.html import render_html, write_run_report
from simulator.result import RunResult, Verdict
import repo


ROOT = repo.ROOT


def _svgs(html: str) -> list[str]:
    return re.findall(r"<svg\b.*?</svg>", html, re.S)


def _write(tmp_path, result=None):
    result = result or example_result(tmp_path / "run")
    index = write_run_report(result, tmp_path / "report")
    return result, index, index.read_text(encoding="utf-8")


def test_writes_history_copy_summary_and_index(tmp_path):
    result = example_result(tmp_path / "run")
    result.run_dir.mkdir(parents=True)
    lines = "".join(json.dumps(e, sort_keys=True) + "\n" for e in result.history)
    result.history_path.write_text(lines, encoding="utf-8")
    index = write_run_report(result, tmp_path / "report")
    assert index == tmp_path / "report" / "index.html"
    assert (tmp_path / "report" / "history.jsonl").read_bytes() == result.history_path.read_bytes()
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["ok"] is False and summary["seed"] == 7
    assert {v["check"] for v in summary["verdicts"]} >= {"P3", "P1"}


def test_history_serialised_when_file_missing(tmp_path):
    result, _, _ = _write(tmp_path)
    written = (tmp_path / "report" / "history.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in written] == result.history


def test_html_is_self_contained(tmp_path):
    _, _, html = _write(tmp_path)
    assert html.startswith("<!DOCTYPE html>")
    assert "http://" not in html and "https://" not in html
    assert "<script" not in html.lower()
    assert "<link" not in html.lower() and "@import" not in html
    # The only url() references are fragments inside the page (arrowhead markers).
    assert all(ref.startswith("#") for ref in re.findall(r"url\(([^)]*)\)", html))


def test_svg_parts_are_valid_xml(tmp_path):
    _, _, html = _write(tmp_path)
    svgs = _svgs(html)
    assert len(svgs) >= 2  # lane header + diagram (+ legend swatches)
    for svg in svgs:
        ET.fromstring(svg)


def test_one_lane_per_process_and_session(tmp_path):
    result, _, html = _write(tmp_path)
    layout = build_layout(result.typed, result.verdicts)
    assert set(layout.lanes) == {("orchestrator", None), ("h1", None), ("h1", "alice"), ("h2", None),
                                 ("h2", "bob"), ("c1", None), ("c1", "carol")}
    # Session lanes sit right after their process lane.
    assert [g for g in layout.groups] == [("h1", [None, "alice"]), ("h2", [None, "bob"]), ("c1", [None, "carol"])]
    diagram = max(_svgs(html), key=len)
    assert diagram.count('class="ll-dead"') == 7
    header = next(s for s in _svgs(html) if 'aria-label="lanes"' in s)
    for label in ("h1 · opencode", "h2 · opencode", "c1 · claude-code", ">alice<", ">bob<", ">carol<"):
        assert label in header


def test_arrows_for_wakes_sends_and_broadcast(tmp_path):
    result, _, html = _write(tmp_path)
    wakes = len(result.events("wake"))
    assert html.count('marker-end="url(#ah-wake)"') == wakes == 2
    # Two sends (alice->bob, alice->carol) + a broadcast from carol to alice and bob.
    assert html.count('marker-end="url(#ah-msg)"') == 4
    root = ET.fromstring(max(_svgs(html), key=len))
    xs = {(ln.get("x1"), ln.get("x2")) for ln in root.iter("line") if ln.get("marker-end") == "url(#ah-msg)"}
    layout = render_timeline(result.typed, result.verdicts)[2]  # the lanes where the drawing placed them
    alice, bob = layout.lanes[("h1", "alice")].x, layout.lanes[("h2", "bob")].x
    assert any(int(a) == alice and abs(int(b) - bob) <= 6 for a, b in xs)  # alice -> bob


def test_witness_highlighted_and_listed(tmp_path):
    result, _, html = _write(tmp_path)
    n_wit = len(result.verdict("P3").witness) + 1  # and expect#0's observation (its verdict names no event)
    root = ET.fromstring(max(_svgs(html), key=len))
    boxes = [g for g in root.iter("g") if g.get("class") == "wit"]
    assert sorted(g.get("id") for g in boxes) == [f"w{k}" for k in range(1, n_wit + 1)]
    for g in boxes:
        assert any(r.get("stroke") == C_WITNESS for r in g.iter("rect"))
    for k in range(1, n_wit + 1):
        assert f'href="#w{k}"' in html  # legend and verdict table link to the box
    assert "Witness events" in html and "crash" in html


def test_time_axis_formats():
    assert fmt_t(90_000, False) == "1:30"
    assert fmt_t(30_250, False) == "0:30.250"
    assert fmt_t(3_725_000, True) == "1:02:05"


def test_day_long_run_stays_small(tmp_path):
    result = long_example(tmp_path / "run", hours=24)
    _, index, html = _write(tmp_path, result)
    assert index.stat().st_size < 3_000_000
    assert "with nothing drawn" in html  # idle stretches compressed into labelled breaks
    for svg in _svgs(html):
        ET.fromstring(svg)


def test_row_cap_keeps_witnesses(tmp_path):
    """A run with far more drawable events than MAX_ROWS keeps lifecycle and witness rows."""
    hist = [{"i": 0, "t": 0, "dispatch": 0, "proc": "orchestrator", "session": None, "kind": "process-start",
             "data": {"target": "h1", "proc_kind": "opencode", "incarnation": 0, "sessions": {"a": "ses_a"}}}]
    for k in range(MAX_ROWS + 500):
        hist.append({"i": len(hist), "t": 1000 * k, "dispatch": k + 1, "proc": "h1", "session": "a",
                     "kind": "tool-result", "data": {"tool": "thatch_chat_status", "ok": True, "text": "ok"}})
    witness = hist[len(hist) // 2]
    result = RunResult("dense", 1, tmp_path, tmp_path / "db", tmp_path / "none.jsonl", hist,
                       [Verdict("P5", "no-loss", "fail", "x", witness=[witness])], virtual_ms=hist[-1]["t"])
    layout = build_layout(result.typed, result.verdicts)
    assert len(layout.rows) == MAX_ROWS
    assert witness["i"] in {n for n, _, _ in layout.rows} and 0 in {n for n, _, _ in layout.rows}
    assert layout.omitted == {"tool-result": 501}
    html = render_html(result)
    assert 'id="w1"' in html and "rows not drawn" in html


def test_fault_arrow_targets_process_named_by_its_step(tmp_path):
    """A crash's `fault-fired` names no process; the arrow goes where its `fault` step pointed."""
    result = example_result(tmp_path / "run")
    layout = build_layout(result.typed, result.verdicts)
    fired = next(n for n, e in enumerate(result.history)
                 if e["kind"] == "fault-fired" and e["data"]["fault"] == "crash")
    assert layout.recipients[fired] == [("h2", None)]


def test_non_event_witnesses_are_listed(tmp_path):
    result = example_result(tmp_path / "run")
    result.verdicts.append(Verdict("P5", "no-loss", "fail", "row vanished",
                                   witness=[{"db_row": {"id": 7, "body": "hi"}}]))
    html = render_html(result)
    assert "db_row" in html and "row vanished" in html


def test_engine_error_with_empty_history_still_renders(tmp_path):
    result = RunResult("broken", 3, tmp_path, tmp_path / "db", tmp_path / "missing.jsonl", [],
                       [Verdict("P1", "single-deliverer", "skipped")], error="harness h1 died during start")
    index = write_run_report(result, tmp_path / "report")
    html = index.read_text()
    assert "engine error: harness h1 died during start" in html and "FAILED" in html
    for svg in _svgs(html):
        ET.fromstring(svg)
    assert (tmp_path / "report" / "history.jsonl").read_text() == ""


def test_freshness_changes_become_rows(tmp_path):
    """bob's host crashes: the sample where bob turns stale, and where it is fresh again, are rows."""
    result = example_result(tmp_path / "run")
    layout = build_layout(result.typed, result.verdicts)
    moves = [m for n, _, _ in layout.rows for m in layout.changes.get(n, [])]
    assert ("bob", "stale") in moves and ("bob", "fresh") in moves
    assert "→ stale" in render_html(result)


@pytest.mark.slow
def test_screenshot_script_renders_a_png(tmp_path):
    """scripts/screenshot_report.py drives headless Chromium (~1.5 s; skipped without it)."""
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        (pytest.fail if os.environ.get("CI") else pytest.skip)("chromium not installed (apt-get install -y chromium)")
    spec = importlib.util.spec_from_file_location("screenshot_report", ROOT / "scripts" / "screenshot_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _, index, _ = _write(tmp_path)
    png = mod.screenshot(index, tmp_path / "shot.png", "800,600")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _text_reach(el: ET.Element) -> float:
    """A lower bound of how far right a text reaches: DejaVu Sans averages over 0.5 em a character."""
    px = 9.5 if "sm" in (el.get("class") or "").split() else 10.5
    width = len(el.text or "") * 0.5 * px
    anchor = el.get("text-anchor", "start")
    return float(el.get("x")) + (width if anchor == "start" else width / 2 if anchor == "middle" else 0)


def test_svg_is_wide_enough_for_the_last_lanes_labels(tmp_path):
    """carol sits on the rightmost lane: her `registered mi-ta-00001` label and a witness
    outline on her row are inside both SVGs, which share one width."""
    result = example_result(tmp_path / "run")
    registered = next(e for e in result.history if e["kind"] == "registered" and e["session"] == "carol")
    result.verdicts.append(Verdict("P7", "identity", "fail", "carol", witness=[registered]))
    html = render_html(result)
    header = ET.fromstring(next(s for s in _svgs(html) if 'aria-label="lanes"' in s))
    diagram = ET.fromstring(next(s for s in _svgs(html) if 'aria-label="timeline"' in s))
    width = float(diagram.get("width"))
    assert float(header.get("width")) == width
    assert diagram.get("viewBox") == f"0 0 {diagram.get('width')} {diagram.get('height')}"
    texts = list(diagram.iter("text")) + list(header.iter("text"))
    assert any(t.text == f"registered {CAROL}" for t in texts)
    for t in texts:
        assert _text_reach(t) <= width, t.text
    w = build_layout(result.typed, result.verdicts).witness[registered["i"]]
    outline = next(g for g in diagram.iter("g") if g.get("id") == f"w{w}")
    box = next(r for r in outline.iter("rect") if r.get("stroke") == C_WITNESS)
    assert float(box.get("x")) + float(box.get("width")) <= width
