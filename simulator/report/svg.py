"""Draws the run report's sequence diagram as two inline SVG fragments.

`render_timeline(history, verdicts)` returns (header_svg, body_svg, layout):
the lane header (kept sticky by the page's CSS) and the diagram itself. Time
flows down; every drawn event is one row (see `lanes` for the layout), drawn
by the drawer `_DRAWERS` keeps for its kind.
No script, no external reference: hover details are SVG `<title>` elements,
and the witness badges carry ids (`w1`, `w2`...) the page links to.

Glyphs are plain SVG shapes rather than emoji so the picture is the same on a
machine with only the DejaVu/Liberation fonts (the CI image). Labels are not
cut: the rows are drawn once to measure how much room each lane's labels take
(`textwidth`), the lanes are spaced to it (`lanes.place_lanes`), and the rows
are drawn again in their places. Only free text (a user's prompt, a message
body, an SQL statement) is shortened, with an ellipsis; the hover title has
it whole.

A message's arrow says what became of it: delivered (solid), held behind an
approval prompt, parked for a later review, refused (it stops short with a
cross), suppressed as a duplicate of an unread copy (it stops short with a
ring: nothing was stored); a message stored in N parts is one arrow, labelled
with its part count; a held message that expired or was declined sends its sender a
notice, drawn from the reviewer's lane back to the sender.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any, Callable, Optional

from simulator.events import (
    CRASH, ECHO, EXPECTATION, FAULT, FAULT_FIRED, FAULT_NOT_FIRED, FORK, HOOK, LOCK_RELEASED, PHASE, POLL,
    PROCESS_EXIT, PROCESS_START, REGISTERED, RUN_END, RUN_START, SAMPLE, SLEEP_END, SLEEP_START, STATUS,
    STEP_DROPPED, STORE_ERROR, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START, USER_PROMPT, WAKE, Event, Fault, Hook,
    SleepEnd, SleepStart, Status, ToolCall, TurnStart,
)
from simulator.history import History
from simulator.report.lanes import (CLI, LEFT, ORCH, ROW_H, Layout, Room, build_layout, fmt_data, fmt_span, fmt_t,
                                    lane_key_of, place_lanes, sample_state)
from simulator.report.outcomes import (APPROVED, DECLINED, EXPIRED, HELD, NOTICE, PARKED, REFUSED, SUPPRESSED,
                                       message_mark, refusal_reason, review_outcome)
from simulator.report.textwidth import text_width

C_MSG, C_WAKE, C_FAULT, C_BAD = "#1f6fd1", "#8a3ffc", "#9a6700", "#8b1a1a"
C_FRESH, C_STALE, C_UNREG, C_BUSY = "#2ea043", "#f0a000", "#d0d7de", "#c9b6f2"
C_HELD, C_PARKED, C_REFUSED, C_DECLINED, C_EXPIRED = "#b35c00", "#6e7781", "#a40e26", "#8250df", "#bc4c00"
C_SUPPRESSED = "#57606a"
C_WITNESS = "#e5000b"
FREE_TEXT_CHARS = 28   # a prompt's or body's excerpt (the hover title has it whole)
# Font sizes and weights are the page CSS's (`html.CSS`) for each text class.
FONT_PX = {"sm": 9.5, "ln": 12.0, "gn": 12.0, "wb": 10.0, "tm": 10.5}
BOLD_CLASSES = {"ln", "gn", "wb", "bad", "stale", "msg", "o-held", "o-parked", "o-refused", "o-declined",
                "o-expired", "o-suppressed"}
DEFAULT_FONT_PX = 10.5
RIGHT_PAD = 12
LABEL_GAP = 9          # from a lane to the start of its row labels
NEXT_LANE_GAP = 16     # from the end of a row label to the next lane (its freshness bar sits left of it)

# Each outcome's arrow: colour, dash, arrowhead marker, and the glyph at the recipient's end.
SEND_STYLE = {
    HELD: (C_HELD, "5 3", "ah-held", "pause"),
    PARKED: (C_PARKED, "2 3", "ah-parked", "park"),
    REFUSED: (C_REFUSED, "", "", "x"),
    SUPPRESSED: (C_SUPPRESSED, "1 3", "", "ring"),
}
# Outcomes that never reached the recipient's inbox: the arrow stops halfway, at its glyph.
STOPS_SHORT = (REFUSED, SUPPRESSED)


def _x(s: Any) -> str:
    """Escape for XML text/attributes; drop control characters XML 1.0 forbids."""
    text = "".join(ch for ch in str(s) if ch >= " " or ch in "\n\t")
    return escape(text, quote=True)


def _clip(s: Any, n: int = FREE_TEXT_CHARS) -> str:
    """Free text cut to `n` characters with an ellipsis."""
    s = " ".join(str(s).split())
    return s if len(s) <= n else s[: n - 1] + "…"


def _title(e: Event, long_run: bool) -> str:
    t, data = fmt_t(e.t, long_run), fmt_data(e.data(), 400)
    return f"<title>#{e.i} t={t} {_x(e.place)} {_x(e.kind)}\n{_x(data)}</title>"


def _text(x: float, y: float, s: str, cls: str = "lb", anchor: str = "start") -> str:
    a = "" if anchor == "start" else f' text-anchor="{anchor}"'
    return f'<text class="{cls}" x="{x:.0f}" y="{y:.0f}"{a}>{_x(s)}</text>'


def label_width(s: str, cls: str) -> float:
    """How wide a text of these classes is drawn (an estimate that errs wide)."""
    classes = cls.split()
    px = next((FONT_PX[c] for c in classes if c in FONT_PX), DEFAULT_FONT_PX)
    return text_width(s, px, bold=any(c in BOLD_CLASSES for c in classes), mono="tm" in classes)


def _text_right(x: float, s: str, cls: str, anchor: str) -> float:
    """How far right a text reaches."""
    width = label_width(s, cls)
    return x + (width if anchor == "start" else width / 2 if anchor == "middle" else 0)


def _fit(s: str, px_room: float, cls: str) -> str:
    """`s`, shortened with an ellipsis until it fits in `px_room` (free text only)."""
    s = " ".join(str(s).split())
    if label_width(s, cls) <= px_room:
        return s
    while len(s) > 1 and label_width(s + "…", cls) > px_room:
        s = s[:-1]
    return s.rstrip() + "…"


class _Sheet:
    """SVG pieces in drawing order, and how far right their text reaches (to size the SVG)."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.right = 0.0

    def add(self, *pieces: str) -> None:
        self.pieces.extend(pieces)

    def text(self, x: float, y: float, s: str, cls: str = "lb", anchor: str = "start") -> None:
        self.pieces.append(_text(x, y, s, cls, anchor))
        self.right = max(self.right, _text_right(x, s, cls, anchor))


