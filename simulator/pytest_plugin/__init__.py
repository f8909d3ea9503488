"""pytest plugin: scenario YAML files become test items.

Registered as the `thatch_scenarios` pytest11 entry point (this module, thin
hooks only). The parts: `collection` (which YAML files are scenarios: those
with the scenario schema comment, those under ini `sim_scenario_paths`, and
any file named on the command line; under ini `sim_scenario_roots` every
YAML file, so none drops out silently), `settings` (the `--sim-*` options and
their `sim_*` ini defaults), `items` (what a scenario file collects into,
how an item runs, fails and is reported), `tally` (the per-property table
printed at the end), `hookspec` (`pytest_sim_run_scenario`, the seam that
runs one scenario; the implementation here runs the real engine).

Options: `--sim-seed N` (override every scenario's seed), `--sim-repeat K`
(seeds N..N+K-1, items `name[seedN]`), `--sim-report always|failed|never`
(keep the run with its HTML report), `--sim-report-dir DIR` (where kept runs
go; default reports/runs under the rootdir), `--sim-timeout S` (wall clock
per run). The ini keys `sim_report`, `sim_report_dir` and `sim_timeout` set
a project's defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from simulator.api import run_scenario
from simulator.pytest_plugin import hookspec, settings
from simulator.pytest_plugin.collection import NAMED_FILES, is_scenario_file, is_under_root, named_files
from simulator.pytest_plugin.items import InvalidScenarioItem, ScenarioFile, ScenarioItem, dress_failure
from simulator.pytest_plugin.tally import PropertyTally
from simulator.result import RunResult
from simulator.scenario.model import KNOWN_MARKERS, Scenario

# `--sim-explore N`: generated scenarios as items (a plugin module of its own).
pytest_plugins = ["simulator.pytest_plugin.explore"]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspec)


def pytest_addoption(parser: pytest.Parser) -> None:
    settings.add_options(parser)


def pytest_configure(config: pytest.Config) -> None:
    # The scenario language's markers, registered here and nowhere else (D-plugin-7).
    for name, meaning in KNOWN_MARKERS:
        config.addinivalue_line("markers", f"{name}: {meaning}")
    config.stash[settings.SETTINGS] = settings.resolve(config)
    config.stash[NAMED_FILES] = named_files(config)
    # Under xdist the controller gets every worker's reports (with their attributes), so it tallies all runs.
    verdicts_json = config.getoption("sim_verdicts_json")
    tally = PropertyTally(Path(verdicts_json) if verdicts_json and not hasattr(config, "workerinput") else None)
    config.pluginmanager.register(tally, "thatch-scenario-tally")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> Optional[pytest.Collector]:
    if is_scenario_file(file_path, parent.config) or is_under_root(file_path, parent.config):
        return ScenarioFile.from_parent(parent, path=file_path)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if isinstance(item, (ScenarioItem, InvalidScenarioItem)):
        item.annotate(report, call)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    dress_failure(report)


@pytest.hookimpl(trylast=True)
def pytest_sim_run_scenario(spec: Scenario, run_dir: Path, seed: int, wall_timeout_s: float) -> RunResult:
    return run_scenario(spec, run_dir=run_dir, seed=seed, wall_timeout_s=wall_timeout_s)
