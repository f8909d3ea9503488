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

import json
import shlex
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from simulator.sut import sut_from_env
from simulator.explore.determinism import first_difference
from simulator.explore.found import FoundFile, write_found
from simulator.explore.generator import Generated, generate
from simulator.explore.guided import CORPUS_FILE, COVERAGE_CSV, Guide, swarm_json, timeline_csv
from simulator.explore.judge import ERROR, TIMEOUT, Finding, Outcome, run_explored
from simulator.explore.progress import Progress
from simulator.explore.shrink import Shrunk, shrink
from simulator.explore.swarm import DEFAULT, SIZES, Size, Swarm
from simulator.scenario.model import PROPERTY_IDS, Scenario

DETERMINISM = "determinism"

# The least wall time a shrink candidate is allowed (a loaded machine runs a small world in seconds).
SHRINK_WALL_FLOOR_S = 20.0


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
    determinism_every: int = 1                 # with check_determinism: every Nth seed of the campaign, from its first
    wall_timeout_s: float = 120.0
    work: Optional[Path] = None                # where run directories go (a temp dir when None)
    guided: bool = False                       # draw feature sets from the coverage corpus (guided.py)
    measure: bool = False                      # measure thatch_core's branches per run (guided implies it)
    corpus: Optional[Path] = None              # the corpus file (default: out/corpus.jsonl)
    swarm: Optional[Swarm] = None              # every run's feature set, given (a guided run's rerun)
    include: tuple[str, ...] = ()              # properties judged on any design (`--include-properties`)
    interleave: bool = False                   # draw interleavings into serial worlds (`--interleave`)
    design: Optional[str] = None               # every world's named design (`--design`; None: the seed's own)

    @property
    def measured(self) -> bool:
        return self.guided or self.measure

    @property
    def corpus_path(self) -> Path:
        return self.corpus if self.corpus is not None else self.out / CORPUS_FILE


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
    coverage: Optional[dict] = None                      # guided.Guide.report() of a measured campaign

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
            **({"coverage": self.coverage} if self.coverage is not None else {}),
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


def explore_command(seed: int, settings: Settings, swarm: Optional[Swarm] = None) -> str:
    """The command that regenerates and reruns seed `seed` exactly (`swarm`: a guided run's feature set)."""
    parts = [f"python -m simulator explore --seed {seed} --runs 1"]
    swarm = swarm or settings.swarm
    if swarm is not None:
        parts.append(f"--swarm {shlex.quote(json.dumps(swarm_json(swarm), separators=(',', ':')))}")
    if settings.size != DEFAULT:
        parts.append(f"--size {size_name(settings.size)}")
    if settings.dispatch:
        parts.append(f"--dispatch {settings.dispatch}")
    if settings.overrides_ref:
        parts.append(f"--overrides {settings.overrides_ref}")
    if settings.include:
        parts.append(f"--include-properties {','.join(settings.include)}")
    if settings.interleave:
        parts.append("--interleave")
    sut = sut_from_env()
    if not sut.is_core:
        parts.append(f"--sut {shlex.quote(sut.name)}")
    if settings.design:
        parts.append(f"--design {settings.design}")
    return " ".join(parts)


# ---------------------------------------------------------------------------
# One seed
# ---------------------------------------------------------------------------


def checks_determinism(seed: int, settings: Settings) -> bool:
    """Is `seed` run twice (in serial dispatch) and its histories compared?"""
    return settings.check_determinism and (seed - settings.seed) % max(1, settings.determinism_every) == 0


def generated(seed: int, settings: Settings, swarm: Optional[Swarm] = None) -> Generated:
    dispatch = "serial" if checks_determinism(seed, settings) else settings.dispatch
    return generate(seed, settings.size, dispatch=dispatch, swarm=swarm or settings.swarm, include=settings.include,
                    interleave=settings.interleave, design=settings.design)


def run_spec(spec: Scenario, settings: Settings, keep: str = "failed") -> Outcome:
    return run_explored(spec, work=settings.work, overrides=settings.overrides,
                        wall_timeout_s=settings.wall_timeout_s, keep=keep)


def guide_of(settings: Settings, *, write: bool = True) -> Optional[Guide]:
    """The campaign's guide when it measures coverage (`write`: it appends to the corpus file)."""
    if not settings.measured:
        return None
    return Guide(guided=settings.guided, corpus_path=settings.corpus_path, write=write)


def run_seed(seed: int, settings: Settings, guide: Optional[Guide]) -> tuple[Generated, Outcome]:
    """Generate seed `seed` (its features from the guide's corpus when guided) and run it (measured)."""
    dispatch = "serial" if checks_determinism(seed, settings) else settings.dispatch
    gen = generated(seed, settings, guide.features(seed, dispatch) if guide is not None else None)
    if guide is None:
        return gen, run_spec(gen.spec, settings)
    try:
        cost = len(gen.doc.get("processes", ())) + len(gen.doc.get("steps", ()))
        outcome, _ = guide.run(seed, gen.swarm, lambda: run_spec(gen.spec, settings), cost)
    except RuntimeError as exc:  # the measured process itself failed: the run's engine error
        outcome = Outcome(seed, [Finding(ERROR, "engine error", str(exc).splitlines()[0])])
    return gen, outcome


