"""Which designs make a property's promise: a property the policy in force does not promise is not applicable
(counted and shown, never a failure), and one judged per process judges only the processes that promise it."""

from __future__ import annotations

import pytest

from historykit import RUN_INFO, H, base_world, make_db, make_spec
from simulator.checks import check_all
from simulator.checks.registry import REGISTRY, judges
from simulator.verdicts import CATALOGUE, POLICY_PROMISE_IDS, PROMISE

TWO_HOSTS = [{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]}, {"id": "h2", "sessions": [{"id": "carol"}]}]


@pytest.fixture
def db(tmp_path):
    return make_db(tmp_path / "thatch.db")


def seven_wakes() -> H:
    h = H(); base_world(h)
    for k in range(7):
        h.wake(60_000 + k * 300_000, "h1", "bob")
    return h


def verdicts(spec, h, db) -> dict:
    return {v.check: v for v in check_all(spec, h.done(), db, RUN_INFO)}


def test_every_promise_declares_who_makes_it():
    """Every property and policy promise carries a Promise, and the catalogue the words a not-applicable verdict
    shows."""
    for pid, (_title, _rules, fn) in REGISTRY.items():
        assert callable(fn.promise.made_by) and CATALOGUE[pid].applies, pid
    assert tuple(fn.pid for fn in judges(PROMISE)) == POLICY_PROMISE_IDS


@pytest.mark.rules("R22")
def test_the_wake_cap_is_not_applicable_under_a_policy_without_one(db):
    """R22: seven wakes in an hour break thatch's P2, but under `policy: qoder` (no wake cap) P2 and P10 are not
    applicable: no failure, a message naming what makes the promise and the policy in force."""
    assert verdicts(make_spec(), seven_wakes(), db)["P2"].status == "fail"
    vs = verdicts(make_spec(policy="qoder"), seven_wakes(), db)
    assert (vs["P2"].status, vs["P10"].status) == ("not-applicable", "not-applicable")
    assert vs["P2"].ok and "wake cap of at most 6" in vs["P2"].message and "wake_cap=off" in vs["P2"].message
    assert vs["P1"].status != "not-applicable"  # every design promises a single deliverer
    loose = verdicts(make_spec(policy={"wake_cap": 10}), seven_wakes(), db)
    assert loose["P2"].status == "not-applicable"  # a looser cap does not promise thatch's six either


@pytest.mark.rules("R22")
def test_in_a_mixed_world_the_wake_cap_judges_only_the_capped_processes(db):
    """R22: with h1 under qoder and h2 under thatch, bob's seven wakes from h1 are not P2's to judge."""
    spec = make_spec(processes=[{**TWO_HOSTS[0], "policy": "qoder"}, TWO_HOSTS[1]])
    assert verdicts(spec, seven_wakes(), db)["P2"].status != "fail"
    spec = make_spec(processes=[TWO_HOSTS[0], {**TWO_HOSTS[1], "policy": "qoder"}])
    assert verdicts(spec, seven_wakes(), db)["P2"].status == "fail"


def test_a_policy_promise_its_options_do_not_make_is_not_applicable(db):
    """Under `{inbound: hold}` alone there is no sender cap: Q1 is not applicable, Q2 and Q3 are judged."""
    vs = verdicts(make_spec(policy={"inbound": "hold"}), seven_wakes(), db)
    assert vs["Q1"].status == "not-applicable" and "sender cap" in vs["Q1"].message
    assert vs["Q2"].status != "not-applicable" and vs["Q3"].status != "not-applicable"
