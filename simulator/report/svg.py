"""Draws the run report's sequence diagram as two inline SVG fragments.

`render_timeline(history, verdicts)` returns (header_svg, body_svg, layout):
the lane header (kept sticky by the page's CSS) and the diagram itself. Time
flows down; every drawn event is one row (see `report_lanes` for the layout).
No script, no external reference: hover details are SVG `<title>` elements,
and the witness badges carry ids (`w1`, `w2`...) the page links to.

Glyphs are plain SVG shapes rather than emoji so the picture is the same on a
machine with only the DejaVu/Liberation fonts (the CI image).
"""

from __future__ import annotations

import json
from html import escape
from typing import Any, Optional

from simulator.report.lanes import LANE_W, LEFT, ORCH, ROW_H, Layout, build_layout, fmt_span, fmt_t

C_MSG, C_WAKE, C_FAULT, C_BAD = "#1f6fd1", "#8a3ffc", "#9a6700", "#8b1a1a"
C_FRESH, C_STALE, C_UNREG, C_BUSY = "#2ea043", "#f0a000", "#d0d7de", "#c9b6f2"
C_WITNESS = "#e5000b"
LABEL_CHARS = 23


def _x(s: Any) -> str:
    """Escape for XML text/attributes; drop control characters XML 1.0 forbids."""
    text = "".join(ch for ch in str(s) if ch >= " " or ch in "\n\t")
    return escape(text, quote=True)


def _clip(s: Any, n: int = LABEL_CHARS) -> str:
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _title(e: dict[str, Any], long_run: bool) -> str:
    data = json.dumps(e.get("data") or {}, sort_keys=True, ensure_ascii=False, default=str)
    if len(data) > 400:
        data = data[:399] + "…"
    where = e.get("proc") or ORCH
    if e.get("session"):
        where += "/" + str(e["session"])
    return f"<title>#{e.get('i', '?')} t={fmt_t(int(e.get('t', 0)), long_run)} {_x(where)} {_x(e.get('kind'))}\n{_x(data)}</title>"


def _text(x: float, y: float, s: str, cls: str = "lb", anchor: str = "start") -> str:
    a = "" if anchor == "start" else f' text-anchor="{anchor}"'
    return f'<text class="{cls}" x="{x:.0f}" y="{y:.0f}"{a}>{_x(s)}</text>'


def _glyph(kind: str, x: float, y: float, color: str) -> str:
    if kind == "start":
        return f'<path d="M{x - 4:.0f},{y - 6:.0f} L{x + 6:.0f},{y:.0f} L{x - 4:.0f},{y + 6:.0f} Z" fill="{color}"/>'
    if kind == "square":
        return f'<rect x="{x - 5:.0f}" y="{y - 5:.0f}" width="10" height="10" fill="{color}"/>'
    if kind == "x":
        return (f'<path d="M{x - 5:.0f},{y - 5:.0f} L{x + 5:.0f},{y + 5:.0f} M{x + 5:.0f},{y - 5:.0f} '
                f'L{x - 5:.0f},{y + 5:.0f}" stroke="{color}" stroke-width="3"/>')
    if kind == "bolt":
        return (f'<path d="M{x + 2:.0f},{y - 8:.0f} L{x - 4:.0f},{y + 1:.0f} L{x:.0f},{y + 1:.0f} '
                f'L{x - 2:.0f},{y + 8:.0f} L{x + 4:.0f},{y - 1:.0f} L{x:.0f},{y - 1:.0f} Z" fill="{color}"/>')
    if kind == "fork":
        return (f'<path d="M{x:.0f},{y + 7:.0f} L{x:.0f},{y:.0f} L{x - 5:.0f},{y - 6:.0f} M{x:.0f},{y:.0f} '
                f'L{x + 5:.0f},{y - 6:.0f}" stroke="{color}" stroke-width="2.2" fill="none"/>')
    if kind == "check":
        return (f'<path d="M{x - 5:.0f},{y:.0f} L{x - 1:.0f},{y + 4:.0f} L{x + 5:.0f},{y - 5:.0f}" '
                f'stroke="{color}" stroke-width="2.5" fill="none"/>')
    if kind == "ring":
        return f'<circle cx="{x:.0f}" cy="{y:.0f}" r="4.5" fill="#fff" stroke="{color}" stroke-width="2"/>'
    if kind == "diamond":
        return f'<path d="M{x:.0f},{y - 5:.0f} L{x + 5:.0f},{y:.0f} L{x:.0f},{y + 5:.0f} L{x - 5:.0f},{y:.0f} Z" fill="{color}"/>'
    return f'<circle cx="{x:.0f}" cy="{y:.0f}" r="3.5" fill="{color}"/>'


