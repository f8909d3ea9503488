"""P4 on the beats a run really committed: a rehosted session graduates only from
activity it already showed, and a poll whose heartbeat a crash cut short is no beat."""

from __future__ import annotations

import pytest

from historykit import BOB, N_BOB, RUN_INFO, H, base_world, make_spec
from simulator.checks.registry import REGISTRY
from simulator.checks.view import RunView


def judge(pid, h, db, spec=None):
    view = RunView(spec or make_spec(), h.done(), db, RUN_INFO)
    return REGISTRY[pid][2](view)


def _beating(h, until, proc="h1", start=0):
    for t in range(start, until, 30_000):
        h.poll(t + 500, proc, ["alice", "bob"])


def _rehosted_world(h):
    """h1 restarts into h2 at 1m with a 5m grace; h2 beats bob within the grace only."""
    base_world(h); _beating(h, 60_000)
    h.exit(60_000, "h1", "restart")
    h.start(60_000, "h2", {}, rehost_of="h1")
    for t in range(90_000, 1_200_000, 30_000):
        h.poll(t, "h2", ["alice", "bob"] if t < 360_000 else [])


def _restart_spec():
    return make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]},
                                {"id": "h2", "start": "never"}],
                     steps=[{"at": "1m", "restart": {"process": "h1", "into": "h2", "grace": "5m"}}])


@pytest.mark.rules("R15", "R14")
def test_p4_counts_a_graduation_only_from_activity_already_shown(db):
    """R15, R14: bob, rehosted and silent past the grace, is correctly stale at 8m; his
    first activity in the new daemon at 15m graduates him from then on, not before."""
    h = H(); _rehosted_world(h)
    h.sample(480_000, {"bob": (N_BOB, True, 330_000)})
    h.status(900_000, "h2", "bob", "busy")  # a turn: its status event graduates bob (D-real-host-5)
    h.call(900_000, "h2", "bob", "list", {}, True, "Active: ...")
    assert judge("P4", h, db, _restart_spec()).status != "fail"


@pytest.mark.rules("R15", "R14")
def test_p4_still_judges_a_graduated_session_live(db):
    """R15, R14: once bob showed activity in the new daemon he is hosted for good,
    so a stale sample after it is wrong even past the grace."""
    h = H(); _rehosted_world(h)
    h.status(300_000, "h2", "bob", "busy")  # a turn: its status event graduates bob (D-real-host-5)
    h.call(300_000, "h2", "bob", "list", {}, True, "Active: ...")
    bad = h.sample(480_000, {"bob": (N_BOB, True, 330_000)})
    v = judge("P4", h, db, _restart_spec())
    assert v.status == "fail" and v.witness[0]["i"] == bad["i"]


@pytest.mark.rules("R14")
@pytest.mark.parametrize("point", ["heartbeat", "sql"])
def test_p4_takes_the_last_committed_heartbeat_as_the_last_beat(db, point):
    """R14: a poll that crashed before its heartbeat statement (the named point, or a crash
    armed by the statement's text) beat no one; the session's last beat is the one before
    it, so stale 70 s later is on time."""
    h = H(); base_world(h); _beating(h, 60_000)           # beats at 0.5 s and 30.5 s
    h.poll(60_500, "h1", ["alice", "bob"])
    h.ev(60_500, "crash", "h1", None, point=point,
         sql="update chat_sessions set last_seen = ? where session_id in (?, ?)", step=0)
    h.exit(60_500, "h1", "crashed")
    h.sample(101_000, {"bob": (N_BOB, True, 30_500)})
    assert judge("P4", h, db).status != "fail"


@pytest.mark.rules("R14")
def test_p4_keeps_a_heartbeat_that_committed_before_the_crash(db):
    """R14: a crash after the heartbeat committed (or later in the poll) leaves the beat,
    so a stale sample less than 60 s after that poll is still too early."""
    for crash in ({"point": "heartbeat", "when": "after"}, {"point": "delivered-stamp"}):
        h = H(); base_world(h); _beating(h, 60_000)
        h.poll(60_500, "h1", ["alice", "bob"])
        h.ev(60_500, "crash", "h1", None, sql="update ...", step=0, **crash)
        h.exit(60_500, "h1", "crashed")
        bad = h.sample(101_000, {"bob": (N_BOB, True, 30_500)})
        v = judge("P4", h, db)
        assert v.status == "fail" and v.witness[-1]["i"] == bad["i"], crash


@pytest.mark.rules("R15", "R14")
def test_p4_waits_for_a_beat_after_a_late_graduation(db):
    """R15, R14: bob, silent past the grace, graduates at 15m05s; his row stays stale until
    the next poll beats him (15m30s), so a stale sample at 15m10s is right, one at 16m wrong."""
    h = H(); _rehosted_world(h)
    h.status(905_000, "h2", "bob", "busy")  # a turn: its status event graduates bob (D-real-host-5)
    h.call(905_000, "h2", "bob", "list", {}, True, "Active: ...")
    for t in range(930_000, 1_200_000, 30_000):
        h.poll(t + 1, "h2", ["alice", "bob"])
    h.sample(910_000, {"bob": (N_BOB, True, 330_000)})
    assert judge("P4", h, db, _restart_spec()).status != "fail"
    bad = h.sample(960_000, {"bob": (N_BOB, True, 330_000)})
    v = judge("P4", h, db, _restart_spec())
    assert v.status == "fail" and v.witness[0]["i"] == bad["i"]



