"""Fault verdicts: one per fault step, judged from the history alone."""

from __future__ import annotations

from historykit import H, base_world, make_spec
from simulator.checks.faults import fault_verdicts
from simulator.history import History


def _spec():
    return make_spec(steps=[{"at": "1m", "kill": {"process": "h1"}},
                            {"at": "2m", "name": "mid-stamp", "crash": {"process": "h1", "before": "delivered-stamp"}},
                            {"at": "3m", "lock": {"for": "10s"}}])


def test_a_fault_that_took_effect_passes_with_its_detail():
    h = H(); base_world(h)
    fired = h.ev(60_000, "fault-fired", fault="kill", step=0, detail="SIGKILL")
    h.ev(600_000, "fault-not-fired", fault="crash", step=1)
    h.ev(600_000, "fault-not-fired", fault="lock", step=2)
    vs = {v.check: v for v in fault_verdicts(_spec(), History.decode(h.done()))}
    assert vs["fault#0"].status == "pass" and vs["fault#0"].title == "kill fault"
    assert vs["fault#0"].message == "step 0 (kill at 1m) took effect: SIGKILL"
    assert vs["fault#0"].witness[0]["i"] == fired["i"]


def test_a_fault_that_never_fired_says_why():
    """The not-reached message names what the fault needed and did not get."""
    h = H(); base_world(h)
    h.ev(60_000, "fault-fired", fault="kill", step=0, detail="SIGKILL")
    h.ev(600_000, "fault-not-fired", fault="crash", step=1)
    h.ev(600_000, "fault-not-fired", fault="lock", step=2)
    vs = {v.check: v for v in fault_verdicts(_spec(), History.decode(h.done()))}
    assert vs["fault#1"].status == "not-reached"
    assert vs["fault#1"].message == ("step 1 (mid-stamp, crash at 2m) never took effect: "
                                     "the process never reached the crash point's statement or step while it ran")
    assert vs["fault#1"].witness[0]["kind"] == "fault-not-fired"
    assert vs["fault#2"].message.endswith("never took effect: no store call met the held lock")


def test_every_fault_step_gets_a_verdict_even_without_events():
    h = H(); base_world(h)
    vs = fault_verdicts(_spec(), History.decode(h.done()))
    assert [(v.check, v.status) for v in vs] == [("fault#0", "not-reached"), ("fault#1", "not-reached"),
                                                 ("fault#2", "not-reached")]
    assert vs[0].message.endswith("never took effect: the process was not running") and vs[0].witness == []
