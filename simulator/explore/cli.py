"""`python -m simulator explore`: generate, run, judge, shrink and file, from a seed.

    explore --seed S [--runs N | --budget 10m] [--out scenarios/found] [--size small|default]
            [--check-determinism] [--no-shrink] [--max-failures K]
            [--dispatch serial|concurrent] [--overrides MODULE:NAME] [--json FILE] [--print]

Exit codes: 0 nothing failed, 1 a failure (or a determinism difference), 2 bad usage.
The simulator CLI's command table takes `HELP`, `EXAMPLES`, `arguments` (fills
the subcommand's parser) and `run` (its handler) from here.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Optional

from simulator.explore.campaign import Settings, Summary, run_campaign
from simulator.explore.generator import generate
from simulator.explore.progress import Progress
from simulator.explore.report import format_summary
from simulator.explore.swarm import SIZES
from simulator.explore.writer import scenario_yaml
from simulator.scenario.durations import parse_duration
from simulator.scenario.model import PROPERTY_IDS


HELP = "generate scenarios from seeds, run them, shrink and file every failure"
EXAMPLES = (
    "thatch-sim explore --seed 0 --runs 200 --size small",
    "thatch-sim explore --seed 1000 --budget 10m --check-determinism",
    "thatch-sim explore --seed 17 --print",
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
    p.add_argument("--check-determinism", action="store_true",
                   help="run each seed twice in serial dispatch and fail on any history difference")
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
                   help="judge these properties on any design (e.g. P11,P12,P13: would seed 000's design have "
                        "been caught?); naming the later design's also draws its incidents' faults into each world")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the campaign summary as JSON")
    p.add_argument("--print", action="store_true", help="print each seed's scenario YAML instead of running it")


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
        dispatch=args.dispatch, check_determinism=args.check_determinism,
        overrides=load_overrides(args.overrides) if args.overrides else None, overrides_ref=args.overrides,
        wall_timeout_s=args.timeout, include=included(args.include_properties))


def included(text: str) -> tuple[str, ...]:
    """`P11,P12` -> the property ids (refused when one is not a property)."""
    pids = tuple(p.strip() for p in (text or "").split(",") if p.strip())
    unknown = [p for p in pids if p not in PROPERTY_IDS]
    if unknown:
        raise ValueError(f"--include-properties: {', '.join(unknown)} is not a property id — write some of "
                         f"{', '.join(PROPERTY_IDS)}")
    return pids


def _print_seeds(settings: Settings) -> int:
    for seed in range(settings.seed, settings.seed + (settings.runs or 1)):
        gen = generate(seed, settings.size, dispatch=settings.dispatch, include=settings.include)
        sys.stdout.write(scenario_yaml(gen.spec, comments=(f"seed {seed}: {gen.swarm.describe()}",)))
        sys.stdout.write("---\n" if seed < settings.seed + (settings.runs or 1) - 1 else "")
    return 0


def run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from(args)
    except (ValueError, ImportError, AttributeError) as exc:
        print(f"explore: {exc}", file=sys.stderr)
        return 2
    if args.print:
        return _print_seeds(settings)
    summary = run_campaign(settings, Progress(total=settings.runs, budget_s=settings.budget_s))
    print(format_summary(summary, settings))
    if args.json:
        Path(args.json).write_text(json.dumps(summary.as_json(), indent=2, default=str), encoding="utf-8")
    return exit_code(summary)


def exit_code(summary: Summary) -> int:
    return 1 if summary.failures else 0


def main(argv: Optional[list[str]] = None) -> int:
    """The subcommand on its own (`python -m simulator.explore`)."""
    parser = argparse.ArgumentParser(prog="python -m simulator explore", description=HELP)
    arguments(parser)
    return run(parser.parse_args(argv))
