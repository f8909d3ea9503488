"""Text views of a RunResult: the failure story, event lines, the verdict table.

Shared by the pytest plugin (repr_failure) and `python -m simulator run`, so a
failure reads the same wherever it is seen: the broken check with its rules
(and `file:line` of the step or claim it judges, when the run came from a file),
the seed, the few witness events as a timeline, and the command that reruns
exactly this case.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from simulator.history import event_place
from simulator.result import RunResult, Verdict
from simulator.scenario.durations import format_duration

MAX_WITNESS = 12
_STATUS_WORD = {"pass": "PASS", "fail": "FAIL", "not-reached": "NOT REACHED", "skipped": "skipped",
                "not-applicable": "N/A", "expected-fail": "FAIL (expected)"}


def format_offset(ms: int) -> str:
    """Virtual time as `+1h2m30s` (`+1s500ms`, `+0s`): the shape the timeline uses, the language's spelling."""
    ms = int(ms)
    return ("-" if ms < 0 else "+") + format_duration(abs(ms))


def _short(value: Any, limit: int = 40) -> str:
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
    if isinstance(value, str) and (" " in text or not text):
        text = json.dumps(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_event(line: dict[str, Any]) -> str:
    """One witness (a history event's line, as a verdict keeps it) as
    `  +1m30s  h2/bob  wake  senders=[...] count=1`."""
    # "?": a witness that is no history event (a database row) names no process
    who = event_place(line, unknown="?")
    data = line.get("data") or {}
    fields = " ".join(f"{k}={_short(v)}" for k, v in data.items()) if isinstance(data, dict) else _short(data)
    return f"  {format_offset(line.get('t', 0))}  {who}  {line.get('kind', '?')}  {fields}".rstrip()


def format_timeline(events: Iterable[dict[str, Any]], limit: int = MAX_WITNESS) -> list[str]:
    events = list(events)
    lines = [format_event(e) for e in events[:limit]]
    if len(events) > limit:
        lines.append(f"  ... {len(events) - limit} more events in the run's history.jsonl")
    return lines


def verdict_heading(verdict: Verdict) -> str:
    rules = f" [{' '.join(verdict.rules)}]" if verdict.rules else ""
    return f"{verdict.check} {verdict.title}{rules}: {_STATUS_WORD.get(verdict.status, verdict.status)}"


def rerun_commands(file: str, name: str, seed: int) -> tuple[str, str]:
    """The two ways to rerun exactly one case: through pytest, and through the CLI."""
    return (f"pytest '{file}::{name}' --sim-seed {seed} -p no:xdist",
            f"python -m simulator run {file} --seed {seed}")


def format_failure(result: RunResult, *, file: str, name: str, report_dir: str | None = None) -> str:
    """The failure as a short story: what broke, the events that show it, how to rerun."""
    checks = ", ".join(v.check for v in result.failures()) or "engine error"
    lines = [f"{checks} failed in scenario {result.scenario} with seed {result.seed} "
             f"({result.dispatches} dispatches, {format_offset(result.virtual_ms)[1:]} virtual, "
             f"{result.wall_s:.1f}s wall)"]
    if result.error:
        lines += ["", f"engine error: {result.error}"]
    for verdict in result.failures():
        where = f"{file}:{verdict.line}: " if verdict.line else ""
        lines += ["", where + verdict_heading(verdict)]
        if verdict.message:
            lines.append(f"  {verdict.message}")
        lines += format_timeline(verdict.witness)
    pytest_cmd, cli_cmd = rerun_commands(file, name, result.seed)
    lines += ["", f"rerun: {pytest_cmd}", f"   or: {cli_cmd}", f"run dir: {result.run_dir}"]
    if report_dir:
        lines.append(f"report: {report_dir}")
    return "\n".join(lines)


def verdict_table(result: RunResult) -> str:
    """Every verdict, one per line, failures with their message: the CLI's closing table."""
    width = max([len(v.check) for v in result.verdicts] + [5])
    lines = []
    for v in result.verdicts:
        status = _STATUS_WORD.get(v.status, v.status)
        lines.append(f"{v.check:<{width}}  {status:<11}  {v.title}" + (f" [{' '.join(v.rules)}]" if v.rules else ""))
        if (not v.ok or v.status == "not-applicable") and v.message:  # n/a says which policy does not promise it
            lines.append(f"{'':<{width}}  {'':<11}  {v.message}")
    verdict = "PASSED" if result.ok else "FAILED"
    lines.append(f"{result.scenario} seed={result.seed} sut={result.sut}: {verdict} "
                 f"({len(result.verdicts) - len(result.failures())}/{len(result.verdicts)} checks ok)")
    if result.error:
        lines.append(f"engine error: {result.error}")
    return "\n".join(lines)
