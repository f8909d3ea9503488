"""Exploration inside pytest: `--sim-explore N` adds N generated runs as test items.

    pytest scenarios --sim-explore 200 --sim-explore-seed 1000 -n auto
    pytest scenarios --sim-explore 2000 --sim-explore-shard 3/8     # the 3rd of 8 CI jobs
    pytest scenarios --sim-explore 400 --tx 2*popen --tx ssh=ci@box2 --dist load --sim-explore-json s.json
    pytest scenarios --sim-explore 200 --sim-explore-guided -n 2
    pytest scenarios --sim-explore 100 --sim-explore-interleave -n 2  # races on demand drawn in

Each item `explore::seed-S` generates the scenario seed S names
(simulator/explore), runs it with every property judged, and on a failure
shrinks it and writes the minimal scenario under `--sim-explore-out`
(default `scenarios/found` under the rootdir); the failure message names
that file and the command that reruns it. Item ids depend only on the
options, so every xdist worker (local `-n` or remote `--tx`) collects the
same items and xdist spreads them like any others. `--sim-explore-shard
k/n` keeps every n-th seed of the range from the k-th on, so n matrix jobs
split one range without overlap.

The module is a pytest plugin of its own (options and configure hook),
loaded by the scenario plugin's `pytest_plugins`. Each item's campaign
figures travel on its report (`EXPLORE_ATTR`), so the
controller adds them up and prints the campaign summary at the end, next to
the per-property tally its verdicts also feed.

Workers never write into `--sim-explore-out`: an item stages its shrunk
file in a directory of its own and sends the text on its report; the
controller (the one process that sees every report, whatever `--tx` says)
writes the files, the guided corpus and `--sim-explore-json`. So no two
workers write the same file, and a remote worker's finds land on the
controller's machine. `--sim-explore-guided` measures thatch_core's
branches per run (simulator/explore/guided.py): each worker draws from the
corpus of the runs it ran (a worker cannot see another's until the
controller merges them), resumes from the corpus file, and the controller
appends every worker's entries to that file and reports branches over time.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

import pytest

from simulator.explore.campaign import (
    Failure, Settings, Summary, confirmed, explore_command, file_failure, guide_of, run_seed, write_coverage,
)
from simulator.explore.guided import Entry, Guide, append_entry
from simulator.explore.cli import load_overrides
from simulator.explore.judge import Outcome
from simulator.explore.report import format_summary
from simulator.explore.swarm import SIZES
from simulator.pytest_plugin.settings import SETTINGS
from simulator.pytest_plugin.tally import VERDICTS_ATTR, encode_verdicts
from simulator.scenario.policies import POLICY_SETS

EXPLORE_ATTR = "sim_explore"
COLLECTOR = "explore"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("thatch-scenarios", "thatch chat scenarios")
    group.addoption("--sim-explore", type=int, default=0, metavar="N",
                    help="add N generated scenarios (one item per seed) that are run, judged, and shrunk on failure")
    group.addoption("--sim-explore-seed", type=int, default=0, metavar="S", help="the first explored seed (default 0)")
    group.addoption("--sim-explore-shard", default=None, metavar="K/N",
                    help="run only the K-th of N interleaved parts of the seed range (CI matrix jobs)")
    group.addoption("--sim-explore-size", choices=sorted(SIZES), default="default",
                    help="world bounds of the generated scenarios")
    group.addoption("--sim-explore-out", default=None, metavar="DIR",
                    help="where shrunk failures are written (default scenarios/found under the rootdir)")
    group.addoption("--sim-explore-overrides", default=None, metavar="MODULE:NAME",
                    help="test injection: broken classes passed to every explored run (a planted bug)")
    group.addoption("--sim-explore-guided", action="store_true", default=False,
                    help="coverage-guided: measure thatch_core's branches per run and draw feature sets from the runs "
                         "that reached new ones (corpus in the out dir, corpus.jsonl)")
    group.addoption("--sim-explore-interleave", action="store_true", default=False,
                    help="draw interleavings into serial worlds of two or more processes (races on demand)")
    group.addoption("--sim-explore-design", choices=tuple(POLICY_SETS), default=None,
                    help="run every explored world under this named design (thatch-later: the later design)")
    group.addoption("--sim-explore-json", default=None, metavar="FILE",
                    help="write the campaign summary, merged over every worker, as JSON")


def shard_of(text: Optional[str]) -> tuple[int, int]:
    """`k/n` -> (k, n), 1 <= k <= n."""
    if not text:
        return 1, 1
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise pytest.UsageError(f"--sim-explore-shard {text!r} — write K/N with 1 <= K <= N, e.g. 2/4")
    return int(m.group(1)), int(m.group(2))


def explored_seeds(first: int, count: int, shard: tuple[int, int]) -> list[int]:
    """The seeds of `first .. first+count-1` that shard k of n runs: every n-th, from the k-th."""
    k, n = shard
    return [first + i for i in range(count) if i % n == k - 1]


def settings_of(config: pytest.Config) -> Settings:
    out = config.getoption("sim_explore_out")
    ref = config.getoption("sim_explore_overrides")
    try:
        overrides = load_overrides(ref) if ref else None
    except (ValueError, ImportError, AttributeError) as exc:
        raise pytest.UsageError(f"--sim-explore-overrides: {exc}") from None
    return Settings(size=SIZES[config.getoption("sim_explore_size")],
                    out=(config.invocation_params.dir / out) if out else config.rootpath / "scenarios" / "found",
                    overrides=overrides, overrides_ref=ref, guided=config.getoption("sim_explore_guided"),
                    interleave=config.getoption("sim_explore_interleave"),
                    wall_timeout_s=float(config.getoption("sim_timeout") or 120),
                    include=config.stash[SETTINGS].include if SETTINGS in config.stash else (),
                    design=config.getoption("sim_explore_design"))


class ExploreFailed(Exception):
    """An explored run failed; the message holds the findings and the shrunk file."""


class ExploreCollector(pytest.Collector):
    """The parent of the explored items (node id `explore`)."""

    def collect(self):  # the items are made by the plugin, not collected from a file
        return []


class ExploreItem(pytest.Item):
    """One explored seed."""

    def __init__(self, *, seed: int, settings: Settings, guide: Optional[Guide] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seed, self.settings, self.guide = seed, settings, guide
        self.outcome: Optional[Outcome] = None
        self.entry: Optional[Entry] = None
        self.found: list[dict[str, str]] = []        # staged files for the controller: name and text
        self.user_properties.append(("seed", str(seed)))

    def runtest(self) -> None:
        gen, self.outcome = run_seed(self.seed, self.settings, self.guide)
        self.entry = self.guide.last if self.guide is not None else None
        findings, flaky = confirmed(gen.spec, self.outcome, self.settings)
        for f in flaky:
            self.add_report_section("call", "flaky", f"{f.check} did not come back on a rerun: {f.message}")
        self.outcome.findings = findings
        if not findings:
            return
        lines = [f"seed {self.seed}: {f.check} fails: {f.message}" for f in findings]
        first = findings[0]
        failure = Failure(self.seed, first.check, first.title, first.message, 0.0, self.outcome.run_dir)
        with tempfile.TemporaryDirectory(prefix="explore-stage-") as stage:
            file_failure(gen, self.outcome, first, failure, self.settings, stage=Path(stage))
            self.found.append({"name": failure.file.path.name, "text": failure.file.path.read_text(encoding="utf-8")})
        state = "reproduces when run alone" if failure.reproduced else "does NOT reproduce when run alone"
        original = explore_command(self.seed, self.settings, gen.swarm if gen.forced else None)
        lines += [f"shrunk {failure.shrunk.before} -> {failure.shrunk.after} (processes, sessions, steps): "
                  f"{self.settings.out / failure.file.path.name} ({state})", f"rerun: {failure.file.rerun}",
                  f"the generated original: {original}"]
        if self.outcome.run_dir is not None:
            lines.append(f"run dir of the original: {self.outcome.run_dir}")
        raise ExploreFailed("\n".join(lines))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ExploreFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"explored seed {self.seed}"


def _figures(item: ExploreItem) -> dict[str, Any]:
    """What the campaign summary adds up from one run (plain data: it travels between xdist processes)."""
    outcome = item.outcome
    return {"entry": item.entry.as_json() if item.entry is not None else None, "found": item.found,
            "seed": outcome.seed, "ok": outcome.ok, "virtual_ms": outcome.virtual_ms, "wall_s": outcome.wall_s,
            "fired": dict(outcome.faults_fired), "armed": dict(outcome.faults_armed), "judged": sorted(outcome.judged),
            "failures": [[f.check, f.title, f.message] for f in outcome.findings]}


class ExplorePlugin:
    """Adds the explored items, carries their figures, prints the campaign summary."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.settings = settings_of(config)
        self.summary = Summary()
        # the worker side: this process's guide (a worker never writes the corpus file: the controller does)
        self.guide = guide_of(self.settings, write=False)
        # the controller side: every worker's corpus entries merged, for the file and branches over time
        self.merged = guide_of(self.settings, write=False)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list) -> None:
        seeds = explored_seeds(config.getoption("sim_explore_seed"), config.getoption("sim_explore"),
                               shard_of(config.getoption("sim_explore_shard")))
        parent = ExploreCollector.from_parent(session, name=COLLECTOR, nodeid=COLLECTOR)
        items += [ExploreItem.from_parent(parent, name=f"seed-{s}", seed=s, settings=self.settings, guide=self.guide)
                  for s in seeds]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if isinstance(item, ExploreItem) and report.when == "call" and item.outcome is not None:
            setattr(report, EXPLORE_ATTR, _figures(item))
            setattr(report, VERDICTS_ATTR, encode_verdicts(item.outcome.verdicts))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        figures = getattr(report, EXPLORE_ATTR, None)
        if report.when != "call" or not figures:
            return
        outcome = Outcome(figures["seed"], [], virtual_ms=figures["virtual_ms"], wall_s=figures["wall_s"])
        outcome.faults_fired.update(figures["fired"])
        outcome.faults_armed.update(figures["armed"])
        outcome.judged = set(figures["judged"])
        self.summary.add(figures["seed"], outcome)
        self.summary.explore_s += figures["wall_s"]
        self.summary.failing += bool(figures["failures"])
        self.summary.failures += [Failure(figures["seed"], check, title, message, 0.0)
                                  for check, title, message in figures["failures"]]
        self.merge_from_worker(figures)

    def merge_from_worker(self, figures: dict[str, Any]) -> None:
        """The controller writes what the workers found: the shrunk files, the corpus entries."""
        if hasattr(self.config, "workerinput"):
            return  # a worker sees its own reports too: only the controller writes
        for found in figures.get("found") or []:
            self.settings.out.mkdir(parents=True, exist_ok=True)
            (self.settings.out / found["name"]).write_text(found["text"], encoding="utf-8")
        if self.merged is None:
            return
        if figures.get("entry"):
            entry = Entry.from_json(figures["entry"])
            new = set(entry.branches) - self.merged.corpus.reached
            if new:  # another worker may have reached some of them first: the entry keeps the rest
                entry = replace(entry, branches=tuple(sorted(new)))
                self.merged.corpus.add(entry)
                append_entry(self.settings.corpus_path, entry)
        self.merged.record(self.summary.runs, self.summary.explore_s)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(self.config, "workerinput") or not self.summary.runs:
            return  # a worker: the controller reports
        if self.merged is not None:
            self.summary.coverage = write_coverage(self.merged, self.settings)
        path = self.config.getoption("sim_explore_json")
        if path:
            target = self.config.invocation_params.dir / path
            target.write_text(json.dumps(self.summary.as_json(), indent=2, default=str), encoding="utf-8")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.summary.runs:
            return
        terminalreporter.write_sep("=", "exploration")
        for line in format_summary(self.summary, self.settings).splitlines():
            terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    """Register the exploration plugin when `--sim-explore N` asks for runs."""
    if config.getoption("sim_explore", 0) > 0:
        config.pluginmanager.register(ExplorePlugin(config), "thatch-explore")
