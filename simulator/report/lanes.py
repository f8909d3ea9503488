"""Lanes, rows and virtual-time layout for the run report's sequence diagram.

This module only decides *where* things go (which lanes exist, which events
become rows, the y of every virtual instant); `svg` draws them. Kept apart so
the layout rules (compressing idle stretches, capping rows for long runs,
resolving message recipients to lanes) can be read without the SVG. The
formats of times, spans and payloads the drawing and the page share live here
too.

`build_layout` runs in passes: a census of processes, sessions and their
names; lane placement; the choice of rows (with message and fault targets);
the row cap; and the y of every row along virtual time.

Lanes: the orchestrator, then per process (first-seen order) its own lane
followed by one lane per session it hosted, keyed `(proc, session)`. A session
resumed in another process therefore gets a second lane under that process,
which is what a reader wants to see: who hosted it when. A machine-wide step
(`thatch chat list` / `tail`) runs in no session's process: its events get a
lane of their own (`CLI`), whichever fake host carried them out.

Lanes are spaced to their text: `place_lanes` takes the room each lane's
labels need (measured by the drawing) and moves the lanes apart, so a label
is never cut short.
"""

from __future__ import annotations

import bisect
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from simulator.events import (
    CRASH, EXPECTATION, FAULT, FAULT_FIRED, FAULT_NOT_FIRED, FORK, LOCK_RELEASED, PHASE, PROCESS_EXIT,
    PROCESS_START, REGISTERED, RUN_END, RUN_START, SAMPLE, SLEEP_END, SLEEP_START, STEP_DROPPED, STORE_ERROR,
    TOOL_RESULT, USER_PROMPT, WAKE, Event, Expectation, Fault, Fork, ProcessExit, ProcessStart, Registered,
    Sample, SampleRow, ToolCall, ToolResult,
)
from simulator.history import History, encode_event
from simulator.replies import Outcome, decode_reply
from simulator.report.outcomes import REFUSED, NoticeRow, message_mark, read_notices
from simulator.scenario.durations import format_duration
from simulator.scenario.kinds import BEATING_ROW_KINDS, DEFAULT_ROW_KIND, MACHINE, STEPS

ORCH = "orchestrator"
CLI = "thatch chat"     # the lane of the machine-wide CLI steps (a space: no process label has one)
LANE_W = 150            # px between lanes at least
LEFT = 92               # time axis gutter
ROW_H = 22              # px per drawn event
BREAK_MS = 10 * 60_000  # an idle stretch this long is drawn as a labelled break
BREAK_H = 30
MAX_ROWS = 2500         # cap for very long runs (keeps a 24 h report to ~1-2 MB)
LONG_RUN_MS = 3_600_000  # from an hour of virtual time on, times read h:mm:ss

# Kinds drawn as a row of the diagram. The rest (poll, status, sample, turn
# boundaries, tool-calls, hooks, echoes) feed bars and tooltips or are only
# drawn when a verdict names them as witnesses.
ROW_KINDS = {
    RUN_START, RUN_END, PHASE, PROCESS_START, PROCESS_EXIT, FAULT,
    FAULT_FIRED, FAULT_NOT_FIRED, SLEEP_START, SLEEP_END, EXPECTATION,
    CRASH, STORE_ERROR, FORK, WAKE, TOOL_RESULT, REGISTERED, USER_PROMPT,
    STEP_DROPPED, LOCK_RELEASED,
}
# Priority when a run has more rows than MAX_ROWS: lower tier survives first.
TIER0 = {RUN_START, RUN_END, PHASE, PROCESS_START, PROCESS_EXIT, FAULT, FAULT_FIRED,
         FAULT_NOT_FIRED, SLEEP_START, SLEEP_END, CRASH, STORE_ERROR, FORK, STEP_DROPPED,
         LOCK_RELEASED}
