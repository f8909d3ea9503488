"""The size of a world a scenario may ask for.

Each bound keeps a scenario something one machine can run and a person can
mean: every harness process is an OS process (about 11 MB each), every poll
of every process a dispatch, and a number past these limits is a typo
(`365000d`, a seed of 10^33) or a world that would spin or exhaust the
machine (`poll_interval: 0`, 200,000 processes). They are checked after the
model validates, with the cross-references (`simulator.scenario.validate`),
so each refusal has file:line, the key and the limit (D-bounds-1). The
authoring guide lists them under "Bounds".
"""

from __future__ import annotations

import math
from typing import Any, Iterator

from simulator.scenario.durations import format_duration
from simulator.scenario.errors import KeyPath
from simulator.scenario.fields import RepeatedBody
from simulator.scenario.model import Scenario

DAY_MS = 86_400_000

MAX_PROCESSES = 100
MAX_SESSIONS = 1_000
MAX_STEPS = 2_000
MAX_EXPECTATIONS = 2_000
MAX_LEGACY_ROWS = 1_000
MAX_RUN_MS = 30 * DAY_MS  # duration + drain
MAX_SPAN_MS = 30 * DAY_MS  # any other time or length inside the run
MAX_AGO_MS = 3_650 * DAY_MS  # a legacy row's last_seen_ago: before the run, up to ten years
MIN_POLL_MS = 1_000
MAX_TURN_MS = DAY_MS
MAX_SEED = 2**32 - 1
MAX_BODY_CHARS = 1_000_000

# (key path, problem, what to write instead)
Problem = tuple[KeyPath, str, str]


def bounds_problems(spec: Scenario) -> list[Problem]:
    """Every value or count of `spec` outside the bounds above."""
    return [*_scenario_problems(spec), *_process_problems(spec), *_step_problems(spec), *_other_problems(spec)]


def _over(path: KeyPath, what: str, ms: int, limit: int) -> Problem:
    return path, f"{what} {format_duration(ms)} is over the limit of {format_duration(limit)}", \
        f"write at most {format_duration(limit)}"


def _positive(path: KeyPath, what: str, ms: int, limit: int, example: str) -> Iterator[Problem]:
    """A length that must be more than zero and at most `limit`."""
    if ms <= 0:
        yield (path, f"{what} of 0 means nothing here",
               f"write a length above 0, at most {format_duration(limit)} (e.g. {example})")
    elif ms > limit:
        yield _over(path, what, ms, limit)


def _count(path: KeyPath, items: Any, noun: str, limit: int, why: str) -> Iterator[Problem]:
    if len(items) > limit:
        yield path, f"{len(items)} {noun}, over the limit of {limit}", f"write at most {limit} {noun}: {why}"


def _scenario_problems(spec: Scenario) -> Iterator[Problem]:
    if not 0 <= spec.seed <= MAX_SEED:
        shown = str(spec.seed) if abs(spec.seed) < 10**40 else f"a number of {len(str(abs(spec.seed)))} digits"
        yield ("seed",), f"seed {shown} is out of range", f"write a whole number from 0 to {MAX_SEED}"
    yield from _positive(("duration",), "a duration", spec.duration, MAX_RUN_MS, "10m")
    if spec.drain > MAX_RUN_MS:
        yield _over(("drain",), "a drain", spec.drain, MAX_RUN_MS)
    elif 0 < spec.duration <= MAX_RUN_MS and spec.duration + spec.drain > MAX_RUN_MS:
        yield ("drain",), (f"duration {format_duration(spec.duration)} plus drain {format_duration(spec.drain)} "
                           f"is over the limit of {format_duration(MAX_RUN_MS)} of virtual time"), \
            f"shorten one: a run lasts at most {format_duration(MAX_RUN_MS)}"
    yield from _count(("processes",), spec.processes, "processes", MAX_PROCESSES,
                      "each is an OS process of about 11 MB")
    sessions = [s for p in spec.processes for s in p.sessions]
    yield from _count(("processes",), sessions, "sessions", MAX_SESSIONS, "in all processes together")
    yield from _count(("steps",), spec.steps, "steps", MAX_STEPS, "split the story into several scenarios")
    yield from _count(("expect",), spec.expect, "expectations", MAX_EXPECTATIONS,
                      "split the story into several scenarios")
    yield from _count(("legacy",), spec.legacy, "legacy rows", MAX_LEGACY_ROWS, "a few rows show a migration")


