"""pytest plugin: every `scenarios/**/*.yaml` file becomes test items.

Registered as the `thatch_scenarios` pytest11 entry point. One ScenarioItem
per scenario (per seed with `--sim-repeat`), node id `<file>::<name>` or
`<file>::<name>[seed=N]`: built only from the file path, the scenario name and
the seed, so every xdist worker collects the same ids.

A malformed file does not stop the session (pytest interrupts the whole run
on any collection error): it collects as one `<file>::load-error` item that
errors at setup with the loader's `file:line` message (D-plugin-1).

Options: `--sim-seed N` (override every scenario's seed), `--sim-repeat K`
(seeds N..N+K-1), `--sim-report always|failed|never` (copy the run directory
to reports/runs/<scenario>/ and call simulator.report.html.write_run_report if
it exists), `--sim-timeout S` (wall clock per run). ini `scenario_paths`:
extra globs/directories (relative to rootdir) whose YAML files are scenarios.
"""

from __future__ import annotations

import fnmatch
import importlib
import json
import tempfile
from pathlib import Path
from typing import Any, Optional

import pytest

from simulator.scenario.loader import ScenarioError, load_file
from simulator.result import RunResult
from simulator.report.publish import publish_run
from simulator.scenario.model import PROPERTY_IDS, Scenario
from simulator.report.text import format_failure, rerun_commands

VERDICTS_PROPERTY = "sim_verdicts"


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


def _shown_path(path: Path, config: pytest.Config) -> str:
    """The file as typed from where pytest was invoked: messages and rerun commands must work pasted there."""
    try:
        return path.relative_to(config.invocation_params.dir).as_posix()
    except ValueError:
        return str(path)


class ScenarioFile(pytest.File):
    """One scenario YAML file: one item per seed, or one load-error item."""

    def collect(self):
        file = _shown_path(self.path, self.config)
        try:
            loaded = load_file(self.path, display=file)
        except ScenarioError as exc:
            yield InvalidScenarioItem.from_parent(self, name="load-error", error=exc)
            return
        spec = loaded.spec
        base = self.config.getoption("sim_seed")
        base = spec.seed if base is None else base
        repeat = max(1, self.config.getoption("sim_repeat"))
        for seed in range(base, base + repeat):
            name = spec.name if repeat == 1 else f"{spec.name}[seed={seed}]"
            item = ScenarioItem.from_parent(self, name=name, spec=spec, seed=seed, file=file)
            for marker in spec.markers:
                item.add_marker(marker)
            yield item


class ScenarioFailed(Exception):
    """A run whose verdicts are not all ok (or whose engine stopped)."""

    def __init__(self, result: RunResult, report_dir: Optional[Path]) -> None:
        checks = ", ".join(v.check for v in result.failures()) or "engine error"
        super().__init__(f"{checks} (seed {result.seed})")
        self.result, self.report_dir = result, report_dir


class ScenarioItem(pytest.Item):
    """One run of one scenario with one seed, in its own run directory."""

    def __init__(self, *, spec: Scenario, seed: int, file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec, self.seed, self.file = spec, seed, file
        self.rerun, self.rerun_cli = rerun_commands(file, spec.name, seed)
        self.user_properties += [("seed", str(seed)), ("rerun", self.rerun), ("scenario_file", file)]

    def _run_dir(self) -> Path:
        factory = getattr(self.config, "_tmp_path_factory", None)
        slug = self.name.replace("[", "-").replace("]", "").replace("=", "")
        if factory is not None:
            return factory.mktemp(f"run-{slug}", numbered=True)
        return Path(tempfile.mkdtemp(prefix=f"run-{slug}-"))

    def runtest(self) -> None:
        # Looked up per run (not at import) so a conftest can stand in for the engine.
        api = importlib.import_module("simulator.api")
        try:
            result = api.run_scenario(self.spec, run_dir=self._run_dir(), seed=self.seed,
                                      wall_timeout_s=self.config.getoption("sim_timeout"))
        except Exception:
            # The engine itself broke: the traceback is pytest's, the rerun line is ours.
            self.add_report_section("call", "rerun", f"{self.rerun}\n{self.rerun_cli}")
            raise
        statuses = {v.check: [v.status, v.title] for v in result.verdicts}
        self.user_properties.append((VERDICTS_PROPERTY, json.dumps(statuses, sort_keys=True)))
        report_dir = self._publish(result)
        if not result.ok:
            raise ScenarioFailed(result, report_dir)

    def _publish(self, result: RunResult) -> Optional[Path]:
        mode = self.config.getoption("sim_report")
        if mode == "never" or (mode == "failed" and result.ok):
            return None
        repeat = self.config.getoption("sim_repeat") > 1
        out = self.config.rootpath / "reports" / "runs" / (f"{self.spec.name}.seed-{self.seed}" if repeat else self.spec.name)
        problem = publish_run(result, out)
        if problem:
            self.add_report_section("call", "report", problem)
        self.user_properties.append(("run_report", str(out)))
        return out

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ScenarioFailed):
            failed = excinfo.value
            report = str(failed.report_dir) if failed.report_dir else None
            return format_failure(failed.result, file=self.file, name=self.spec.name, report_dir=report)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"scenario {self.spec.name} ({self.file}, seed {self.seed})"


class InvalidScenarioItem(pytest.Item):
    """Stands for a scenario file that does not load: errors at setup with the file:line message."""

    def __init__(self, *, error: ScenarioError, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def setup(self) -> None:
        raise self.error

    def runtest(self) -> None:  # never reached: setup raises
        raise self.error

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ScenarioError):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    # pytest formats setup errors with _repr_failure_py, not repr_failure:
    # the loader's message is the whole story, a traceback would bury it.
    def _repr_failure_py(self, excinfo, style=None):
        if isinstance(excinfo.value, ScenarioError):
            return str(excinfo.value)
        return super()._repr_failure_py(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"invalid scenario file {_shown_path(self.path, self.config)}"


# ---------------------------------------------------------------------------
# Per-property tally (works under xdist: verdicts travel in user_properties)
# ---------------------------------------------------------------------------


class PropertyTally:
    """property (and reach claim) -> runs checked, passed, failed, not reached; printed at the end."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        props = dict(report.user_properties)
        if VERDICTS_PROPERTY not in props:
            return
        for check, (status, title) in json.loads(props[VERDICTS_PROPERTY]).items():
            if check not in PROPERTY_IDS and not check.startswith("reach:"):
                continue  # point expectations and faults are per scenario: no sense in a tally
            # reach claims' titles are sentences: their id says enough in a table
            label = check if check.startswith("reach:") else f"{check} {title}"
            row = self.rows.setdefault(check, {"label": label, "checked": 0, "passed": 0, "failed": 0, "not reached": 0})
            if status == "skipped":
                continue
            row["checked"] += 1
            row[{"pass": "passed", "not-reached": "not reached"}.get(status, "failed")] += 1

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.rows:
            return
        tr = terminalreporter
        tr.write_sep("=", "scenario checks")
        width = max(len(row["label"]) for row in self.rows.values())
        tr.write_line(f"{'check':<{width}}  checked  passed  failed  not reached")
        for check in sorted(self.rows, key=_order):
            row = self.rows[check]
            tr.write_line(f"{row['label']:<{width}}  {row['checked']:>7}  {row['passed']:>6}  {row['failed']:>6}  {row['not reached']:>11}")


def _order(check: str) -> tuple:
    if check in PROPERTY_IDS:
        return (0, PROPERTY_IDS.index(check), check)
    return (1, 0, check)
