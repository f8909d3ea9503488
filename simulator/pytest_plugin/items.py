"""What a scenario file collects into: one ScenarioItem per seed, or one InvalidScenarioItem.

Node ids are `<file>::<name>` or `<file>::<name>[seedN]`, built only from the
file path, the scenario name and the seed, so every xdist worker collects the
same ids (D-plugin-3). A malformed file does not stop the session (pytest
interrupts the whole run on any collection error): it collects as one
`<file>::load-error` item that errors at setup with the loader's `file:line`
message (D-plugin-1).

A run happens in a fresh directory under the system temp dir: removed when
the run passes, kept and named in the failure when it fails (D-plugin-9).
What pytest reports about an item is annotated in `pytest_runtest_makereport`:
the run's verdicts travel as a report attribute (for the tally, across xdist),
and a failure carries a one-line headline, its first failing verdict, which
pytest's short summary and junit's failure message show (D-plugin-10). An
item's location is its file at the `name:` line; a run's verdicts get the
line of the step or claim each judges, which the story and the crash
location (`--tb=line`) name as `file:line` (D-plugin-12).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pytest

from simulator.pytest_plugin.collection import is_scenario_file, missing_comment_problem
from simulator.pytest_plugin.settings import SETTINGS, Settings
from simulator.pytest_plugin.tally import VERDICTS_ATTR, encode_verdicts
from simulator.report.publish import publish_run
from simulator.report.text import format_failure, rerun_commands, verdict_heading
from simulator.result import RunResult
from simulator.scenario.loader import ScenarioError, ScenarioSyntaxError, exclusion_reason, load_file
from simulator.scenario.model import PROPERTY_IDS, AllExcept
from simulator.scenario.positions import LoadedScenario, place_verdicts

HEADLINE_ATTR = "sim_headline"
CRASH_LINE_ATTR = "sim_crash_line"


def shown_path(path: Path, config: pytest.Config) -> str:
    """The file as typed from where pytest was invoked: messages and rerun commands must work pasted there."""
    try:
        return path.relative_to(config.invocation_params.dir).as_posix()
    except ValueError:
        return str(path)


class ScenarioFile(pytest.File):
    """One scenario YAML file: one item per seed, or one load-error item; under a scenario root, one
    missing-schema-comment item (a file that says nothing) or one not-a-scenario item (the exclusion mark)."""

    def collect(self):
        file = shown_path(self.path, self.config)
        reason = exclusion_reason(self.path)
        if reason is not None:
            yield ExcludedFileItem.from_parent(self, name="not-a-scenario", reason=f"not a scenario: {reason}")
            return
        if not is_scenario_file(self.path, self.config):
            problem, fix = missing_comment_problem(self.path)
            error = ScenarioSyntaxError(problem, file=file, line=1, hint=fix)
            yield InvalidScenarioItem.from_parent(self, name="missing-schema-comment", error=error)
            return
        try:
            loaded = load_file(self.path, display=file)
        except ScenarioError as exc:
            yield InvalidScenarioItem.from_parent(self, name="load-error", error=exc)
            return
        except Exception as exc:  # noqa: BLE001 - one file's failure never stops the session (D-loader-8)
            error = ScenarioSyntaxError(f"cannot be loaded ({type(exc).__name__}: {exc})", file=file, line=1)
            yield InvalidScenarioItem.from_parent(self, name="load-error", error=error)
            return
        spec = loaded.spec
        settings = self.config.stash[SETTINGS]
        base = spec.seed if settings.seed is None else settings.seed
        for seed in range(base, base + settings.repeat):
            # `[seedN]`, not `[seed=N]`: `-k seed8` must be a valid expression
            name = spec.name if settings.repeat == 1 else f"{spec.name}[seed{seed}]"
            item = ScenarioItem.from_parent(self, name=name, loaded=loaded, seed=seed, file=file)
            for marker in spec.markers:
                item.add_marker(marker)
            yield item


class ScenarioFailed(Exception):
    """A run whose verdicts are not all ok (or whose engine stopped)."""

    def __init__(self, result: RunResult, report_dir: Optional[Path]) -> None:
        checks = ", ".join(v.check for v in result.failures()) or "engine error"
        super().__init__(f"{checks} (seed {result.seed})")
        self.result, self.report_dir = result, report_dir


def headline(result: RunResult) -> str:
    """A failed run in one line: the engine error, or the first failing verdict (and how many more)."""
    failures = result.failures()
    if result.error is not None or not failures:
        lines = (result.error or "").strip().splitlines()
        return "engine error: " + (lines[0] if lines else "no message")
    first = failures[0]
    text = f"{first.check} {first.title}: {first.message.splitlines()[0]}" if first.message else verdict_heading(first)
    return text + (f" (+{len(failures) - 1} more)" if len(failures) > 1 else "")


def crash_line(result: RunResult, scenario_line: int) -> int:
    """Where a failed run points in its file: the first failing verdict's step or claim, else
    (an engine error, a property judged by default) the scenario's own line."""
    failures = result.failures()
    first = failures[0].line if failures and result.error is None else None
    return scenario_line if first is None else first


