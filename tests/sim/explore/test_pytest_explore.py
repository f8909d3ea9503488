"""`pytest --sim-explore N`: explored seeds as items, spread by xdist, split by shards, failures filed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from explorekit import OVERRIDES, planted_seed, subprocess_env
from simulator.pytest_plugin.explore import explored_seeds, shard_of


def _pytest(where: Path, *args: str) -> subprocess.CompletedProcess:
    """A real pytest in `where` (an empty directory: the explored items are all it collects)."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
           "--sim-explore-size", "small", *args]
    return subprocess.run(cmd, cwd=where, env=subprocess_env(), capture_output=True, text=True, timeout=600)


def test_shards_split_a_seed_range_without_overlap():
    parts = [explored_seeds(100, 10, (k, 3)) for k in (1, 2, 3)]
    assert parts == [[100, 103, 106, 109], [101, 104, 107], [102, 105, 108]]
    assert sorted(s for p in parts for s in p) == list(range(100, 110))
    assert shard_of(None) == (1, 1) and shard_of("2/4") == (2, 4)
    for bad in ("0/3", "4/3", "x", "1/"):
        with pytest.raises(pytest.UsageError):
            shard_of(bad)


def test_explored_items_have_stable_ids_and_a_shard_collects_its_part(tmp_path):
    done = _pytest(tmp_path, "--sim-explore", "10", "--sim-explore-seed", "5", "--sim-explore-shard", "2/3",
                   "--co", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [line for line in done.stdout.splitlines() if line.startswith("explore::")]
    assert ids == ["explore::seed-6", "explore::seed-9", "explore::seed-12"]
    bad = _pytest(tmp_path, "--sim-explore", "3", "--sim-explore-shard", "4/3", "--co", "-q")
    assert bad.returncode != 0 and "--sim-explore-shard" in bad.stderr


def test_xdist_spreads_explored_items_and_the_controller_sums_the_campaign(tmp_path):
    done = _pytest(tmp_path, "--sim-explore", "4", "-n", "2", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout
    summary = done.stdout[done.stdout.index("exploration"):]
    assert "seeds 0..3, 4 runs (size small)" in summary and "virtual time:" in summary
    assert "no failure" in summary
    assert "scenario checks" in done.stdout  # the per-property tally counted the explored runs too


@pytest.mark.rules("R7")
def test_a_failing_explored_item_names_its_shrunk_file(tmp_path):
    seed = planted_seed()
    done = _pytest(tmp_path, "--sim-explore", "1", "--sim-explore-seed", str(seed), "--sim-explore-overrides",
                   OVERRIDES, "-q", "--tx", "2*popen", "--dist", "load", "--sim-explore-json", "campaign.json")
    assert done.returncode == 1, done.stdout + done.stderr
    found = sorted((tmp_path / "scenarios" / "found").glob("*.yaml"))
    # Written by the controller from the worker's report (the worker only staged them): one file per
    # check the run broke (P7, and the reference model P11 where it sees the rejoin).
    assert found and all(f"from seed {seed}:" in f.read_text() for f in found)
    assert found[0].read_text().startswith("# yaml-language-server: $schema=")
    campaign = json.loads((tmp_path / "campaign.json").read_text())
    assert campaign["runs"] == 1 and {f["seed"] for f in campaign["failures"]} == {seed}
    assert f"seed {seed}: " in done.stdout and str(found[0]) in done.stdout
    assert "reproduces when run alone" in done.stdout and "rerun: python -m simulator run" in done.stdout
    assert "FAILED: 1 of 1 runs" in done.stdout


def test_a_guided_campaign_over_two_popen_workers_merges_its_summary_and_corpus(tmp_path):
    done = _pytest(tmp_path, "--sim-explore", "4", "--sim-explore-guided", "--tx", "2*popen", "--dist", "load",
                   "--sim-explore-json", "campaign.json", "--sim-explore-out", "found", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    campaign = json.loads((tmp_path / "campaign.json").read_text())
    assert campaign["runs"] == 4 and campaign["seeds"] == [0, 3] and campaign["failures"] == []
    coverage = campaign["coverage"]
    assert [row[0] for row in coverage["timeline"]] == [1, 2, 3, 4] and coverage["mode"] == "guided"
    lines = (tmp_path / "found" / "corpus.jsonl").read_text().splitlines()
    branches = [b for line in lines for b in json.loads(line)["branches"]]
    assert len(branches) == len(set(branches)) == coverage["branches"] > 0  # each branch once, first reacher
    assert "thatch_core branches reached (guided)" in done.stdout


def test_explored_items_draw_interleavings_on_request(tmp_path):
    done = _pytest(tmp_path, "--sim-explore", "3", "--sim-explore-seed", "1", "--sim-explore-interleave", "-q")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
    summary = done.stdout[done.stdout.index("exploration"):]
    assert "interleave " in summary  # the faults line counts the interleavings armed


def test_explored_items_run_under_a_named_design_on_request(tmp_path):
    """`--sim-explore-design thatch-later` runs every explored world under the later design, with its incidents'
    faults drawn in (retries, reloads) and its properties judged; without it the same seeds draw none of them."""
    def summary(*extra: str) -> str:
        done = _pytest(tmp_path, "--sim-explore", "3", "--sim-explore-seed", "1000", "-q", *extra)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout[done.stdout.index("exploration"):]
    later = summary("--sim-explore-design", "thatch-later")
    faults = next(line for line in later.splitlines() if line.startswith("faults fired/armed"))
    assert "retry " in faults and "reload " in faults, faults
    assert "P13 0 " not in later and "P12 0 " not in later
    assert "retry " not in summary()