@pytest.mark.rules("R14")
def test_p4_dates_an_orphan_from_the_host_that_died_last(db):
    """R14: h2 and h3 both host bob; h3 (started later) dies at 2m, h2 at 10m. Bob is orphaned
    from 10m, so a live sample 20 s later is right although h3 died 8 minutes before it."""
    h = H(); base_world(h); _beating(h, 60_000)
    h.exit(60_000, "h1", "killed")
    h.start(60_000, "h2", {"bob": BOB}, resumed="bob", how="-s")
    h.start(90_000, "h3", {"bob": BOB}, resumed="bob", how="-s")
    for t in range(90_000, 600_000, 30_000):
        h.poll(t + 1, "h2", ["bob"])
        if t < 120_000:
            h.poll(t + 2, "h3", ["bob"])
    h.exit(120_000, "h3", "killed")
    h.exit(600_000, "h2", "killed")
    h.sample(620_000, {"bob": (N_BOB, False, 570_001)})
    assert judge("P4", h, db).status != "fail"


@pytest.mark.rules("R15", "R14")
def test_p4_wants_a_silent_rehosted_tab_stale_once_its_deadline_passed(db):
    """R15, R14: bob, only re-hosted by h2 until 6m and silent there, ages out: live at 7m is
    still within a staleness period and a poll of the deadline, live at 8m is a tab kept fresh
    past its grace."""
    h = H(); _rehosted_world(h)
    h.sample(420_000, {"bob": (N_BOB, False, 330_000)})
    assert judge("P4", h, db, _restart_spec()).status != "fail"
    bad = h.sample(480_000, {"bob": (N_BOB, False, 450_000)})
    v = judge("P4", h, db, _restart_spec())
    assert v.status == "fail" and "rehost deadline" in v.message and v.witness[-1]["i"] == bad["i"], v.message


@pytest.mark.rules("R15", "R13")
def test_p4_fails_a_silent_rehosted_tab_beaten_after_its_deadline(db):
    """R15, R13: h2 re-hosts bob until 6m (its restart's own record of him is no activity of
    his); a sample a poll after that deadline may still show him live, but not with a beat
    newer than the deadline: a silent tab ages out and no host beats it any more."""
    h = H(); _rehosted_world(h)
    h.registered(60_000, "h2", "bob", BOB, N_BOB, how="rehost")
    h.sample(400_000, {"bob": (N_BOB, False, 330_000)})
    assert judge("P4", h, db, _restart_spec()).status != "fail"
    bad = h.sample(410_000, {"bob": (N_BOB, False, 390_000)})
    v = judge("P4", h, db, _restart_spec())
    assert v.status == "fail" and "beaten at t=6m30s" in v.message and v.witness[-1]["i"] == bad["i"], v.message


@pytest.mark.rules("R5", "R7", "R30")
def test_a_resumed_session_thatch_may_not_join_is_hosted_only_from_its_first_status(db):
    """R5, R7, R30: a `-s` resume hosts bob from the process start, unless auto-registration was
    off at that start or bob had left: then the startup path neither registers nor hosts him, and
    the judges count him hosted only from his first status event (D-real-host-3)."""
    def world(extra=()):
        h = H(); base_world(h)
        for e in extra:
            e(h)
        h.exit(60_000, "h1", "killed")
        h.start(60_000, "h2", {"bob": BOB}, resumed="bob", how="-s")
        h.status(90_000, "h2", "bob", "busy")
        return h

    def hosting(h, spec, t):
        view = RunView(spec, h.done(), db, RUN_INFO)
        inc = next(i for i in view.hosting.incs if i.proc == "h2")
        return view.hosting.is_hosting(inc, "bob", t)

    procs = [{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]}, {"id": "h2", "start": "never"}]
    assert hosting(world(), make_spec(processes=procs), 70_000)
    off = [procs[0], {**procs[1], "config": {"autoRegister": False}}]
    assert not hosting(world(), make_spec(processes=off), 70_000)
    assert hosting(world(), make_spec(processes=off), 90_000)
    left = [lambda h: h.call(30_000, "h1", "bob", "unregister", {}, True, "You left the chat directory.")]
    assert not hosting(world(left), make_spec(processes=procs), 70_000)
    assert hosting(world(left), make_spec(processes=procs), 95_000)


def _roster(active, stale):
    def lines(names):
        return "\n".join(f"- {n} | seen 1m ago" for n in names) or "(none)"
    return (f"[chat] 2 sessions registered\nActive ({len(active)}):\n{lines(active)}\n\n"
            f"Stale ({len(stale)}):\nStale sessions missed two heartbeats.\n{lines(stale)}")


