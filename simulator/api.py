"""`run_scenario`: run one scenario end to end and judge it.

The one entry point the pytest plugin, the bench and the tests use. It runs
the orchestrator, then hands the merged history and the final database to
`simulator.checks.check_all`, which judges properties, reach claims,
expectations and one verdict per fault step.
"""

from __future__ import annotations

import importlib
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional

from simulator.checks import check_all
from simulator.checks.faults import fault_verdicts
from simulator.engine.orchestrator import Orchestrator, SystemUnderTest
from simulator.engine.world import DB_NAME
from simulator.history import History
from simulator.result import SUT_CHECK, RunResult, Verdict
from simulator.scenario.model import Scenario
from simulator.scenario.policies import uses_policies
from simulator.sut import CORE, Sut, sut_from_env
from simulator.sut.capabilities import Capabilities, capabilities_of, not_applicable, scenario_not_applicable


# The one place the simulator binds the code under test: the fake hosts drive thatch_core.
# Named, and loaded when a run starts: importing the simulator (lint, matrix, collection, the
# checkers, the explore generator) loads no thatch_core code (D-layout-3).
HARNESS = "simulator.harness"


def code_under_test(sut: Sut = CORE) -> SystemUnderTest:
    """The fake hosts and the database they share, loaded on first use, driving `sut`
    (thatch_core, or a checkout each harness process serves by a bun sidecar)."""
    harness = importlib.import_module(HARNESS)
    support = importlib.import_module(f"{HARNESS}.support")
    return SystemUnderTest(make_harness=harness.make_harness, create_database=support.create_database, sut=sut)


def run_scenario(spec: Scenario, *, run_dir: Path, seed: Optional[int] = None, wall_timeout_s: float = 120,
                 overrides: Optional[dict] = None, sample_interval_ms: Optional[int] = None,
                 progress: Optional[Callable[[int, int], None]] = None, check: bool = True,
                 engine: Optional[str] = None, sut: Optional[Sut] = None) -> RunResult:
    """Run `spec` in `run_dir` (created if needed) and return its verdicts and history.

    `seed` overrides `spec.seed`; `overrides` are test injections passed to
    every HarnessContext (`{"store": ..., "poller": ..., "harness": ...}`);
    `engine` is "lockstep" or "windowed" (default: $THATCH_SIM_ENGINE, else windowed); `sut` the
    system under test (simulator.sut: default $THATCH_SIM_SUT, else thatch_core; or a thatch checkout).
    Raises `SimulationTimeout` when the wall guard fires (children killed).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    sut = sut if sut is not None else sut_from_env()
    caps = capabilities_of(sut)
    reason = scenario_not_applicable(spec.rules, uses_policies(spec), caps)
    if reason is not None:
        return not_applicable_result(spec, run_dir, sut, reason, seed)
    started = time.monotonic()
    orch = Orchestrator(spec, run_dir, code_under_test(sut), seed=seed, wall_timeout_s=wall_timeout_s,
                        overrides=overrides, sample_interval_ms=sample_interval_ms, progress=progress, engine=engine)
    outcome = orch.run()
    wall = time.monotonic() - started
    error = outcome.error
    records = History.decode(outcome.history)  # the one decoding of this run's events, read by every judge
    if check:
        try:
            verdicts = check_all(spec, records, orch.world.db_path, outcome.run_info)
        except Exception:
            # Keep the run (history, db) for the post-mortem; the broken checker is the error.
            verdicts = fault_verdicts(spec, records)
            error = (error + "\n" if error else "") + "property checkers failed:\n" + traceback.format_exc()
    else:
        verdicts = fault_verdicts(spec, records)
    verdicts = judged_on(caps, verdicts)
    return RunResult(
        scenario=spec.name, seed=orch.seed, run_dir=run_dir, db_path=orch.world.db_path,
        history_path=run_dir / "history.jsonl", history=outcome.history, records=records, verdicts=verdicts,
        wall_s=wall,
        virtual_ms=outcome.virtual_ms, dispatches=outcome.dispatches, error=error, sut=sut.name)


def judged_on(caps: Capabilities, verdicts: list[Verdict]) -> list[Verdict]:
    """A property whose promise needs a behaviour the system lacks is not applicable there, whatever it found."""
    if caps.core:
        return verdicts
    out = []
    for v in verdicts:
        lacking = caps.missing_for_property(v.check)
        if lacking is not None and v.status != "not-applicable":
            v = replace(v, status="not-applicable", message=not_applicable(f"was: {v.status}, {v.message}", lacking))
        out.append(v)
    return out


def not_applicable_result(spec: Scenario, run_dir: Path, sut: Sut, reason: str, seed: Optional[int]) -> RunResult:
    """A scenario the system cannot be judged on: not run, one verdict saying why."""
    verdict = Verdict(check=SUT_CHECK, title="system under test", status="not-applicable", message=reason)
    return RunResult(scenario=spec.name, seed=spec.seed if seed is None else seed, run_dir=run_dir,
                     db_path=run_dir / DB_NAME, history_path=run_dir / "history.jsonl", history=[],
                     verdicts=[verdict], sut=sut.name)