TIER1 = {WAKE, TOOL_RESULT, SAMPLE}
MESSAGE_TOOLS = {"thatch_chat_send", "thatch_chat_broadcast"}
# Steps that run on the machine, not in a session's process: their tool events are the CLI's.
MACHINE_TOOLS = frozenset(k.key for k in STEPS.values() if k.target == MACHINE)


LaneKey = tuple[str, Optional[str]]   # (proc, session); session None = the process lane itself


@dataclass
class Lane:
    key: LaneKey
    x: int = 0
    start_t: Optional[int] = None    # first virtual time the lane exists
    left: int = 0                    # the lane's column: from midway to the previous lane...
    right: int = 0                   # ...to midway to the next one (the last lane: its own room)


def lane_key_of(e: Event) -> LaneKey:
    """The lane of the process that did `e`: its own, or the CLI's for a machine-wide step."""
    if isinstance(e, (ToolCall, ToolResult)) and e.tool in MACHINE_TOOLS:
        return (CLI, None)
    return (e.proc or ORCH, e.session)


@dataclass
class Layout:
    lanes: dict[LaneKey, Lane]
    groups: list[tuple[str, list[Optional[str]]]]        # proc -> [None, session labels...]
    proc_kind: dict[str, str]
    names: dict[str, str]                                # session label -> assigned name (last seen)
    rows: list[tuple[int, Event, int]]                   # (history index, event, y center)
    breaks: list[tuple[int, int, int]]                   # (y top, y bottom, idle ms)
    witness: dict[int, int]                              # history index -> W number (1-based)
    omitted: dict[str, int]                              # kind -> rows left out by the cap
    alive: dict[str, list[tuple[int, Optional[int]]]]    # proc -> [(start t, end t or None)]
    recipients: dict[int, list[LaneKey]]   # history index -> target lanes
    bodies: dict[int, str] = field(default_factory=dict)      # history index -> message body (from its tool-call)
    changes: dict[int, list[tuple[str, str]]] = field(default_factory=dict)  # sample index -> [(label, new state)]
    replies: dict[int, Outcome] = field(default_factory=dict)  # send / broadcast result index -> its reply, decoded
    extra: dict[int, Event] = field(default_factory=dict)  # row index past the history -> drawn-only event
    failed: dict[str, str] = field(default_factory=dict)     # failing check -> its title
    # A witness -> its history position (`witness_matcher`): the W numbers and the report's tables read it.
    match: Callable[[Any], Optional[int]] = lambda w: None
    width: int = 0                                       # lanes' width (the drawing widens it to fit labels)
    height: int = 0
    end_t: int = 0
    _anchor_t: list[int] = field(default_factory=list)
    _anchor_y: list[float] = field(default_factory=list)

    @property
    def long_run(self) -> bool:
        return self.end_t >= LONG_RUN_MS

    def y_of_t(self, t: int) -> float:
        """The y of a virtual instant: exact on rows, interpolated between them."""
        if not self._anchor_t:
            return ROW_H
        k = bisect.bisect_left(self._anchor_t, t)
        if k < len(self._anchor_t) and self._anchor_t[k] == t:
            return self._anchor_y[k]
        if k == 0:
            return self._anchor_y[0]
        if k >= len(self._anchor_t):
            return self._anchor_y[-1]
        t0, t1 = self._anchor_t[k - 1], self._anchor_t[k]
        y0, y1 = self._anchor_y[k - 1], self._anchor_y[k]
        return y0 + (y1 - y0) * (t - t0) / (t1 - t0)

    def lane_for_session(self, label: str, t: int) -> Optional[Lane]:
        """The lane of `label` in the process that hosted it most recently at `t`."""
        return session_lane(self.lanes, label, t)


def sample_state(row: Optional[SampleRow]) -> str:
    """A session's freshness in one `sample`: fresh, stale or unreg (absent / not registered)."""
    if row is None or not row.registered:
        return "unreg"
    return "stale" if row.stale else "fresh"


