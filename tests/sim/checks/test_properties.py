"""The property checkers P1-P10 on hand-built histories: each passes a good run and
fails a bad one with the offending events in its witness."""

from __future__ import annotations

import pytest

from historykit import ALICE, BOB, CAROL, N_ALICE, N_BOB, N_CAROL, RUN_INFO, H, base_world, make_db, make_spec
from simulator.checks import check_all
from simulator.checks.registry import REGISTRY
from simulator.checks.view import RunView
from simulator.design import MAIL_SWEEP_AGE_MS


def judge(pid, h, db, spec=None):
    view = RunView(spec or make_spec(), h.done(), db, RUN_INFO)
    return REGISTRY[pid][2](view)


def in_witness(v, *events):
    ids = {(w.get("i"), w.get("kind")) for w in v.witness}
    return all((e["i"], e["kind"]) in ids for e in events)


# --- registry ---------------------------------------------------------------

def test_every_property_is_registered_with_a_docstring_and_rules():
    """Each of P1-P15 has a title and a one-sentence docstring; P1-P11 and P15 name their R-ids, P12-P14 (the
    later design's, beyond R1-R36) the later behaviour they state."""
    properties = [pid for pid in REGISTRY if pid.startswith("P")]
    assert sorted(properties, key=lambda p: int(p[1:])) == [f"P{n}" for n in range(1, 16)]
    for pid, (title, rules, fn) in REGISTRY.items():
        assert title and fn.__doc__.strip(), pid
        assert rules or pid.startswith("Q") or "the later design's" in " ".join(fn.__doc__.split()), pid


# --- P1 ---------------------------------------------------------------------

@pytest.mark.rules("R25")
def test_p1_passes_when_the_host_wakes(db):
    """R25: a wake received by the live host of the session passes."""
    h = H(); base_world(h)
    h.wake(60_000, "h1", "bob")
    v = judge("P1", h, db)
    assert v.status == "pass" and v.judged > 0, v.message  # a pass says how much it judged


@pytest.mark.rules("R25")
def test_p1_fails_a_wake_by_a_non_host(db):
    """R25: a wake recorded by a process that does not host the session fails."""
    h = H(); base_world(h)
    h.start(0, "h2", {"carol": CAROL})
    bad = h.wake(60_000, "h2", "bob", hosted=False)
    v = judge("P1", h, db)
    assert v.status == "fail" and in_witness(v, bad)


@pytest.mark.rules("R25")
def test_p1_fails_one_batch_woken_by_two_live_processes(db):
    """R25: two live incarnations both waking the same session within the re-nudge window fail."""
    h = H(); base_world(h)
    h.start(10_000, "h2", {"bob": BOB}, resumed="bob", how="-s")
    a = h.wake(60_000, "h1", "bob")
    b = h.wake(90_000, "h2", "bob")
    v = judge("P1", h, db)
    assert v.status == "fail" and in_witness(v, a, b)


@pytest.mark.rules("R25", "R20")
def test_p1_allows_a_second_host_to_wake_new_mail_only(db):
    """R25, R20: a wake that counts only mail that arrived after the first wake is another batch."""
    h = H(); base_world(h)
    h.start(10_000, "h2", {"bob": BOB}, resumed="bob", how="-s")
    h.wake(60_000, "h1", "bob")
    h.send(70_000, "h1", "alice", N_BOB, "more")
    h.wake(90_000, "h2", "bob", count=1)
    assert judge("P1", h, db).status == "pass"


@pytest.mark.rules("R25", "R23")
def test_p1_allows_the_next_host_to_rewake_after_the_first_died(db):
    """R25, R23: after the first host died, its successor may wake the same batch."""
    h = H(); base_world(h)
    h.wake(60_000, "h1", "bob")
    h.exit(60_000, "h1", "crashed")
    h.start(70_000, "h2", {"bob": BOB}, resumed="bob", how="-s")
    h.wake(90_000, "h2", "bob")
    assert judge("P1", h, db).status == "pass"

@pytest.mark.rules("R25", "R18")
def test_p1_tells_a_re_nudge_of_older_mail_from_a_batch_woken_twice(db):
    """R25, R18: h1 and h2 both host bob (two tabs on one session). h2 woke him for alice's
    message at 20 s; h1 for carol's at 110 s; h2 re-nudges alice's at 15m20s, when it came due
    again: other mail, no second deliverer. Had h2 woken him for carol's (h1's batch), it fails."""
    for senders, fails in (((N_ALICE,), False), ((N_CAROL,), True)):
        h = H(); base_world(h)
        h.start(0, "h2", {"bob": BOB})
        h.wake(20_000, "h2", "bob", senders=(N_ALICE,))
        h.wake(110_000, "h1", "bob", senders=(N_CAROL,))
        h.wake(920_000 if not fails else 200_000, "h2", "bob", senders=senders)
        v = judge("P1", h, db)
        assert (v.status == "fail") == fails, v.message


# --- P2 ---------------------------------------------------------------------