def write_coverage(guide: Guide, settings: Settings) -> dict:
    """The coverage report of a measured campaign; its timeline also as out/coverage.csv."""
    report = guide.report()
    settings.out.mkdir(parents=True, exist_ok=True)
    path = settings.out / COVERAGE_CSV
    path.write_text(timeline_csv(report["timeline"]), encoding="utf-8")
    report["csv"] = str(path)
    return report


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
    # A simpler candidate should not run much longer than the failure it shrinks: dropping a
    # machine sleep of a week turns it into a week of polls. Such a candidate is cut off early
    # and counts as not reproducing (unless the failure is itself a timeout).
    wall = settings.wall_timeout_s if check == TIMEOUT else min(settings.wall_timeout_s,
                                                                max(SHRINK_WALL_FLOOR_S, 5 * first.wall_s))

    def still_fails(spec: Scenario) -> Optional[Outcome]:
        outcome = run_explored(spec, work=settings.work, overrides=settings.overrides, wall_timeout_s=wall,
                               keep="never")
        return outcome if outcome.finding(check) else None

    deadline = time.monotonic() + settings.shrink_budget_s
    return shrink(gen.doc, first, still_fails, max_runs=settings.shrink_runs, deadline=deadline)


def file_failure(gen: Generated, first: Outcome, finding: Finding, failure: Failure, settings: Settings,
                 stage: Optional[Path] = None) -> None:
    """Shrink, write and rerun alone: fills `failure.shrunk`, `.file` and `.reproduced`.

    `stage`: write the file there instead, meant for `settings.out` (the pytest controller moves it).
    """
    failure.shrunk = shrink_failure(gen, first, finding.check, settings)
    done = failure.shrunk.outcome.finding(finding.check) or finding
    failure.file = write_found(failure.shrunk, seed=gen.seed, check=finding.check, title=done.title,
                               message=done.message, rules=done.rules, out=stage or settings.out,
                               lives_in=settings.out if stage is not None else None,
                               explore_command=explore_command(gen.seed, settings,
                                                               gen.swarm if gen.forced else None))
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
    if checks_determinism(gen.seed, state.settings) and outcome.history:
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
    guide = guide_of(settings)
    n = 0
    while state.more(n):
        seed = settings.seed + n
        n += 1
        t0 = time.monotonic()
        gen, outcome = run_seed(seed, settings, guide)
        findings = _findings(gen, outcome, state)
        state.summary.explore_s += time.monotonic() - t0
        state.summary.add(seed, outcome)
        if guide is not None:
            guide.record(state.summary.runs, state.summary.explore_s)
        state.summary.failing += bool(findings)
        if on_run is not None:
            on_run(seed, outcome)
        if findings:
            _settle(gen, outcome, findings, state)
        state.progress.update(state.summary.runs, state.summary.failing)
    state.progress.close()
    state.summary.wall_s = time.monotonic() - started
    if guide is not None:
        state.summary.coverage = write_coverage(guide, settings)
    return state.summary


def merge_summaries(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Campaign summaries (as JSON) of disjoint seed ranges, e.g. CI shards, as one summary."""
    def total(key: str) -> float:
        return sum(p.get(key) or 0 for p in parts)

    def counted(key: str) -> dict[str, int]:
        c: Counter = Counter()
        for p in parts:
            c.update(p.get(key) or {})
        return dict(c)

    firsts = [p["seeds"][0] for p in parts if p.get("seeds") and p["seeds"][0] is not None]
    lasts = [p["seeds"][1] for p in parts if p.get("seeds") and p["seeds"][1] is not None]
    judged = counted("judged")
    explore_s = total("explore_s")
    fails = [p["first_failure_s"] for p in parts if p.get("first_failure_s") is not None]
    return {
        "parts": len(parts), "runs": int(total("runs")), "failing_runs": int(total("failing_runs")),
        "seeds": [min(firsts, default=None), max(lasts, default=None)],
        "virtual_hours": round(total("virtual_hours"), 2), "explore_s": round(explore_s, 1),
        "wall_s": round(max((p.get("wall_s") or 0 for p in parts), default=0), 1),
        "runs_per_minute": round(total("runs") / explore_s * 60, 1) if explore_s else None,
        "faults_armed": counted("faults_armed"), "faults_fired": counted("faults_fired"),
        "judged": {p: judged.get(p, 0) for p in PROPERTY_IDS},
        "never_judged": [p for p in PROPERTY_IDS if not judged.get(p)],
        "first_failure_s": min(fails, default=None), "determinism_checked": int(total("determinism_checked")),
        "failures": [f for p in parts for f in p.get("failures") or []],
        "flaky": [f for p in parts for f in p.get("flaky") or []],
    }
