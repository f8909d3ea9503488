"""What a run of a scenario will cost the machine, estimated before it runs.

A run's work is its dispatches (every poll of every process is one, and they
dominate: the reference run's 46.5k dispatches are 46k polls), and its memory
is its OS processes (every harness process, and every MCP server child of a
Claude Code host). `lint` prints a warning when the estimate exceeds the
memory this machine has available or the wall-clock budget of one run
(D-bounds-2); the bounds (`simulator.scenario.bounds`) refuse what no
machine could run, the estimate warns about what this one may not.

The per-unit figures are measurements, not promises: bench/RESULTS.md
(410-660 us a dispatch in serial dispatch on a 2-core VM) and about 11 MB
resident per harness process.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, TextIO

from simulator.scenario.kinds import HOSTS
from simulator.scenario.model import Scenario
from simulator.scenario.positions import LoadedScenario

US_PER_DISPATCH = 500
MB_PER_OS_PROCESS = 11
MB_BASE = 100  # the orchestrator and whatever runs it (pytest, the CLI)
DISPATCHES_PER_STEP = 4  # a step, the turn it starts, its tool calls and their replies
DEFAULT_WALL_BUDGET_S = 120.0  # the default wall-clock budget of one run (`--sim-timeout`)
# docs/authoring-scenarios.md, "Before you commit a scenario": a scenario should run in about this much wall time.
GUIDE_WALL_S = 3.0


@dataclass(frozen=True)
class CostEstimate:
    """The expected size of one run of a scenario: its dispatches and OS processes, and what they cost."""

    dispatches: int
    os_processes: int
    wall_s: float
    memory_mb: int


def _lifetimes(spec: Scenario, run_ms: int) -> dict[str, tuple[int, int]]:
    """process label -> (start, end) of its life in virtual time, from its `start` and the
    steps that start or end it."""
    life = {p.id: (p.start if isinstance(p.start, int) else None, run_ms) for p in spec.processes}
    for step in spec.steps:
        args = step.args
        started = {"start": "process", "resume": "process", "restart": "into"}.get(step.action)
        if started and getattr(args, started, None) in life and life[getattr(args, started)][0] is None:
            life[getattr(args, started)] = (step.at, run_ms)
        if step.action in ("kill", "restart") and args.process in life:
            begin, end = life[args.process]
            life[args.process] = (begin, min(end, step.at))
    return {label: (begin, end) for label, (begin, end) in life.items() if begin is not None and end > begin}


def estimate_cost(spec: Scenario) -> CostEstimate:
    """Dispatches and OS processes of one run of `spec`: every opencode process polls while it
    lives, the engine samples at the shortest poll interval, and a machine sleep stops both."""
    run_ms = spec.duration + spec.drain
    asleep = sum(step.args.duration for step in spec.steps if step.action == "sleep")
    lives = _lifetimes(spec, run_ms)
    polls = sum(max(0, lives[p.id][1] - lives[p.id][0] - asleep) // max(1, p.poll_interval)
                for p in spec.processes if HOSTS[p.kind].polls and p.id in lives)
    samples = max(0, run_ms - asleep) // max(1, min((p.poll_interval for p in spec.processes), default=30_000))
    sessions = sum(len(p.sessions) for p in spec.processes)
    dispatches = polls + samples + DISPATCHES_PER_STEP * len(spec.steps) + 2 * sessions
    os_processes = sum(1 + len(p.sessions) * HOSTS[p.kind].processes_per_session for p in spec.processes)
    return CostEstimate(dispatches=dispatches, os_processes=os_processes, wall_s=dispatches * US_PER_DISPATCH / 1e6,
                        memory_mb=MB_BASE + os_processes * MB_PER_OS_PROCESS)


def available_memory_mb(meminfo: Path = Path("/proc/meminfo")) -> Optional[int]:
    """The memory this machine has available now (MemAvailable), or None where it cannot be read."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def cost_warnings(spec: Scenario, *, available_mb: Optional[int] = None,
                  wall_budget_s: float = DEFAULT_WALL_BUDGET_S) -> list[str]:
    """Why a run of `spec` would exceed the machine: its memory, its wall-clock budget (none: it fits)."""
    cost = estimate_cost(spec)
    out = []
    if available_mb is not None and cost.memory_mb > available_mb:
        out.append(f"a run needs about {cost.memory_mb} MB "
                   f"({cost.os_processes} OS processes of ~{MB_PER_OS_PROCESS} MB), "
                   f"more than the {available_mb} MB this machine has available — use fewer processes")
    if cost.wall_s > wall_budget_s:
        out.append(f"a run makes about {cost.dispatches} dispatches "
                   f"(~{cost.wall_s:.0f} s at ~{US_PER_DISPATCH} us each), "
                   f"over the {wall_budget_s:.0f} s wall-clock budget of a run — shorten duration or drain, raise "
                   "poll_interval, or give the run a larger budget (--sim-timeout)")
    elif cost.wall_s > GUIDE_WALL_S:
        out.append(f"a run makes about {cost.dispatches} dispatches (~{cost.wall_s:.0f} s at ~{US_PER_DISPATCH} us "
                   f"each, more on a loaded machine), over the guide's ~{GUIDE_WALL_S:.0f} s for a scenario — let "
                   "the machine `sleep:` through idle stretches (nothing polls while it sleeps), shorten duration "
                   "or drain, or raise poll_interval")
    return out


def warn_if_costly(loaded: LoadedScenario, stream: Optional[TextIO] = None) -> None:
    """Print `FILE:LINE: warning: ...` (to stderr by default) for each way a run of `loaded`
    would exceed this machine."""
    line = loaded.positions.line_of(("processes",))[0]
    for text in cost_warnings(loaded.spec, available_mb=available_memory_mb()):
        print(f"{loaded.file}:{line}: warning: {text}", file=stream or sys.stderr)