def _arrow(x1: float, x2: float, y: float, color: str, marker: str, dash: str = "", width: float = 1.6) -> str:
    # Stop short of the target lifeline so the arrowhead tip touches it.
    x2e = x2 - 5 if x2 > x1 else x2 + 5
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<line x1="{x1:.0f}" y1="{y:.0f}" x2="{x2e:.0f}" y2="{y:.0f}" stroke="{color}" '
            f'stroke-width="{width}"{d} marker-end="url(#{marker})"/>')


def _lane_x(layout: Layout, e: dict[str, Any]) -> float:
    key = (e.get("proc") or ORCH, e.get("session"))
    lane = layout.lanes.get(key) or layout.lanes.get((key[0], None)) or layout.lanes[(ORCH, None)]
    return lane.x


def _event(layout: Layout, n: int, e: dict[str, Any], y: float, long_run: bool) -> tuple[list[str], float, float]:
    """SVG pieces of one row, and the x extent it covers (for the witness box)."""
    kind, d = e.get("kind"), e.get("data") or {}
    x = _lane_x(layout, e)
    out: list[str] = []
    lo, hi = x - 8, x + 8 + 6.2 * LABEL_CHARS

    def mark(glyph: str, color: str, label: str, cls: str = "lb") -> None:
        out.append(_glyph(glyph, x, y, color))
        out.append(_text(x + 9, y + 4, _clip(label), cls))

    if kind == "process-start":
        target = d.get("target")
        x = layout.lanes[(target, None)].x if (target, None) in layout.lanes else x
        lo, hi = x - 8, x + 8 + 6.2 * LABEL_CHARS
        how = f" {d['how']} {d.get('resumed', '')}" if d.get("how") else (" rehost" if d.get("rehost_of") else "")
        mark("start", C_FRESH, f"start #{d.get('incarnation', 0)}{how}")
        if d.get("resumed") and (target, d["resumed"]) in layout.lanes:
            sx = layout.lanes[(target, d["resumed"])].x
            out.append(_glyph("ring", sx, y, C_FRESH))
            out.append(_text(sx + 9, y + 4, f"resumed {d.get('how', '')}"))
            hi = max(hi, sx + 8 + 6.2 * 12)
    elif kind == "process-exit":
        target = d.get("target")
        x = layout.lanes[(target, None)].x if (target, None) in layout.lanes else x
        lo, hi = x - 8, x + 8 + 6.2 * LABEL_CHARS
        reason = d.get("reason", "end")
        glyph, color = ("square", "#24292f") if reason == "end" else ("square", C_FAULT) if reason == "restart" else ("x", C_BAD)
        mark(glyph, color, f"exit: {reason}", "lb bad" if reason in ("killed", "crashed") else "lb")
    elif kind == "crash":
        mark("x", C_BAD, f"crash at {d.get('point') or _clip(d.get('sql', ''), 14)}", "lb bad")
    elif kind in ("fault", "fault-fired"):
        verb = "armed" if kind == "fault" else "fired"
        targets = layout.recipients.get(n) or []
        if targets and targets[0] in layout.lanes:
            tx = layout.lanes[targets[0]].x
            out.append(_arrow(x, tx, y, C_FAULT, "ah-fault", "2 3", 1.3))
            out.append(_text((x + tx) / 2, y - 4, f"{d.get('fault')} {verb}", "lb sm", "middle"))
            out.append(_glyph("bolt", x, y, C_FAULT))
            lo, hi = min(x, tx) - 10, max(x, tx) + 10
        else:
            mark("bolt", C_FAULT, f"fault#{d.get('step', '?')} {d.get('fault')} {verb}")
    elif kind == "fault-not-fired":
        mark("ring", C_FAULT, f"fault#{d.get('step', '?')} {d.get('fault')} never fired", "lb bad")
    elif kind in ("sleep-start", "sleep-end"):
        until = d.get("until")
        label = "machine sleeps" + (f" until {fmt_t(int(until), long_run)}" if isinstance(until, int) else "") \
            if kind == "sleep-start" else "machine wakes"
        mark("ring", "#3b5b92", label)
    elif kind == "fork":
        mark("fork", "#0a7d74", f"id fork → {str(d.get('new_host_id', ''))[:8]}")
    elif kind == "registered":
        mark("ring", C_FRESH, f"registered {d.get('name', '')}")
    elif kind == "user-prompt":
        mark("dot", "#6e7781", f"user: {d.get('text', '')}", "lb muted")
    elif kind == "expectation":
        ok = d.get("ok")
        if ok is None:  # observed here, judged by the checkers afterwards (see the verdict table)
            mark("diamond", "#57606a", f"expect#{d.get('index', '?')} {d.get('kind', '')} observed", "lb muted")
        else:
            mark("check" if ok else "x", C_FRESH if ok else C_BAD,
                 f"expect#{d.get('index', '?')} {'ok' if ok else 'FAILED'}", "lb" if ok else "lb bad")
    elif kind == "step-dropped":
        mark("ring", C_FAULT, f"step#{d.get('step', '?')} {d.get('action', '')} dropped", "lb bad")
    elif kind == "lock-released":
        mark("ring", C_FAULT, f"lock#{d.get('step', '?')} released", "lb muted")
    elif kind == "sample" and n in layout.changes:
        # Freshness changes, drawn on each session's lane (the row belongs to no lane of its own).
        pieces = []
        xs = []
        for label, state in layout.changes[n]:
            lane = layout.lane_for_session(label, int(e.get("t", 0)))
            if lane is None:
                continue
            xs.append(lane.x)
            color = {"fresh": C_FRESH, "stale": C_STALE, "unreg": "#8c959f"}[state]
            pieces.append(f'<rect x="{lane.x - 11}" y="{y - 3:.0f}" width="8" height="6" fill="{color}"/>')
            pieces.append(_text(lane.x + 9, y + 4, f"→ {'not registered' if state == 'unreg' else state}",
                                "lb sm stale" if state == "stale" else "lb sm muted"))
        out += pieces
        if xs:
            lo, hi = min(xs) - 14, max(xs) + 8 + 6.2 * 14
    elif kind == "sample":
        rows = d.get("sessions") or {}
        stale = [k for k, v in rows.items() if isinstance(v, dict) and v.get("stale")]
        mark("diamond", "#57606a", "sample" + (f": stale {', '.join(stale)}" if stale else ": all fresh"), "lb muted")
    elif kind in ("status", "turn-start", "turn-end", "poll", "hook", "echo", "tool-call"):
        detail = d.get("status") or d.get("cause") or d.get("hook") or d.get("tool") or ""
        mark("diamond", "#8c959f", f"{kind} {str(detail).replace('thatch_chat_', '')}", "lb muted")
    elif kind == "store-error":
        mark("diamond", C_FAULT, f"store error: {d.get('where', '')}", "lb bad")
    elif kind in ("run-start", "run-end"):
        mark("square", "#24292f", kind if kind == "run-end" else f"run seed={d.get('seed', '?')}")
    elif kind == "phase":
        mark("diamond", "#57606a", f"phase: {d.get('phase')}", "lb muted")
    elif kind == "wake":
        # The deliverer is the poller of the receiving process: arrow proc lane -> session lane.
        px = layout.lanes.get((e.get("proc"), None))
        px_x = px.x if px else x
        senders = ", ".join(str(s) for s in d.get("senders") or [])
        out.append(_arrow(px_x, x, y, C_WAKE, "ah-wake", "4 2", 1.8))
        out.append(_glyph("dot", x, y, C_WAKE))
        out.append(_text(x + 9, y + 4, _clip(f"wake ×{d.get('count', '?')} ← {senders}"), "lb wake"))
        lo = min(px_x, x) - 8
    elif kind == "tool-result":
        tool = str(d.get("tool", "")).replace("thatch_chat_", "")
        targets = [t for t in layout.recipients.get(n) or []]
        if targets:
            lanes = []
            for _, label in targets:
                lane = layout.lane_for_session(label, int(e.get("t", 0))) if label else None
                lanes.append((label, lane))
            bcast = tool == "broadcast"
            xs = [lane.x for _, lane in lanes if lane is not None and lane.x != x]
            # The arrow runs a little below the row centre so its label fits above it.
            ya = y + 3
            for tx in xs:
                out.append(_arrow(x, tx, ya, C_MSG, "ah-msg", "6 3" if bcast else "", 1.8))
            missing = [str(label) for label, lane in lanes if lane is None]
            far = max(xs, key=lambda v: abs(v - x)) if xs else x + 60
            body = layout.bodies.get(n, "")
            label = f"{'broadcast' if bcast else 'msg'}" + (f" → {', '.join(missing)}?" if missing else "") + \
                (f" “{_clip(body, 24)}”" if body else "")
            # Label just off the sender, on the arrow's side, so it never sits on an arrowhead.
            right = far >= x
            out.append(_text(x + (12 if right else -12), y - 2, _clip(label, max(12, int(abs(far - x) / 6.2))),
                             "lb sm msg", "start" if right else "end"))
            out.append(_glyph("dot", x, ya, C_MSG))
            lo, hi = min([x] + xs) - 8, max([x] + xs) + 8
        else:
            ok = d.get("ok")
            mark("dot" if ok else "ring", "#6e7781" if ok else C_BAD, f"{tool} {'ok' if ok else 'refused'}",
                 "lb muted" if ok else "lb bad")
    else:
        mark("diamond", "#8c959f", str(kind), "lb muted")
    return out, lo, hi


