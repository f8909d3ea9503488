"""P15 contention-safe: a store error of a lock not got must never reach a reply (seed 000's "already
solved" concurrent access). A planted store with the real thatch's deferred broadcast shows the judge
fails, with the interleaving as witness; thatch_core serialises the same interleaving and passes."""

from __future__ import annotations

import pytest

import repo
from explorekit import DeferredBroadcastStore
from simulator.api import run_scenario
from simulator.scenario.loader import load_file

INCIDENT = repo.ROOT / "scenarios" / "races" / "broadcast-while-another-writes.yaml"


@pytest.mark.rules("R12")
def test_a_deferred_broadcast_fails_p15_with_the_interleaving_as_witness(tmp_path):
    spec = load_file(INCIDENT).spec
    r = run_scenario(spec, run_dir=tmp_path, overrides={"store": DeferredBroadcastStore})
    v = r.verdict("P15")
    assert v.status == "fail"
    assert "a tool call of lead" in v.message and "database is locked" in v.message
    assert [(w["kind"], w["proc"]) for w in v.witness] == [
        ("paused", "h1"), ("interleave-run", "orchestrator"), ("tool-result", "h2"), ("resumed", "h1"),
        ("tool-result", "h1")]
    assert r.verdict("fault#0").status == "pass"  # the interleaving happened as written


@pytest.mark.rules("R12")
def test_thatch_core_serialises_the_same_interleaving_and_keeps_p15(tmp_path):
    r = run_scenario(load_file(INCIDENT).spec, run_dir=tmp_path)
    assert r.ok, [f"{v.check}: {v.message}" for v in r.failures()]
    assert r.verdict("P15").status == "pass" and r.verdict("P15").judged
    assert "DEADLOCK" in r.verdict("fault#0").message
