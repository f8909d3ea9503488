"""Exploration's later draws: only when a campaign includes properties, from a stream of their own."""

from __future__ import annotations

from simulator.explore.campaign import Settings, explore_command
from simulator.explore.generator import generate
from simulator.explore.plan import replay_problems
from simulator.explore.swarm import SMALL

LATER = ("P12", "P13", "P14")


def test_without_include_a_seed_names_the_world_it_always_did():
    plain = generate(3, SMALL)
    assert "properties" not in plain.doc
    assert not any(k in s for s in plain.doc["steps"] for k in ("retry", "reload"))


def test_with_include_the_ordinary_world_stays_and_the_incidents_are_drawn_in():
    found = set()
    for seed in range(12):
        plain, later = generate(seed, SMALL), generate(seed, SMALL, include=LATER)
        assert later.doc["properties"] == {"include": list(LATER)}
        assert [p["id"] for p in later.doc["processes"]] == [p["id"] for p in plain.doc["processes"]]
        ordinary = [s for s in later.doc["steps"] if not ({"retry", "reload"} & set(s))]
        assert all(s in plain.doc["steps"] or "send" in s for s in ordinary)
        assert replay_problems(later.doc) == []
        found |= {k for s in later.doc["steps"] for k in ("retry", "reload") if k in s}
        found |= {"machinery" for p in later.doc["processes"] for s in p["sessions"] if s.get("machinery")}
        found |= {"clip" for p in later.doc["processes"] if p.get("clip")}
    assert found == {"retry", "reload", "machinery", "clip"}


def test_the_rerun_command_names_the_included_properties():
    assert explore_command(5, Settings(include=LATER)).endswith("--include-properties P12,P13,P14")
