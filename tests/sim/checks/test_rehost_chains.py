"""Re-hosting across daemon restarts (R15, D-runtime-15), as P3 and P4 judge it: a session
the previous daemon was itself only re-hosting keeps that daemon's deadline, and a re-hosted
session that went silent past its deadline is back with an unknown status when it shows
activity again."""

from __future__ import annotations

import pytest

from historykit import ALICE, BOB, N_ALICE, N_BOB, RUN_INFO, H, base_world, make_db, make_spec
from simulator.checks.registry import REGISTRY
from simulator.checks.view import RunView


def judge(pid, h, db, spec):
    return REGISTRY[pid][2](RunView(spec, h.done(), db, RUN_INFO))


def one_message_db(path, created):
    return make_db(path, sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                   messages=((ALICE, BOB, "hello", created, None, 0),))


def _beating(h, until, proc="h1", start=0):
    for t in range(start, until, 30_000):
        h.poll(t + 500, proc, ["alice", "bob"])


def _chained_world(h, *, bob_active_in_h2=False):
    """h1 restarts into h2 at 1m with a 5m grace (bob re-hosted until 6m); h2 restarts into
    h3 at 2m with the default 24 h grace. h3 beats bob only while its deadline lasts."""
    base_world(h); _beating(h, 60_000)
    h.exit(60_000, "h1", "restart")
    h.start(60_000, "h2", {}, rehost_of="h1")
    h.poll(90_000, "h2", ["alice", "bob"])
    if bob_active_in_h2:
        h.status(100_000, "h2", "bob", "busy")  # a turn: its status event graduates bob
        h.call(100_000, "h2", "bob", "list", {}, True, "Active: ...")
    h.exit(120_000, "h2", "restart")
    h.start(120_000, "h3", {}, rehost_of="h2")
    for t in range(150_000, 1_200_000, 30_000):
        h.poll(t, "h3", ["alice", "bob"] if t < 360_000 or bob_active_in_h2 else ["alice"])


def _chained_spec():
    return make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]},
                                {"id": "h2", "start": "never"}, {"id": "h3", "start": "never"}],
                     steps=[{"at": "1m", "restart": {"process": "h1", "into": "h2", "grace": "5m"}},
                            {"at": "2m", "restart": {"process": "h2", "into": "h3"}}])


@pytest.mark.rules("R15", "R14")
def test_p4_keeps_the_first_rehost_deadline_through_a_chain_of_restarts(db):
    """R15, R14: bob, silent since h1, is only re-hosted by h2 and keeps its 6m deadline in h3
    (a chain of restarts must not keep a closed tab fresh); stale at 8m is right, although
    h3's own grace is 24 h."""
    h = H(); _chained_world(h)
    h.sample(480_000, {"bob": (N_BOB, True, 330_000)})
    assert judge("P4", h, db, _chained_spec()).status != "fail"


@pytest.mark.rules("R15", "R14")
def test_p4_gives_a_session_that_graduated_midway_the_new_daemons_grace(db):
    """R15, R14: bob showed activity in h2, so h2 hosted him for real and h3 re-hosts him for
    its own 24 h: stale at 8m is wrong."""
    h = H(); _chained_world(h, bob_active_in_h2=True)
    bad = h.sample(480_000, {"bob": (N_BOB, True, 330_000)})
    v = judge("P4", h, db, _chained_spec())
    assert v.status == "fail" and v.witness[0]["i"] == bad["i"]


@pytest.mark.rules("R15", "R18")
def test_p3_owes_no_wake_to_a_session_past_its_first_rehost_deadline(tmp_path):
    """R15, R18: mail to bob at 10m, past the 6m deadline he kept through h2 into h3, is owed
    no wake; had he graduated in h2, h3 would owe one."""
    for active, owed in ((False, False), (True, True)):
        h = H(); _chained_world(h, bob_active_in_h2=active)
        h.send(600_000, "h3", "alice", N_BOB, "hello")
        h.phase(1_200_000, "end")
        v = judge("P3", h, one_message_db(tmp_path / f"chain-{active}.db", 600_000), _chained_spec())
        assert (v.status == "fail") == owed, (active, v.message)