def _bars(layout: Layout, history: list[dict[str, Any]]) -> list[str]:
    """Heartbeat freshness (from `sample`) and busy windows (from `status`) per session lane."""
    out: list[str] = []
    segs: dict[str, list[tuple[int, str]]] = {}
    for e in history:
        if e.get("kind") == "sample":
            t = int(e.get("t", 0))
            rows = (e.get("data") or {}).get("sessions") or {}
            labels = {k for ps in layout.groups for k in ps[1] if k} | set(rows)
            for label in labels:
                row = rows.get(label)
                state = "unreg" if not isinstance(row, dict) or not row.get("registered", True) else \
                    "stale" if row.get("stale") else "fresh"
                seq = segs.setdefault(label, [])
                if not seq or seq[-1][1] != state:
                    seq.append((t, state))
    color = {"fresh": C_FRESH, "stale": C_STALE, "unreg": C_UNREG}
    for label, seq in segs.items():
        for k, (t0, state) in enumerate(seq):
            t1 = seq[k + 1][0] if k + 1 < len(seq) else layout.end_t
            lane = layout.lane_for_session(label, t0)
            if lane is None:
                continue
            y0, y1 = layout.y_of_t(t0), layout.y_of_t(t1)
            if y1 - y0 < 1:
                y1 = y0 + 1
            out.append(f'<rect class="hb" x="{lane.x - 9}" y="{y0:.1f}" width="4" height="{y1 - y0:.1f}" '
                       f'fill="{color[state]}"><title>{_x(label)}: {state} from {fmt_t(t0, layout.end_t >= 3_600_000)}'
                       f'</title></rect>')
    busy_from: dict[tuple[str, str], int] = {}
    for e in history + [{"kind": "status", "t": layout.end_t, "proc": p, "session": s, "data": {"status": "idle"}}
                        for (p, s) in list(layout.lanes) if s]:
        if e.get("kind") != "status" or not e.get("session"):
            continue
        key = (e.get("proc"), e["session"])
        busy = (e.get("data") or {}).get("status") == "busy" or (e.get("data") or {}).get("compacting")
        if busy and key not in busy_from:
            busy_from[key] = int(e.get("t", 0))
        elif not busy and key in busy_from:
            t0 = busy_from.pop(key)
            lane = layout.lanes.get(key)
            if lane is None:
                continue
            y0, y1 = layout.y_of_t(t0), max(layout.y_of_t(int(e.get("t", 0))), layout.y_of_t(t0) + 2)
            out.append(f'<rect x="{lane.x + 3}" y="{y0:.1f}" width="4" height="{y1 - y0:.1f}" fill="{C_BUSY}">'
                       f'<title>{_x(key[1])} busy</title></rect>')
    return out