def run_dir_for(name: str) -> Path:
    """A fresh directory for one run of the item `name`, under the system temp dir (TMPDIR)."""
    slug = name.replace("[", "-").replace("]", "")
    return Path(tempfile.mkdtemp(prefix=f"thatch-sim-{slug}-"))


def including(spec: Any, include: tuple[str, ...]) -> Any:
    """`spec` with `include` judged on any design too (`--sim-include-properties`)."""
    if not include:
        return spec
    props = spec.properties
    if isinstance(props, list):  # the listed ones and the included ones
        exclude = [p for p in PROPERTY_IDS if p not in props and p not in include]
    else:
        exclude = [p for p in getattr(props, "exclude", ()) if p not in include]
    have = tuple(getattr(props, "include", ()))
    selection = AllExcept(exclude=exclude, include=list(dict.fromkeys(have + include)))
    return spec.model_copy(update={"properties": selection})


class ScenarioItem(pytest.Item):
    """One run of one scenario with one seed, in its own run directory."""

    def __init__(self, *, loaded: LoadedScenario, seed: int, file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.loaded, self.spec, self.seed, self.file = loaded, loaded.spec, seed, file
        self.line = loaded.positions.line_of(("name",))[0]  # 1-based, where the scenario names itself
        self.rerun, self.rerun_cli = rerun_commands(file, self.spec.name, seed)
        self.user_properties += [("seed", str(seed)), ("rerun", self.rerun), ("scenario_file", file)]
        self.result: Optional[RunResult] = None

    def runtest(self) -> None:
        settings = self.config.stash[SETTINGS]
        run_dir = run_dir_for(self.name)
        try:
            result = self.config.hook.pytest_sim_run_scenario(
                spec=including(self.spec, settings.include), run_dir=run_dir, seed=self.seed,
                wall_timeout_s=settings.timeout_s)
        except Exception:
            # The engine itself broke: the traceback is pytest's, the rerun line is ours.
            self.add_report_section("call", "rerun", f"{self.rerun}\n{self.rerun_cli}\nrun dir: {run_dir}")
            raise
        place_verdicts(result.verdicts, self.loaded)
        self.result = result
        self.user_properties.append(("sut", result.sut))
        if result.unjudged is not None:
            shutil.rmtree(run_dir, ignore_errors=True)
            pytest.skip(result.unjudged.message)  # shown with its reason, never a silent pass
        report_dir = self.keep_run(result, settings)
        if not result.ok:
            raise ScenarioFailed(result, report_dir)
        shutil.rmtree(run_dir, ignore_errors=True)

    def keep_run(self, result: RunResult, settings: Settings) -> Optional[Path]:
        if settings.report == "never" or (settings.report == "failed" and result.ok) or settings.report_dir is None:
            return None
        name = f"{self.spec.name}.seed-{self.seed}" if settings.repeat > 1 else self.spec.name
        out = settings.report_dir / name
        problem = publish_run(result, out)
        if problem:
            self.add_report_section("call", "report", problem)
        self.user_properties.append(("run_report", str(out)))
        return out

    def annotate(self, report: pytest.TestReport, call: pytest.CallInfo) -> None:
        """The run's verdicts on its call report, and the headline when it failed."""
        if report.when != "call" or self.result is None:
            return
        setattr(report, VERDICTS_ATTR, encode_verdicts(self.result.verdicts))
        if report.failed and not self.result.ok:
            setattr(report, HEADLINE_ATTR, headline(self.result))
            setattr(report, CRASH_LINE_ATTR, crash_line(self.result, self.line))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ScenarioFailed):
            failed = excinfo.value
            report = str(failed.report_dir) if failed.report_dir else None
            return format_failure(failed.result, file=self.file, name=self.spec.name, report_dir=report)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, self.line - 1, f"scenario {self.name}"


