"""`run_scenario`: run one scenario end to end and judge it.

The one entry point the pytest plugin, the bench and the tests use. It runs
the orchestrator, then hands the merged history and the final database to
`simulator.checks.properties.check_all` (imported lazily: the checkers are optional
while they are being written) and adds one verdict per fault step.
"""

from __future__ import annotations

import importlib
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Optional

from simulator.engine.orchestrator import Orchestrator, Outcome
from simulator.result import RunResult, Verdict
from simulator.scenario.model import Scenario, format_duration


def run_scenario(spec: Scenario, *, run_dir: Path, seed: Optional[int] = None, wall_timeout_s: float = 120,
                 overrides: Optional[dict] = None, sample_interval_ms: Optional[int] = None,
                 progress: Optional[Callable[[int, int], None]] = None, check: bool = True) -> RunResult:
    """Run `spec` in `run_dir` (created if needed) and return its verdicts and history.

    `seed` overrides `spec.seed`; `overrides` are test injections passed to
    every HarnessContext (`{"store": ..., "poller": ..., "harness": ...}`).
    Raises `SimulationTimeout` when the wall guard fires (children killed).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    orch = Orchestrator(spec, run_dir, seed=seed, wall_timeout_s=wall_timeout_s, overrides=overrides,
                        sample_interval_ms=sample_interval_ms, progress=progress)
    outcome = orch.run()
    wall = time.monotonic() - started
    verdicts = fault_verdicts(spec, outcome)
    error = outcome.error
    if check:
        checker = _checker()
        if checker is not None:
            try:
                checked = list(checker(spec, outcome.history, orch.world.db_path, outcome.run_info))
            except Exception:
                # Keep the run (history, db) for the post-mortem; the broken checker is the error.
                checked = []
                error = (error + "\n" if error else "") + "property checkers failed:\n" + traceback.format_exc()
            # The checkers may judge faults themselves; theirs win, ours fill the gaps.
            have = {v.check for v in checked}
            verdicts = checked + [v for v in verdicts if v.check not in have]
    return RunResult(
        scenario=spec.name, seed=orch.seed, run_dir=run_dir, db_path=orch.world.db_path,
        history_path=run_dir / "history.jsonl", history=outcome.history, verdicts=verdicts, wall_s=wall,
        virtual_ms=outcome.virtual_ms, dispatches=outcome.dispatches, error=error)


def _checker() -> Optional[Callable[..., Any]]:
    try:
        module = importlib.import_module("simulator.checks.properties")
    except ModuleNotFoundError as err:
        if err.name != "simulator.checks.properties":
            raise
        return None
    return getattr(module, "check_all", None)


def fault_verdicts(spec: Scenario, outcome: Outcome) -> list[Verdict]:
    """One verdict per fault step: pass when it took effect, not-reached when it never did."""
    out = []
    for idx, f in sorted(outcome.faults.items()):
        step = spec.steps[idx]
        where = f"step {idx} ({step.name + ', ' if step.name else ''}{f.fault} at {format_duration(step.at)})"
        if f.fired:
            out.append(Verdict(f"fault#{idx}", f"{f.fault} fault", "pass", f"{where} took effect: {f.detail}"))
        else:
            out.append(Verdict(f"fault#{idx}", f"{f.fault} fault", "not-reached",
                               f"{where} never took effect{_why(f.fault)}"))
    return out


def _why(fault: str) -> str:
    return {
        "crash": ": no statement matched the crash point while the process ran",
        "kill": ": the process was not running",
        "lock": ": no store call met the held lock",
        "fork": ": the session's host was not running or refused the fork",
        "resume": ": the resuming process did not start",
        "restart": ": the daemon or its replacement did not start",
    }.get(fault, "")