# Glyph outlines relative to the row's point on its lane, and how each is painted.
_GLYPH_PATHS = {
    "start": ("M-4,-6 L6,0 L-4,6 Z", 'fill="{c}"'),
    "x": ("M-5,-5 L5,5 M5,-5 L-5,5", 'stroke="{c}" stroke-width="3"'),
    "bolt": ("M2,-8 L-4,1 L0,1 L-2,8 L4,-1 L0,-1 Z", 'fill="{c}"'),
    "fork": ("M0,7 L0,0 L-5,-6 M0,0 L5,-6", 'stroke="{c}" stroke-width="2.2" fill="none"'),
    "check": ("M-5,0 L-1,4 L5,-5", 'stroke="{c}" stroke-width="2.5" fill="none"'),
    "diamond": ("M0,-5 L5,0 L0,5 L-5,0 Z", 'fill="{c}"'),
    "pause": ("M-3,-6 L-3,6 M3,-6 L3,6", 'stroke="{c}" stroke-width="3"'),
    "hourglass": ("M-5,-6 L5,-6 L-5,6 L5,6 Z", 'fill="{c}"'),
}


def _moved(path: str, x: float, y: float) -> str:
    """A relative outline moved to (x, y), in whole pixels."""
    def point(step: str) -> str:
        dx, dy = (float(v) for v in step[1:].split(","))
        return f"{step[0]}{x + dx:.0f},{y + dy:.0f}"
    return " ".join(step if step == "Z" else point(step) for step in path.split())


def _glyph(kind: str, x: float, y: float, color: str) -> str:
    if kind in _GLYPH_PATHS:
        path, paint = _GLYPH_PATHS[kind]
        return f'<path d="{_moved(path, x, y)}" {paint.format(c=color)}/>'
    if kind == "square":
        return f'<rect x="{x - 5:.0f}" y="{y - 5:.0f}" width="10" height="10" fill="{color}"/>'
    if kind == "ring":
        return f'<circle cx="{x:.0f}" cy="{y:.0f}" r="4.5" fill="#fff" stroke="{color}" stroke-width="2"/>'
    if kind == "park":  # an outlined box: put aside for later
        return (f'<rect x="{x - 5:.0f}" y="{y - 5:.0f}" width="10" height="10" fill="#fff" stroke="{color}" '
                f'stroke-width="2"/>')
    if kind == "ban":  # a struck circle: declined
        return (f'<circle cx="{x:.0f}" cy="{y:.0f}" r="5" fill="#fff" stroke="{color}" stroke-width="2"/>'
                f'<path d="M{x - 3.5:.0f},{y + 3.5:.0f} L{x + 3.5:.0f},{y - 3.5:.0f}" stroke="{color}" '
                'stroke-width="2"/>')
    return f'<circle cx="{x:.0f}" cy="{y:.0f}" r="3.5" fill="{color}"/>'