class InvalidScenarioItem(pytest.Item):
    """Stands for a scenario file that does not load: errors at setup with the file:line message."""

    def __init__(self, *, error: ScenarioError, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error
        self.user_properties.append(("scenario_file", shown_path(self.path, self.config)))

    def setup(self) -> None:
        raise self.error

    def runtest(self) -> None:  # never reached: setup raises
        raise self.error

    def annotate(self, report: pytest.TestReport, call: pytest.CallInfo) -> None:
        """The loader's message is the whole story of a setup error: a traceback would bury it."""
        if report.when == "setup" and call.excinfo is not None and isinstance(call.excinfo.value, ScenarioError):
            report.longrepr = str(call.excinfo.value)
            setattr(report, HEADLINE_ATTR, report.longrepr.splitlines()[0])

    def reportinfo(self):
        return self.path, None, f"invalid scenario file {shown_path(self.path, self.config)}"


class ExcludedFileItem(pytest.Item):
    """A YAML file among the scenarios whose first line excludes it: skipped, with its path and reason."""

    def __init__(self, *, reason: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reason = reason
        self.user_properties.append(("scenario_file", shown_path(self.path, self.config)))
        self.add_marker(pytest.mark.skip(reason=reason))  # a marker's skip is reported at the item's location

    def runtest(self) -> None:  # never reached: the marker skips it
        pytest.skip(self.reason)

    def reportinfo(self):
        return self.path, 0, f"excluded file {shown_path(self.path, self.config)}"  # the mark is on line 1


@dataclass(frozen=True)
class Crash:
    """Where pytest's short summary (`longrepr.reprcrash.message`) and junit's failure message look."""

    path: str
    message: str
    lineno: Optional[int] = None  # 1-based, as pytest's own crash locations

    def __str__(self) -> str:  # the `--tb=line` form
        return f"{self.path}:{self.lineno}: {self.message}" if self.lineno else f"{self.path}: {self.message}"


class FailureText:
    """A scenario item's failure as pytest shows it: the whole story, plus a one-line headline."""

    def __init__(self, text: str, path: str, headline: str, lineno: Optional[int] = None) -> None:
        self.text, self.reprcrash = text, Crash(path, headline, lineno)

    def toterminal(self, tw) -> None:
        for line in self.text.splitlines():
            tw.line(line)

    def __str__(self) -> str:
        return self.text


def dress_failure(report: pytest.TestReport) -> None:
    """Give a failed scenario report its headline. Runs where reports are logged, so also in the
    xdist controller, which receives the story as plain text."""
    line = getattr(report, HEADLINE_ATTR, None)
    if line and not isinstance(report.longrepr, FailureText):
        report.longrepr = FailureText(str(report.longrepr), report.nodeid.split("::", 1)[0], line,
                                      getattr(report, CRASH_LINE_ATTR, None))
