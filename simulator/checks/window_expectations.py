"""Point expectations over a stretch of time: `between: [from, until]`, `per_hour`.

A window is half-open like a busy window: `from` inclusive, `until`
exclusive, so `[0, 1h]`, `[1h, 2h]` tile the run. What a window means depends
on what is judged:

- events (`wakes`, `echoes`, `store_errors`) are counted inside it; `per_hour`
  bounds the count of every rolling hour `[t, t + 1h)` that lies inside it
  (the cap's own window, R22);
- states hold throughout it: `unread` at every instant (from the stored
  messages' created/read stamps, second resolution), `roster` at every
  directory sample and in every chat_list reply the session got in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from simulator.checks.view import RunView
from simulator.design import HOUR_MS, roster_section
from simulator.events import SAMPLE, STORE_ERROR, Event, SampleRow
from simulator.scenario.durations import format_duration
from simulator.scenario.expectation_keys import window_of

Judgement = tuple[Optional[str], list]


def shown(ms: int) -> str:
    return format_duration(ms) if ms else "0"


@dataclass(frozen=True)
class Span:
    """What an expectation looks at: everything by `at` (inclusive), or only the window [start, until)."""

    at: Any                                  # `end` or ms: when `{label}` expands; "by <at>" in messages
    window: Optional[tuple[int, int]] = None

    def pick(self, events: list[Any]) -> list[Any]:
        """The events (records, or calls: anything with a time `t`) it looks at."""
        if self.window is not None:
            start, until = self.window
            return [e for e in events if start <= e.t < until]
        return events if self.at == "end" else [e for e in events if e.t <= self.at]

    def __str__(self) -> str:
        if self.window is not None:
            return f"between {shown(self.window[0])} and {shown(self.window[1])}"
        return f"by {self.at if self.at == 'end' else format_duration(int(self.at))}"


def bounds_problem(spec: dict, got: int) -> Optional[str]:
    """None when `got` satisfies count/min/max, else what was wanted."""
    if "count" in spec and got != int(spec["count"]):
        return f"exactly {spec['count']}"
    if "min" in spec and got < int(spec["min"]):
        return f"at least {spec['min']}"
    if "max" in spec and got > int(spec["max"]):
        return f"at most {spec['max']}"
    return None


def rolling_extremes(times: list[int], window: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    """((fewest, its hour's start), (most, its hour's start)) over every rolling hour
    [t, t + 1h) inside the window. A count only changes where an event enters or
    leaves the hour, so those starts (and the window's ends) are all to try."""
    start, last = window[0], window[1] - HOUR_MS
    starts = {start, last} | {c for e in times for c in (e, e + 1, e - HOUR_MS, e - HOUR_MS + 1) if start <= c <= last}
    counts = [(sum(1 for e in times if t <= e < t + HOUR_MS), t) for t in sorted(starts)]
    at_event = set(times)  # the busiest hour is shown from its first event
    return min(counts), max(counts, key=lambda c: (c[0], c[1] in at_event, -c[1]))


def per_hour(events: list[Event], arg: dict, what: str) -> Judgement:
    """`per_hour: {count | min | max}`: every rolling hour inside `between` holds that many events."""
    window, bound = window_of(arg), arg["per_hour"]
    if window is None:  # refused at load time; a scenario built in Python lands here
        return "per_hour needs `between: [from, until]`", []
    (fewest, low_t), (most, high_t) = rolling_extremes([e.t for e in events], window)
    where = f"every rolling hour between {shown(window[0])} and {shown(window[1])}"
    for got, t, keys in ((fewest, low_t, ("count", "min")), (most, high_t, ("count", "max"))):
        want = bounds_problem({k: bound[k] for k in keys if k in bound}, got)
        if want:
            hour = [e for e in events if t <= e.t < t + HOUR_MS]
            # t % 1000 == 1: an hour that starts past an event
            start = f"just after {shown(t - 1)}" if t % 1000 == 1 else f"from {shown(t)}"
            return f"{what}: {got} in the hour {start}, want {want} in {where}", hour[:4]
    return None, events[-4:]


def in_section(row: Optional[SampleRow], section: str) -> bool:
    """A sample's row of a session is registered and listed in `section` (`active` or `stale`) of a roster."""
    return row is not None and row.registered and roster_section(row.stale, row.host_kind) == section


def unread_throughout(view: RunView, arg: dict, window: tuple[int, int]) -> Judgement:
    """The unread count at every instant of the window (R9): it changes only where
    a message to the session is stored or read, so those instants are all to try."""
    label, (start, until) = arg["session"], window
    if view.epoch_ms is None:
        return f"cannot tell {label}'s unread mail between {shown(start)} and {shown(until)}: no clock epoch", []
    ids = set(view.names.ids.get(label, ()))
    spans = []  # (stored, read or None) of each message to the session
    for m in view.db["messages"]:
        if m["to_session"] in ids and view.vt(m["created_at"]) is not None:
            spans.append((view.vt(m["created_at"]), view.vt(m["read_at"]) if m["read_at"] else None, m))
    instants = sorted({start} | {t for c, r, _ in spans for t in (c, r) if t is not None and start <= t < until})
    for t in instants:
        open_now = [m for c, r, m in spans if c <= t and (r is None or r > t)]
        want = bounds_problem(arg, len(open_now))
        if want:
            return (f"{label} has {len(open_now)} unread at {shown(t)}, want {want} throughout "
                    f"{shown(start)} .. {shown(until)}"), [{"db_row": m} for m in open_now[:3]]
    return None, []


def roster_throughout(view: RunView, arg: dict, window: tuple[int, int], expand: Any) -> Judgement:
    """`active` / `stale` at every sample in the window, the texts in every chat_list reply
    of the session in it; a window with no sample (or no reply, for a text) judges nothing: a failure."""
    label, (start, until) = arg["session"], window
    inside = [s for s in view.history.of(SAMPLE) if start <= s.t < until]
    if (arg.get("active") or arg.get("stale")) and not inside:
        return f"no directory sample between {shown(start)} and {shown(until)} to look in", []
    for sample in inside:
        for section in ("active", "stale"):
            for other in arg.get(section) or []:
                if not in_section(sample.sessions.get(other), section):
                    return f"{other} is not in {label}'s {section} section at {shown(sample.t)}", [sample]
    replies = [c for c in view.mail.calls_of("list", label, ok=True) if start <= c.t < until]
    for key, negate in (("contains", False), ("not_contains", True)):
        if key not in arg:
            continue
        if not replies:
            return f"{label} got no chat_list reply between {shown(start)} and {shown(until)} to look in", []
        for call in replies:
            needle = expand(arg[key], call.t)
            if (needle in call.text) == negate:
                return (f"{label}'s roster at {shown(call.t)} {'contains' if negate else 'lacks'} {needle!r}",
                        call.witness())
    return None, inside[-2:]


def store_errors(view: RunView, span: Span, arg: dict) -> Judgement:
    """Store calls that failed (`store-error` events), of one process or all (R24)."""
    errors = span.pick(view.history.of(STORE_ERROR, proc=arg.get("process")))
    want = bounds_problem(arg, len(errors))
    where = f" in {arg['process']}" if "process" in arg else ""
    return (f"{len(errors)} store errors{where} {span}, want {want}" if want else None), errors[:4]