def _arrow(x1: float, x2: float, y: float, color: str, marker: str, dash: str = "", width: float = 1.6) -> str:
    # Stop short of the target lifeline so the arrowhead tip touches it.
    x2e = x2 - 5 if x2 > x1 else x2 + 5
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<line x1="{x1:.0f}" y1="{y:.0f}" x2="{x2e:.0f}" y2="{y:.0f}" stroke="{color}" '
            f'stroke-width="{width}"{d} marker-end="url(#{marker})"/>')


def _lane_of(layout: Layout, e: Event):
    key = lane_key_of(e)
    return layout.lanes.get(key) or layout.lanes.get((key[0], None)) or layout.lanes[(ORCH, None)]


class _Row(_Sheet):
    """One diagram row being drawn: its event, its lane, the x span its witness box covers, and
    how far right of each lane its labels reach (the room `place_lanes` gives that lane)."""

    def __init__(self, layout: Layout, n: int, e: Any, y: float) -> None:  # e: a record of its row's kind
        super().__init__()
        self.layout, self.n, self.e, self.y = layout, n, e, y
        self.t = e.t
        self.room: dict[Any, float] = {}
        self.at(_lane_of(layout, e))

    def at(self, lane) -> None:
        """Draw on `lane`; the witness box spans the glyph and whatever label follows it."""
        self.lane, self.x, self.lo, self.hi = lane, lane.x, lane.x - 8, lane.x + 8

    def at_process(self) -> None:
        """Draw on the lane of the process the event (a process's start or exit) is about."""
        lane = self.layout.lanes.get((self.e.target, None))
        if lane is not None:
            self.at(lane)

    def label(self, lane, s: str, cls: str = "lb") -> None:
        """A label right of `lane`'s glyph, whole; the lane is spaced to make room for it."""
        x = lane.x + LABEL_GAP
        self.text(x, self.y + 4, s, cls)
        reach = LABEL_GAP + label_width(s, cls)
        self.room[lane.key] = max(self.room.get(lane.key, 0.0), reach + NEXT_LANE_GAP)
        if lane is self.lane:
            self.hi = max(self.hi, x + label_width(s, cls) + 4)

    def mark(self, glyph: str, color: str, label: str, cls: str = "lb") -> None:
        """A glyph on the lane with its label right of it."""
        self.add(_glyph(glyph, self.x, self.y, color))
        self.label(self.lane, label, cls)


def _draw_process_start(row: _Row) -> None:
    e = row.e
    row.at_process()
    how = f" {e.how} {e.resumed or ''}" if e.how else (" rehost" if e.rehost_of else "")
    row.mark("start", C_FRESH, f"start #{e.incarnation}{how}")
    resumed = row.layout.lanes.get((e.target, e.resumed)) if e.resumed else None
    if resumed is not None:
        row.add(_glyph("ring", resumed.x, row.y, C_FRESH))
        row.label(resumed, f"resumed {e.how or ''}")
        row.hi = max(row.hi, row.right + 4)


def _draw_process_exit(row: _Row) -> None:
    row.at_process()
    reason = row.e.reason or "end"
    glyph, color = ("square", "#24292f") if reason == "end" else ("square", C_FAULT) if reason == "restart" \
        else ("x", C_BAD)
    row.mark(glyph, color, f"exit: {reason}", "lb bad" if reason in ("killed", "crashed") else "lb")


def _draw_crash(row: _Row) -> None:
    row.mark("x", C_BAD, f"crash at {row.e.point or _clip(row.e.sql or '', 14)}", "lb bad")


def _draw_fault(row: _Row) -> None:
    """A fault armed or fired: an arrow to the lane it hits, or a bolt where it names none."""
    e, lanes = row.e, row.layout.lanes
    verb = "armed" if isinstance(e, Fault) else "fired"
    targets = row.layout.recipients.get(row.n) or []
    if not targets or targets[0] not in lanes:
        row.mark("bolt", C_FAULT, f"fault#{e.step} {e.fault} {verb}")
        return
    x, tx = row.x, lanes[targets[0]].x
    row.add(_arrow(x, tx, row.y, C_FAULT, "ah-fault", "2 3", 1.3))
    row.text((x + tx) / 2, row.y - 4, f"{e.fault} {verb}", "lb sm al", "middle")
    row.add(_glyph("bolt", x, row.y, C_FAULT))
    row.lo, row.hi = min(x, tx) - 10, max(x, tx) + 10


def _draw_fault_not_fired(row: _Row) -> None:
    row.mark("ring", C_FAULT, f"fault#{row.e.step} {row.e.fault} never fired", "lb bad")


def _draw_sleep_start(row: _Row) -> None:
    until = row.e.until
    row.mark("ring", "#3b5b92", "machine sleeps" + (
        f" until {fmt_t(int(until), row.layout.long_run)}" if isinstance(until, int) else ""))


