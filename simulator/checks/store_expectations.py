"""Point expectations about the database at a time: a name base's counter, a
session's leave tombstones, stored message rows, the id a session is registered
under, and a session's name compared at two times.

The engine's observer reads the database at the expectation's time (and at
`end`, at the end of the drain) and records what it read in the
`expectation` event; these checkers judge only that record, never the code
under test. An observation that is missing (a run that stopped early) fails
the expectation: nothing passes unobserved.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from simulator.checks.view import RunView
from simulator.checks.window_expectations import Judgement, bounds_problem
from simulator.design import NAME_RE
from simulator.events import EXPECTATION, Expectation
from simulator.scenario.durations import format_duration
from simulator.scenario.expectation_keys import moments_of


def observed(view: RunView, index: int, moment: Optional[int] = None) -> Optional[Expectation]:
    """The observer's `expectation` event for expectation `index` (and `moment`), if any."""
    evs = [e for e in view.history.of(EXPECTATION) if e.index == index and (moment is None or e.moment == moment)]
    return evs[-1] if evs else None


def when(at: Any) -> str:
    return "end" if at == "end" else format_duration(int(at))


def _detail(view: RunView, index: int, at: Any) -> tuple[Optional[dict], Optional[str], list]:
    """(the observed detail, or None and why not, the witness)."""
    ev = observed(view, index)
    if ev is None:
        return None, f"nothing was observed at {when(at)} (the run ended before it?)", []
    detail = ev.detail or {}
    if "error" in detail:
        return None, f"the database could not be read at {when(at)}: {detail['error']}", [ev]
    return detail, None, [ev]


def name_base(name: str) -> Optional[str]:
    """An assigned name's pool base (`ba-sil-00003` -> `ba-sil`, R2); None for a claimed legacy name."""
    return name.rsplit("-", 1)[0] if NAME_RE.match(name) else None


def counter(view: RunView, at: Any, arg: dict, index: int) -> Judgement:
    """The counter of a name base (`base`, or the base of the session's name by then), R2."""
    detail, why, wit = _detail(view, index, at)
    if detail is None:
        return why, wit
    base = arg.get("base")
    if base is None:
        label = arg["session"]
        name = detail["name"] or view.names.name_by(label, wit[0].t)  # its last name, if it left
        if not name:
            return f"{label} has no name by {when(at)}, so no base to look up", wit
        base = name_base(name)
        if base is None:
            return f"{label}'s name {name!r} is not an assigned name (a pool base and a counter)", wit
    got = int(detail["counters"].get(base, 0))  # a base never drawn counts 0
    want = bounds_problem(arg, got)
    return (f"the counter of {base!r} is {got} at {when(at)}, want {want}" if want else None), wit


def _counted(view: RunView, at: Any, arg: dict, index: int, key: str, what: Callable[[int], str]) -> Judgement:
    """An observed count (`key` of the detail) against count / min / max; `what(n)` says what was counted."""
    detail, why, wit = _detail(view, index, at)
    if detail is None:
        return why, wit
    got = int(detail[key])
    want = bounds_problem(arg, got)
    return (f"{what(got)} at {when(at)}, want {want}" if want else None), wit


def tombstones(view: RunView, at: Any, arg: dict, index: int) -> Judgement:
    """Leave tombstones held against the session's ids (R7)."""
    return _counted(view, at, arg, index, "tombstones", lambda n: f"{arg['session']} has {n} leave tombstones")


def messages(view: RunView, at: Any, arg: dict, index: int) -> Judgement:
    """Stored message rows matching every given filter (R11, R12: `via_broadcast`)."""
    return _counted(view, at, arg, index, "messages", lambda n: _rows_described(arg, n))


def _rows_described(arg: dict, n: int) -> str:
    words = [f"{n} message {'row' if n == 1 else 'rows'}"]
    if "from" in arg:
        words.append(f"from {arg['from']}")
    if "to" in arg:
        words.append(f"to {arg['to']}")
    if "via_broadcast" in arg:
        words.append("stored by a broadcast" if arg["via_broadcast"] else "sent directly")
    if "read" in arg:
        words.append("read" if arg["read"] else "unread")
    if "parts" in arg:
        words.append(f"that start a body split into {arg['parts']} parts")
    for key, said in (("body", "with the body"), ("contains", "whose body contains")):
        if key in arg:
            words.append(f"{said} {arg[key][:60]!r}")
    return " ".join(words)


def registered_row(view: RunView, at: Any, arg: dict, index: int) -> Judgement:
    """`row: first | latest | N`: the session is registered under that one of its ids (R33)."""
    detail, why, wit = _detail(view, index, at)
    if detail is None:
        return why, wit
    label, row, ids, rows = arg["session"], arg["row"], detail["ids"], detail["rows"]
    pos = {"first": 0, "latest": len(ids) - 1}.get(row, row - 1 if isinstance(row, int) else -1)
    if not 0 <= pos < len(ids):
        return f"{label} has {len(ids)} ids by {when(at)}, so no id number {row}", wit
    if ids[pos] not in rows:
        held = ", ".join(f"id {ids.index(r) + 1} of {len(ids)} ({r})" for r in rows) or "no id (not registered)"
        return f"{label} is registered under {held} at {when(at)}, want its {row} id ({ids[pos]})", wit
    return None, wit


def same_name(view: RunView, arg: dict, index: int) -> Judgement:
    """A session's name at two times: the same (default), or `is: false`: registered at both under different names."""
    label, times = arg["session"], moments_of(arg)
    seen = [observed(view, index, moment) for moment in (0, 1)]
    if None in seen:
        return f"{label}'s name was not observed at {when(times[seen.index(None)])} (the run ended before it?)", []
    names = [e.detail["name"] if e.detail["registered"] else None for e in seen]
    shown = " and ".join(f"{n or 'not registered'} at {when(t)}" for n, t in zip(names, times, strict=True))
    if None in names:
        return f"{label} was {shown}: no name to compare", seen
    same = names[0].lower() == names[1].lower()  # names are unique case-insensitively (R2)
    if same != arg.get("is", True):
        return f"{label} was {shown}, want {'the same name' if arg.get('is', True) else 'a different name'}", seen
    return None, seen
