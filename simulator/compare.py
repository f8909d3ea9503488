"""`thatch-sim compare`: the same scenarios under several messaging-policy sets, side by side.

Each scenario runs once per policy set (`thatch`, `qoder`, a set with options
changed, or a YAML file: simulator.scenario.policies) with the scenario's
own seed, so the worlds are the same and only the policy differs. Every run
is judged as usual (thatch's properties P1-P14, the policies' Q1-Q3, the
scenario's own expectations) and measured from what a user could observe:
send replies, wake prompts, the final database. The table goes to stdout
and, with the chart per scenario, to an HTML page (simulator/report/compare.py).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Optional

from simulator.api import run_scenario
from simulator.checks.view import RunView
from simulator.design import HOUR_MS
from simulator.events import WAKE
from simulator.replies import HELD, decode_notice
from simulator.report.compare import PolicyRun, ScenarioComparison, render_page, text_table
from simulator.result import SUT_CHECK, RunResult
from simulator.scenario.loader import ScenarioError, load_file
from simulator.scenario.model import Scenario
from simulator.scenario.policies import PolicyOptions, PolicySetError, parse_policy_set, policy_spec_of
from simulator.report.text import format_event
from simulator.sut import Sut, SutError, parse_sut_list
from simulator.sut.capabilities import capabilities_of

HELP = ("run scenarios under several messaging-policy sets, or on several systems under test (--sut), "
        "and compare them side by side")
WITNESS_LINES = 4
EXAMPLES = ("thatch-sim compare scenarios/ratecap/ping-pong-three-hours.yaml",
            "thatch-sim compare scenarios/policies/*.yaml --policies thatch,qoder,qoder+wake_cap=6",
            "thatch-sim compare FILE --policies thatch,my-policy.yaml --html out/compare.html",
            "thatch-sim compare scenarios/broadcast/*.yaml --sut thatch-core,PATH")
DEFAULT_POLICIES = "thatch,qoder"
DEFAULT_HTML = Path("reports") / "compare" / "index.html"
PROMISE_PREFIXES = ("P", "Q")


def under(spec: Scenario, options: PolicyOptions) -> Scenario:
    """`spec` with its top-level `policy:` replaced by `options` (a process's own policy is laid over it)."""
    return spec.model_copy(update={"policy": policy_spec_of(options)})


def _is_promise(check: str) -> bool:
    return check[:1] in PROMISE_PREFIXES and check[1:].isdigit()


def _latencies(view: RunView) -> tuple[list[float], int]:
    """(seconds from send to read of every message read, messages never read); notices are not sends."""
    sent_at = {r["message_id"]: r["created_at"] for r in view.db["held"] if r["message_id"]}
    waits, unread = [], 0
    for r in view.db["messages"]:
        if decode_notice(r["body"]) is not None:
            continue
        if not r["read_at"]:
            unread += 1
            continue
        start, end = view.vt(sent_at.get(r["id"], r["created_at"])), view.vt(r["read_at"])
        if start is not None and end is not None:
            waits.append(max(0, end - start) / 1000)
    return waits, unread


def _peak_hour(view: RunView) -> int:
    """The most wakes one recipient got in a rolling hour: what a per-recipient hourly cap bounds (an
    average over the run would spread a burst over the quiet hours and the drain)."""
    by: dict[str, list[int]] = {}
    for w in view.history.of(WAKE):
        by.setdefault(w.session, []).append(w.t)
    peak = 0
    for ts in by.values():
        ts.sort()
        lo = 0
        for hi, t in enumerate(ts):
            while t - ts[lo] >= HOUR_MS:
                lo += 1
            peak = max(peak, hi - lo + 1)
    return peak


def measure(label: str, options: PolicyOptions, spec: Scenario, result: RunResult) -> PolicyRun:
    """One run's row: its verdicts and what the policy did to the traffic."""
    view = RunView(spec, result.typed, result.db_path)
    sends = [c for c in view.mail.calls_of("send") if c.result is not None]
    notices = [n for n in map(decode_notice, (r["body"] for r in view.db["messages"])) if n is not None]
    held = [c for c in sends if c.ok and c.outcome.kind == HELD]
    waits, unread = _latencies(view)
    promises = {v.check: v.status for v in result.verdicts if _is_promise(v.check)}
    script = [v for v in result.verdicts if not _is_promise(v.check)]
    return PolicyRun(
        policy=label, options=options.describe(), ok=result.ok, promises=promises,
        script_passed=sum(1 for v in script if v.ok), script_total=len(script),
        failed=[v.check for v in result.verdicts if not v.ok],
        failures=[(v.check, v.title + (" (expected under this design)" if v.status == "expected-fail" else ""))
                  for v in result.verdicts if not v.ok or v.status == "expected-fail"],
        sent=len(sends), delivered=sum(1 for c in sends if c.ok) - len(held),
        held=len(held), refused=sum(1 for c in sends if not c.ok),
        expired=sum(1 for n in notices if n.outcome == "expired"),
        declined=sum(1 for n in notices if n.outcome == "refused"),
        wakes=len(view.history.of(WAKE)), peak_hour=_peak_hour(view), wake_cap=options.wake_cap,
        read_median_s=statistics.median(waits) if waits else None, read_worst_s=max(waits) if waits else None,
        unread=unread, wake_times=[w.t for w in view.history.of(WAKE)], error=result.error)


def compare_one(file: str, spec: Scenario, policy_sets: list[tuple[str, PolicyOptions]], *,
                seed: Optional[int] = None, wall_timeout_s: float = 300,
                suts: Optional[list[Sut]] = None) -> ScenarioComparison:
    """`spec` under each policy set, or (with `suts`) on each system under test under the scenario's own."""
    runs, results = [], {}
    plan = ([(s.name, PolicyOptions(), s) for s in suts] if suts
            else [(label, options, None) for label, options in policy_sets])
    for label, options, sut in plan:
        variant = spec if sut is not None else under(spec, options)
        with tempfile.TemporaryDirectory(prefix=f"thatch-compare-{spec.name}-") as tmp:
            result = run_scenario(variant, run_dir=Path(tmp) / "run", seed=seed, wall_timeout_s=wall_timeout_s,
                                  sut=sut)
            results[label] = result
            run = measure(label, options, variant, result)
            runs.append(run if sut is None else replace(run, options=f"system under test {sut.name}"))
    return ScenarioComparison(name=spec.name, file=file, seed=spec.seed if seed is None else seed, story=spec.story,
                              run_ms=spec.duration + spec.drain, runs=runs,
                              differences=verdict_differences(results) if suts else [])


def verdict_differences(results: dict[str, RunResult]) -> list[tuple[str, list[str]]]:
    """Every check whose status differs between the systems: per system its status, message and witness."""
    unjudged = {label: r.unjudged for label, r in results.items() if r.unjudged is not None}
    if unjudged:  # a system that could not be judged on the scenario: that is the one difference
        return [(SUT_CHECK, [f"{label}: {v.status}: {v.message}" for label, v in unjudged.items()])]
    by_system = {label: {v.check: v for v in r.verdicts} for label, r in results.items()}
    checks = list(dict.fromkeys(c for verdicts in by_system.values() for c in verdicts))
    out = []
    for check in checks:
        seen = {label: verdicts.get(check) for label, verdicts in by_system.items()}
        if len({v.status if v else "absent" for v in seen.values()}) < 2:
            continue
        lines = []
        for label, v in seen.items():
            lines.append(f"{label}: {v.status}: {v.message}" if v else f"{label}: not judged")
            if v is not None and not v.ok:
                lines.extend(f"  {format_event(e)}" for e in v.witness[:WITNESS_LINES])
        out.append((check, lines))
    return out


def policy_sets_of(text: str) -> list[tuple[str, PolicyOptions]]:
    """The `--policies` list: comma-separated sets (raises PolicySetError naming the bad one)."""
    entries = [e.strip() for e in text.split(",") if e.strip()]
    if not entries:
        raise PolicySetError("--policies names no set — write e.g. thatch,qoder")
    return [parse_policy_set(e) for e in entries]


# -- the command -------------------------------------------------------------------------


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="SCENARIO", help="scenario YAML files")
    p.add_argument("--policies", default=DEFAULT_POLICIES, metavar="SETS",
                   help="comma-separated policy sets: thatch, qoder, SET+OPTION=VALUE (e.g. qoder+wake_cap=6), "
                        f"or a .yaml file with a `policy:` mapping (default {DEFAULT_POLICIES})")
    p.add_argument("--seed", type=int, default=None, metavar="N",
                   help="run every scenario with seed N instead of its own")
    p.add_argument("--html", default=str(DEFAULT_HTML), metavar="PATH",
                   help=f"where to write the page (default {DEFAULT_HTML})")
    p.add_argument("--wall-budget", type=float, default=300.0, metavar="S",
                   help="wall-time budget of each run (default 300)")
    p.add_argument("--sut", default=None, metavar="SYSTEMS",
                   help="compare systems under test instead of policy sets: comma-separated thatch-core and "
                        "checkout paths (e.g. thatch-core,PATH), each scenario under its own design")


def systems_of(text: str) -> list[Sut]:
    """`--sut A,B`: each system checked (a checkout that does not load under bun says so now)."""
    suts = parse_sut_list(text)
    for sut in suts:
        capabilities_of(sut)
    return suts


def run(args: argparse.Namespace) -> int:
    try:
        sets = policy_sets_of(args.policies)
        suts = systems_of(args.sut) if args.sut else None
    except (PolicySetError, SutError) as exc:
        print(f"thatch-sim compare: {exc}", file=sys.stderr)
        return 2
    loaded = []
    for file in args.files:
        try:
            loaded.append((file, load_file(Path(file)).spec))
        except ScenarioError as exc:
            print(str(exc), file=sys.stderr)
            return 2
    comparisons = [compare_one(file, spec, sets, seed=args.seed, wall_timeout_s=args.wall_budget, suts=suts)
                   for file, spec in loaded]
    print(text_table(comparisons), end="")
    page = Path(args.html)
    page.parent.mkdir(parents=True, exist_ok=True)
    columns = [s.name for s in suts] if suts else [label for label, _ in sets]
    page.write_text(render_page(comparisons, columns), encoding="utf-8")
    print(f"page: {page}")
    return 0 if all(r.error is None for c in comparisons for r in c.runs) else 1
