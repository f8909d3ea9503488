"""A campaign: seeds S, S+1, ... generated, run and judged; each new failure shrunk and filed.

`run_campaign(settings)` walks the seeds until `runs` are done or the
exploration budget (wall time spent running seeds, shrinking excluded) is
spent. For every failing run it records each failing check; the first
failure of each check (a property id, `error`, `timeout`, `determinism`)
is shrunk (shrink.py), written under `out` (found.py) and rerun alone from
the written file to confirm it reproduces. `Summary` adds up what the
campaign did: runs, virtual hours, faults armed and fired by kind, and per
property the runs in which it judged something (a property that judged
nothing in a whole campaign is flagged: it watched nothing).
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from simulator.explore.determinism import first_difference
from simulator.explore.found import FoundFile, write_found
from simulator.explore.generator import Generated, generate
from simulator.explore.judge import ERROR, TIMEOUT, Finding, Outcome, run_explored
from simulator.explore.progress import Progress
from simulator.explore.shrink import Shrunk, shrink
from simulator.explore.swarm import DEFAULT, SIZES, Size
from simulator.scenario.model import PROPERTY_IDS, Scenario

DETERMINISM = "determinism"


@dataclass
class Settings:
    """What a campaign explores and how (the CLI's and the pytest options' common form)."""

    seed: int = 0
    runs: Optional[int] = 1
    budget_s: Optional[float] = None
    size: Size = DEFAULT
    out: Path = Path("scenarios/found")
    shrink: bool = True
    shrink_runs: int = 150
    shrink_budget_s: float = 300.0
    max_failures: Optional[int] = None
    dispatch: Optional[str] = None
    overrides: Optional[dict] = None
    overrides_ref: Optional[str] = None        # "module:name" of the overrides, for rerun commands
    check_determinism: bool = False
    wall_timeout_s: float = 120.0
    work: Optional[Path] = None                # where run directories go (a temp dir when None)
    include: tuple[str, ...] = ()              # properties judged on any design (`--include-properties`)


@dataclass
class Failure:
    """One failing check of one run, and (for the first of its check) its shrunk file."""

    seed: int
    check: str
    title: str
    message: str
    after_s: float                              # campaign wall time when the run finished
    run_dir: Optional[Path] = None
    shrunk: Optional[Shrunk] = None
    file: Optional[FoundFile] = None
    reproduced: Optional[bool] = None


@dataclass
class Summary:
    runs: int = 0
    failing: int = 0
    virtual_ms: int = 0
    explore_s: float = 0.0
    wall_s: float = 0.0
    first_seed: Optional[int] = None
    last_seed: Optional[int] = None
    faults_fired: Counter = field(default_factory=Counter)
    faults_armed: Counter = field(default_factory=Counter)
    judged: Counter = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    flaky: list[Failure] = field(default_factory=list)   # engine errors that did not come back on a rerun
    determinism_checked: int = 0

    def add(self, seed: int, outcome: Outcome) -> None:
        """Count one run's figures (whether it failed is the caller's to count: see `confirmed`)."""
        self.runs += 1
        self.virtual_ms += outcome.virtual_ms
        self.first_seed = seed if self.first_seed is None else min(seed, self.first_seed)
        self.last_seed = seed if self.last_seed is None else max(seed, self.last_seed)
        self.faults_fired.update(outcome.faults_fired)
        self.faults_armed.update(outcome.faults_armed)
        self.judged.update(outcome.judged)

    def never_judged(self) -> list[str]:
        return [p for p in PROPERTY_IDS if not self.judged.get(p)]

    @property
    def first_failure_s(self) -> Optional[float]:
        return min((f.after_s for f in self.failures), default=None)

    def as_json(self) -> dict[str, Any]:
        return {
            "runs": self.runs, "failing_runs": self.failing, "seeds": [self.first_seed, self.last_seed],
            "virtual_hours": round(self.virtual_ms / 3_600_000, 2), "explore_s": round(self.explore_s, 1),
            "wall_s": round(self.wall_s, 1),
            "runs_per_minute": round(self.runs / self.explore_s * 60, 1) if self.explore_s else None,
            "faults_armed": dict(self.faults_armed), "faults_fired": dict(self.faults_fired),
            "judged": {p: self.judged.get(p, 0) for p in PROPERTY_IDS}, "never_judged": self.never_judged(),
            "first_failure_s": self.first_failure_s, "determinism_checked": self.determinism_checked,
            "failures": [_failure_json(f) for f in self.failures],
            "flaky": [_failure_json(f) for f in self.flaky],
        }


def _failure_json(f: Failure) -> dict[str, Any]:
    out: dict[str, Any] = {"seed": f.seed, "check": f.check, "message": f.message, "after_s": round(f.after_s, 1)}
    if f.shrunk is not None:
        out["shrunk"] = {"before": list(f.shrunk.before), "after": list(f.shrunk.after), "runs": f.shrunk.runs}
    if f.file is not None:
        out.update(file=str(f.file.path), rerun=f.file.rerun, reproduced=f.reproduced)
    return out


def size_name(size: Size) -> str:
    return next((name for name, s in SIZES.items() if s == size), "default")


def explore_command(seed: int, settings: Settings) -> str:
    """The command that regenerates and reruns seed `seed` exactly."""
    parts = [f"python -m simulator explore --seed {seed} --runs 1"]
    if settings.size != DEFAULT:
        parts.append(f"--size {size_name(settings.size)}")
    if settings.dispatch:
        parts.append(f"--dispatch {settings.dispatch}")
    if settings.overrides_ref:
        parts.append(f"--overrides {settings.overrides_ref}")
    if settings.include:
        parts.append(f"--include-properties {','.join(settings.include)}")
    return " ".join(parts)


# ---------------------------------------------------------------------------
# One seed
# ---------------------------------------------------------------------------


def generated(seed: int, settings: Settings) -> Generated:
    dispatch = "serial" if settings.check_determinism else settings.dispatch
    return generate(seed, settings.size, dispatch=dispatch, include=settings.include)


def run_spec(spec: Scenario, settings: Settings, keep: str = "failed") -> Outcome:
    return run_explored(spec, work=settings.work, overrides=settings.overrides,
                        wall_timeout_s=settings.wall_timeout_s, keep=keep)


def confirmed(spec: Scenario, outcome: Outcome, settings: Settings) -> tuple[list[Finding], list[Finding]]:
    """(the findings that stand, the engine errors and timeouts that did not come back on one rerun).

    A property verdict of a serial run is a function of the scenario and seed; an engine error
    or a timeout may be the machine (a busy disk, a starved lock holder), so it must happen twice.
    """
    unsure = [f for f in outcome.findings if f.check in (ERROR, TIMEOUT)]
    if not unsure:
        return list(outcome.findings), []
    again = run_spec(spec, settings, keep="never")
    gone = [f for f in unsure if again.finding(f.check) is None]
    return [f for f in outcome.findings if f not in gone], gone


def determinism_problem(spec: Scenario, first: Outcome, settings: Settings) -> Optional[str]:
    """Run `spec` again (serial) and compare its history with `first`'s: the first difference, or None."""
    again = run_spec(spec, settings, keep="never")
    return first_difference(first.history, again.history)


