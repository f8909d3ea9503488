"""`python -m simulator explore`: generate, run, judge, shrink and file, from a seed.

    explore --seed S [--runs N | --budget 10m] [--out scenarios/found] [--size small|default]
            [--check-determinism [EVERY]] [--no-shrink] [--max-failures K]
            [--dispatch serial|concurrent] [--overrides MODULE:NAME] [--json FILE] [--print]
            [--guided | --measure-coverage | --compare-guided] [--corpus FILE] [--swarm JSON]

Exit codes: 0 nothing failed, 1 a failure (or a determinism difference), 2 bad usage.
The simulator CLI's command table takes `HELP`, `EXAMPLES`, `arguments` (fills
the subcommand's parser) and `run` (its handler) from here.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

from simulator.sut.capabilities import choose_sut, sut_argument
from simulator.explore.campaign import Settings, Summary, merge_summaries, run_campaign
from simulator.explore.generator import generate
from simulator.explore.progress import Progress
from simulator.explore.guided import CORPUS_FILE, Corpus, swarm_arg
from simulator.explore.report import compare_table, format_summary
from simulator.explore.swarm import SIZES
from simulator.explore.writer import scenario_yaml
from simulator.scenario.durations import parse_duration
from simulator.scenario.model import PROPERTY_IDS
from simulator.scenario.policies import POLICY_SETS


HELP = "generate scenarios from seeds, run them, shrink and file every failure"
EXAMPLES = (
    "thatch-sim explore --seed 0 --runs 200 --size small",
    "thatch-sim explore --seed 1000 --budget 10m --check-determinism",
    "thatch-sim explore --seed 17 --print",
    "thatch-sim explore --seed 0 --budget 5m --guided --out /tmp/campaign",
    "thatch-sim explore --seed 0 --budget 2m --compare-guided --no-shrink",
)


def arguments(p: argparse.ArgumentParser) -> None:
    """The subcommand's arguments, on the parser the simulator CLI made for it."""
    p.add_argument("--seed", type=int, default=0, help="the first seed (default 0)")
    limit = p.add_mutually_exclusive_group()
    limit.add_argument("--runs", type=int, default=None, metavar="N",
                       help="how many seeds (default 1, or all the budget allows)")
    limit.add_argument("--budget", default=None, metavar="DURATION",
                       help="explore until this much wall time was spent running seeds (10m, 90s); shrinking is extra")
    p.add_argument("--out", default="scenarios/found", metavar="DIR",
                   help="where shrunk failures are written (default scenarios/found)")
    p.add_argument("--size", choices=sorted(SIZES), default="default",
                   help="world bounds (small: 4 processes, 14 steps, 10 minutes)")
    p.add_argument("--check-determinism", type=int, nargs="?", const=1, default=0, metavar="EVERY",
                   help="run each seed (or every EVERY-th, from --seed) twice in serial dispatch and fail on any "
                        "history difference")
    p.add_argument("--no-shrink", action="store_true", help="report failures without shrinking them")
    p.add_argument("--shrink-runs", type=int, default=150, metavar="N",
                   help="at most N runs to shrink one failure (default 150)")
    p.add_argument("--max-failures", type=int, default=None, metavar="K", help="stop after K failing runs")
    p.add_argument("--dispatch", choices=("serial", "concurrent"), default=None, help="force every run's dispatch")
    p.add_argument("--overrides", default=None, metavar="MODULE:NAME",
                   help="test injection: a dict (or a function returning one) of broken classes passed to every run, "
                        "e.g. to measure what exploration finds against a planted bug")
    p.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="wall-clock limit of one run (default 120)")
    p.add_argument("--include-properties", default="", metavar="P-IDS",
                   help="judge these properties on any design (e.g. P12,P13,P14: would seed 000's design have "
                        "been caught?); naming the later design's also draws its incidents' faults into each world")
    p.add_argument("--interleave", action="store_true",
                   help="draw interleavings into serial worlds of two or more processes: a tool call pauses at a "
                        "statement boundary while other processes' calls run (races on demand, judged by P15 "
                        "among others)")
    p.add_argument("--design", choices=tuple(POLICY_SETS), default=None,
                   help="run every world under this named design (thatch-later: the later design's options, with "
                        "its incidents' faults and long bodies drawn in); default: the scenario's own, thatch")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the campaign summary as JSON")
    p.add_argument("--print", action="store_true", help="print each seed's scenario YAML instead of running it")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--guided", action="store_true",
                      help="coverage-guided: measure thatch_core's branches per run and draw the next feature sets "
                           "from the runs that reached new ones (a corpus in OUT/corpus.jsonl; a later campaign "
                           "with the same --out resumes from it)")
    mode.add_argument("--measure-coverage", action="store_true",
                      help="plain swarm, but measure thatch_core's branches per run (branches over time)")
    mode.add_argument("--compare-guided", action="store_true",
                      help="run the budget twice from the same seed, plain swarm then guided (both measured, "
                           "found files in OUT/plain and OUT/guided), and print branches over time side by side")
    p.add_argument("--corpus", default=None, metavar="FILE", help="the guided corpus file (default OUT/corpus.jsonl)")
    p.add_argument("--merge", nargs="+", default=None, metavar="FILE",
                   help="merge the JSON summaries of disjoint campaigns (CI shards) into --json (or stdout), and "
                        "any corpus files given (*.jsonl) into OUT/corpus.jsonl; nothing is run")
    p.add_argument("--swarm", default=None, metavar="JSON",
                   help="every run's feature set, as a guided run's rerun command gives it")
    sut_argument(p)


