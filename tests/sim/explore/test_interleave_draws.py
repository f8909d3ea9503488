"""Exploration draws interleavings (`--interleave`) from a stream of its own: the ordinary world a seed
names stays as it was, and every drawn world lints clean (D-interleave-5)."""

from __future__ import annotations

import io

import pytest

from explorekit import DeferredBroadcastStore
from simulator.api import run_scenario
from simulator.explore.campaign import Settings, run_campaign
from simulator.explore.generator import generate
from simulator.explore.progress import Progress
from simulator.scenario.loader import load_file
from simulator.scenario.validate import check_spec


def _interleaves(doc: dict) -> list[dict]:
    return [s for s in doc["steps"] if "interleave" in s]


def test_interleavings_are_drawn_beside_the_ordinary_world_of_the_seed():
    drawn = 0
    for seed in range(40):
        plain, woven = generate(seed), generate(seed, interleave=True)
        assert [s for s in woven.doc["steps"] if "interleave" not in s] == plain.doc["steps"]
        assert woven.doc["processes"] == plain.doc["processes"]
        assert not check_spec(woven.spec), seed
        steps = _interleaves(woven.doc)
        started = [p for p in woven.doc["processes"] if p.get("start") != "never"]
        if steps:
            assert len(started) >= 2 and woven.doc.get("dispatch") != "concurrent"
        drawn += len(steps)
        assert generate(seed, interleave=True).doc == woven.doc  # the same seed, the same draws
    assert drawn > 40


def test_a_drawn_pause_names_a_tool_call_made_next_and_runs_calls_of_other_processes():
    for seed in range(40):
        doc = generate(seed, interleave=True).doc
        host = {s["id"]: p["id"] for p in doc["processes"] for s in p["sessions"]}
        for i, step in enumerate(doc["steps"]):
            if "interleave" not in step:
                continue
            pause, run = step["interleave"]["pause"], step["interleave"]["run"]
            after = doc["steps"][i + 1]
            action = next(k for k in after if k not in ("at", "name", "expect"))
            assert after["at"] == step["at"] and pause["call"] == action
            for call in run:
                (kind, args), = call.items()
                where = args.get("process") or host[args.get("from") or args.get("session")]
                assert where != host[pause["session"]]


@pytest.mark.rules("R12")
def test_exploration_finds_a_contention_bug_and_its_shrunk_file_keeps_the_interleaving(tmp_path):
    """A broadcast that reads before it takes the lock (the real thatch's shape, planted): seed 6 of an
    interleaving campaign breaks P15; the shrunk file keeps the pause with its broadcast and fails alone."""
    settings = Settings(seed=6, runs=1, interleave=True, out=tmp_path / "found",
                        overrides={"store": DeferredBroadcastStore}, shrink_runs=6, work=tmp_path / "runs")
    summary = run_campaign(settings, Progress(io.StringIO(), tty=False))
    failure = next(f for f in summary.failures if f.file is not None)
    assert failure.check == "P15" and failure.reproduced
    assert failure.shrunk.after[2] < failure.shrunk.before[2]
    assert "--interleave" in failure.file.path.read_text(encoding="utf-8")
    spec = load_file(failure.file.path).spec
    kept = [i for i, s in enumerate(spec.steps) if s.action == "interleave" and s.args.pause.call == "broadcast"]
    assert kept and spec.steps[kept[-1] + 1].action == "broadcast"
    broken = run_scenario(spec, run_dir=tmp_path / "alone", overrides={"store": DeferredBroadcastStore})
    assert broken.verdict("P15").status == "fail"
    assert run_scenario(spec, run_dir=tmp_path / "real").verdict("P15").status == "pass"