def _process_problems(spec: Scenario) -> Iterator[Problem]:
    for i, proc in enumerate(spec.processes):
        base: KeyPath = ("processes", i)
        if proc.poll_interval < MIN_POLL_MS:
            yield (base + ("poll_interval",),
                   f"poll interval {format_duration(proc.poll_interval)} is under the limit of "
                   f"{format_duration(MIN_POLL_MS)}",
                   f"write {format_duration(MIN_POLL_MS)} or more (the default is 30s)")
        elif proc.poll_interval > MAX_SPAN_MS:
            yield _over(base + ("poll_interval",), "poll interval", proc.poll_interval, MAX_SPAN_MS)
        if isinstance(proc.start, int) and proc.start > MAX_SPAN_MS:
            yield _over(base + ("start",), "start", proc.start, MAX_SPAN_MS)
        for j, sess in enumerate(proc.sessions):
            yield from _session_problems(base + ("sessions", j), sess)


def _session_problems(base: KeyPath, sess: Any) -> Iterator[Problem]:
    if sess.start > MAX_SPAN_MS:
        yield _over(base + ("start",), "start", sess.start, MAX_SPAN_MS)
    agent = base + ("agent",)
    yield from _positive(agent + ("turn",), "a turn", sess.agent.turn, MAX_TURN_MS, "20s")
    for key in ("busy", "compacting", "aborted"):
        for k, window in enumerate(getattr(sess.agent, key, None) or ()):
            if window.until > MAX_SPAN_MS:
                yield _over(agent + (key, k, "until"), "a window's end", window.until, MAX_SPAN_MS)


def _body_length(body: Any) -> int:
    if isinstance(body, RepeatedBody):
        return len(body.prefix) + len(body.repeat) * body.times + len(body.suffix)
    return len(body) if isinstance(body, str) else 0


def _step_problems(spec: Scenario) -> Iterator[Problem]:
    for i, step in enumerate(spec.steps):
        path: KeyPath = ("steps", i, step.action)
        args = step.args
        if step.action in ("sleep", "lock"):
            yield from _positive(path + ("for",), f"a {step.action}", args.duration, MAX_SPAN_MS, "5m")
        if step.action == "restart" and args.grace is not None and args.grace > MAX_SPAN_MS:
            yield _over(path + ("grace",), "a grace", args.grace, MAX_SPAN_MS)
        length = _body_length(getattr(args, "body", None))
        if length > MAX_BODY_CHARS:
            yield (path + ("body",), f"the body is {length} characters, over the limit of {MAX_BODY_CHARS}",
                   "the store refuses anything over 10000 characters: a little more shows the refusal")
        stale = getattr(args, "stale", None) if step.action == "cli_list" else None
        if isinstance(stale, float) and not math.isfinite(stale):
            yield (path + ("stale",), f"stale {stale} is not a number of days",
                   "write a number of days, or `all` to show every row")


def _other_problems(spec: Scenario) -> Iterator[Problem]:
    for i, exp in enumerate(spec.expect):
        if isinstance(exp.at, int) and exp.at > MAX_RUN_MS:
            yield _over(("expect", i, "at"), "an expectation time", exp.at, MAX_RUN_MS)
    for i, row in enumerate(spec.legacy):
        if row.last_seen_ago > MAX_AGO_MS:
            yield _over(("legacy", i, "last_seen_ago"), "last_seen_ago", row.last_seen_ago, MAX_AGO_MS)