def _cli(active, stale):
    out = "# Active Sessions\nNAME  AGE  STATUS\n" + "".join(f"{n}  1m ago  fresh\n" for n in active)
    return out + "\n# Stale Sessions\nThese sessions have missed their heartbeat.\nNAME  AGE  STATUS\n" + "".join(
        f"{n}  1m ago  stale\n" for n in stale)


def _reply(tool, bob_stale):
    """alice's reply of `tool` placing bob (N_BOB) stale or active."""
    if tool == "list":
        return _roster(["ba-sil-00001"] + ([] if bob_stale else [N_BOB]), [N_BOB] if bob_stale else [])
    if tool == "cli_list":
        return _cli(["ba-sil-00001"] + ([] if bob_stale else [N_BOB]), [N_BOB] if bob_stale else [])
    if tool == "send":
        note = "The recipient is stale (stale in chat_list): gone." if bob_stale else "The recipient is active: nudged."
        return f"[sent] to {N_BOB} (ses_bob)\n\n{note}"
    return (f"[broadcast] to 1 session\nrecipients: {'(none)' if bob_stale else N_BOB}"
            + (f"\nskipped stale: {N_BOB}" if bob_stale else ""))


@pytest.mark.rules("R14", "R16")
@pytest.mark.parametrize("tool", ["list", "cli_list", "send", "broadcast"])
def test_p4_judges_every_reply_that_places_a_row_by_its_age(tool):
    """R14, R16: bob's row was last stamped at 4m30s (his host died). A reply 60 s later must show
    him active, one 61 s later stale: chat_list's sections, the CLI's, a send's note and a
    broadcast's skips all follow the one rule. A reply the other way fails P4."""
    for age_s, shown_stale, fails in ((60, False, False), (60, True, True), (61, True, False), (61, False, True)):
        h = H(); base_world(h)
        h.sample(300_000, {"alice": ("ba-sil-00001", False, 300_000), "bob": (N_BOB, False, 270_000)})
        h.call(270_000 + age_s * 1000, "h1", "alice", tool, {}, True, _reply(tool, shown_stale))
        v = judge("P4", h, None)
        assert (v.status == "fail") == fails, (tool, age_s, shown_stale, v.message)


@pytest.mark.rules("R14")
def test_p4_leaves_a_stale_mark_unjudged_when_something_touched_the_row_since_the_sample():
    """R14: a poll beating bob between the sample and the reply may have moved his last_seen, so
    the reply's "active" is not judged against the sampled stamp."""
    h = H(); base_world(h)
    h.sample(300_000, {"alice": ("ba-sil-00001", False, 300_000), "bob": (N_BOB, False, 240_000)})
    h.poll(320_000, "h1", ["bob"])
    h.call(330_000, "h1", "alice", "list", {}, True, _reply("list", False))
    assert judge("P4", h, None).status != "fail"


@pytest.mark.rules("R16")
def test_p4_holds_the_cli_list_to_its_stale_bound_and_chat_list_to_every_row():
    """R16: bob's row was last stamped 25 hours before alice's queries. The CLI's list hides a
    stale row last seen more than a day ago by default (`--stale 2` shows it, `all` too);
    chat_list is unbounded, so leaving him out fails there."""
    day = 86_400_000
    cases = (("cli_list", {}, False, False), ("cli_list", {}, True, True), ("cli_list", {"stale": 2}, True, False),
             ("cli_list", {"stale": 2}, False, True), ("cli_list", {"stale": "all"}, False, True),
             ("list", {}, True, False), ("list", {}, False, True))
    for tool, args, shown, fails in cases:
        h = H(); base_world(h)
        t = day + 2 * 3_600_000
        h.sample(t - 30_000, {"alice": ("ba-sil-00001", False, t - 30_000), "bob": (N_BOB, True, t - 25 * 3_600_000)})
        text = (_cli if tool == "cli_list" else _roster)(["ba-sil-00001"], [N_BOB] if shown else [])
        h.call(t, "h1", "alice", tool, args, True, text)
        v = judge("P4", h, None)
        assert (v.status == "fail") == fails, (tool, args, shown, v.message)


@pytest.mark.rules("R14")
def test_p4_takes_a_poll_naming_no_hosted_set_as_a_beat_of_every_session(db):
    """R14: a poll event that lists no hosted set beat every session its process hosts, so a
    stale sample of bob while h1 keeps polling so is a failure, with that poll as the last beat."""
    h = H(); base_world(h)
    for t in range(500, 120_000, 30_000):
        h.ev(t, "poll", "h1")
    bad = h.sample(100_000, {"bob": (N_BOB, True, 90_500)})
    v = judge("P4", h, db)
    assert v.status == "fail" and v.witness[0]["i"] == bad["i"] and v.witness[1]["kind"] == "poll", v