@pytest.mark.rules("R22")
def test_p2_passes_six_wakes_an_hour(db):
    """R22: six wakes in an hour, the seventh an hour after the first, pass."""
    h = H(); base_world(h)
    for k in range(6):
        h.wake(60_000 + k * 900_000 // 2, "h1", "bob")
    h.wake(60_000 + 3_600_000, "h1", "bob")
    v = judge("P2", h, db)
    assert v.status == "pass" and v.judged > 0, v.message  # a pass says how much it judged


@pytest.mark.rules("R22")
def test_p2_fails_a_seventh_wake_within_the_hour(db):
    """R22: a seventh wake within a rolling hour from one incarnation fails."""
    h = H(); base_world(h)
    ws = [h.wake(60_000 + k * 300_000, "h1", "bob") for k in range(7)]
    v = judge("P2", h, db)
    assert v.status == "fail" and in_witness(v, ws[0], ws[6])


@pytest.mark.rules("R22")
def test_p2_counts_per_incarnation(db):
    """R22: a restarted process starts a fresh count (the cap is in memory)."""
    h = H(); base_world(h)
    for k in range(6):
        h.wake(60_000 + k * 60_000, "h1", "bob")
    h.exit(500_000, "h1", "killed")
    h.start(510_000, "h1", {"alice": ALICE, "bob": BOB}, incarnation=1)
    h.wake(540_000, "h1", "bob")
    assert judge("P2", h, db).status == "pass"


# --- P3 ---------------------------------------------------------------------

def _p3_db(tmp_path, read=None):
    return make_db(tmp_path / "p3.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                   messages=((ALICE, BOB, "hello", 10_000, read, 0),))


@pytest.mark.rules("R18", "R19")
def test_p3_passes_unread_mail_that_was_woken(tmp_path):
    """R18, R19: unread mail at the end with a wake after its creation passes."""
    h = H(); base_world(h); h.status(1_000, "h1", "bob")
    h.send(10_000, "h1", "alice", N_BOB, "hello")
    h.wake(30_000, "h1", "bob")
    h.phase(600_000, "end")
    assert judge("P3", h, _p3_db(tmp_path)).status == "pass"


@pytest.mark.rules("R18", "R19")
def test_p3_fails_unread_mail_never_woken(tmp_path):
    """R18, R19: unread mail to a live-hosted, idle recipient with no wake after it fails."""
    h = H(); base_world(h); h.status(1_000, "h1", "bob")
    _, res = h.send(10_000, "h1", "alice", N_BOB, "hello")
    h.phase(600_000, "end")
    v = judge("P3", h, _p3_db(tmp_path))
    assert v.status == "fail" and in_witness(v, res)


@pytest.mark.rules("R18")
def test_p3_does_not_blame_a_run_that_left_no_live_host(tmp_path):
    """R18: mail to a session whose host died is not an obligation (the run gave it no chance)."""
    h = H(); base_world(h); h.status(1_000, "h1", "bob")
    h.send(10_000, "h1", "alice", N_BOB, "hello")
    h.exit(20_000, "h1", "killed")
    h.phase(600_000, "end")
    assert judge("P3", h, _p3_db(tmp_path)).status == "skipped"


@pytest.mark.rules("R23", "R21")
def test_p3_fails_a_lost_stamp_without_renudge(tmp_path):
    """R23: a crash at delivered-stamp after a wake must be followed by another wake once re-hosted."""
    h = H(); base_world(h); h.status(1_000, "h1", "bob")
    h.send(10_000, "h1", "alice", N_BOB, "hello")
    w = h.wake(30_000, "h1", "bob")
    c = h.crash(30_000, "h1", "bob", "delivered-stamp")
    h.exit(30_000, "h1", "crashed")
    h.start(100_000, "h1", {"alice": ALICE, "bob": BOB}, incarnation=1)
    h.status(100_000, "h1", "bob")
    h.phase(600_000, "end")
    v = judge("P3", h, _p3_db(tmp_path))
    assert v.status == "fail" and in_witness(v, w, c)


@pytest.mark.rules("R23", "R21")
def test_p3_passes_a_renudge_after_the_crash(tmp_path):
    """R23: the re-hosted process wakes the same batch again."""
    h = H(); base_world(h); h.status(1_000, "h1", "bob")
    h.send(10_000, "h1", "alice", N_BOB, "hello")
    h.wake(30_000, "h1", "bob")
    h.crash(30_000, "h1", "bob", "delivered-stamp")
    h.exit(30_000, "h1", "crashed")
    h.start(100_000, "h1", {"alice": ALICE, "bob": BOB}, incarnation=1)
    h.status(100_000, "h1", "bob")
    h.wake(130_000, "h1", "bob")
    h.phase(600_000, "end")
    assert judge("P3", h, _p3_db(tmp_path)).status == "pass"


# --- P4 ---------------------------------------------------------------------

def _beating(h, until, proc="h1", start=0):
    for t in range(start, until, 30_000):
        h.poll(t + 500, proc, ["alice", "bob"])


@pytest.mark.rules("R14")
def test_p4_passes_live_sessions_never_stale(db):
    """R14: samples of sessions hosted by a live, beating process show them active."""
    h = H(); base_world(h); _beating(h, 300_000)
    for t in (60_000, 120_000, 240_000):
        h.sample(t, {"alice": (N_ALICE, False, t - 29_000), "bob": (N_BOB, False, t - 29_000)})
    v = judge("P4", h, db)
    assert v.status == "pass" and v.judged > 0, v.message  # a pass says how much it judged


@pytest.mark.rules("R14")
def test_p4_fails_a_live_session_sampled_stale(db):
    """R14: a session hosted by a live, beating process must never sample stale."""
    h = H(); base_world(h); _beating(h, 300_000)
    bad = h.sample(240_000, {"alice": (N_ALICE, False, 239_000), "bob": (N_BOB, True, 100_000)})
    v = judge("P4", h, db)
    assert v.status == "fail" and v.witness[0]["i"] == bad["i"]


@pytest.mark.rules("R14")
def test_p4_fails_a_dead_host_session_still_active(db):
    """R14: 60 s plus a poll interval after its host died, a session must sample stale."""
    h = H(); base_world(h); _beating(h, 100_000)
    kill = h.exit(100_000, "h1", "killed")
    h.sample(120_000, {"bob": (N_BOB, False, 90_500)})
    bad = h.sample(200_000, {"bob": (N_BOB, False, 90_500)})
    v = judge("P4", h, db)
    assert v.status == "fail" and in_witness(v, kill) and v.witness[-1]["i"] == bad["i"]


@pytest.mark.rules("R14")
def test_p4_fails_a_dead_host_session_stale_too_early(db):
    """R14: a session is not stale before 60 s after its last beat, even when its host died."""
    h = H(); base_world(h); _beating(h, 100_000)
    h.exit(100_000, "h1", "killed")
    bad = h.sample(110_000, {"bob": (N_BOB, True, 90_500)})
    v = judge("P4", h, db)
    assert v.status == "fail" and v.witness[-1]["i"] == bad["i"]


@pytest.mark.rules("R14", "R35")
def test_p4_passes_dead_host_stale_on_time_and_exempts_mcp(db):
    """R14, R35: stale from kill + 60 s + a poll on; mcp rows are never judged."""
    h = H(); base_world(h); _beating(h, 100_000)
    h.exit(100_000, "h1", "killed")
    h.sample(120_000, {"bob": (N_BOB, False, 90_500), "carol": (N_CAROL, True, 0, "mcp")})
    h.sample(200_000, {"bob": (N_BOB, True, 90_500)})
    assert judge("P4", h, db).status == "pass"


# --- P5 ---------------------------------------------------------------------

@pytest.mark.rules("R9", "R10")
def test_p5_passes_a_send_stored_once_and_read_once(tmp_path):
    """R9, R10: one accepted send, one row, one read."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                 messages=((ALICE, BOB, "hello", 10_000, 40_000, 0),))
    h = H(); base_world(h)
    h.send(10_000, "h1", "alice", N_BOB, "  hello ")
    h.read(40_000, "h1", "bob", [(N_ALICE, 10_000, "hello")])
    v = judge("P5", h, db)
    assert v.status == "pass" and v.judged > 0, v.message  # a pass says how much it judged


@pytest.mark.rules("R9", "R32")
def test_p5_finds_a_claude_code_send_stored_as_the_session_it_claimed(tmp_path):
    """R9, R32: a Claude Code session's server falls through to the claimed `as` when its anchors
    fail (its parent pid mapped long ago, its own row pruned), so carol's send claiming alice is
    stored as alice's mail: found, not lost. Without the claim, alice's row is not carol's send."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                 messages=((ALICE, BOB, "hello", 40_000, None, 0),))
    for args, fails in (({"as": N_ALICE}, False), ({}, True)):
        h = H(); base_world(h)
        h.start(0, "cc", {"carol": "cc-host-1"}, kind="claude-code")
        h.call(40_000, "cc", "carol", "send", {"to": N_BOB, "body": "hello", **args}, True,
               f"[sent] to {N_BOB} (ses_x)\n\nThe recipient is active.")
        spec = make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]},
                                    {"id": "cc", "kind": "claude-code", "sessions": [{"id": "carol"}]}])
        v = judge("P5", h, db, spec)
        assert (v.status == "fail") == fails, (args, v.message)


