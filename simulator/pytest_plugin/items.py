"""What a scenario file collects into: one ScenarioItem per seed, or one InvalidScenarioItem.

Node ids are `<file>::<name>` or `<file>::<name>[seed=N]`, built only from the
file path, the scenario name and the seed, so every xdist worker collects the
same ids (D-plugin-3). A malformed file does not stop the session (pytest
interrupts the whole run on any collection error): it collects as one
`<file>::load-error` item that errors at setup with the loader's `file:line`
message (D-plugin-1).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Optional

import pytest

from simulator.report.publish import publish_run
from simulator.report.text import format_failure, rerun_commands
from simulator.result import RunResult
from simulator.scenario.loader import ScenarioError, load_file
from simulator.scenario.model import Scenario
from simulator.pytest_plugin.tally import VERDICTS_PROPERTY, encode_verdicts


def shown_path(path: Path, config: pytest.Config) -> str:
    """The file as typed from where pytest was invoked: messages and rerun commands must work pasted there."""
    try:
        return path.relative_to(config.invocation_params.dir).as_posix()
    except ValueError:
        return str(path)


class ScenarioFile(pytest.File):
    """One scenario YAML file: one item per seed, or one load-error item."""

    def collect(self):
        file = shown_path(self.path, self.config)
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
        try:
            result = self.config.hook.pytest_sim_run_scenario(
                spec=self.spec, run_dir=self._run_dir(), seed=self.seed,
                wall_timeout_s=self.config.getoption("sim_timeout"))
        except Exception:
            # The engine itself broke: the traceback is pytest's, the rerun line is ours.
            self.add_report_section("call", "rerun", f"{self.rerun}\n{self.rerun_cli}")
            raise
        self.user_properties.append((VERDICTS_PROPERTY, encode_verdicts(result.verdicts)))
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
        return self.path, None, f"invalid scenario file {shown_path(self.path, self.config)}"