def _draw_sleep_end(row: _Row) -> None:
    row.mark("ring", "#3b5b92", "machine wakes")


def _draw_fork(row: _Row) -> None:
    row.mark("fork", "#0a7d74", f"id fork → {str(row.e.new_host_id)[:8]}")


def _draw_registered(row: _Row) -> None:
    row.mark("ring", C_FRESH, f"registered {row.e.name}")


def _draw_user_prompt(row: _Row) -> None:
    row.mark("dot", "#6e7781", f"user: {_clip(row.e.text)}", "lb muted")


def _draw_expectation(row: _Row) -> None:
    e, ok = row.e, row.e.ok
    check = f"expect#{e.index}"
    if ok is None and check in row.layout.failed:  # observed here, and the checkers found it wrong
        row.mark("x", C_BAD, f"{check} FAILED: {row.layout.failed[check]}", "lb bad")
    elif ok is None:  # observed here, judged by the checkers afterwards (see the verdict table)
        row.mark("diamond", "#57606a", f"{check} {e.expect_kind} observed", "lb muted")
    else:
        row.mark("check" if ok else "x", C_FRESH if ok else C_BAD,
                 f"{check} {'ok' if ok else 'FAILED'}", "lb" if ok else "lb bad")


def _draw_step_dropped(row: _Row) -> None:
    row.mark("ring", C_FAULT, f"step#{row.e.step} {row.e.action} dropped", "lb bad")


def _draw_lock_released(row: _Row) -> None:
    row.mark("ring", C_FAULT, f"lock#{row.e.step} released", "lb muted")


_CHANGE_COLOR = {"fresh": C_FRESH, "stale": C_STALE, "unreg": "#8c959f"}


def _draw_freshness_changes(row: _Row) -> None:
    """Freshness changes, drawn on each session's lane (the row belongs to no lane of its own)."""
    xs = []
    for label, state in row.layout.changes[row.n]:
        lane = row.layout.lane_for_session(label, row.t)
        if lane is None:
            continue
        xs.append(lane.x)
        row.add(f'<rect x="{lane.x - 11}" y="{row.y - 3:.0f}" width="8" height="6" fill="{_CHANGE_COLOR[state]}"/>')
        row.label(lane, f"→ {'not registered' if state == 'unreg' else state}",
                  "lb sm stale" if state == "stale" else "lb sm muted")
    if xs:
        row.lo, row.hi = min(xs) - 14, row.right + 4


def _draw_sample(row: _Row) -> None:
    if row.n in row.layout.changes:
        _draw_freshness_changes(row)
        return
    stale = [k for k, v in row.e.sessions.items() if v.stale]
    row.mark("diamond", "#57606a", SAMPLE + (f": stale {', '.join(stale)}" if stale else ": all fresh"), "lb muted")


def _draw_activity(row: _Row) -> None:
    """Status, turns, polls, hooks, echoes and tool calls: drawn only as witnesses."""
    row.mark("diamond", "#8c959f", f"{row.e.kind} {_activity(row.e).replace('thatch_chat_', '')}", "lb muted")


def _activity(e: Event) -> str:
    """What an activity event says in a word: the status, the turn's cause, the hook or the tool."""
    if isinstance(e, Status):
        return e.status
    if isinstance(e, TurnStart):
        return e.cause
    if isinstance(e, Hook):
        return e.hook
    return str(e.tool) if isinstance(e, ToolCall) else ""


def _draw_store_error(row: _Row) -> None:
    row.mark("diamond", C_FAULT, f"store error: {row.e.where}", "lb bad")


def _draw_run_start(row: _Row) -> None:
    row.mark("square", "#24292f", f"run seed={row.e.seed}")


def _draw_run_end(row: _Row) -> None:
    row.mark("square", "#24292f", RUN_END)


def _draw_phase(row: _Row) -> None:
    row.mark("diamond", "#57606a", f"phase: {row.e.phase}", "lb muted")


def _draw_wake(row: _Row) -> None:
    # The deliverer is the poller of the receiving process: arrow proc lane -> session lane.
    poller = row.layout.lanes.get((row.e.proc, None))
    px = poller.x if poller else row.x
    senders = ", ".join(str(s) for s in row.e.senders)
    row.add(_arrow(px, row.x, row.y, C_WAKE, "ah-wake", "4 2", 1.8))
    row.mark("dot", C_WAKE, f"wake ×{row.e.count} ← {senders}", "lb wake")
    row.lo = min(px, row.x) - 8


