"""Exploration draws interleavings (`--interleave`) from a stream of its own: the ordinary world a seed
names stays as it was, and every drawn world lints clean (D-interleave-5)."""

from __future__ import annotations

from simulator.explore.generator import generate
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