@pytest.mark.rules("R10", "R32")
def test_p5_finds_a_claude_code_read_that_drained_the_session_it_claimed(tmp_path):
    """R10, R32: carol's Claude Code read claiming bob fell through to the claim (D-props-14) and
    drained bob's inbox: bob's stamped message was returned, not lost. A read that returned
    nothing leaves the stamp unexplained."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                 messages=((ALICE, BOB, "hello", 10_000, 40_000, 0),))
    for lines, fails in (([(N_ALICE, 10_000, "hello")], False), ([], True)):
        h = H(); base_world(h)
        h.start(0, "cc", {"carol": "cc-host-1"}, kind="claude-code")
        h.send(10_000, "h1", "alice", N_BOB, "hello")
        h.read(40_000, "cc", "carol", lines, args={"as": N_BOB})
        spec = make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]},
                                    {"id": "cc", "kind": "claude-code", "sessions": [{"id": "carol"}]}])
        v = judge("P5", h, db, spec)
        assert (v.status == "fail") == fails, (lines, v.message)


@pytest.mark.rules("R9")
def test_p5_fails_an_accepted_send_missing_from_the_db(db):
    """R9: an ok chat_send with no stored row fails."""
    h = H(); base_world(h)
    _, res = h.send(10_000, "h1", "alice", N_BOB, "hello")
    v = judge("P5", h, db)
    assert v.status == "fail" and in_witness(v, res)


@pytest.mark.rules("R10", "R11")
def test_p5_fails_a_read_message_gone_from_the_db(tmp_path):
    """R10, R11: a message a read returned stays in the db (history outlives the read); one gone is lost."""
    for rows, want in ((((ALICE, BOB, "hello", 10_000, 40_000, 0),), "pass"), ((), "fail")):
        db = make_db(tmp_path / f"{want}.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                     messages=rows)
        h = H(); base_world(h)
        _, res = h.read(40_000, "h1", "bob", [(N_ALICE, 10_000, "hello")])
        v = judge("P5", h, db)
        assert v.status == want and (want == "pass" or ("is gone from the db" in v.message and in_witness(v, res))), \
            v.message


@pytest.mark.rules("R26")
def test_p5_allows_prune_to_sweep_mail(tmp_path):
    """R26: unread mail to a pruned session may be swept once it is older than the
    sweep age (7 days) by the run's end; younger mail cannot have been."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0),), pruned=(BOB,))
    for duration, want in ((10_000 + MAIL_SWEEP_AGE_MS + 1_000, "pass"), (10_000 + MAIL_SWEEP_AGE_MS - 5_000, "fail")):
        h = H(); base_world(h)
        h.send(10_000, "h1", "alice", N_BOB, "hello")
        view = RunView(make_spec(), h.done(), db, {**RUN_INFO, "duration_ms": duration})
        assert REGISTRY["P5"][2](view).status == want, duration


@pytest.mark.rules("R10")
def test_p5_tells_twins_apart_by_count_not_by_row(tmp_path):
    """R10: two sends of one text in one second, a read between them: the read's one line stands
    for either row, so one stamped twin is all it owes; a read returning both owes two stamps."""
    twins = ((ALICE, BOB, "hello", 10_000, 10_000, 0), (ALICE, BOB, "hello", 10_000, None, 0))
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                 messages=twins)
    for lines, want in (([(N_ALICE, 10_000, "hello")], "pass"), ([(N_ALICE, 10_000, "hello")] * 2, "fail")):
        h = H(); base_world(h)
        h.send(10_000, "h1", "alice", N_BOB, "hello")
        h.read(10_000, "h1", "bob", lines)
        h.send(10_000, "h1", "alice", N_BOB, "hello")
        v = judge("P5", h, db)
        assert v.status == want, v.message


