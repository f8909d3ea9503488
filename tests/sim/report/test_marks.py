"""The run report's marks: what became of each message, witnesses of failed expectations, whose lane an
event is drawn on, and labels drawn whole in lanes spaced to fit them.

Hand-built histories in the documented format (`reportkit`), so neither the engine nor a browser is
needed; `test_screenshot.py` measures the same pages in headless Chromium.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from reportkit import example_result, long_label_example, policy_example
from simulator.report.html import render_html
from simulator.report.lanes import CLI
from simulator.report.svg import label_width, render_timeline
from simulator.result import RunResult, Verdict


def _diagram(html: str) -> ET.Element:
    return ET.fromstring(re.search(r'<svg class="tl".*?</svg>', html, re.S).group(0))


def _header(html: str) -> ET.Element:
    return ET.fromstring(re.search(r'<svg class="lanes".*?</svg>', html, re.S).group(0))


def _markers(root: ET.Element) -> list[str]:
    return [ln.get("marker-end") for ln in root.iter("line") if ln.get("marker-end")]


def test_held_parked_and_refused_sends_are_not_drawn_as_deliveries(tmp_path):
    """Four sends to the reviewer: held behind a prompt, parked, refused by the sender cap, delivered.
    Only the last is an ordinary delivery arrow; the others carry their own mark and words."""
    html = render_html(policy_example(tmp_path / "run"))
    root = _diagram(html)
    markers = _markers(root)
    assert markers.count("url(#ah-msg)") == 1
    assert markers.count("url(#ah-held)") == 1 and markers.count("url(#ah-parked)") == 1
    texts = [t.text or "" for t in root.iter("text")]
    assert any(t.startswith("held “note 0") for t in texts) and any(t.startswith("parked “note 1") for t in texts)
    assert any(t.startswith("refused (sender cap)") for t in texts)
    assert any(t.startswith("msg “note 3") for t in texts)


def test_expiry_and_decline_notices_are_drawn_from_the_reviewer_to_the_sender(tmp_path):
    """The stored notices: the decline at 4m and the expiry at 6m, each an arrow from the reviewer's lane to
    the worker's, before the wake that brings them; the decline itself is a mark of its own."""
    result = policy_example(tmp_path / "run")
    _, body, layout = render_timeline(result.typed, result.verdicts, result.virtual_ms, result.db_path)
    root = ET.fromstring(body)
    assert _markers(root).count("url(#ah-notice)") == 1 and _markers(root).count("url(#ah-declined)") == 1
    texts = [t.text or "" for t in root.iter("text")]
    assert "held #1 expired → notice" in texts and "held #2 declined → notice" in texts
    assert "declined held #2" in texts
    order = [getattr(e, "outcome", None) or getattr(e, "tool", None) or e.kind for _, e, _ in layout.rows]
    assert order[order.index("decline"):] == ["decline", "declined", "expired", "wake", "run-end"]
    notice_row = next(y for _, e, y in layout.rows if e.kind == "notice" and e.outcome == "expired")
    arrow = next(ln for ln in root.iter("line") if ln.get("marker-end") == "url(#ah-notice)")
    reviewer, worker = layout.lanes[("h1", "reviewer")].x, layout.lanes[("h2", "worker")].x
    assert int(arrow.get("x1")) == reviewer and abs(int(arrow.get("x2")) - worker) <= 6
    assert abs(float(arrow.get("y1")) - notice_row) <= 4


def test_without_the_database_the_sends_still_get_their_marks(tmp_path):
    result = policy_example(tmp_path / "run")
    result.db_path = tmp_path / "gone.db"
    markers = _markers(_diagram(render_html(result)))
    assert "url(#ah-held)" in markers and "url(#ah-notice)" not in markers


def test_the_legend_names_every_outcome(tmp_path):
    html = render_html(policy_example(tmp_path / "run"))
    legend = set(re.findall(r'data-outcome="([a-z]+)"', html))
    assert legend == {"held", "parked", "refused", "suppressed", "expired", "declined"}
    for words in ("held for approval", "parked for a later review", "refused", "suppressed duplicate", "expired",
                  "declined"):
        assert words in html


def test_a_failed_expectation_without_witnesses_is_marked_on_its_observation(tmp_path):
    """expect#0 ("bob: expected 2 wakes, saw 1") names no event: its observation row gets the red outline
    and says it failed, with the verdict's title."""
    result = example_result(tmp_path / "run")
    assert result.verdict("expect#0").witness == []
    _, body, layout = render_timeline(result.typed, result.verdicts, result.virtual_ms)
    observed = next(n for n, e in enumerate(result.history) if e["kind"] == "expectation" and e["data"]["index"] == 0)
    assert observed in layout.witness
    root = ET.fromstring(body)
    assert f'w{layout.witness[observed]}' in {g.get("id") for g in root.iter("g") if g.get("class") == "wit"}
    assert "expect#0 FAILED: wakes" in [t.text for t in root.iter("text")]


