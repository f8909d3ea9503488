"""pytest plugin: every `scenarios/**/*.yaml` file becomes test items.

Registered as the `thatch_scenarios` pytest11 entry point (this module). The
parts: `items` (what a scenario file collects into, how an item runs and
fails), `tally` (the per-property table printed at the end), `hookspec`
(`pytest_sim_run_scenario`, the seam that runs one scenario; the
implementation here runs the real engine).

Options: `--sim-seed N` (override every scenario's seed), `--sim-repeat K`
(seeds N..N+K-1), `--sim-report always|failed|never` (copy the run directory
to reports/runs/<scenario>/ and write its run report), `--sim-timeout S`
(wall clock per run). ini `scenario_paths`: extra globs/directories
(relative to rootdir) whose YAML files are scenarios.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Optional

import pytest

from simulator.api import run_scenario
from simulator.pytest_plugin import hookspec
from simulator.pytest_plugin.items import ScenarioFile
from simulator.pytest_plugin.tally import PropertyTally
from simulator.result import RunResult
from simulator.scenario.model import Scenario


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("thatch-scenarios", "thatch chat scenarios")
    group.addoption("--sim-seed", type=int, default=None, metavar="N",
                    help="run every scenario with seed N instead of its own `seed:`")
    group.addoption("--sim-repeat", type=int, default=1, metavar="K",
                    help="run each scenario K times with seeds N, N+1, ... (items named name[seed=N])")
    group.addoption("--sim-report", choices=("always", "failed", "never"), default="failed",
                    help="when to keep the run directory under reports/runs/<scenario>/ (default: failed)")
    group.addoption("--sim-timeout", type=float, default=120.0, metavar="S",
                    help="wall-clock limit of one scenario run in seconds (default 120)")
    parser.addini("scenario_paths", type="linelist", default=[],
                  help="extra globs or directories (relative to rootdir) holding scenario YAML files")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: long-running scenario or test")
    config.addinivalue_line("markers", "race: exercises concurrent dispatch")
    # Under xdist the controller gets every worker's reports (with user_properties), so it tallies all runs.
    config.pluginmanager.register(PropertyTally(), "thatch-scenario-tally")


def _is_scenario_file(path: Path, config: pytest.Config) -> bool:
    if path.suffix not in (".yaml", ".yml"):
        return False
    try:
        rel = path.relative_to(config.rootpath)
    except ValueError:
        rel = path
    # `pytest scenarios/` without an ini file makes scenarios/ itself the rootdir.
    if "scenarios" in rel.parent.parts or config.rootpath.name == "scenarios":
        return True
    posix = rel.as_posix()
    for pattern in config.getini("scenario_paths"):
        pattern = pattern.strip().rstrip("/")
        if pattern and (fnmatch.fnmatch(posix, pattern) or posix.startswith(pattern + "/")):
            return True
    return False


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Optional[pytest.Collector]:
    if _is_scenario_file(file_path, parent.config):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(trylast=True)
def pytest_sim_run_scenario(spec: Scenario, run_dir: Path, seed: int, wall_timeout_s: float) -> RunResult:
    return run_scenario(spec, run_dir=run_dir, seed=seed, wall_timeout_s=wall_timeout_s)