@pytest.mark.rules("R10")
def test_p5_fails_a_message_read_twice(tmp_path):
    """R10: a message returned by two reads with no crash inside chat_read between fails."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                 messages=((ALICE, BOB, "hello", 10_000, 40_000, 0),))
    h = H(); base_world(h)
    h.send(10_000, "h1", "alice", N_BOB, "hello")
    _, r1 = h.read(40_000, "h1", "bob", [(N_ALICE, 10_000, "hello")])
    _, r2 = h.read(50_000, "h1", "bob", [(N_ALICE, 10_000, "hello")])
    v = judge("P5", h, db)
    assert v.status == "fail" and in_witness(v, r1, r2)


@pytest.mark.rules("R10")
def test_p5_fails_a_message_stamped_read_that_no_read_returned(tmp_path):
    """R10: a row stamped read in the final db that no ok chat_read of its
    recipient ever returned is mail lost inside chat_read (stamped, never shown)."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                 messages=((ALICE, BOB, "hello", 10_000, 40_000, 0), (ALICE, BOB, "second", 20_000, 40_000, 0)))
    h = H(); base_world(h)
    h.send(10_000, "h1", "alice", N_BOB, "hello")
    h.send(20_000, "h1", "alice", N_BOB, "second")
    _, res = h.read(40_000, "h1", "bob", [(N_ALICE, 10_000, "hello")])  # "second" stamped but never shown
    v = judge("P5", h, db)
    assert v.status == "fail" and "stamped read" in v.message and in_witness(v, res)


@pytest.mark.rules("R10")
def test_p5_allows_a_stamp_nobody_saw_across_a_read_stamp_crash(tmp_path):
    """R10: with a crash inside chat_read the reverse check is not judged."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                 messages=((ALICE, BOB, "hello", 10_000, 40_000, 0),))
    h = H(); base_world(h)
    h.send(10_000, "h1", "alice", N_BOB, "hello")
    h.crash(40_000, "h1", "bob", "read-stamp")
    assert judge("P5", h, db).status == "pass"


@pytest.mark.rules("R10")
def test_p5_allows_a_reread_across_a_read_stamp_crash(tmp_path):
    """R10: a crash between chat_read's select and stamp lets the batch be read again."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                 messages=((ALICE, BOB, "hello", 10_000, 50_000, 0),))
    h = H(); base_world(h)
    h.send(10_000, "h1", "alice", N_BOB, "hello")
    h.read(40_000, "h1", "bob", [(N_ALICE, 10_000, "hello")])
    h.crash(45_000, "h1", "bob", "read-stamp")
    h.read(50_000, "h1", "bob", [(N_ALICE, 10_000, "hello")])
    assert judge("P5", h, db).status == "pass"


# --- P6 ---------------------------------------------------------------------

@pytest.mark.rules("R2", "R5")
def test_p6_passes_names_kept_across_a_resume(db):
    """R2, R5: a resumed session keeps its assigned name."""
    h = H(); base_world(h)
    h.sample(30_000, {"alice": (N_ALICE, False, 29_000), "bob": (N_BOB, False, 29_000)})
    h.exit(40_000, "h1", "killed")
    h.start(50_000, "h2", {"bob": BOB}, resumed="bob", how="-s")
    h.sample(60_000, {"alice": (N_ALICE, False, 29_000), "bob": (N_BOB, False, 55_000)})
    v = judge("P6", h, db)
    assert v.status == "pass" and v.judged > 0, v.message  # a pass says how much it judged


@pytest.mark.rules("R2")
def test_p6_fails_a_malformed_name(db):
    """R2: an assigned name is base-counter (five digits)."""
    h = H(); base_world(h)
    bad = h.registered(2_000, "h1", "carol", CAROL, "Carol_1")
    v = judge("P6", h, db)
    assert v.status == "fail" and in_witness(v, bad)


@pytest.mark.rules("R2")
def test_p6_fails_one_name_on_two_sessions(db):
    """R2: a name is never seen on two sessions."""
    h = H(); base_world(h)
    bad = h.registered(2_000, "h1", "carol", CAROL, N_BOB)
    v = judge("P6", h, db)
    assert v.status == "fail" and in_witness(v, bad)


