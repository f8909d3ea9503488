"""The campaign summary as text: what ran, what fired, what each property judged, what failed."""

from __future__ import annotations

from typing import Optional

from simulator.explore.campaign import Failure, Settings, Summary, size_name
from simulator.explore.guided import thinned
from simulator.scenario.model import PROPERTY_IDS


def _faults(summary: Summary) -> str:
    kinds = sorted(set(summary.faults_armed) | set(summary.faults_fired))
    if not kinds:
        return "none"
    return ", ".join(f"{k} {summary.faults_fired.get(k, 0)}/{summary.faults_armed.get(k, 0)}" for k in kinds)


def _judged(summary: Summary) -> str:
    return "  ".join(f"{p} {summary.judged.get(p, 0)}" for p in PROPERTY_IDS)


def _failure(f: Failure) -> list[str]:
    lines = [f"  {f.check} seed {f.seed} (after {f.after_s:.0f}s): {f.message.splitlines()[0][:200]}"]
    lines += [f"      {line}" for line in f.message.splitlines()[1:3]]
    if f.shrunk is not None and f.file is not None:
        (p0, s0, t0), (p1, s1, t1) = f.shrunk.before, f.shrunk.after
        state = "reproduces alone" if f.reproduced else "DOES NOT reproduce alone"
        lines.append(f"      shrunk {p0}/{s0}/{t0} -> {p1}/{s1}/{t1} processes/sessions/steps in {f.shrunk.runs} runs: "
                     f"{f.file.path} ({state})")
        lines.append(f"      rerun: {f.file.rerun}")
    elif f.run_dir is not None:
        lines.append(f"      run dir: {f.run_dir}")
    return lines


def coverage_lines(coverage: dict, next_seed: Optional[int] = None) -> list[str]:
    """The coverage part: branches reached, the corpus, and branches over time as a small table."""
    lines = [f"thatch_core branches reached ({coverage['mode']}): {coverage['branches']} of {coverage['of']}"
             + (f", corpus {coverage['corpus']} entries" if coverage["mode"] == "guided" else "")
             + (f" ({coverage['resumed_from']} loaded from the file)" if coverage.get("resumed_from") else "")]
    if coverage.get("corpus_file"):
        again = f" --seed {next_seed}" if next_seed is not None else ""
        lines.append(f"  corpus: {coverage['corpus_file']} (resume: --guided{again} --out the same directory)")
    if coverage.get("csv"):
        lines.append(f"  branches over time: {coverage['csv']}")
    lines.append("  | runs | wall (s) | branches |")
    lines += [f"  | {r} | {w:.0f} | {b} |" for r, w, b in thinned(coverage["timeline"])]
    return lines


def format_summary(summary: Summary, settings: Settings) -> str:
    """The campaign in a few lines; the never-judged properties and every failure called out."""
    rate = summary.runs / summary.explore_s * 60 if summary.explore_s else 0.0
    seeds = f"seeds {summary.first_seed}..{summary.last_seed}" if summary.runs else "no seed"
    lines = [
        f"explore: {seeds}, {summary.runs} runs (size {size_name(settings.size)}), "
        f"{summary.explore_s:.0f}s running seeds, {rate:.0f} runs/min"
        + (f", {summary.wall_s:.0f}s in all" if summary.wall_s else ""),
        f"virtual time: {summary.virtual_ms / 3_600_000:.1f} h",
        f"faults fired/armed: {_faults(summary)}",
        f"runs in which each property judged something: {_judged(summary)}",
    ]
    if summary.coverage is not None:
        lines += coverage_lines(summary.coverage, None if summary.last_seed is None else summary.last_seed + 1)
    never = summary.never_judged()
    if never and summary.runs:
        lines.append(f"NEVER JUDGED in this campaign: {', '.join(never)} (no run gave them anything to check)")
    if settings.check_determinism:
        bad = sum(1 for f in summary.failures if f.check == "determinism")
        lines.append(f"determinism: {summary.determinism_checked} seeds run twice, "
                     + ("every history identical" if not bad else f"{bad} differ"))
    for f in summary.flaky:
        lines.append(f"flaky (gone on a rerun): {f.check} seed {f.seed}: {f.message.splitlines()[0][:160]}")
    if summary.failures:
        lines.append(f"FAILED: {summary.failing} of {summary.runs} runs")
        for f in summary.failures:
            lines += _failure(f)
    else:
        lines.append("no failure")
    return "\n".join(lines)


def _at(timeline: list[list], x: float, by: int) -> Optional[int]:
    """Branches reached by the time the timeline's column `by` (0 runs, 1 wall) got to `x`."""
    reached = [row[2] for row in timeline if row[by] <= x]
    return reached[-1] if reached else None


def compare_table(plain: Summary, guided: Summary, *, budget_s: Optional[float], runs: Optional[int],
                  steps: int = 6) -> str:
    """Plain swarm against guided in the same budget, as a markdown table (branches at even checkpoints)."""
    by, top = (1, budget_s) if budget_s else (0, runs or max(plain.runs, guided.runs))
    unit = "s" if by == 1 else " runs"
    lines = ["| mode | " + " | ".join(f"branches at {top * (i + 1) / steps:.0f}{unit}" for i in range(steps))
             + " | at the end | runs | failing runs | first failure |",
             "|---|" + "---|" * (steps + 4)]
    for name, summary in (("plain swarm", plain), ("guided", guided)):
        timeline = (summary.coverage or {}).get("timeline", [])
        cells = [_at(timeline, top * (i + 1) / steps + 1e-9, by) for i in range(steps)]
        first = summary.first_failure_s
        end = f"{timeline[-1][2]} ({timeline[-1][1]:.0f}s)" if timeline else "-"
        when = "-" if first is None else f"{first:.0f} s"
        lines.append(f"| {name} | " + " | ".join("-" if c is None else str(c) for c in cells)
                     + f" | {end} | {summary.runs} | {summary.failing} | {when} |")
    of = (guided.coverage or plain.coverage or {}).get("of")
    if of:
        lines.append(f"\n(thatch_core has {of} branches in all)")
    return "\n".join(lines)