def load_overrides(ref: str) -> dict:
    """`module:name` -> the overrides dict it names (a callable is called)."""
    module, _, name = ref.partition(":")
    if not module or not name:
        raise ValueError(f"{ref!r} is not MODULE:NAME")
    value = getattr(importlib.import_module(module), name)
    value = value() if callable(value) else value
    if not isinstance(value, dict):
        raise ValueError(f"{ref} is a {type(value).__name__}, not a dict of overrides")
    return value


def settings_from(args: argparse.Namespace) -> Settings:
    budget = parse_duration(args.budget) / 1000 if args.budget else None
    runs = args.runs if args.runs is not None else (None if budget else 1)
    return Settings(
        seed=args.seed, runs=runs, budget_s=budget, size=SIZES[args.size], out=Path(args.out),
        shrink=not args.no_shrink, shrink_runs=args.shrink_runs, max_failures=args.max_failures,
        dispatch=args.dispatch, check_determinism=args.check_determinism > 0,
        determinism_every=max(1, args.check_determinism),
        overrides=load_overrides(args.overrides) if args.overrides else None, overrides_ref=args.overrides,
        wall_timeout_s=args.timeout, guided=args.guided, measure=args.measure_coverage,
        corpus=Path(args.corpus) if args.corpus else None, swarm=swarm_arg(args.swarm) if args.swarm else None,
        include=included(args.include_properties), interleave=args.interleave, design=args.design)


def included(text: str) -> tuple[str, ...]:
    """`P12,P13` -> the property ids (refused when one is not a property)."""
    pids = tuple(p.strip() for p in (text or "").split(",") if p.strip())
    unknown = [p for p in pids if p not in PROPERTY_IDS]
    if unknown:
        raise ValueError(f"--include-properties: {', '.join(unknown)} is not a property id — write some of "
                         f"{', '.join(PROPERTY_IDS)}")
    return pids


def _print_seeds(settings: Settings) -> int:
    for seed in range(settings.seed, settings.seed + (settings.runs or 1)):
        gen = generate(seed, settings.size, dispatch=settings.dispatch, swarm=settings.swarm, include=settings.include,
                       interleave=settings.interleave, design=settings.design)
        sys.stdout.write(scenario_yaml(gen.spec, comments=(f"seed {seed}: {gen.swarm.describe()}",)))
        sys.stdout.write("---\n" if seed < settings.seed + (settings.runs or 1) - 1 else "")
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from(args)
        choose_sut(args.sut)
    except (ValueError, ImportError, AttributeError) as exc:
        print(f"explore: {exc}", file=sys.stderr)
        return 2
    if args.print:
        return _print_seeds(settings)
    if args.merge:
        return _merge(args, settings)
    if args.compare_guided:
        return _compare(settings, args)
    summary = run_campaign(settings, Progress(total=settings.runs, budget_s=settings.budget_s))
    print(format_summary(summary, settings))
    if args.json:
        Path(args.json).write_text(json.dumps(summary.as_json(), indent=2, default=str), encoding="utf-8")
    return exit_code(summary)


def _merge(args: argparse.Namespace, settings: Settings) -> int:
    """`--merge`: summaries into one, corpora into OUT/corpus.jsonl (each branch kept by its first entry)."""
    corpora = [Path(f) for f in args.merge if f.endswith(".jsonl")]
    summaries = [json.loads(Path(f).read_text(encoding="utf-8")) for f in args.merge if not f.endswith(".jsonl")]
    merged = merge_summaries(summaries)
    if corpora:
        target = settings.corpus_path
        corpus = Corpus()
        for part in corpora:
            for entry in Corpus.load(part).entries:
                new = tuple(b for b in entry.branches if b not in corpus.reached)
                if new:
                    corpus.add(replace(entry, branches=new))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(json.dumps(e.as_json(), sort_keys=True) + "\n" for e in corpus.entries),
                          encoding="utf-8")
        merged["corpus"] = {"file": str(target), "entries": len(corpus.entries), "branches": len(corpus.reached)}
    text = json.dumps(merged, indent=2, default=str)
    if args.json:
        Path(args.json).write_text(text, encoding="utf-8")
    else:
        print(text)
    return 1 if merged["failures"] else 0


def _compare(settings: Settings, args: argparse.Namespace) -> int:
    """Plain swarm, then guided, in the same budget from the same seed (both measured, each from nothing)."""
    plain_out, guided_out = settings.out / "plain", settings.out / "guided"
    (guided_out / CORPUS_FILE).unlink(missing_ok=True)  # the comparison's guided side starts from no corpus
    summaries = []
    for name, s in (("plain", replace(settings, measure=True, out=plain_out)),
                    ("guided", replace(settings, guided=True, out=guided_out, corpus=None))):
        summary = run_campaign(s, Progress(total=s.runs, budget_s=s.budget_s))
        print(f"== {name} ==\n{format_summary(summary, s)}\n")
        summaries.append(summary)
    print(compare_table(*summaries, budget_s=settings.budget_s, runs=settings.runs))
    if args.json:
        Path(args.json).write_text(json.dumps({"plain": summaries[0].as_json(), "guided": summaries[1].as_json()},
                                              indent=2, default=str), encoding="utf-8")
    return max(exit_code(s) for s in summaries)


def exit_code(summary: Summary) -> int:
    return 1 if summary.failures else 0


def main(argv: Optional[list[str]] = None) -> int:
    """The subcommand on its own (`python -m simulator.explore`)."""
    parser = argparse.ArgumentParser(prog="python -m simulator explore", description=HELP)
    arguments(parser)
    return run(parser.parse_args(argv))