@pytest.mark.rules("R26", "R5")
def test_p6_allows_a_new_name_after_a_row_silent_long_enough_to_be_pruned(db):
    """R26, R5: bob's row, last beaten at 29 s, is silent through a machine sleep of more than
    7 days; the prune at the wake may delete it, so a fresh name at his next registration (before
    any sample saw him gone) is no name change. One beat during the sleep's span would forbid it."""
    week = 7 * 86_400_000
    for beaten, fails in ((False, False), (True, True)):
        h = H(); base_world(h)
        h.sample(30_000, {"bob": (N_BOB, False, 29_000)})
        if beaten:
            h.poll(week // 2, "h1", ["alice", "bob"])
        h.registered(week + 60_000, "h1", "bob", BOB, "e-cho-00002")
        assert (judge("P6", h, db).status == "fail") == fails, beaten


@pytest.mark.rules("R5")
def test_p6_fails_a_name_change_without_a_leave(db):
    """R5: a reclaim keeps the name: a change while registered fails."""
    h = H(); base_world(h)
    a = h.sample(30_000, {"bob": (N_BOB, False, 29_000)})
    b = h.sample(60_000, {"bob": ("e-cho-00002", False, 59_000)})
    v = judge("P6", h, db)
    assert v.status == "fail" and in_witness(v, b) and v.witness[0]["i"] == a["i"]


@pytest.mark.rules("R6", "R2")
def test_p6_leave_then_register_needs_a_fresh_name(db):
    """R6, R2: after a leave an explicit register mints a fresh name; the old one back fails."""
    h = H(); base_world(h)
    h.sample(30_000, {"bob": (N_BOB, False, 29_000)})
    _, leave = h.call(40_000, "h1", "bob", "unregister", {}, True, "You left the chat directory.")
    h.sample(60_000, {"bob": (None, False, 0)})
    h.call(70_000, "h1", "bob", "register", {}, True, f"[registered] {N_BOB}")
    bad = h.registered(70_000, "h1", "bob", BOB, N_BOB, how="explicit")
    v = judge("P6", h, db)
    assert v.status == "fail" and in_witness(v, leave, bad)
    h2 = H(); base_world(h2)
    h2.call(40_000, "h1", "bob", "unregister", {}, True, "You left the chat directory.")
    h2.sample(60_000, {"bob": (None, False, 0)})
    h2.registered(70_000, "h1", "bob", BOB, "e-cho-00002", how="explicit")
    assert judge("P6", h2, db).status == "pass"


# --- P7 ---------------------------------------------------------------------

@pytest.mark.rules("R7")
def test_p7_passes_a_leave_until_explicit_register(db):
    """R7: gone after the leave, back only after an explicit chat_register."""
    h = H(); base_world(h)
    h.call(40_000, "h1", "bob", "unregister", {}, True, "You left the chat directory.")
    h.sample(60_000, {"bob": (None, False, 0)})
    h.call(70_000, "h1", "bob", "register", {}, True, "[registered] e-cho-00002")
    h.sample(90_000, {"bob": ("e-cho-00002", False, 70_000)})
    v = judge("P7", h, db)
    assert v.status == "pass" and v.judged > 0, v.message  # a pass says how much it judged


@pytest.mark.rules("R7", "R1")
def test_p7_fails_a_silent_comeback(db):
    """R7: a session registered again after a leave without an explicit register fails."""
    h = H(); base_world(h)
    _, leave = h.call(40_000, "h1", "bob", "unregister", {}, True, "You left the chat directory.")
    h.ev(50_000, "status", "h1", "bob", status="idle", compacting=False)
    bad = h.sample(60_000, {"bob": ("e-cho-00002", False, 50_000)})
    v = judge("P7", h, db)
    assert v.status == "fail" and in_witness(v, leave, bad)


# --- P8 ---------------------------------------------------------------------

def _bcast_world(h):
    base_world(h)
    h.start(0, "h2", {"carol": "cc-host-1", "dave": "ses_dave"}, kind="claude-code")
    h.sample(30_000, {"alice": (N_ALICE, False, 29_000), "bob": (N_BOB, False, 29_000),
                      "carol": (N_CAROL, True, 0, "mcp"), "dave": ("ze-phyr-00001", True, 0)})


def _bcast_text(recips, skipped=()):
    text = f"[broadcast] to {len(recips)} session{'' if len(recips) == 1 else 's'}\nrecipients: {', '.join(recips)}"
    return text + (f"\nskipped stale: {', '.join(skipped)}" if skipped else "")


@pytest.mark.rules("R12", "R35")
def test_p8_passes_the_right_recipients(tmp_path):
    """R12, R35: one row per live or mcp recipient, none for the sender or stale opencode rows."""
    from simulator.design import mcp_session_id
    carol = mcp_session_id("cc-host-1")
    db = make_db(tmp_path / "d.db",
                 sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0), (carol, N_CAROL, "mcp", 0)),
                 messages=((ALICE, BOB, "all", 40_000, None, 1), (ALICE, carol, "all", 40_000, None, 1)))
    h = H(); _bcast_world(h)
    h.call(40_000, "h1", "alice", "broadcast", {"body": "all"}, True, _bcast_text([N_BOB, N_CAROL], ["ze-phyr-00001"]))
    h.sample(60_000, {"alice": (N_ALICE, False, 59_000), "bob": (N_BOB, False, 59_000),
                      "carol": (N_CAROL, True, 0, "mcp"), "dave": ("ze-phyr-00001", True, 0)})
    v = judge("P8", h, db)
    assert v.status == "pass" and v.judged > 0, v.message  # a pass says how much it judged


@pytest.mark.rules("R12", "R35")
def test_p8_fails_an_mcp_row_left_out(tmp_path):
    """R35: an mcp row always receives a broadcast, however old its beat."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                 messages=((ALICE, BOB, "all", 40_000, None, 1),))
    h = H(); _bcast_world(h)
    _, res = h.call(40_000, "h1", "alice", "broadcast", {"body": "all"}, True,
                    _bcast_text([N_BOB], [N_CAROL, "ze-phyr-00001"]))
    h.sample(60_000, {"alice": (N_ALICE, False, 59_000), "bob": (N_BOB, False, 59_000),
                      "carol": (N_CAROL, True, 0, "mcp"), "dave": ("ze-phyr-00001", True, 0)})
    v = judge("P8", h, db)
    assert v.status == "fail" and in_witness(v, res)


@pytest.mark.rules("R12")
def test_p8_fails_a_missing_recipient_row(tmp_path):
    """R12: every named recipient has exactly one via_broadcast row."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)))
    h = H(); base_world(h)
    _, res = h.call(40_000, "h1", "alice", "broadcast", {"body": "all"}, True, _bcast_text([N_BOB]))
    v = judge("P8", h, db)
    assert v.status == "fail" and in_witness(v, res)