def _send_arrow(row: _Row, tx: float, ya: float, outcome: str, bcast: bool) -> None:
    """One recipient's arrow, styled by what became of the message (SEND_STYLE; delivered: plain)."""
    x = row.x
    if outcome not in SEND_STYLE:
        row.add(_arrow(x, tx, ya, C_MSG, "ah-msg", "6 3" if bcast else "", 1.8))
        return
    color, dash, marker, glyph = SEND_STYLE[outcome]
    if outcome in STOPS_SHORT:  # it never reached the recipient's inbox: the arrow stops halfway, at its glyph
        mid = (x + tx) / 2
        d = f' stroke-dasharray="{dash}"' if dash else ""
        row.add(f'<line x1="{x:.0f}" y1="{ya:.0f}" x2="{mid:.0f}" y2="{ya:.0f}" stroke="{color}" '
                f'stroke-width="1.8"{d}/>', _glyph(glyph, mid, ya, color))
        return
    row.add(_arrow(x, tx - (12 if tx > x else -12), ya, color, marker, dash, 1.8), _glyph(glyph, tx, ya, color))


def _draw_message(row: _Row, tool: str, targets: list[tuple[str, Optional[str]]]) -> None:
    """A send or broadcast: arrows to the recipients' lanes, the body on the sender's side."""
    x, y = row.x, row.y
    lanes = [(label, row.layout.lane_for_session(label, row.t) if label else None) for _, label in targets]
    bcast = tool == "broadcast"
    reply = row.layout.replies[row.n]
    outcome = message_mark(reply)
    xs = [lane.x for _, lane in lanes if lane is not None and lane.x != x]
    # The arrow runs a little below the row centre so its label fits above it.
    ya = y + 3
    for tx in xs:
        _send_arrow(row, tx, ya, outcome, bcast)
    missing = [str(label) for label, lane in lanes if lane is None]
    body = row.layout.bodies.get(row.n, "")
    what = "broadcast" if bcast else "msg" if outcome == "delivered" else outcome
    if outcome == REFUSED:
        what += f" ({refusal_reason(reply)})"
    elif outcome == SUPPRESSED:
        what += " (its copy unread)"
    parts = reply.parts
    if parts > 1:
        what += f" in {parts} parts"
    color = SEND_STYLE.get(outcome, (C_MSG,))[0]
    row.add(_glyph("dot", x, ya, color))
    if not xs:  # no lane to point at: a mark with the whole label, on the sender's lane
        row.label(row.lane, f"{what} → {', '.join(missing) or '?'}" + (f" “{_clip(body)}”" if body else ""),
                  "lb sm msg" if outcome == "delivered" else "lb sm bad")
        return
    far = max(xs, key=lambda v: abs(v - x))
    label = what + (f" → {', '.join(missing)}?" if missing else "") + (f" “{body}”" if body else "")
    # Label just off the sender, on the arrow's side, so it never sits on an arrowhead; free text,
    # so it is shortened to the arrow's length.
    right = far >= x
    cls = "lb sm msg al" if outcome == "delivered" else f"lb sm o-{outcome} al"
    row.text(x + (12 if right else -12), y - 2, _fit(label, abs(far - x) - 24, cls), cls,
             "start" if right else "end")
    row.lo, row.hi = min([x] + xs) - 8, max([x] + xs) + 8


def _draw_review(row: _Row) -> None:
    """A user's review of a held message: approved (a tick) or declined (a struck circle)."""
    reviewed = review_outcome(row.e.text)
    if reviewed is None:
        row.mark("dot", "#6e7781", f"{row.e.tool}: nothing held", "lb muted")
    elif reviewed[0] == APPROVED:
        row.mark("check", C_FRESH, f"approved held #{reviewed[1]}")
    else:
        row.mark("ban", C_DECLINED, f"declined held #{reviewed[1]}", "lb o-declined")


def _draw_notice(row: _Row) -> None:
    """A held message expired or was declined: the mark on its recipient's lane, the notice to its sender."""
    e = row.e
    expired = e.outcome == EXPIRED
    color = C_EXPIRED if expired else C_DECLINED
    what = f"held #{e.held} {'expired' if expired else 'declined'} → notice"
    row.add(_glyph("hourglass" if expired else "ban", row.x, row.y, color))
    to = row.layout.lane_for_session(e.to, row.t) if e.to else None
    if to is None or to.x == row.x:
        row.label(row.lane, what, f"lb o-{e.outcome}")
        return
    ya = row.y + 3
    row.add(_arrow(row.x, to.x, ya, color, "ah-notice" if expired else "ah-declined", "1 3", 1.8))
    right = to.x > row.x
    cls = f"lb sm o-{EXPIRED if expired else DECLINED} al"
    row.text(row.x + (12 if right else -12), row.y - 2, _fit(what, abs(to.x - row.x) - 24, cls), cls,
             "start" if right else "end")
    row.lo, row.hi = min(row.x, to.x) - 8, max(row.x, to.x) + 8


