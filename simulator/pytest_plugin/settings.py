"""The plugin's command-line options and ini keys, resolved once per session.

Every option has the `--sim-` prefix and every ini key the `sim_` prefix, so
the plugin stays out of the way of other plugins in the same environment. An
ini key is the project's default for its option: the command line wins, then
the ini file, then the built-in default (D-plugin-8).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from simulator.sut import SutError
from simulator.sut.capabilities import choose_sut
from simulator.scenario.model import PROPERTY_IDS

REPORT_MODES = ("always", "failed", "never")
DEFAULT_REPORT = "failed"
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_REPORT_DIR = Path("reports") / "runs"  # under the rootdir


@dataclass(frozen=True)
class Settings:
    """What every scenario item of the session reads."""

    seed: Optional[int]           # None: each scenario's own `seed:`
    repeat: int                   # seeds per scenario, from `seed`
    report: str                   # always | failed | never
    report_dir: Optional[Path]    # kept runs go to report_dir/<scenario>/ (None: only the named run dir is kept)
    timeout_s: float              # wall-clock budget of one run
    include: tuple[str, ...] = ()  # properties judged on any design (`--sim-include-properties`)


SETTINGS = pytest.StashKey[Settings]()


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("thatch-scenarios", "thatch chat scenarios")
    group.addoption("--sim-seed", type=int, default=None, metavar="N",
                    help="run every scenario with seed N instead of its own `seed:`")
    group.addoption("--sim-repeat", type=int, default=1, metavar="K",
                    help="run each scenario K times with seeds N, N+1, ... (items named name[seedN])")
    group.addoption("--sim-report", choices=REPORT_MODES, default=None,
                    help="when to keep a run with its HTML report in the report dir "
                         f"(ini sim_report; default {DEFAULT_REPORT})")
    group.addoption("--sim-report-dir", default=None, metavar="DIR",
                    help="where kept runs go, one directory per scenario "
                         "(ini sim_report_dir; default reports/runs under the rootdir)")
    group.addoption("--sim-timeout", type=float, default=None, metavar="S",
                    help="wall-clock budget of one scenario run in seconds "
                         f"(ini sim_timeout; default {DEFAULT_TIMEOUT_S:g})")
    group.addoption("--sim-sut", default=None, metavar="PATH",
                    help="the system under test: thatch-core (the default) or a thatch checkout PATH "
                         "(its src/chat.ts, run by bun); default $THATCH_SIM_SUT")
    group.addoption("--sim-verdicts-json", default=None, metavar="FILE",
                    help="write every scenario's verdicts (check, status, message) to FILE as JSON")
    group.addoption("--sim-include-properties", default="", metavar="P-IDS",
                    help="judge these properties on every scenario whatever its design (e.g. P12,P13,P14): "
                         "would this have been caught before it shipped?")
    parser.addini("sim_scenario_paths", type="linelist", default=[],
                  help="globs or directories (relative to the rootdir) whose "
                       "YAML files are scenarios even without the schema comment")
    parser.addini("sim_scenario_roots", type="linelist", default=[],
                  help="directories (relative to the rootdir) where every YAML file is collected: one without "
                       "the schema comment errors, one starting `# thatch-sim: not a scenario — WHY` is skipped")
    parser.addini("sim_report", default="", help=f"default of --sim-report: {' | '.join(REPORT_MODES)}")
    parser.addini("sim_report_dir", default="", help="default of --sim-report-dir, relative to the ini file")
    parser.addini("sim_timeout", default="", help="default of --sim-timeout, in seconds")


def _ini_base(config: pytest.Config) -> Path:
    return config.inipath.parent if config.inipath else config.rootpath


def _report_mode(config: pytest.Config) -> str:
    mode = config.getoption("sim_report") or config.getini("sim_report").strip() or DEFAULT_REPORT
    if mode not in REPORT_MODES:
        raise pytest.UsageError(f"ini sim_report = {mode!r} — write one of {', '.join(REPORT_MODES)}")
    return mode


def _report_dir(config: pytest.Config) -> Optional[Path]:
    """Where kept runs are copied: the option, the ini key, else reports/runs of the project (the
    rootdir of an ini file). A `pytest FILE` outside any project has none, so nothing is written
    into the working directory: the failure names the run directory it kept."""
    given = config.getoption("sim_report_dir")
    if given:
        return config.invocation_params.dir / given
    ini = config.getini("sim_report_dir").strip()
    if ini:
        return _ini_base(config) / ini
    return config.rootpath / DEFAULT_REPORT_DIR if config.inipath else None


def _timeout(config: pytest.Config) -> float:
    given = config.getoption("sim_timeout")
    if given is None:
        ini = config.getini("sim_timeout").strip()
        try:
            given = float(ini) if ini else DEFAULT_TIMEOUT_S
        except ValueError:
            raise pytest.UsageError(f"ini sim_timeout = {ini!r} — write a number of seconds, e.g. 120") from None
    if given <= 0:
        raise pytest.UsageError(f"sim timeout {given:g} — give a positive number of seconds")
    return given


def resolve(config: pytest.Config) -> Settings:
    """The session's settings from the command line, the ini file and the defaults."""
    repeat = config.getoption("sim_repeat")
    if repeat < 1:
        raise pytest.UsageError(f"--sim-repeat {repeat} — give 1 or more")
    try:
        # Exported to the environment before xdist starts its workers, which inherit the choice.
        choose_sut(config.getoption("sim_sut"))
    except SutError as exc:
        raise pytest.UsageError(f"--sim-sut: {exc}") from None
    return Settings(seed=config.getoption("sim_seed"), repeat=repeat, report=_report_mode(config),
                    report_dir=_report_dir(config), timeout_s=_timeout(config), include=_included(config))


def _included(config: pytest.Config) -> tuple[str, ...]:
    pids = tuple(p.strip() for p in (config.getoption("sim_include_properties") or "").split(",") if p.strip())
    unknown = [p for p in pids if p not in PROPERTY_IDS]
    if unknown:
        raise pytest.UsageError(f"--sim-include-properties {', '.join(unknown)} — write property ids: "
                                f"{', '.join(PROPERTY_IDS)}")
    return pids