@pytest.mark.rules("R12")
def test_p8_knows_a_recipient_by_its_final_row_when_no_observation_named_it(tmp_path):
    """R12: carol registered at a machine's wake and the run ended before a sample saw her;
    the broadcast names her and her row is there, which the final rows tell."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0),
                                              (CAROL, N_CAROL, "opencode", 40_000)),
                 messages=((ALICE, BOB, "all", 40_000, None, 1), (ALICE, CAROL, "all", 40_000, None, 1)))
    h = H(); base_world(h)
    h.start(0, "h2", {"carol": CAROL})
    h.call(40_000, "h1", "alice", "broadcast", {"body": "all"}, True, _bcast_text([N_BOB, N_CAROL]))
    v = judge("P8", h, db)
    assert v.status == "pass", v.message


@pytest.mark.rules("R12", "R26")
def test_p8_excuses_a_missing_row_only_where_a_prune_may_have_swept_it(tmp_path):
    """R12, R26: bob's broadcast row is gone at the end. His row then went silent for more than
    7 days (the prune deletes it and a later pass sweeps his unread mail), which excuses it;
    with a beat every few days it cannot have been pruned, and the missing row fails."""
    day = 86_400_000
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)))
    for beats, fails in (((), False), ((4 * day, 7 * day + 3_600_000), True)):
        h = H(); base_world(h)
        h.sample(30_000, {"alice": (N_ALICE, False, 29_000), "bob": (N_BOB, False, 29_000)})
        h.call(40_000, "h1", "alice", "broadcast", {"body": "all"}, True, _bcast_text([N_BOB]))
        for t in beats:
            h.poll(t, "h1", ["alice", "bob"])
        h.phase(8 * day, "end")
        assert (judge("P8", h, db).status == "fail") == fails, beats


@pytest.mark.rules("R12", "R26", "R35")
def test_p8_does_not_count_an_mcp_row_the_prune_may_have_deleted_before_the_broadcast(tmp_path):
    """R35, R26: carol's mcp row was last seen at 0 and the broadcast comes 7 days and a minute
    later, after the machine slept: the prune may have deleted her row first, and her next prompt
    registered her under a fresh name before the next sample. Left out, she is excused; seen
    under her old name a day before the broadcast, she could not have been pruned and fails."""
    day = 86_400_000
    t = 7 * day + 60_000
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                 messages=((ALICE, BOB, "all", t, None, 1),))
    for seen, name_after, fails in ((0, "a-corn-00001", False), (6 * day, N_CAROL, True)):
        h = H(); _bcast_world(h)
        h.sample(t - 30_000, {"alice": (N_ALICE, False, t - 31_000), "bob": (N_BOB, False, t - 31_000),
                              "carol": (N_CAROL, True, seen, "mcp"), "dave": ("ze-phyr-00001", True, 0)})
        h.call(t, "h1", "alice", "broadcast", {"body": "all"}, True, _bcast_text([N_BOB], ["ze-phyr-00001"]))
        h.sample(t + 30_000, {"alice": (N_ALICE, False, t + 29_000), "bob": (N_BOB, False, t + 29_000),
                              "carol": (name_after, False, t + 1_000, "mcp"), "dave": ("ze-phyr-00001", True, 0)})
        v = judge("P8", h, db)
        assert (v.status == "fail") == fails, (seen, v.message)


@pytest.mark.rules("R12", "R7")
def test_p8_counts_the_rows_of_a_recipient_whose_name_nothing_ties_to_a_session(tmp_path):
    """R12: the broadcast names rus-set-00001, a session that registered and left (R7) within one
    instant, so no event, sample or final row says which session had that name. Its row is
    counted, not matched by name: one row passes, none fails."""
    for rows, fails in ((((ALICE, CAROL, "all", 40_000, None, 1),), False), ((), True)):
        db = make_db(tmp_path / f"d{len(rows)}.db", sessions=((ALICE, N_ALICE, "opencode", 0),), messages=rows)
        h = H(); base_world(h)
        h.call(40_000, "h1", "alice", "broadcast", {"body": "all"}, True, _bcast_text(["rus-set-00001"]))
        v = judge("P8", h, db)
        assert (v.status == "fail") == fails, (rows, v.message)


@pytest.mark.rules("R12")
def test_p8_fails_a_crashed_broadcast_that_left_rows(tmp_path):
    """R12: a broadcast cut by a crash inside its transaction leaves zero rows."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                 messages=((ALICE, BOB, "all", 40_000, None, 1),))
    h = H(); base_world(h)
    call = h.ev(40_000, "tool-call", "h1", "alice", tool="thatch_chat_broadcast", args={"body": "all"})
    h.crash(40_000, "h1", "alice", "broadcast-insert")
    v = judge("P8", h, db)
    assert v.status == "fail" and in_witness(v, call)


# --- P9 ---------------------------------------------------------------------

def _fork_world(h, new_name):
    h.ev(0, "run-start", scenario="t", seed=0, dispatch_mode="serial")
    h.start(0, "c1", {"carol": "host-old"}, kind="claude-code")
    h.ev(1_000, "hook", "c1", "carol", hook="SessionStart",
         line=f'[thatch] chat: you are {N_CAROL} (no unread mail for you).', decision=None)
    f = h.ev(50_000, "fork", "c1", "carol", old_host_id="host-old", new_host_id="host-new")
    line = h.ev(60_000, "hook", "c1", "carol", hook="UserPromptSubmit",
                line=f'[thatch] chat: you are {new_name} (1 unread message(s) for you).', decision=None)
    return f, line


@pytest.mark.rules("R33")
def test_p9_passes_name_and_mail_carried(tmp_path):
    """R33: after a fork the hook line shows the old name and the mail moved."""
    from simulator.design import mcp_session_id
    db = make_db(tmp_path / "d.db", sessions=((mcp_session_id("host-new"), N_CAROL, "mcp", 0),),
                 messages=((ALICE, mcp_session_id("host-new"), "hi", 10_000, None, 0),))
    h = H(); _fork_world(h, N_CAROL)
    v = judge("P9", h, db)
    assert v.status == "pass" and v.judged > 0, v.message  # a pass says how much it judged


@pytest.mark.rules("R33")
def test_p9_fails_a_new_name_after_the_fork(tmp_path):
    """R33: a fork that shows a freshly minted name lost the identity."""
    db = make_db(tmp_path / "d.db")
    h = H(); f, line = _fork_world(h, "o-pal-00002")
    v = judge("P9", h, db)
    assert v.status == "fail" and in_witness(v, f, line)


