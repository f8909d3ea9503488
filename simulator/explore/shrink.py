"""Shrinking a failure to the smallest scenario that still fails the same way.

Greedy delta debugging (Zeller's ddmin, simplified) over the scenario
document: each pass proposes smaller or simpler documents (drop steps in
chunks, then one at a time; drop processes; drop sessions; simplify agents,
bodies and arguments; shorten the timeline), and a candidate replaces the
current one when the *same* check (a property id, `error`, `timeout`) still
fails on the *same* seed. Passes repeat until none makes progress or the
run budget is spent.

Every candidate is a scenario the generator could have written: it must
validate, pass the loader's cross-checks and replay cleanly against the
world plan (plan.py), so a shrunk failure never rests on a world the
no-false-alarm runs do not cover. Dropping a step also drops the steps that
stop fitting without it (a resume whose kill is gone).
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from pydantic import ValidationError

from simulator.explore.judge import Outcome
from simulator.explore.plan import action_of, keep_fitting, replay_problems
from simulator.scenario.kinds import PROCESS_ARG_KEYS, SESSION_ARG_KEYS
from simulator.scenario.model import Scenario
from simulator.scenario.validate import check_spec

MINUTE = 60_000
MIN_DRAIN = 3 * MINUTE   # the generator's shortest drain: progress is judged after at least this
SHORT_BODY = "ping"

Doc = dict[str, Any]
Runner = Callable[[Scenario], Optional[Outcome]]   # the candidate's failing outcome, or None


@dataclass
class Shrunk:
    """The smallest failing scenario found, and what it took."""

    spec: Scenario
    doc: Doc
    outcome: Outcome
    runs: int
    before: tuple[int, int, int]   # (processes, sessions, steps) of the original
    after: tuple[int, int, int]


def size_of(doc: Doc) -> tuple[int, int, int]:
    """(processes, sessions, steps) of a document."""
    procs = doc["processes"]
    return len(procs), sum(len(p.get("sessions", ())) for p in procs), len(doc.get("steps", ()))


def to_spec(doc: Doc) -> Optional[Scenario]:
    """The document as a Scenario, or None when it is not one the generator could have written."""
    try:
        spec = Scenario.model_validate(doc)
    except ValidationError:
        return None
    if check_spec(spec) or replay_problems(doc):
        return None
    return spec


def shrink(doc: Doc, first: Outcome, run: Runner, *, max_runs: int = 200,
           deadline: Optional[float] = None) -> Shrunk:
    """Shrink `doc` (whose run gave `first`) while `run` still returns a failing outcome.

    `run` decides what "the same failure" is (the caller checks the property);
    `max_runs` and `deadline` (a `time.monotonic()` value) bound the work.
    """
    best, outcome, runs = copy.deepcopy(doc), first, 0
    before = size_of(doc)
    seen: set[str] = set()
    progress = True
    while progress and runs < max_runs and (deadline is None or time.monotonic() < deadline):
        progress = False
        for candidate in _candidates(best):
            key = repr(candidate)
            if key in seen:
                continue
            seen.add(key)
            spec = to_spec(candidate)
            if spec is None:
                continue
            if runs >= max_runs or (deadline is not None and time.monotonic() >= deadline):
                break
            runs += 1
            failed = run(spec)
            if failed is not None:
                best, outcome, progress = candidate, failed, True
                break  # restart the passes from the smaller document
    return Shrunk(spec=Scenario.model_validate(best), doc=best, outcome=outcome, runs=runs,
                  before=before, after=size_of(best))


# ---------------------------------------------------------------------------
# Candidates, biggest cuts first
# ---------------------------------------------------------------------------


def _candidates(doc: Doc) -> Iterator[Doc]:
    yield from _serial(doc)
    yield from _fewer_steps(doc)
    yield from _fewer_run_calls(doc)
    yield from _fewer_processes(doc)
    yield from _fewer_sessions(doc)
    yield from _shorter(doc)
    yield from _simpler_steps(doc)
    yield from _simpler_world(doc)
    yield from _fewer_legacy_rows(doc)


def _fewer_legacy_rows(doc: Doc) -> Iterator[Doc]:
    """Without one 002-era row, or without any (a fresh database)."""
    rows = doc.get("legacy") or []
    if rows:
        yield {k: v for k, v in doc.items() if k != "legacy"}
    for i in range(len(rows) if len(rows) > 1 else 0):
        yield {**doc, "legacy": copy.deepcopy(rows[:i] + rows[i + 1:])}


def _serial(doc: Doc) -> Iterator[Doc]:
    if doc.get("dispatch") == "concurrent":
        out = {k: v for k, v in doc.items() if k != "dispatch"}
        out["markers"] = [m for m in doc.get("markers", ()) if m != "race"]
        if not out["markers"]:
            del out["markers"]
        yield out


def _chunks(n: int) -> Iterator[tuple[int, int]]:
    """(start, end) of the runs of items to drop: halves, quarters, ... single items (ddmin's complements)."""
    size = max(1, n // 2)
    while n:
        for start in range(0, n, size):
            yield start, min(n, start + size)
        if size == 1:
            return
        size //= 2


def _fewer_steps(doc: Doc) -> Iterator[Doc]:
    steps = doc.get("steps", [])
    for a, b in _chunks(len(steps)):
        yield keep_fitting({**doc, "steps": copy.deepcopy(steps[:a] + steps[b:])})


def _fewer_run_calls(doc: Doc) -> Iterator[Doc]:
    """An interleaving with one of its run calls fewer (it keeps one), so the processes and sessions
    only the dropped call named can go next."""
    for i, step in enumerate(doc.get("steps", [])):
        args = step.get("interleave")
        calls = args.get("run") if isinstance(args, dict) else None
        for j in range(len(calls) if calls and len(calls) > 1 else 0):
            out = copy.deepcopy(doc)
            del out["steps"][i]["interleave"]["run"][j]
            yield keep_fitting(out)


def _mentions(step: dict[str, Any], labels: set[str]) -> bool:
    args = step[action_of(step)]
    if not isinstance(args, dict):
        return False
    if "pause" in args and "run" in args:  # an interleaving: its pause's labels and its run calls'
        return any(_mentions({"x": part}, labels) for part in [args["pause"], *(v for c in args["run"]
                                                                                 for v in c.values())])
    named = {args.get(k) for k in SESSION_ARG_KEYS + PROCESS_ARG_KEYS} | set(args.get("listing") or ())
    return bool(named & labels)


def _without(doc: Doc, labels: set[str]) -> Doc:
    """The document without these processes or sessions, and without the steps naming them."""
    out = copy.deepcopy(doc)
    procs = [p for p in out["processes"] if p["id"] not in labels]
    for p in procs:
        p["sessions"] = [s for s in p.get("sessions", []) if s["id"] not in labels]
        for s in p["sessions"]:
            if s.get("parent") in labels:
                del s["parent"]
    gone = labels | {s["id"] for p in out["processes"] if p["id"] in labels for s in p.get("sessions", [])}
    out["processes"] = procs
    out["steps"] = [s for s in out.get("steps", []) if not _mentions(s, gone)]
    if out.get("legacy"):  # a 002-era row of a session that is gone is an orphan row now
        out["legacy"] = [{k: v for k, v in r.items() if not (k == "session" and v in gone)} for r in out["legacy"]]
    return keep_fitting(out)


def _fewer_processes(doc: Doc) -> Iterator[Doc]:
    labels = [p["id"] for p in doc["processes"]]
    for a, b in _chunks(len(labels)):
        if b - a < len(labels):  # a scenario keeps at least one process
            yield _without(doc, set(labels[a:b]))


def _fewer_sessions(doc: Doc) -> Iterator[Doc]:
    labels = [s["id"] for p in doc["processes"] for s in p.get("sessions", [])]
    for a, b in _chunks(len(labels)):
        yield _without(doc, set(labels[a:b]))


def _shorter(doc: Doc) -> Iterator[Doc]:
    """A shorter script (just past the last step), the shortest drain, earlier times."""
    steps = doc.get("steps", [])
    last = max((s["at"] for s in steps), default=0)
    end = max(MINUTE, -(-last // MINUTE) * MINUTE)
    if end < doc["duration"]:
        yield _with_duration(doc, end)
    if doc.get("drain", 5 * MINUTE) > MIN_DRAIN:
        yield {**doc, "drain": MIN_DRAIN}
    if steps and steps[0]["at"] > 0:
        yield _shifted(doc, -steps[0]["at"])


def _with_duration(doc: Doc, duration: int) -> Doc:
    """`duration` shortened, windows and late starts clipped to it."""
    out = copy.deepcopy(doc)
    out["duration"] = duration
    for p in out["processes"]:
        for s in p.get("sessions", []):
            if s.get("start", 0) > duration:
                s["start"] = duration
    return out


def _shifted(doc: Doc, delta: int) -> Doc:
    """The whole timeline `delta` ms later (earlier when negative): steps, late session starts
    and agent windows move together, the script shortens with them."""
    out = copy.deepcopy(doc)
    for s in out["steps"]:
        s["at"] = max(0, s["at"] + delta)
    for p in out["processes"]:
        for s in p.get("sessions", []):
            if s.get("start"):
                s["start"] = max(0, s["start"] + delta)
            for key in ("busy", "compacting", "aborted"):
                for w in s.get("agent", {}).get(key, []):
                    w["from"], w["until"] = max(0, w["from"] + delta), max(1000, w["until"] + delta)
    out["duration"] = max(MINUTE, out["duration"] + delta)
    return out


# Per-step simplifications: (action, argument key) -> a simpler value (None: drop the key).
def _halved(v: Any) -> Any:
    return max(1000, (v // 2000) * 1000) if isinstance(v, int) else v


_SIMPLER_ARGS: dict[tuple[str, str], Callable[[Any], Any]] = {
    ("send", "body"): lambda v: SHORT_BODY, ("broadcast", "body"): lambda v: SHORT_BODY,
    ("prompt", "text"): lambda v: None, ("crash", "nth"): lambda v: None,
    ("restart", "grace"): lambda v: None, ("resume", "how"): lambda v: None,
    ("sleep", "for"): _halved, ("lock", "for"): _halved, ("stall", "for"): _halved,
    ("cli_list", "stale"): lambda v: None, ("cli_tail", "limit"): lambda v: None,
    ("crash", "statement"): lambda v: max(1, v - 1), ("crash", "when"): lambda v: None,
    ("send", "as"): lambda v: None, ("read", "as"): lambda v: None,
    # an earlier boundary of the paused call: fewer of its statements, so fewer rows it needs to reach it
    ("interleave", "pause"): lambda v: {**v, "statement": max(1, v.get("statement", 1) - 1)},
}


def _simpler_steps(doc: Doc) -> Iterator[Doc]:
    for i, step in enumerate(doc.get("steps", [])):
        action = action_of(step)
        args = step[action]
        for key in list(args) if isinstance(args, dict) else ():
            simplify = _SIMPLER_ARGS.get((action, key))
            if simplify is None:
                continue
            value = simplify(args[key])
            if value == args[key]:
                continue
            out = copy.deepcopy(doc)
            if value is None:
                del out["steps"][i][action][key]
            else:
                out["steps"][i][action][key] = value
            yield out


_SESSION_KEYS = ("title", "joins", "start", "parent")
_AGENT_KEYS = ("busy", "compacting", "aborted", "reply_limit", "turn")
_PROCESS_KEYS = ("poll_interval", "checkout", "project", "events")


def _simpler_world(doc: Doc) -> Iterator[Doc]:
    """Drop optional keys: agent windows and turns, session titles and joins, process options."""
    for pi, p in enumerate(doc["processes"]):
        for si, s in enumerate(p.get("sessions", [])):
            for key in _AGENT_KEYS:
                if key in s.get("agent", {}):
                    out = copy.deepcopy(doc)
                    del out["processes"][pi]["sessions"][si]["agent"][key]
                    yield out
            if s.get("agent") in ({}, {"kind": "reader"}):  # the default agent: say nothing
                out = copy.deepcopy(doc)
                del out["processes"][pi]["sessions"][si]["agent"]
                yield out
            elif s.get("agent", {}).get("kind", "reader") != "reader":
                out = copy.deepcopy(doc)
                out["processes"][pi]["sessions"][si]["agent"]["kind"] = "reader"
                out["processes"][pi]["sessions"][si]["agent"].pop("reply_limit", None)
                yield out
            for key in _SESSION_KEYS:
                if key in s:
                    out = copy.deepcopy(doc)
                    del out["processes"][pi]["sessions"][si][key]
                    yield out
        for key in _PROCESS_KEYS:
            if key in p:
                out = copy.deepcopy(doc)
                del out["processes"][pi][key]
                yield out
