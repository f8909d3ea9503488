"""The hooks the scenario plugin adds to pytest (registered in `pytest_addhooks`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.result import RunResult
from simulator.scenario.model import Scenario


@pytest.hookspec(firstresult=True)
def pytest_sim_run_scenario(spec: Scenario, run_dir: Path, seed: int, wall_timeout_s: float) -> RunResult:
    """Run one scenario item: `spec` with `seed` in the empty directory `run_dir`.

    The plugin's own implementation (trylast) runs the real engine,
    `simulator.api.run_scenario`. A conftest or plugin that returns a
    RunResult stands in for it, e.g. to test the plugin without simulating.
    An exception raised here is the item's failure, with the rerun line added.
    """