@pytest.mark.rules("R33", "R7")
def test_p9_leaves_a_session_that_left_after_the_fork_to_p7(tmp_path):
    """R33, R7: a fork, then a leave, then (its tombstone aged out) a hook line with a fresh name:
    the fork did not lose the identity, the leave gave it up, so P9 judges nothing there."""
    db = make_db(tmp_path / "d.db")
    h = H()
    h.ev(0, "run-start", scenario="t", seed=0, dispatch_mode="serial")
    h.start(0, "c1", {"carol": "host-old"}, kind="claude-code")
    h.ev(1_000, "hook", "c1", "carol", hook="SessionStart",
         line=f"[thatch] chat: you are {N_CAROL} (no unread mail for you).", decision=None)
    h.ev(50_000, "fork", "c1", "carol", old_host_id="host-old", new_host_id="host-new")
    h.call(55_000, "c1", "carol", "unregister", {}, True, f"[unregistered] {N_CAROL}")
    h.ev(60_000, "hook", "c1", "carol", hook="UserPromptSubmit",
         line="[thatch] chat: you are o-pal-00002 (no unread mail for you).", decision=None)
    v = judge("P9", h, db)
    assert v.status == "skipped", v.message


@pytest.mark.rules("R33", "R26")
def test_p9_does_not_judge_a_fork_across_a_silence_past_the_auto_row_ttl(tmp_path):
    """R33, R26: a fork, then eight silent days (prune may delete the row), then a fresh name."""
    db = make_db(tmp_path / "d.db")
    h = H()
    h.ev(0, "run-start", scenario="t", seed=0, dispatch_mode="serial")
    h.start(0, "c1", {"carol": "host-old"}, kind="claude-code")
    h.ev(1_000, "hook", "c1", "carol", hook="SessionStart",
         line=f"[thatch] chat: you are {N_CAROL} (no unread mail for you).", decision=None)
    h.ev(50_000, "fork", "c1", "carol", old_host_id="host-old", new_host_id="host-new")
    h.ev(8 * 86_400_000, "hook", "c1", "carol", hook="UserPromptSubmit",
         line="[thatch] chat: you are o-pal-00002 (no unread mail for you).", decision=None)
    v = judge("P9", h, db)
    assert v.status == "skipped", v.message


@pytest.mark.rules("R33")
def test_p9_fails_mail_left_on_the_old_id(tmp_path):
    """R33: mail addressed to the pre-fork identity must move to the new one."""
    from simulator.design import mcp_session_id
    db = make_db(tmp_path / "d.db", sessions=((mcp_session_id("host-new"), N_CAROL, "mcp", 0),),
                 messages=((ALICE, mcp_session_id("host-old"), "hi", 10_000, None, 0),))
    h = H(); f, _ = _fork_world(h, N_CAROL)
    v = judge("P9", h, db)
    assert v.status == "fail" and in_witness(v, f)


# --- P10 --------------------------------------------------------------------

def _pp_spec():
    return make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice", "agent": "ping-pong"},
                                                         {"id": "bob", "agent": "ping-pong"}]}],
                     steps=[{"at": "10s", "send": {"from": "alice", "to": "bob", "body": "ping"}}])


@pytest.mark.rules("R22")
def test_p10_passes_a_bounded_exchange(tmp_path):
    """R22: ping-pong under the cap, messages within the bound."""
    msgs = tuple((ALICE if k % 2 else BOB, BOB if k % 2 else ALICE, f"m{k}", 10_000 + k * 60_000, None, 0)
                 for k in range(10))
    db = make_db(tmp_path / "d.db", messages=msgs)
    h = H(); base_world(h)
    for k in range(6):
        h.wake(60_000 + k * 120_000, "h1", "bob")
    h.phase(3_600_000, "end")
    v = judge("P10", h, db, _pp_spec())
    assert v.status == "pass" and v.judged > 0, v.message  # a pass says how much it judged


@pytest.mark.rules("R22")
def test_p10_fails_an_uncapped_ping_pong(tmp_path):
    """R22: a ping-pong session woken 7 times in an hour by one process fails."""
    db = make_db(tmp_path / "d.db")
    h = H(); base_world(h)
    ws = [h.wake(60_000 + k * 60_000, "h1", "alice") for k in range(7)]
    v = judge("P10", h, db, _pp_spec())
    assert v.status == "fail" and in_witness(v, ws[-1])


@pytest.mark.rules("R22")
def test_p10_fails_a_runaway_message_count(tmp_path):
    """R22: more messages between a pair than the caps allow fails."""
    msgs = tuple((ALICE if k % 2 else BOB, BOB if k % 2 else ALICE, f"m{k}", 10_000 + k * 1000, None, 0)
                 for k in range(40))
    db = make_db(tmp_path / "d.db", messages=msgs)
    h = H(); base_world(h)
    h.phase(3_600_000, "end")
    v = judge("P10", h, db, _pp_spec())
    assert v.status == "fail" and v.witness and "db_row" in v.witness[0]


# --- check_all ----------------------------------------------------------------

@pytest.mark.rules("R22", "R25")
def test_check_all_listed_property_with_nothing_to_check_is_not_reached(db):
    """R25: a property the scenario lists by name must have something to check."""
    h = H(); base_world(h)
    spec = make_spec(properties=["P1", "P9"])
    vs = {v.check: v for v in check_all(spec, h.done(), db, RUN_INFO)}
    assert vs["P1"].status == "not-reached" and vs["P9"].status == "not-reached"
    vs = {v.check: v for v in check_all(make_spec(), h.done(), db, RUN_INFO)}
    assert vs["P9"].status == "skipped" and len([c for c in vs if c.startswith("P")]) == 15