def fmt_t(ms: int, long_run: bool) -> str:
    """Virtual time as m:ss (short runs) or h:mm:ss (runs past an hour); ms when not whole."""
    s, rem = divmod(int(ms), 1000)
    h, s2 = divmod(s, 3600)
    m, sec = divmod(s2, 60)
    text = f"{h}:{m:02d}:{sec:02d}" if long_run else f"{h * 60 + m}:{sec:02d}"
    return text + (f".{rem:03d}" if rem else "")


def fmt_span(ms: int) -> str:
    """A duration for humans, in whole seconds (under a second: exact): 2h10m, 4m30s, 12s."""
    return format_duration(ms if ms < 1000 else ms // 1000 * 1000)


def fmt_data(obj: Any, limit: Optional[int] = None) -> str:
    """A payload as readable JSON (spaced, keys sorted), cut to `limit` characters with an ellipsis."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _gap(dt: int) -> int:
    # Time between rows grows with the log of the idle time: 1 s ~3 px, 30 s ~15 px,
    # 5 min ~25 px. Anything over BREAK_MS becomes a labelled break instead.
    if dt <= 0:
        return 0
    if dt >= BREAK_MS:
        return BREAK_H
    return min(26, round(3 * math.log2(1 + dt / 1000)))


def witness_matcher(history: History) -> Callable[[Any], Optional[int]]:
    """A function mapping a witness (an event's line, as a verdict keeps it) to its history position
    (or None).

    A witness is matched by its `i` when it has one, else by (t, proc, session,
    kind, data) equality, so a checker may hand back a copy of the event. A
    witness of no kind (a database row) is no event.
    """
    by_i = {e.i: n for n, e in enumerate(history)}
    by_val: dict[tuple, int] = {}   # built at the first event witness that has no position of the history

    def match(w: Any) -> Optional[int]:
        if not isinstance(w, dict):
            return None
        n = by_i.get(w["i"]) if "i" in w else None
        if n is not None or "kind" not in w:
            return n
        if not by_val:
            for k, e in enumerate(history):
                by_val.setdefault(_ident(e.as_dict()), k)
        return by_val.get(_ident(w))

    return match


def witness_indices(history: History, verdicts, match: Callable[[Any], Optional[int]]) -> dict[int, int]:
    """History positions named by failing verdicts' witnesses (found by `match`, a `witness_matcher`)
    -> W numbers (1-based, first-seen).

    A failing expectation, step reply or fault whose verdict names no event (a "0 wakes, want 1"
    has nothing to point at) is witnessed by its own record: the observation, the step's result,
    the fault's events, else the run's end."""
    out: dict[int, int] = {}
    for v in verdicts:
        if v.ok:
            continue
        found = [n for n in map(match, v.witness or []) if n is not None]
        for n in found or own_record(history, v.check):
            if n not in out:
                out[n] = len(out) + 1
    return out


_OWN_KINDS = {"expect": (EXPECTATION,), "step": (TOOL_RESULT, STEP_DROPPED),
              "fault": (FAULT, FAULT_FIRED, FAULT_NOT_FIRED, CRASH)}


def own_record(history: History, check: str) -> list[int]:
    """The events that record an `expect#N`, `step#N` or `fault#N` (else the run's end; else none)."""
    family, _, number = check.partition("#")
    if family not in _OWN_KINDS or not number.isdigit():
        return []
    hits = [n for n, e in enumerate(history)
            if e.kind in _OWN_KINDS[family] and _own_number(e) == int(number)]
    ends = [n for n, e in enumerate(history) if e.kind == RUN_END]
    return hits[:3] or ends[-1:]


def _own_number(e: Event) -> Any:
    """The expectation's index, or the step a step's result or a fault's event names."""
    return e.index if isinstance(e, Expectation) else getattr(e, "step", None)


def _ident(line: dict[str, Any]) -> tuple:
    """An event line's identity but for its position (its data in one key order)."""
    return (line.get("t"), line.get("proc"), line.get("session"), line.get("kind"), encode_event(line.get("data")))


def session_lane(lanes: dict[LaneKey, Lane], label: str, t: int) -> Optional[Lane]:
    """The lane of session `label` in the process that hosted it most recently at `t`."""
    best: Optional[Lane] = None
    for lane in lanes.values():
        if lane.key[1] != label:
            continue
        start = lane.start_t if lane.start_t is not None else 0
        if best is None or (start <= t and (best.start_t or 0) <= start):
            best = lane
    return best


def _fault_target(e: Event, procs: set[str], lanes) -> Optional[LaneKey]:
    """The lane a fault event is about, when its payload (an armed fault's arguments, a fired one's
    detail) names a process or a session."""
    sub = e.args if isinstance(e, Fault) else getattr(e, "detail", None)
    cands, session = [], None
    if isinstance(sub, dict):
        cands += [sub.get("target"), sub.get("proc"), sub.get("process")]
        session = sub.get("session")
    elif isinstance(sub, str):
        cands.append(sub)
    proc = next((c for c in cands if isinstance(c, str) and c in procs), None)
    if proc is not None:
        return (proc, None)
    if isinstance(session, str) and (lane := session_lane(lanes, session, e.t)) is not None:
        return lane.key
    return None


@dataclass
class _Census:
    """What the history says about processes and sessions, in first-seen order."""
    procs: list[str] = field(default_factory=list)
    sessions: dict[str, list[str]] = field(default_factory=dict)      # proc -> session labels it hosted
    proc_kind: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)               # label -> assigned name (last seen)
    all_names: dict[str, str] = field(default_factory=dict)           # every name ever minted (lowercase) -> label
    ids: dict[str, str] = field(default_factory=dict)                 # session id / host id -> label
    lane_start: dict[LaneKey, int] = field(default_factory=dict)
    alive: dict[str, list[tuple[int, Optional[int]]]] = field(default_factory=dict)

    def add(self, proc: str, session: Optional[str], t: int) -> None:
        """A lane for `proc` (and `session` under it), first seen at `t`."""
        if proc == ORCH and session is None:
            return
        if proc not in self.sessions:
            self.procs.append(proc)
            self.sessions[proc] = []
        if session is not None and session not in self.sessions[proc]:
            self.sessions[proc].append(session)
        self.lane_start.setdefault((proc, session), t)
        self.lane_start.setdefault((proc, None), t)

    def see_lifecycle(self, e: Event) -> None:
        """Processes starting and exiting, and every process or session an event happens in."""
        (proc, ses), t = lane_key_of(e), e.t
        if isinstance(e, ProcessStart) and e.target:
            target = e.target
            self.add(target, None, t)
            self.proc_kind[target] = str(e.proc_kind)
            for label, sid in e.sessions.items():
                self.add(target, label, t)
                self.ids[str(sid)] = label
            if e.resumed:
                self.add(target, e.resumed, t)
            self.alive.setdefault(target, []).append((t, None))
        elif isinstance(e, ProcessExit) and e.target in self.alive:
            spans = self.alive[e.target]
            if spans and spans[-1][1] is None:
                spans[-1] = (spans[-1][0], t)
        elif proc == CLI:
            self.add(proc, None, t)
            self.proc_kind[CLI] = "command line"
        elif proc != ORCH:
            self.add(proc, ses, t)
            if proc not in self.alive:
                self.alive[proc] = [(t, None)]

    def see_identity(self, e: Event) -> None:
        """The names and ids a session is known by (message recipients are resolved through them)."""
        ses = e.session
        if isinstance(e, Registered) and ses:
            if e.name:
                self.names[ses] = str(e.name)
                self.all_names[str(e.name).lower()] = ses
            if e.session_id:
                self.ids[str(e.session_id)] = ses
        elif isinstance(e, Fork) and ses and e.new_host_id:
            self.ids[str(e.new_host_id)] = ses
        elif isinstance(e, Sample):
            for label, row in e.sessions.items():
                if row.name:
                    self.names[label] = str(row.name)
                    self.all_names[str(row.name).lower()] = label
                if row.session_id:
                    self.ids.setdefault(str(row.session_id), label)


def _census(history: History) -> _Census:
    census = _Census()
    for e in history:
        census.see_lifecycle(e)
        census.see_identity(e)
    return census


def _place_lanes(census: _Census) -> tuple[dict[LaneKey, Lane], list[tuple[str, list[Optional[str]]]]]:
    """The orchestrator's lane, then per process its own lane followed by its sessions' lanes
    (positions come from `place_lanes`)."""
    lanes: dict[LaneKey, Lane] = {(ORCH, None): Lane((ORCH, None), 0, 0)}
    groups: list[tuple[str, list[Optional[str]]]] = []
    for proc in census.procs:
        members: list[Optional[str]] = [None] + census.sessions[proc]
        groups.append((proc, members))
        for ses in members:
            lanes[(proc, ses)] = Lane((proc, ses), 0, census.lane_start.get((proc, ses)))
    return lanes, groups


@dataclass
class Room:
    """What the lanes' text needs, in px: how far right of its lane a lane's row labels reach,
    half the widest header label of each lane, the width of each process group's header."""
    right: dict[LaneKey, float] = field(default_factory=dict)
    half: dict[LaneKey, float] = field(default_factory=dict)
    group: dict[str, float] = field(default_factory=dict)


def _xs(first: float, gaps: list[float]) -> list[float]:
    xs = [first]
    for g in gaps:
        xs.append(xs[-1] + g)
    return xs


def place_lanes(layout: Layout, room: Room) -> None:
    """Space the lanes (at least LANE_W apart) so every label fits in its lane's column."""
    keys = list(layout.lanes)
    half = [max(LANE_W / 2, room.half.get(k, 0.0)) for k in keys]
    gaps = [max(LANE_W, room.right.get(a, 0.0), half[i] + half[i + 1]) for i, a in enumerate(keys[:-1])]
    first = LEFT + half[0]
    last_extra = max(half[-1], room.right.get(keys[-1], 0.0))
    pos = {k: i for i, k in enumerate(keys)}
    for proc, members in layout.groups:
        lo, hi = pos[(proc, members[0])], pos[(proc, members[-1])]
        xs = _xs(first, gaps)
        left = (xs[lo - 1] + xs[lo]) / 2 if lo else LEFT
        right = (xs[hi] + xs[hi + 1]) / 2 if hi + 1 < len(xs) else xs[hi] + last_extra
        short = room.group.get(proc, 0.0) - (right - left)
        if short > 0 and hi + 1 < len(xs):
            gaps[hi] += 2 * short
        elif short > 0:
            last_extra += short
    xs = _xs(first, gaps)
    for i, k in enumerate(keys):
        lane = layout.lanes[k]
        lane.x = round(xs[i])
        lane.left = round((xs[i - 1] + xs[i]) / 2) if i else LEFT
        lane.right = round((xs[i] + xs[i + 1]) / 2) if i + 1 < len(xs) else math.ceil(xs[i] + last_extra)
    layout.width = layout.lanes[keys[-1]].right + 10


@dataclass
class _Picks:
    """Which events become rows, and for arrows, where they point."""
    rows: list[int] = field(default_factory=list)
    recipients: dict[int, list[LaneKey]] = field(default_factory=dict)
    bodies: dict[int, str] = field(default_factory=dict)
    changes: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    replies: dict[int, Outcome] = field(default_factory=dict)


def _freshness_moves(registered_now: dict[str, SampleRow], fresh_state: dict[str, str]) -> list[tuple[str, str]]:
    """Sessions whose freshness this sample changes (P4's moments); updates `fresh_state`."""
    moved = []
    for label, row in registered_now.items():
        state = sample_state(row)
        old = fresh_state.get(label)
        # Skip the unremarkable: first sight of a session, and a registration
        # (its `registered` row already marks where the bar turns green).
        if old != state and old is not None and (old, state) != ("unreg", "fresh"):
            moved.append((label, state))
        fresh_state[label] = state
    return moved


def _pick_rows(history: History, witness: dict[int, int], census: _Census, lanes: dict[LaneKey, Lane]) -> _Picks:
    picks = _Picks()
    proc_set = set(census.procs)
    last_call: dict[LaneKey, ToolCall] = {}
    registered_now: dict[str, SampleRow] = {}
    step_target: dict[Any, LaneKey] = {}   # fault step -> the lane it hits
    fresh_state: dict[str, str] = {}
    for n, e in enumerate(history):
        key = lane_key_of(e)
        if isinstance(e, ToolCall):
            last_call[key] = e
        elif isinstance(e, Sample):
            registered_now = e.sessions
            # A sample becomes a row only where a session's freshness changes.
            moved = _freshness_moves(registered_now, fresh_state)
            if moved:
                picks.changes[n] = moved
        if e.kind in ROW_KINDS or n in witness or n in picks.changes:
            picks.rows.append(n)
        if isinstance(e, ToolResult) and e.tool in MESSAGE_TOOLS:
            picks.replies[n] = reply = decode_reply(e.tool.removeprefix("thatch_chat_"), e.ok, e.text)
            call = last_call.get(key)
            if message_mark(reply) != REFUSED or e.tool == "thatch_chat_send":  # a refused broadcast names no one
                picks.recipients[n] = _message_targets(e, call, census.all_names, census.ids, registered_now,
                                                       census.sessions)
            picks.bodies[n] = str(call.args.get("body", "")) if call is not None else ""
        elif e.kind in (FAULT, FAULT_FIRED):
            target = _fault_target(e, proc_set, lanes) or step_target.get(e.step)
            if target is not None:
                picks.recipients[n] = [target]
                step_target.setdefault(e.step, target)
    return picks


def _place_rows(layout: Layout, history: list[Event], picked: list[int], end_t: int) -> None:
    """The y of every row and the time anchors between them; idle stretches become breaks."""
    y = 14 + ROW_H // 2
    prev_t: Optional[int] = None
    for n in picked:
        e = history[n]
        t = e.t
        if prev_t is not None:
            dt = t - prev_t
            if dt >= BREAK_MS:
                layout.breaks.append((y + ROW_H // 2, y + ROW_H // 2 + BREAK_H, dt))
            y += ROW_H + _gap(dt)
        if prev_t is None or t != prev_t:
            layout._anchor_t.append(t)
            layout._anchor_y.append(y - ROW_H / 2 + 2)
        layout.rows.append((n, e, y))
        prev_t = t
    last_t = max([e.t for e in history] + [end_t, 0])
    layout.end_t = last_t
    # The time after the last row keeps its proportion (bars still change there).
    tail = last_t - prev_t if prev_t is not None else 0
    if tail >= BREAK_MS:
        layout.breaks.append((y + ROW_H // 2, y + ROW_H // 2 + BREAK_H, tail))
    y_end = y + ROW_H // 2 + max(10, _gap(tail))
    if prev_t is None or last_t > prev_t:
        layout._anchor_t.append(last_t)
        layout._anchor_y.append(y_end)
    layout.height = y_end + 16


def build_layout(history: History, verdicts, end_t: int = 0, db_path: Optional[Path] = None) -> Layout:
    """Lanes from who appears in the history, rows from what is drawn (and the notices the database
    holds), y from virtual time."""
    census = _census(history)
    lanes, groups = _place_lanes(census)
    match = witness_matcher(history)
    witness = witness_indices(history, verdicts, match)
    picks = _pick_rows(history, witness, census, lanes)
    omitted: dict[str, int] = {}
    picked = _cap(history, picks.rows, witness, omitted) if len(picks.rows) > MAX_ROWS else picks.rows
    layout = Layout(lanes, groups, census.proc_kind, census.names, [], [], witness, omitted, census.alive,
                    picks.recipients, picks.bodies, picks.changes, picks.replies, match=match)
    layout.failed = {v.check: v.title for v in verdicts if not v.ok}
    notices = _notice_events(history, census, lanes, db_path)
    layout.extra = {len(history) + k: e for k, e in enumerate(notices)}
    _place_rows(layout, [*history, *notices], _merge(history, picked, notices), end_t)
    place_lanes(layout, Room())
    return layout


def _notice_events(history: History, census: _Census, lanes: dict[LaneKey, Lane],
                   db_path: Optional[Path]) -> list[NoticeRow]:
    """The stored notices as drawn-only events, on the lane of the held message's recipient."""
    epoch = next((e.epoch_ms for e in history.of(RUN_START)), None)
    out = []
    for notice in read_notices(db_path, epoch):
        by = census.ids.get(notice.by)
        if by is None:
            continue
        lane = session_lane(lanes, by, notice.t)
        out.append(NoticeRow(t=notice.t, proc=lane.key[0] if lane else ORCH, session=by, held=notice.held,
                             outcome=notice.outcome, to=census.ids.get(notice.to)))
    return out


def _merge(history: History, picked: list[int], notices: list[NoticeRow]) -> list[int]:
    """Rows in time order, a notice after the rows of its instant but before a wake then: it is
    stored before the poll that wakes its reader. Notices are numbered after the history."""
    out, k, base = [], 0, len(history)
    for n in picked:
        e = history[n]
        t = e.t
        while k < len(notices) and (notices[k].t < t or (notices[k].t == t and e.kind == WAKE)):
            out.append(base + k)
            k += 1
        out.append(n)
    return out + list(range(base + k, base + len(notices)))


def _message_targets(e: ToolResult, call: Optional[ToolCall], by_name, ids, registered_now: dict[str, SampleRow],
                     sessions) -> list[LaneKey]:
    """Recipient session labels of a successful send / broadcast (procs resolved later)."""
    sender = e.session
    if e.tool == "thatch_chat_send":
        to = str((call.args.get("to", "") if call is not None else "") or "")
        label = by_name.get(to.lower()) or ids.get(to) or (to if any(to in s for s in sessions.values()) else None)
        return [("?", label or to)]
    # Broadcast: registered at the last sample, minus the sender, minus stale
    # opencode rows (R12/R35). Without a sample: every other known session.
    if registered_now:
        labels = [k for k, v in registered_now.items()
                  if v.registered and k != sender
                  and not (v.stale and (v.host_kind or DEFAULT_ROW_KIND) in BEATING_ROW_KINDS)]
    else:
        labels = sorted({s for ss in sessions.values() for s in ss if s != sender})
    return [("?", label) for label in labels]


def _cap(history, picked, witness, omitted) -> list[int]:
    """Keep MAX_ROWS rows: witnesses, then lifecycle/faults, then messages near witnesses."""
    wpos = sorted(witness)

    def rank(n: int) -> tuple:
        kind = history[n].kind
        tier = 0 if n in witness or kind in TIER0 else 1 if kind in TIER1 else 2
        if wpos:
            k = bisect.bisect_left(wpos, n)
            near = min(abs(n - wpos[j]) for j in (k - 1, k) if 0 <= j < len(wpos))
        else:
            near = 0
        return (tier, near, n)

    keep = set(sorted(picked, key=rank)[:MAX_ROWS])
    for n in picked:
        if n not in keep:
            kind = history[n].kind
            omitted[kind] = omitted.get(kind, 0) + 1
    return [n for n in picked if n in keep]