def render_timeline(history: list[dict[str, Any]], verdicts, end_t: int = 0) -> tuple[str, str, Layout]:
    layout = build_layout(history, verdicts, end_t)
    long_run = layout.end_t >= 3_600_000
    W, H = layout.width, layout.height
    body: list[str] = [
        f'<svg class="tl" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" aria-label="timeline">',
        "<defs>",
        *(f'<marker id="{mid}" viewBox="0 0 10 10" refX="8" refY="5" markerWidth="7" markerHeight="7" '
          f'orient="auto"><path d="M0,0 L10,5 L0,10 Z" fill="{c}"/></marker>'
          for mid, c in (("ah-msg", C_MSG), ("ah-wake", C_WAKE), ("ah-fault", C_FAULT))),
        "</defs>",
    ]
    # Process groups as alternating background columns.
    for k, (proc, members) in enumerate(layout.groups):
        x0 = layout.lanes[(proc, members[0])].x - LANE_W // 2
        body.append(f'<rect x="{x0}" y="0" width="{LANE_W * len(members)}" height="{H}" '
                    f'fill="{"#f6f8fa" if k % 2 == 0 else "#ffffff"}"/>')
    # Machine sleeps: a shaded band across every lane.
    start: Optional[int] = None
    for e in history:
        if e.get("kind") == "sleep-start":
            start = int(e.get("t", 0))
        elif e.get("kind") == "sleep-end" and start is not None:
            y0, y1 = layout.y_of_t(start), layout.y_of_t(int(e.get("t", 0))) + ROW_H / 2
            body.append(f'<rect x="{LEFT}" y="{y0:.1f}" width="{W - LEFT}" height="{y1 - y0:.1f}" fill="#dde6f5" '
                        f'opacity="0.75"><title>machine asleep {fmt_span(int(e.get("t", 0)) - start)}</title></rect>')
            start = None
    for y0, y1, dt in layout.breaks:
        body.append(f'<rect x="0" y="{y0}" width="{W}" height="{y1 - y0}" class="brk"/>')
        body.append(f'<line x1="0" y1="{(y0 + y1) / 2:.0f}" x2="{W}" y2="{(y0 + y1) / 2:.0f}" class="brkl"/>')
        body.append(_text(LEFT + 6, (y0 + y1) / 2 + 4, f"⋯ {fmt_span(dt)} with nothing drawn ⋯", "lb brkt"))
    # Lifelines: solid while the process is alive, dashed otherwise.
    for (proc, ses), lane in layout.lanes.items():
        body.append(f'<line x1="{lane.x}" y1="0" x2="{lane.x}" y2="{H}" class="ll-dead"/>')
        spans = layout.alive.get(proc, []) if proc != ORCH else []
        for t0, t1 in spans:
            t0 = max(t0, lane.start_t or 0)
            y0, y1 = layout.y_of_t(t0), layout.y_of_t(layout.end_t if t1 is None else t1)
            body.append(f'<line x1="{lane.x}" y1="{y0:.1f}" x2="{lane.x}" y2="{y1:.1f}" '
                        f'class="{"ll-proc" if ses is None else "ll-ses"}"/>')
    body += _bars(layout, history)
    # Time axis and rows.
    witness_boxes: list[str] = []
    prev_t: Optional[int] = None
    for n, e, y in layout.rows:
        t = int(e.get("t", 0))
        if t != prev_t:
            body.append(f'<line x1="{LEFT - 4}" y1="{y - ROW_H / 2:.0f}" x2="{W}" y2="{y - ROW_H / 2:.0f}" class="grid"/>')
            body.append(_text(LEFT - 8, y + 4, fmt_t(t, long_run), "tm", "end"))
        prev_t = t
        if e.get("kind") == "phase":
            body.append(f'<line x1="{LEFT}" y1="{y}" x2="{W}" y2="{y}" class="phase"/>')
        pieces, lo, hi = _event(layout, n, e, y, long_run)
        body.append(f'<g class="ev k-{_x(e.get("kind"))}">{_title(e, long_run)}{"".join(pieces)}</g>')
        w = layout.witness.get(n)
        if w is not None:
            witness_boxes.append(
                f'<g id="w{w}" class="wit"><rect x="{lo:.0f}" y="{y - ROW_H / 2 - 1:.0f}" width="{hi - lo:.0f}" '
                f'height="{ROW_H + 2}" rx="4" fill="none" stroke="{C_WITNESS}" stroke-width="2.2"/>'
                f'<rect x="2" y="{y - 8:.0f}" width="26" height="16" rx="3" fill="{C_WITNESS}"/>'
                f'{_text(15, y + 4, f"W{w}", "wb", "middle")}{_title(e, long_run)}</g>')
    body += witness_boxes
    body.append("</svg>")

    head: list[str] = [f'<svg class="lanes" width="{W}" height="58" viewBox="0 0 {W} 58" role="img" aria-label="lanes">',
                       f'<rect x="0" y="0" width="{W}" height="58" fill="#ffffff"/>',
                       _text(LEFT - 8, 50, "virtual time", "tm", "end")]
    o = layout.lanes[(ORCH, None)]
    head.append(_text(o.x, 50, "orchestrator", "ln", "middle"))
    for k, (proc, members) in enumerate(layout.groups):
        x0 = layout.lanes[(proc, members[0])].x - LANE_W // 2 + 2
        kind = layout.proc_kind.get(proc, "")
        head.append(f'<rect x="{x0}" y="3" width="{LANE_W * len(members) - 4}" height="22" rx="4" class="grp"/>')
        head.append(_text(x0 + 8, 18, f"{proc}" + (f" · {kind}" if kind else ""), "gn"))
        for ses in members:
            lane = layout.lanes[(proc, ses)]
            if ses is None:
                head.append(_text(lane.x, 42, "process", "ln muted", "middle"))
                head.append(_text(lane.x, 54, "(poller)", "lb sm muted", "middle"))
            else:
                head.append(_text(lane.x, 42, _clip(ses, 20), "ln", "middle"))
                head.append(_text(lane.x, 54, _clip(layout.names.get(ses, ""), 22), "lb sm muted", "middle"))
    head.append("</svg>")
    return "".join(head), "\n".join(body), layout