def test_check_all_reports_every_fault_step(db):
    """A fault that fired passes; one that never took effect is not-reached."""
    spec = make_spec(steps=[{"at": "1m", "kill": {"process": "h1"}},
                            {"at": "2m", "crash": {"process": "h1", "before": "delivered-stamp"}}])
    h = H(); base_world(h)
    h.ev(60_000, "fault", fault="kill", step=0, args={})
    h.ev(60_000, "fault-fired", fault="kill", step=0, detail="SIGKILL")
    h.ev(600_000, "fault-not-fired", fault="crash", step=1)
    vs = {v.check: v for v in check_all(spec, h.done(), db, RUN_INFO)}
    assert vs["fault#0"].status == "pass" and vs["fault#1"].status == "not-reached"
    assert vs["fault#1"].witness[0]["kind"] == "fault-not-fired"


# --- details that real runs showed ------------------------------------------------

@pytest.mark.rules("R18", "R19")
def test_p3_counts_processes_that_exit_at_the_run_end_as_live(tmp_path):
    """R18, R19: a host whose process-exit is the run's own end (reason end) still owed the wake."""
    h = H(); base_world(h); h.status(1_000, "h1", "bob")
    h.send(10_000, "h1", "alice", N_BOB, "hello")
    h.phase(600_000, "end")
    h.exit(600_000, "h1", "end")
    assert judge("P3", h, _p3_db(tmp_path)).status == "fail"


@pytest.mark.rules("R7", "R17")
def test_p7_a_delete_step_is_a_leave(db):
    """R17, R7: session.deleted records no tool result; the delete step itself is the leave."""
    spec = make_spec(steps=[{"at": "1m", "delete": {"session": "bob"}}])
    h = H(); base_world(h)
    h.sample(30_000, {"bob": (N_BOB, False, 29_000)})
    h.sample(60_000, {"bob": (N_BOB, False, 59_000)})   # same time as the step: not judged
    h.sample(90_000, {"bob": (None, False, 0)})
    assert judge("P7", h, db, spec).status == "pass"
    bad = h.sample(120_000, {"bob": ("e-cho-00002", False, 110_000)})
    v = judge("P7", h, db, spec)
    assert v.status == "fail" and v.witness[0]["kind"] == "leave" and v.witness[1]["i"] == bad["i"]


@pytest.mark.rules("R9", "R6")
def test_p5_matches_recipients_by_session_not_by_their_current_name(tmp_path):
    """R9, R6: mail to a session that later left and came back under a fresh name is still its mail."""
    db = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, "e-cho-00002", "opencode", 0)),
                 messages=((ALICE, BOB, "hello", 10_000, None, 0),))
    h = H(); base_world(h)
    h.send(10_000, "h1", "alice", N_BOB, "hello")
    h.call(40_000, "h1", "bob", "unregister", {}, True, "You left the chat directory.")
    h.registered(50_000, "h1", "bob", BOB, "e-cho-00002", how="explicit")
    assert judge("P5", h, db).status == "pass"


@pytest.mark.rules("R14")
def test_p4_does_not_judge_a_sleeping_machine(db):
    """R14: during a machine sleep and one poll after it, every session may look stale."""
    h = H(); base_world(h); _beating(h, 120_000); _beating(h, 600_000, start=420_000)
    h.ev(120_000, "sleep-start", until=420_000)
    h.ev(420_000, "sleep-end")
    h.sample(420_000, {"bob": (N_BOB, True, 90_500)})
    h.sample(480_000, {"bob": (N_BOB, False, 450_500)})
    v = judge("P4", h, db)
    assert v.status == "pass" and v.message.startswith("1 ")


@pytest.mark.rules("R15", "R14")
def test_p4_rehosted_sessions_age_out_after_the_grace(db):
    """R15, R14: a rehosted session is judged live within the grace; silent past it, it may go stale."""
    spec = make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]},
                                {"id": "h2", "start": "never"}],
                     steps=[{"at": "1m", "restart": {"process": "h1", "into": "h2", "grace": "5m"}}])
    h = H(); base_world(h); _beating(h, 60_000)
    h.exit(60_000, "h1", "restart")
    h.start(60_000, "h2", {}, rehost_of="h1")
    for t in range(90_000, 900_000, 30_000):
        h.poll(t, "h2", ["alice", "bob"] if t < 360_000 else [])
    h.sample(800_000, {"bob": (N_BOB, True, 330_000)})
    assert judge("P4", h, db, spec).status != "fail"
    bad = h.sample(300_000, {"bob": (N_BOB, True, 100_000)})
    v = judge("P4", h, db, spec)
    assert v.status == "fail" and v.witness[0]["i"] == bad["i"]


@pytest.mark.rules("R6", "R12")
def test_p8_follows_a_hookless_mcp_mint_to_its_rows(tmp_path):
    """R6, R12: a hookless MCP conversation's explicit register mints an id the
    harness never learns (its `registered` event has no session_id); the checkers
    map the name to the row, so its broadcast rows count as its own."""
    minted, name = "mcp_0123456789ab", "cin-der-00001"
    db = make_db(tmp_path / "d.db", sessions=((BOB, N_BOB, "opencode", 0), (minted, name, "mcp", 0)),
                 messages=((minted, BOB, "joined", 60_000, None, 1),))
    spec = make_spec(processes=[{"id": "h1", "sessions": [{"id": "bob"}]},
                                {"id": "c1", "kind": "claude-code",
                                 "sessions": [{"id": "ghost", "joins": "explicit"}]}])
    h = H(); h.start(0, "h1", {"bob": BOB}); h.start(0, "c1", {"ghost": "host-ghost"}, kind="claude-code")
    h.ev(0, "registered", "h1", "bob", how="first-prompt", name=N_BOB, session_id=BOB)
    h.ev(30_000, "registered", "c1", "ghost", how="explicit", name=name, session_id=None)
    h.call(60_000, "c1", "ghost", "broadcast", {"body": "joined"}, True,
           f"[broadcast] to 1 session\nrecipients: {N_BOB}")
    assert judge("P8", h, db, spec).status == "pass"