def test_a_failed_step_reply_is_marked_on_its_result(tmp_path):
    result = policy_example(tmp_path / "run")
    result.verdicts.append(Verdict("step#2", "reply of step 2 (send at 1m20s)", "fail", "wrong text"))
    layout = render_timeline(result.typed, result.verdicts, result.virtual_ms, result.db_path)[2]
    refused = next(n for n, e in enumerate(result.history) if e["kind"] == "tool-result" and e["data"]["step"] == 2)
    assert list(layout.witness) == [refused]


def _cli_result(tmp_path) -> RunResult:
    hist = [{"i": 0, "t": 0, "dispatch": 0, "proc": "orchestrator", "session": None, "kind": "process-start",
             "data": {"target": "h1", "proc_kind": "opencode", "incarnation": 0, "sessions": {"a": "ses_a"}}},
            {"i": 1, "t": 1000, "dispatch": 1, "proc": "h1", "session": None, "kind": "tool-call",
             "data": {"tool": "cli_tail", "args": {}}},
            {"i": 2, "t": 1000, "dispatch": 1, "proc": "h1", "session": None, "kind": "tool-result",
             "data": {"tool": "cli_tail", "ok": True, "text": "", "step": 0}},
            {"i": 3, "t": 2000, "dispatch": 2, "proc": "h1", "session": "a", "kind": "tool-result",
             "data": {"tool": "thatch_chat_status", "ok": True, "text": "ok"}}]
    return RunResult("cli", 1, tmp_path, tmp_path / "db", tmp_path / "none.jsonl", hist, [], virtual_ms=2000)


def test_a_cli_step_is_drawn_on_the_cli_lane_not_on_the_process_that_ran_it(tmp_path):
    """`thatch chat tail` is a command a user runs on the machine: the fake host that carried it out is
    not the process that did it."""
    result = _cli_result(tmp_path)
    _, body, layout = render_timeline(result.typed, result.verdicts, result.virtual_ms)
    assert (CLI, None) in layout.lanes and ("h1", None) in layout.lanes
    cli_x, h1_x = layout.lanes[(CLI, None)].x, layout.lanes[("h1", None)].x
    row = next(g for g in ET.fromstring(body).iter("g") if g.get("class") == "ev k-tool-result")
    assert {c.get("cx") for c in row.iter("circle")} == {str(cli_x)} != {str(h1_x)}
    assert "terminal" in render_html(result)


def _split_broadcast_result(tmp_path) -> RunResult:
    def ev(i, t, proc, session, kind, **data):
        return {"i": i, "t": t, "dispatch": i, "proc": proc, "session": session, "kind": kind, "data": data}
    reply = ("[broadcast] to 1 session\nrecipients: bob-00001\nsent as 2 parts per recipient (the body exceeded "
             "2000 characters and was auto-split)\n\nEach recipient's session is nudged when idle.")
    hist = [ev(0, 0, "orchestrator", None, "process-start", target="h1", proc_kind="opencode", incarnation=0,
               sessions={"alice": "ses_a"}),
            ev(1, 0, "orchestrator", None, "process-start", target="h2", proc_kind="opencode", incarnation=0,
               sessions={"bob": "ses_b"}),
            ev(2, 1000, "h1", "alice", "tool-call", tool="thatch_chat_broadcast", args={"body": "x" * 3000}),
            ev(3, 1000, "h1", "alice", "tool-result", tool="thatch_chat_broadcast", ok=True, text=reply)]
    return RunResult("split", 1, tmp_path, tmp_path / "db", tmp_path / "none.jsonl", hist, [], virtual_ms=1000)


def test_a_split_broadcast_is_one_arrow_per_recipient_in_parts(tmp_path):
    """A broadcast the later design stored as 2 parts per recipient is one arrow to its recipient, labelled
    with its part count (its reply read as a broadcast's, not as a send's)."""
    result = _split_broadcast_result(tmp_path)
    root = ET.fromstring(render_timeline(result.typed, result.verdicts, result.virtual_ms)[1])
    assert _markers(root) == ["url(#ah-msg)"]
    assert any((t.text or "").startswith("broadcast in 2 parts") for t in root.iter("text"))


def test_long_labels_are_drawn_whole_and_the_lanes_make_room(tmp_path):
    """Identifiers (session labels, chat names, expectation ids) are never cut; each mark's label ends
    before the next lane, by the drawing's own estimate of its width."""
    result = long_label_example(tmp_path / "run")
    html = render_html(result)
    diagram, header = _diagram(html), _header(html)
    lane_xs = sorted({float(ln.get("x1")) for ln in diagram.iter("line") if ln.get("class") == "ll-dead"})
    width = float(diagram.get("width"))
    for t in header.iter("text"):
        assert "…" not in (t.text or ""), t.text
    assert any(t.text == "registered sorrel-meadow-basil00001" for t in diagram.iter("text"))
    for t in diagram.iter("text"):
        cls = t.get("class") or ""
        if t.get("text-anchor") or "msg" in cls or not cls.startswith("lb"):
            continue  # arrow labels run along their arrow; times and badges sit in the gutter
        x = float(t.get("x"))
        right = x + label_width(t.text or "", cls)
        next_lane = min([v for v in lane_xs if v > x] + [width])
        assert right <= next_lane, (t.text, right, next_lane)