def shrink_failure(gen: Generated, first: Outcome, check: str, settings: Settings) -> Shrunk:
    """The smallest scenario the same check still fails on, with the same seed."""
    def still_fails(spec: Scenario) -> Optional[Outcome]:
        outcome = run_spec(spec, settings, keep="never")
        return outcome if outcome.finding(check) else None

    deadline = time.monotonic() + settings.shrink_budget_s
    return shrink(gen.doc, first, still_fails, max_runs=settings.shrink_runs, deadline=deadline)


def file_failure(gen: Generated, first: Outcome, finding: Finding, failure: Failure, settings: Settings) -> None:
    """Shrink, write and rerun alone: fills `failure.shrunk`, `.file` and `.reproduced`."""
    failure.shrunk = shrink_failure(gen, first, finding.check, settings)
    done = failure.shrunk.outcome.finding(finding.check) or finding
    failure.file = write_found(failure.shrunk, seed=gen.seed, check=finding.check, title=done.title,
                               message=done.message, rules=done.rules, out=settings.out,
                               explore_command=explore_command(gen.seed, settings))
    failure.reproduced = run_spec(failure.file.spec, settings, keep="never").finding(finding.check) is not None


# ---------------------------------------------------------------------------
# The campaign
# ---------------------------------------------------------------------------


