"""End to end: exploration finds a planted bug, shrinks it, files a scenario that fails alone.

The bug is a store whose leaves write no tombstone (breaks R7): the session
comes back on its next idle event. Exploration with the broken store (the
`overrides` test injection, as in tests/e2e/test_property_failures.py) must
find P6, P7 or P11 failing within a few dozen small seeds, shrink the world, and
write a scenario that lints clean, fails the same property when run alone
with the bug, and passes every property with the real code.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pytest

import repo
from explorekit import OVERRIDES, TOMBSTONE_CHECKS, NoTombstoneStore, planted_seed, subprocess_env
from simulator.api import run_scenario
from simulator.cli import lint_paths
from simulator.explore.campaign import Settings, run_campaign
from simulator.explore.progress import Progress
from simulator.explore.swarm import SMALL
from simulator.scenario.loader import load_file
from simulator.scenario.model import PROPERTY_IDS


@pytest.mark.rules("R7")
def test_explore_finds_shrinks_and_files_a_planted_bug(tmp_path):
    settings = Settings(seed=0, runs=60, size=SMALL, out=tmp_path / "found", overrides={"store": NoTombstoneStore},
                        max_failures=1, shrink_runs=80, work=tmp_path / "runs")
    summary = run_campaign(settings, Progress(io.StringIO(), tty=False))
    filed = [f for f in summary.failures if f.file is not None]
    assert filed, f"nothing found in {summary.runs} runs: {[f.message for f in summary.failures]}"
    failure = filed[0]
    assert failure.check in TOMBSTONE_CHECKS and failure.reproduced
    assert failure.shrunk.after[2] <= min(3, failure.shrunk.before[2])

    path = failure.file.path
    assert path.parent == tmp_path / "found" and path.name.startswith(failure.check.lower() + "-")
    assert lint_paths([str(path)]) == []
    text = path.read_text(encoding="utf-8")
    assert f"from seed {failure.seed}: it breaks {failure.check}" in text and "rerun: python -m simulator run" in text
    spec = load_file(path).spec
    assert spec.seed == failure.seed and spec.story.endswith(failure.shrunk.outcome.finding(failure.check).message)

    broken = run_scenario(spec, run_dir=tmp_path / "alone-broken", overrides={"store": NoTombstoneStore})
    assert broken.verdict(failure.check).status == "fail"
    real = run_scenario(spec, run_dir=tmp_path / "alone-real")
    assert real.error is None
    assert [v.check for v in real.verdicts if v.check in PROPERTY_IDS and not v.ok] == []


@pytest.mark.rules("R7")
def test_the_cli_reports_and_files_it_with_a_named_planted_bug(tmp_path):
    out = tmp_path / "found"
    cmd = [sys.executable, "-m", "simulator", "explore", "--seed", str(planted_seed()), "--runs", "40",
           "--size", "small",
           "--max-failures", "1", "--shrink-runs", "60", "--out", str(out), "--overrides", OVERRIDES,
           "--json", str(tmp_path / "summary.json")]
    done = subprocess.run(cmd, cwd=tmp_path, env=subprocess_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    found = [f for f in summary["failures"] if "file" in f]
    assert found and found[0]["check"] in TOMBSTONE_CHECKS and found[0]["reproduced"] is True
    assert "shrunk" in done.stdout and found[0]["file"] in done.stdout
    assert "explore: seed" in done.stderr  # the progress notes
    assert summary["runs"] >= 1 and summary["first_failure_s"] is not None


def test_a_bad_overrides_reference_is_a_usage_error(tmp_path):
    done = subprocess.run([sys.executable, "-m", "simulator", "explore", "--overrides", "nosuchmodule:x"],
                          cwd=repo.ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "explore:" in done.stderr
