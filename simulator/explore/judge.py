"""Running one explored scenario and reading what it found.

A generated scenario claims nothing (no reach claims, no expectations), so
a run fails only on what the design promises always: a property P1-P10
that fails, an engine error (the run stopped), or the wall guard. A fault
step that never took effect (a crash point nothing reached) is counted,
not failed: the generator arms points it cannot promise are hit.

`Outcome` also carries what the campaign summary adds up: virtual time,
faults fired by kind, and which properties judged something in this run.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from simulator.api import run_scenario
from simulator.events import FAULT, FAULT_FIRED
from simulator.result import RunResult, Verdict
from simulator.scenario.model import PROPERTY_IDS, Scenario

ERROR = "error"      # the engine stopped (a harness died, the scenario asked the impossible)
TIMEOUT = "timeout"  # the wall guard fired
SHARED_MEMORY = "/dev/shm"           # memory-backed scratch for runs nobody keeps (`scratch_root`)
SCRATCH_ROOM_BYTES = 512 << 20       # the free room it needs to take runs (a run's files are a few MiB)


@dataclass(frozen=True)
class Finding:
    """One failing check of a run: a property id, `error` or `timeout`."""

    check: str
    title: str
    message: str
    rules: tuple[str, ...] = ()


@dataclass
class Outcome:
    """One run of one explored scenario."""

    seed: int
    findings: list[Finding]
    virtual_ms: int = 0
    dispatches: int = 0
    wall_s: float = 0.0
    faults_fired: Counter = field(default_factory=Counter)
    faults_armed: Counter = field(default_factory=Counter)
    judged: set[str] = field(default_factory=set)
    run_dir: Optional[Path] = None
    history: list[dict[str, Any]] = field(default_factory=list)
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def finding(self, check: str) -> Optional[Finding]:
        return next((f for f in self.findings if f.check == check), None)


def findings_of(result: RunResult) -> list[Finding]:
    """The property failures and the engine error of a run."""
    out = [Finding(v.check, v.title, v.message, tuple(v.rules)) for v in result.verdicts
           if v.check in PROPERTY_IDS and v.status == "fail"]
    if result.error:
        first = result.error.strip().splitlines()[0] if result.error.strip() else "engine error"
        out.append(Finding(ERROR, "engine error", first))
    return out


def judged_properties(result: RunResult) -> set[str]:
    """The properties that judged something in the run (not skipped; a count when the verdict has one)."""
    out = set()
    for v in result.verdicts:
        if v.check not in PROPERTY_IDS or v.status == "skipped":
            continue
        if getattr(v, "judged", None) == 0:
            continue
        out.add(v.check)
    return out


def _faults(result: RunResult, kind: str) -> Counter:
    """How many fault events of `kind` (armed or fired) the run recorded, per fault."""
    return Counter(e.fault for e in result.typed.of(kind))


def run_explored(spec: Scenario, *, seed: Optional[int] = None, work: Optional[Path] = None,
                 overrides: Optional[dict] = None, wall_timeout_s: float = 120.0, keep: str = "failed") -> Outcome:
    """Run `spec` in a fresh directory under `work` (`scratch_root()` when None) and judge it.

    `keep`: `always`, `failed` (default) or `never`: whether the run directory stays (a kept
    one moves out of memory-backed scratch to the system temp dir).
    """
    seed = spec.seed if seed is None else seed
    if work is not None:
        Path(work).mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix=f"{spec.name}-", dir=work if work is not None else scratch_root()))
    started = time.monotonic()
    try:
        result = run_scenario(spec, run_dir=run_dir, seed=seed, overrides=overrides, wall_timeout_s=wall_timeout_s)
    except Exception as exc:  # the wall guard (SimulationTimeout) or an engine bug before any history
        kind = TIMEOUT if type(exc).__name__ == "SimulationTimeout" else ERROR
        outcome = Outcome(seed, [Finding(kind, kind, str(exc).splitlines()[0] if str(exc) else kind)],
                          wall_s=time.monotonic() - started, run_dir=run_dir)
        return _keep(outcome, keep)
    outcome = Outcome(seed, findings_of(result), virtual_ms=result.virtual_ms, dispatches=result.dispatches,
                      wall_s=result.wall_s, faults_fired=_faults(result, FAULT_FIRED),
                      faults_armed=_faults(result, FAULT), judged=judged_properties(result),
                      run_dir=run_dir, history=result.history, verdicts=list(result.verdicts))
    return _keep(outcome, keep)


def _keep(outcome: Outcome, keep: str) -> Outcome:
    if keep == "never" or (keep == "failed" and outcome.ok):
        shutil.rmtree(outcome.run_dir, ignore_errors=True)
        outcome.run_dir = None
    elif outcome.run_dir.parent == Path(SHARED_MEMORY):
        # Kept for a person to read: out of memory, where a reboot or a full /dev/shm would take it.
        kept = Path(tempfile.mkdtemp(prefix=f"{outcome.run_dir.name}-"))
        shutil.copytree(outcome.run_dir, kept, dirs_exist_ok=True)
        shutil.rmtree(outcome.run_dir, ignore_errors=True)
        outcome.run_dir = kept
    return outcome



def scratch_root() -> Optional[str]:
    """Where a run's throwaway directory goes when no `work` is named: memory-backed `/dev/shm`
    when it is there, writable and roomy, and `TMPDIR` names no other place; else None (the
    system temp dir).

    Most exploration runs pass and are deleted at once; on disk their directories, the store's
    WAL and its checkpoints cost the run's processes file-system work (~5% of a campaign's
    wall time, measured) that nothing reads. SQLite's WAL and locks behave the same on tmpfs
    (D-speed-harness-7).
    """
    if os.environ.get("TMPDIR") or not os.path.isdir(SHARED_MEMORY) or not os.access(SHARED_MEMORY, os.W_OK | os.X_OK):
        return None
    try:
        room = os.statvfs(SHARED_MEMORY)
    except OSError:
        return None
    return SHARED_MEMORY if room.f_bavail * room.f_frsize >= SCRATCH_ROOM_BYTES else None