def _draw_tool_result(row: _Row) -> None:
    tool = row.e.tool.replace("thatch_chat_", "")
    targets = row.layout.recipients.get(row.n) or []
    if targets:
        _draw_message(row, tool, targets)
        return
    if tool in ("approve", "decline"):
        _draw_review(row)
        return
    ok = row.e.ok
    row.mark("dot" if ok else "ring", "#6e7781" if ok else C_BAD, f"{tool} {'ok' if ok else 'failed'}",
             "lb muted" if ok else "lb bad")


def _draw_other(row: _Row) -> None:
    row.mark("diamond", "#8c959f", row.e.kind, "lb muted")


_DRAWERS: dict[str, Callable[[_Row], None]] = {
    PROCESS_START: _draw_process_start,
    PROCESS_EXIT: _draw_process_exit,
    CRASH: _draw_crash,
    FAULT: _draw_fault,
    FAULT_FIRED: _draw_fault,
    FAULT_NOT_FIRED: _draw_fault_not_fired,
    SLEEP_START: _draw_sleep_start,
    SLEEP_END: _draw_sleep_end,
    FORK: _draw_fork,
    REGISTERED: _draw_registered,
    USER_PROMPT: _draw_user_prompt,
    EXPECTATION: _draw_expectation,
    STEP_DROPPED: _draw_step_dropped,
    LOCK_RELEASED: _draw_lock_released,
    SAMPLE: _draw_sample,
    **dict.fromkeys((STATUS, TURN_START, TURN_END, POLL, HOOK, ECHO, TOOL_CALL), _draw_activity),
    STORE_ERROR: _draw_store_error,
    RUN_START: _draw_run_start,
    RUN_END: _draw_run_end,
    PHASE: _draw_phase,
    WAKE: _draw_wake,
    TOOL_RESULT: _draw_tool_result,
    NOTICE: _draw_notice,
}


def _draw_row(layout: Layout, n: int, e: Event, y: float) -> _Row:
    row = _Row(layout, n, e, y)
    _DRAWERS.get(e.kind, _draw_other)(row)
    return row


def _freshness_bars(layout: Layout, history: History) -> list[str]:
    """Heartbeat freshness per session lane, from the `sample` events."""
    segs: dict[str, list[tuple[int, str]]] = {}
    lane_labels = [k for ps in layout.groups for k in ps[1] if k]
    for e in history.of(SAMPLE):
        t, rows = e.t, e.sessions
        for label in dict.fromkeys(lane_labels + list(rows)):
            state = sample_state(rows.get(label))
            seq = segs.setdefault(label, [])
            if not seq or seq[-1][1] != state:
                seq.append((t, state))
    color = {"fresh": C_FRESH, "stale": C_STALE, "unreg": C_UNREG}
    out: list[str] = []
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
                       f'fill="{color[state]}"><title>{_x(label)}: {state} from {fmt_t(t0, layout.long_run)}'
                       f'</title></rect>')
    return out


def _busy_bars(layout: Layout, history: History) -> list[str]:
    """Busy (or compacting) windows per session lane, from the `status` events."""
    out: list[str] = []
    busy_from: dict[tuple[Optional[str], str], int] = {}
    closing = [Status(t=layout.end_t, proc=p, session=s, status="idle") for (p, s) in list(layout.lanes) if s]
    for e in [*history.of(STATUS), *closing]:
        if not e.session:
            continue
        key = (e.proc, e.session)
        busy = e.status == "busy" or e.compacting
        if busy and key not in busy_from:
            busy_from[key] = e.t
        elif not busy and key in busy_from:
            t0 = busy_from.pop(key)
            lane = layout.lanes.get(key)
            if lane is None:
                continue
            y0, y1 = layout.y_of_t(t0), max(layout.y_of_t(e.t), layout.y_of_t(t0) + 2)
            out.append(f'<rect x="{lane.x + 3}" y="{y0:.1f}" width="4" height="{y1 - y0:.1f}" fill="{C_BUSY}">'
                       f'<title>{_x(key[1])} busy</title></rect>')
    return out


def _markers() -> list[str]:
    return ["<defs>",
            *(f'<marker id="{mid}" viewBox="0 0 10 10" refX="8" refY="5" markerWidth="7" markerHeight="7" '
              f'orient="auto"><path d="M0,0 L10,5 L0,10 Z" fill="{c}"/></marker>'
              for mid, c in (("ah-msg", C_MSG), ("ah-wake", C_WAKE), ("ah-fault", C_FAULT), ("ah-held", C_HELD),
                             ("ah-parked", C_PARKED), ("ah-notice", C_EXPIRED), ("ah-declined", C_DECLINED))),
            "</defs>"]


