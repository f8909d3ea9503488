"""A judged run's view and its indexes go as soon as the last reference to them does.

Exploration judges run after run in one process. An index holding the view (a bound method of
it, say) made a reference cycle: every run's records and indexes then waited for a full
collection, and the explorer's memory grew with each run it judged (and so did the cost of
each fork after it). Checked with the cyclic collector off, so only reference counting frees.
"""

from __future__ import annotations

import gc
import weakref

from historykit import ALICE, BOB, N_ALICE, N_BOB, RUN_INFO, H, base_world, make_db, make_spec
from simulator.checks.registry import REGISTRY
from simulator.checks.view import RunView


def _judged_world(h: H) -> None:
    """Mail both ways, a read, samples and polls: every index has something to hold."""
    base_world(h)
    h.poll(30_000, "h1", ["alice", "bob"])
    h.sample(30_000, {"alice": (N_ALICE, False, 30_000), "bob": (N_BOB, False, 30_000)})
    h.send(40_000, "h1", "alice", N_BOB, "hello bob")
    h.status(41_000, "h1", "bob", "idle")
    h.wake(42_000, "h1", "bob")
    h.read(43_000, "h1", "bob", [(N_ALICE, 40_000, "hello bob")])
    h.send(44_000, "h1", "bob", N_ALICE, "hello alice")
    h.poll(60_000, "h1", ["alice", "bob"])
    h.sample(60_000, {"alice": (N_ALICE, False, 60_000), "bob": (N_BOB, False, 60_000)})
    h.phase(600_000, "end")


def test_a_judged_view_is_freed_by_reference_counting_alone(tmp_path):
    db = make_db(tmp_path / "thatch.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                 messages=((ALICE, BOB, "hello bob", 40_000, 43_000, False),
                           (BOB, ALICE, "hello alice", 44_000, None, False)))
    h = H()
    _judged_world(h)
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        view = RunView(make_spec(), h.done(), db, RUN_INFO)
        verdicts = [judge(view) for pid, (_title, _rules, judge) in REGISTRY.items() if pid.startswith("P")]
        assert verdicts and all(v is not None for v in verdicts)
        gone = [weakref.ref(x) for x in (view, view.names, view.mail, view.hosting, view.disturbances)]
        gone += [weakref.ref(cut) for cut in (view.cut(5),)]
        del view, verdicts
        alive = [type(ref()).__name__ for ref in gone if ref() is not None]
        assert alive == [], f"held in a reference cycle after the run was judged: {alive}"
    finally:
        if was_enabled:
            gc.enable()
