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
from pathlib import Path
from typing import Callable, Optional

from simulator.checks import check_all
from simulator.checks.faults import fault_verdicts
from simulator.engine.orchestrator import Orchestrator, SystemUnderTest
from simulator.result import RunResult
from simulator.scenario.model import Scenario
from simulator.sut import CORE, Sut


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
                 engine: Optional[str] = None, sut: Sut = CORE) -> RunResult:
    """Run `spec` in `run_dir` (created if needed) and return its verdicts and history.

    `seed` overrides `spec.seed`; `overrides` are test injections passed to
    every HarnessContext (`{"store": ..., "poller": ..., "harness": ...}`);
    `engine` is "lockstep" or "windowed" (default: $THATCH_SIM_ENGINE, else windowed); `sut` the
    system under test (simulator.sut: thatch_core by default, or a thatch checkout).
    Raises `SimulationTimeout` when the wall guard fires (children killed).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    orch = Orchestrator(spec, run_dir, code_under_test(sut), seed=seed, wall_timeout_s=wall_timeout_s, overrides=overrides,
                        sample_interval_ms=sample_interval_ms, progress=progress, engine=engine)
    outcome = orch.run()
    wall = time.monotonic() - started
    error = outcome.error
    if check:
        try:
            verdicts = check_all(spec, outcome.history, orch.world.db_path, outcome.run_info)
        except Exception:
            # Keep the run (history, db) for the post-mortem; the broken checker is the error.
            verdicts = fault_verdicts(spec, outcome.history)
            error = (error + "\n" if error else "") + "property checkers failed:\n" + traceback.format_exc()
    else:
        verdicts = fault_verdicts(spec, outcome.history)
    return RunResult(
        scenario=spec.name, seed=orch.seed, run_dir=run_dir, db_path=orch.world.db_path,
        history_path=run_dir / "history.jsonl", history=outcome.history, verdicts=verdicts, wall_s=wall,
        virtual_ms=outcome.virtual_ms, dispatches=outcome.dispatches, error=error, sut=sut.name)