def _group_columns(layout: Layout) -> list[str]:
    """Process groups as alternating background columns."""
    out = []
    for k, (proc, members) in enumerate(layout.groups):
        x0, x1 = layout.lanes[(proc, members[0])].left, layout.lanes[(proc, members[-1])].right
        out.append(f'<rect x="{x0}" y="0" width="{x1 - x0}" height="{layout.height}" '
                   f'fill="{"#f6f8fa" if k % 2 == 0 else "#ffffff"}"/>')
    return out


def _sleep_bands(layout: Layout, history: History) -> list[str]:
    """Machine sleeps: a shaded band across every lane."""
    out = []
    start: Optional[int] = None
    for e in history.of(SLEEP_START, SLEEP_END):
        if isinstance(e, SleepStart):
            start = e.t
        elif isinstance(e, SleepEnd) and start is not None:
            y0, y1 = layout.y_of_t(start), layout.y_of_t(e.t) + ROW_H / 2
            out.append(f'<rect x="{LEFT}" y="{y0:.1f}" width="{layout.width - LEFT}" height="{y1 - y0:.1f}" '
                       f'fill="#dde6f5" opacity="0.75"><title>machine asleep {fmt_span(e.t - start)}'
                       f'</title></rect>')
            start = None
    return out


def _breaks(layout: Layout) -> list[str]:
    """Idle stretches left out of the time axis, each a labelled band."""
    out = []
    W = layout.width
    for y0, y1, dt in layout.breaks:
        out.append(f'<rect x="0" y="{y0}" width="{W}" height="{y1 - y0}" class="brk"/>')
        out.append(f'<line x1="0" y1="{(y0 + y1) / 2:.0f}" x2="{W}" y2="{(y0 + y1) / 2:.0f}" class="brkl"/>')
        out.append(_text(LEFT + 6, (y0 + y1) / 2 + 4, f"⋯ {fmt_span(dt)} with nothing drawn ⋯", "lb brkt"))
    return out


def _lifelines(layout: Layout) -> list[str]:
    """Lifelines: solid while the process is alive, dashed otherwise."""
    out = []
    for (proc, ses), lane in layout.lanes.items():
        out.append(f'<line x1="{lane.x}" y1="0" x2="{lane.x}" y2="{layout.height}" class="ll-dead"/>')
        spans = layout.alive.get(proc, []) if proc != ORCH else []
        for t0, t1 in spans:
            t0 = max(t0, lane.start_t or 0)
            y0, y1 = layout.y_of_t(t0), layout.y_of_t(layout.end_t if t1 is None else t1)
            out.append(f'<line x1="{lane.x}" y1="{y0:.1f}" x2="{lane.x}" y2="{y1:.1f}" '
                       f'class="{"ll-proc" if ses is None else "ll-ses"}"/>')
    return out


def _witness_box(row: _Row, w: int, long_run: bool) -> str:
    """The red outline of a witness row and its `W<n>` badge in the time gutter."""
    y = row.y
    return (f'<g id="w{w}" class="wit"><rect x="{row.lo:.0f}" y="{y - ROW_H / 2 - 1:.0f}" '
            f'width="{row.hi - row.lo:.0f}" height="{ROW_H + 2}" rx="4" fill="none" stroke="{C_WITNESS}" '
            f'stroke-width="2.2"/>'
            f'<rect x="2" y="{y - 8:.0f}" width="26" height="16" rx="3" fill="{C_WITNESS}"/>'
            f'{_text(15, y + 4, f"W{w}", "wb", "middle")}{_title(row.e, long_run)}</g>')


def _rows(layout: Layout, rows: list[_Row]) -> list[str]:
    """The time axis and the drawn rows, then the witness outlines on top."""
    out: list[str] = []
    witness_boxes: list[str] = []
    W, long_run = layout.width, layout.long_run
    prev_t: Optional[int] = None
    for row in rows:
        y, e = row.y, row.e
        if row.t != prev_t:
            top = y - ROW_H / 2
            out.append(f'<line x1="{LEFT - 4}" y1="{top:.0f}" x2="{W}" y2="{top:.0f}" class="grid"/>')
            out.append(_text(LEFT - 8, y + 4, fmt_t(row.t, long_run), "tm", "end"))
        prev_t = row.t
        if e.kind == PHASE:
            out.append(f'<line x1="{LEFT}" y1="{y}" x2="{W}" y2="{y}" class="phase"/>')
        out.append(f'<g class="ev k-{_x(e.kind)}">{_title(e, long_run)}{"".join(row.pieces)}</g>')
        w = layout.witness.get(row.n)
        if w is not None:
            witness_boxes.append(_witness_box(row, w, long_run))
    return out + witness_boxes


def _lane_titles(layout: Layout, proc: str, ses: Optional[str]) -> tuple[str, str]:
    """The two lines over a lane: the session and its chat name, or what the process lane is."""
    if ses is not None:
        return ses, layout.names.get(ses, "")
    return ("terminal", "(CLI steps)") if proc == CLI else ("process", "(poller)")