@pytest.mark.rules("R15", "R19")
def test_p3_owes_no_wake_to_a_returning_tab_until_its_status_is_seen(tmp_path):
    """R15, R19: bob, re-hosted by h2 until 6m and silent, drops out with the idle status assumed
    of him; his call at 10m alone does not host him again (only a status event does,
    D-real-host-5), so no wake is owed for mail at 11m until h2 sees him idle (at 12m),
    from when one is."""
    for idle_at, owed in ((None, False), (720_000, True)):
        h = H(); base_world(h)
        h.exit(60_000, "h1", "restart")
        h.start(60_000, "h2", {}, rehost_of="h1")
        h.call(600_000, "h2", "bob", "list", {}, True, "Active: ...")
        if idle_at is not None:
            h.status(idle_at, "h2", "bob")
        h.send(660_000, "h2", "alice", N_BOB, "hello")
        h.phase(1_200_000, "end")
        spec = make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]},
                                    {"id": "h2", "start": "never"}],
                         steps=[{"at": "1m", "restart": {"process": "h1", "into": "h2", "grace": "5m"}}])
        v = judge("P3", h, one_message_db(tmp_path / f"back-{idle_at}.db", 660_000), spec)
        assert (v.status == "fail") == owed, (idle_at, v.message)


DAY = 86_400_000


def _reloaded_world(h, *, bob_idle_at=None):
    """h1 hosts alice and bob; its plugin reloads at 1m (a fresh runtime in the same process,
    re-hosting what the old one hosted for the default 24 h grace). bob, silent unless
    `bob_idle_at`, drops out of the hosted set when that grace ends; his explicit register
    at 24h2m hosts nothing (only a status event does)."""
    base_world(h)
    h.poll(30_000, "h1", ["alice", "bob"])
    h.ev(60_000, "fault-fired", fault="reload", step=0, detail={"target": "h1"})
    if bob_idle_at is not None:
        h.status(bob_idle_at, "h1", "bob")
    for t in (90_000, 7_190_000):
        h.poll(t, "h1", ["alice", "bob"])
    h.poll(DAY + 90_000, "h1", ["alice", "bob"] if bob_idle_at is not None else ["alice"])
    h.call(DAY + 120_000, "h1", "bob", "register", {}, True, f"[registered] as {N_BOB}")


def _reload_spec():
    return make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]}],
                     steps=[{"at": "1m", "reload": {"process": "h1"}}])


@pytest.mark.rules("R15", "R14")
def test_p4_lets_a_session_silent_since_a_reload_go_stale_past_its_grace(db):
    """R15, R14: a plugin reload re-hosts bob only for its grace (D-later-sim-2); silent, he
    drops out a day later and goes stale, which his explicit register does not change (seed
    1040 of the thatch-later campaign: P4 took the reloaded runtime for one still hosting him)."""
    h = H(); _reloaded_world(h)
    h.sample(DAY + 240_000, {"bob": (N_BOB, True, DAY + 120_000)})
    v = judge("P4", h, db, _reload_spec())
    assert v.status != "fail", v.message


@pytest.mark.rules("R15", "R14")
def test_p4_still_holds_a_reloaded_runtime_to_its_grace_and_to_graduation(db):
    """R15, R14: within the reload's grace bob must stay fresh, and once a status event hosts him
    in the fresh runtime he is hosted for good: stale in either case fails."""
    h = H(); _reloaded_world(h)
    bad = h.sample(7_200_000, {"bob": (N_BOB, True, 90_000)})
    v = judge("P4", h, db, _reload_spec())
    assert v.status == "fail" and v.witness[0]["i"] == bad["i"], v.message
    h = H(); _reloaded_world(h, bob_idle_at=300_000)
    bad = h.sample(DAY + 240_000, {"bob": (N_BOB, True, DAY + 90_000 - 120_000)})
    v = judge("P4", h, db, _reload_spec())
    assert v.status == "fail" and v.witness[0]["i"] == bad["i"], v.message


@pytest.mark.rules("R29", "R15")
def test_p4_a_reload_while_chat_is_disabled_hosts_nothing(db):
    """R29, R15: the fresh runtime of a reload reads its config; with chat turned off before it, it starts no
    poller and hosts nothing, so bob going stale after is no failure (seed 1070 of the thatch-later campaign)."""
    h = H(); base_world(h)
    h.poll(30_000, "h1", ["alice", "bob"])
    h.ev(60_000, "fault-fired", fault="reload", step=1, detail={"target": "h1"})
    h.sample(150_000, {"bob": (N_BOB, True, 30_000)})
    spec = make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]}],
                     steps=[{"at": "0s", "config": {"process": "h1", "enabled": False}},
                            {"at": "1m", "reload": {"process": "h1"}}])
    v = judge("P4", h, db, spec)
    assert v.status != "fail", v.message