@dataclass
class _State:
    settings: Settings
    summary: Summary
    progress: Progress
    started: float
    filed: set[str] = field(default_factory=set)   # checks already shrunk in this campaign

    def more(self, n: int) -> bool:
        s = self.settings
        if s.runs is not None and n >= s.runs:
            return False
        if s.budget_s is not None and self.summary.explore_s >= s.budget_s:
            return False
        return s.max_failures is None or self.summary.failing < s.max_failures


def _findings(gen: Generated, outcome: Outcome, state: _State) -> list[Finding]:
    findings, flaky = confirmed(gen.spec, outcome, state.settings)
    after = time.monotonic() - state.started
    for f in flaky:
        state.summary.flaky.append(Failure(gen.seed, f.check, f.title, f.message, after, outcome.run_dir))
        state.progress.note(f"seed {gen.seed}: {f.check} did not come back on a rerun (flaky): {f.message[:120]}")
    if state.settings.check_determinism and outcome.history:
        state.summary.determinism_checked += 1
        problem = determinism_problem(gen.spec, outcome, state.settings)
        if problem:
            findings.append(Finding(DETERMINISM, "determinism", problem))
    return findings


def _settle(gen: Generated, outcome: Outcome, findings: list[Finding], state: _State) -> None:
    """Record each failing check; shrink and file the first of a check not filed yet."""
    after = time.monotonic() - state.started
    for finding in findings:
        failure = Failure(gen.seed, finding.check, finding.title, finding.message, after, outcome.run_dir)
        state.summary.failures.append(failure)
        state.progress.note(f"seed {gen.seed}: {finding.check} fails: {finding.message.splitlines()[0][:160]}")
        if not state.settings.shrink or finding.check in state.filed or finding.check == DETERMINISM:
            continue
        state.filed.add(finding.check)
        state.progress.note(f"shrinking {finding.check} of seed {gen.seed} ...")
        file_failure(gen, outcome, finding, failure, state.settings)
        shrunk = failure.shrunk
        state.progress.note(f"{finding.check}: {shrunk.before} -> {shrunk.after} (processes, sessions, steps) "
                            f"in {shrunk.runs} runs: {failure.file.path}"
                            + ("" if failure.reproduced else " (DOES NOT REPRODUCE alone)"))


def run_campaign(settings: Settings, progress: Optional[Progress] = None,
                 on_run: Optional[Callable[[int, Outcome], None]] = None) -> Summary:
    """Explore from `settings.seed` on; see the module docstring."""
    started = time.monotonic()
    state = _State(settings, Summary(), progress or Progress(total=settings.runs, budget_s=settings.budget_s), started)
    n = 0
    while state.more(n):
        seed = settings.seed + n
        n += 1
        t0 = time.monotonic()
        gen = generated(seed, settings)
        outcome = run_spec(gen.spec, settings)
        findings = _findings(gen, outcome, state)
        state.summary.explore_s += time.monotonic() - t0
        state.summary.add(seed, outcome)
        state.summary.failing += bool(findings)
        if on_run is not None:
            on_run(seed, outcome)
        if findings:
            _settle(gen, outcome, findings, state)
        state.progress.update(state.summary.runs, state.summary.failing)
    state.progress.close()
    state.summary.wall_s = time.monotonic() - started
    return state.summary