def _group_title(layout: Layout, proc: str) -> str:
    kind = layout.proc_kind.get(proc, "")
    return f"{proc}" + (f" · {kind}" if kind else "")


def _lane_header(layout: Layout) -> _Sheet:
    """Lane names: per process group its name and kind, per lane the session and its chat name."""
    head = _Sheet()
    head.text(LEFT - 8, 50, "virtual time", "tm", "end")
    head.text(layout.lanes[(ORCH, None)].x, 50, "orchestrator", "ln", "middle")
    for proc, members in layout.groups:
        x0, x1 = layout.lanes[(proc, members[0])].left + 2, layout.lanes[(proc, members[-1])].right - 2
        head.add(f'<rect x="{x0}" y="3" width="{x1 - x0}" height="22" rx="4" class="grp"/>')
        head.text(x0 + 8, 18, _group_title(layout, proc), "gn")
        for ses in members:
            lane = layout.lanes[(proc, ses)]
            top, under = _lane_titles(layout, proc, ses)
            muted = " muted" if ses is None else ""
            head.text(lane.x, 42, top, "ln" + muted, "middle")
            head.text(lane.x, 54, under, "lb sm muted", "middle")
    return head


def _header_room(layout: Layout) -> Room:
    """Half the widest title of each lane, and each group's title width, as `place_lanes` wants them."""
    room = Room()
    room.half[(ORCH, None)] = label_width("orchestrator", "ln") / 2 + 8
    for proc, members in layout.groups:
        room.group[proc] = label_width(_group_title(layout, proc), "gn") + 20
        for ses in members:
            top, under = _lane_titles(layout, proc, ses)
            room.half[(proc, ses)] = max(label_width(top, "ln"), label_width(under, "lb sm")) / 2 + 8
    return room


def _fitted_width(layout: Layout, rows: list[_Row], head: _Sheet) -> int:
    """The lanes' width, widened so the rightmost label or witness outline fits."""
    reach = [head.right] + [row.right for row in rows] + [row.hi for row in rows if row.n in layout.witness]
    return max(layout.width, math.ceil(max(reach) + RIGHT_PAD))


def _drawn_rows(layout: Layout) -> list[_Row]:
    """Every row drawn twice: once to measure what its labels need, then in lanes spaced to fit them."""
    rows = [_draw_row(layout, n, e, y) for n, e, y in layout.rows]
    room = _header_room(layout)
    for row in rows:
        for key, px in row.room.items():
            room.right[key] = max(room.right.get(key, 0.0), px)
    place_lanes(layout, room)
    return [_draw_row(layout, n, e, y) for n, e, y in layout.rows]


def render_timeline(history: History, verdicts, end_t: int = 0,
                    db_path=None) -> tuple[str, str, Layout]:
    layout = build_layout(history, verdicts, end_t, db_path)
    rows = _drawn_rows(layout)
    head = _lane_header(layout)
    layout.width = _fitted_width(layout, rows, head)
    W, H = layout.width, layout.height
    body = [f'<svg class="tl" width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" aria-label="timeline">',
            *_markers(), *_group_columns(layout), *_sleep_bands(layout, history), *_breaks(layout),
            *_lifelines(layout), *_freshness_bars(layout, history), *_busy_bars(layout, history),
            *_rows(layout, rows), "</svg>"]
    header = [f'<svg class="lanes" width="{W}" height="58" viewBox="0 0 {W} 58" role="img" aria-label="lanes">',
              f'<rect x="0" y="0" width="{W}" height="58" fill="#ffffff"/>', *head.pieces, "</svg>"]
    return "".join(header), "\n".join(body), layout


def swatch(outcome: str) -> str:
    """The legend's picture of a message outcome: a short arrow styled as the diagram draws it."""
    if outcome in (EXPIRED, DECLINED):
        color, glyph = (C_EXPIRED, "hourglass") if outcome == EXPIRED else (C_DECLINED, "ban")
        line = (f'<line x1="8" y1="7" x2="34" y2="7" stroke="{color}" stroke-width="1.8" stroke-dasharray="1 3"/>'
                f'<path d="M34,3 L40,7 L34,11 Z" fill="{color}"/>')
        return f'<svg width="42" height="14">{_glyph(glyph, 6, 7, color)}{line}</svg>'
    color, dash, _, glyph = SEND_STYLE[outcome]
    d = f' stroke-dasharray="{dash}"' if dash else ""
    end = 20 if outcome in STOPS_SHORT else 30
    return (f'<svg width="42" height="14"><line x1="2" y1="7" x2="{end}" y2="7" stroke="{color}" '
            f'stroke-width="1.8"{d}/>{_glyph(glyph, end + (0 if outcome in STOPS_SHORT else 6), 7, color)}</svg>')
