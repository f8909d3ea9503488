"""The reference model (P11) on hand-built histories: it fails a reply or row the design does not
allow, showing its prediction, and passes every outcome the design leaves open."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from historykit import ALICE, BOB, CAROL, N_ALICE, N_BOB, N_CAROL, RUN_INFO, H, base_world, make_db, make_spec
from simulator.checks import check_all
from simulator.checks.registry import REGISTRY
from simulator.checks.view import RunView
from simulator.design import (
    EMPTY_BODY_REPLY, NOT_REGISTERED_REPLY, ORIGIN_DRAWN, ORIGIN_KEPT, ORIGIN_REJOINED, SELF_REPLY, TOO_LONG_REPLY,
    UNREGISTERED_REPLY,
)

ROOT = Path(__file__).resolve().parents[3]

ACTIVE = "The recipient is active: it is nudged when its session is idle."


def judge(h, db, spec=None):
    return REGISTRY["P11"][2](RunView(spec or make_spec(), h.done(), db, RUN_INFO))


def sent(h, t, frm, to_name, to_id, body, *, proc="h1"):
    text = f"[sent] to {to_name} ({to_id[:12]})\n\n{ACTIVE}"
    return h.call(t, proc, frm, "send", {"to": to_name, "body": body}, True, text)


def status(h, t, who, name, pending, total):
    return h.call(t, "h1", who, "status", {}, True,
                  f"[chat] registered as {name}: {pending} unread of {total} total.")


def registered_reply(name, sid, origin):
    return f"[registered] {name}\nsession_id: {sid}\nproject: unknown\n\n{origin} Other sessions can now message you."


def mail_db(tmp_path, messages=(), sessions=None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    rows = sessions if sessions is not None else ((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0))
    return make_db(tmp_path / "m.db", sessions=rows, messages=messages)


def test_p11_is_registered_as_a_property():
    """P11 is a registered property with its rules."""
    title, rules, _fn = REGISTRY["P11"]
    assert title == "reply-model" and {"R9", "R10", "R27"} <= set(rules)
    # docs/rules.md names the rules P11 stands for in its properties table: the same set.
    row = next(line for line in (ROOT / "docs" / "rules.md").read_text().splitlines() if line.startswith("| P11 |"))
    assert set(re.findall(r"\[(R\d+)\]", row)) == set(rules)


@pytest.mark.rules("R9", "R10")
def test_a_send_and_its_read_pass(tmp_path):
    """R9, R10: an ok send to a registered session, drained by its read, passes."""
    h = H(); base_world(h)
    sent(h, 60_000, "alice", N_BOB, BOB, "hello")
    h.read(90_000, "h1", "bob", [(N_ALICE, 60_000, "hello")])
    v = judge(h, mail_db(tmp_path, ((ALICE, BOB, "hello", 60_000, 90_000, 0),)))
    assert v.status == "pass" and v.judged >= 3, v.message


@pytest.mark.rules("R9")
def test_a_send_to_oneself_that_lands_fails(db):
    """R9: a session's send to itself must be refused; an ok reply fails, naming the refusal."""
    h = H(); base_world(h)
    sent(h, 60_000, "alice", N_ALICE, ALICE, "note to self")
    v = judge(h, db)
    assert v.status == "fail" and "self" in v.message, v.message


@pytest.mark.rules("R9")
def test_the_body_cap_is_exactly_10000_characters(db):
    """R9: a trimmed body of exactly 10,000 characters is accepted, one more is refused."""
    h = H(); base_world(h)
    h.call(60_000, "h1", "alice", "send", {"to": N_BOB, "body": " " + "x" * 10_000 + " "}, False, TOO_LONG_REPLY)
    v = judge(h, db)
    assert v.status == "fail" and "too_long" in v.message and "sent" in v.message, v.message
    h = H(); base_world(h)
    h.call(60_000, "h1", "alice", "send", {"to": N_BOB, "body": "x" * 10_001}, False, TOO_LONG_REPLY)
    h.call(61_000, "h1", "alice", "send", {"to": N_BOB, "body": " \n "}, False, EMPTY_BODY_REPLY)
    assert judge(h, db).status == "pass"


@pytest.mark.rules("R9", "R8")
def test_a_registered_sender_refused_as_unregistered_fails(db):
    """R9, R8: only an unregistered sender gets the not-registered refusal."""
    h = H(); base_world(h)
    h.call(60_000, "h1", "alice", "send", {"to": N_BOB, "body": "hi"}, False, "Not sent: " + NOT_REGISTERED_REPLY)
    v = judge(h, db)
    assert v.status == "fail" and "predicted sent" in v.message, v.message


@pytest.mark.rules("R10")
def test_mail_read_out_of_order_fails(tmp_path):
    """R10: chat_read drains oldest first."""
    h = H(); base_world(h)
    sent(h, 60_000, "alice", N_BOB, BOB, "first")
    sent(h, 61_000, "alice", N_BOB, BOB, "second")
    h.read(90_000, "h1", "bob", [(N_ALICE, 61_000, "second"), (N_ALICE, 60_000, "first")])
    db = mail_db(tmp_path, ((ALICE, BOB, "first", 60_000, 90_000, 0), (ALICE, BOB, "second", 61_000, 90_000, 0)))
    v = judge(h, db)
    assert v.status == "fail" and "oldest first" in v.message, v.message


@pytest.mark.rules("R10")
def test_a_second_delivery_of_one_message_fails(tmp_path):
    """R10: a message read once is not returned again."""
    h = H(); base_world(h)
    sent(h, 60_000, "alice", N_BOB, BOB, "once")
    h.read(90_000, "h1", "bob", [(N_ALICE, 60_000, "once")])
    h.read(120_000, "h1", "bob", [(N_ALICE, 60_000, "once")])
    v = judge(h, mail_db(tmp_path, ((ALICE, BOB, "once", 60_000, 90_000, 0),)))
    assert v.status == "fail" and "only the unread mail" in v.message, v.message


@pytest.mark.rules("R10")
def test_a_read_that_leaves_mail_unread_fails(tmp_path):
    """R10: a read drains all unread mail."""
    h = H(); base_world(h)
    sent(h, 60_000, "alice", N_BOB, BOB, "one")
    sent(h, 61_000, "alice", N_BOB, BOB, "two")
    h.read(90_000, "h1", "bob", [(N_ALICE, 60_000, "one")])
    v = judge(h, mail_db(tmp_path, ((ALICE, BOB, "one", 60_000, 90_000, 0), (ALICE, BOB, "two", 61_000, None, 0))))
    assert v.status == "fail" and "it left ['two'] unread" in v.message, v.message


@pytest.mark.rules("R34")
def test_a_wrong_unread_count_fails(tmp_path):
    """R34: chat_status counts the caller's unread mail."""
    h = H(); base_world(h)
    sent(h, 60_000, "alice", N_BOB, BOB, "one")
    status(h, 70_000, "bob", N_BOB, 0, 1)
    v = judge(h, mail_db(tmp_path, ((ALICE, BOB, "one", 60_000, None, 0),)))
    assert v.status == "fail" and "predicted 1 unread" in v.message, v.message
    h = H(); base_world(h)
    sent(h, 60_000, "alice", N_BOB, BOB, "one")
    status(h, 70_000, "bob", N_BOB, 1, 1)
    touched = ((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 70_000))
    assert judge(h, mail_db(tmp_path / "x", ((ALICE, BOB, "one", 60_000, None, 0),), touched)).status == "pass"


@pytest.mark.rules("R34")
def test_a_status_that_does_not_touch_last_seen_fails(tmp_path):
    """R34: chat_status touches the caller's last_seen; a final row older than the call fails."""
    h = H(); base_world(h)
    status(h, 70_000, "bob", N_BOB, 0, 0)
    v = judge(h, mail_db(tmp_path))
    assert v.status == "fail" and "last_seen of bob" in v.message, v.message


@pytest.mark.rules("R2", "R6")
def test_a_reused_name_fails(db):
    """R2, R6: a freshly drawn name was never held before, by anyone."""
    h = H(); base_world(h)
    h.start(0, "h2", {"carol": CAROL})
    h.call(60_000, "h2", "carol", "register", {}, True, registered_reply(N_ALICE, CAROL, ORIGIN_DRAWN))
    v = judge(h, db)
    assert v.status == "fail" and "never held before" in v.message, v.message


@pytest.mark.rules("R6")
def test_a_registered_session_keeps_its_name_on_register(db):
    """R6: chat_register by a registered session keeps its name (a fresh one fails)."""
    h = H(); base_world(h)
    h.call(60_000, "h1", "alice", "register", {}, True, registered_reply(N_ALICE, ALICE, ORIGIN_KEPT))
    assert judge(h, db).status == "pass"
    h = H(); base_world(h)
    h.call(60_000, "h1", "alice", "register", {}, True, registered_reply(N_CAROL, ALICE, ORIGIN_DRAWN))
    assert judge(h, db).status == "fail"


@pytest.mark.rules("R27")
def test_an_echo_of_a_refused_call_fails(db):
    """R27: a refused call leaves no transcript echo."""
    h = H(); base_world(h)
    h.ev(60_000, "tool-call", "h1", "alice", tool="thatch_chat_send", args={"to": N_ALICE, "body": "x"})
    h.ev(60_000, "echo", "h1", "alice", text="[chat] " + SELF_REPLY)
    h.ev(60_000, "tool-result", "h1", "alice", tool="thatch_chat_send", ok=False, text=SELF_REPLY)
    v = judge(h, db)
    assert v.status == "fail" and "no echo" in v.message, v.message


@pytest.mark.rules("R12")
def test_a_broadcast_that_reaches_its_sender_fails(db):
    """R12: a broadcast reaches every other registered session, never the sender."""
    h = H(); base_world(h)
    h.call(60_000, "h1", "alice", "broadcast", {"body": "all"}, True,
           f"[broadcast] to 2 sessions\nrecipients: {N_ALICE}, {N_BOB}")
    v = judge(h, db)
    assert v.status == "fail" and "but the sender" in v.message, v.message


@pytest.mark.rules("R12")
def test_a_broadcast_that_misses_a_registered_session_fails(db):
    """R12: every other registered session is a recipient or skipped as stale."""
    h = H(); base_world(h)
    h.call(60_000, "h1", "alice", "broadcast", {"body": "all"}, True, "[broadcast] to 0 sessions\nrecipients: (none)")
    v = judge(h, db)
    assert v.status == "fail" and N_BOB in v.message, v.message


def broadcast_reply(reached: tuple[str, ...]) -> str:
    return f"[broadcast] to {len(reached)} sessions\nrecipients: {', '.join(reached) or '(none)'}"


@pytest.mark.rules("R12", "R7")
def test_a_delete_at_the_instant_of_a_broadcast_scripted_before_it_may_come_first(tmp_path):
    """R12, R7: bob's session is deleted at the instant of alice's broadcast, scripted after it. A
    delete records no event, so either may have run first: the broadcast may reach bob or miss him;
    after that instant he is surely gone, so a later broadcast reaching him fails. Scripted before
    the broadcast, the delete surely came first: a broadcast reaching bob then fails."""
    broadcast = {"at": "2m", "broadcast": {"from": "alice"}}
    delete = {"at": "2m", "delete": {"session": "bob"}}
    cases = (([broadcast, delete], 0, (), (), True), ([broadcast, delete], 0, (N_BOB,), (), True),
             ([broadcast, delete], 0, (), (N_BOB,), False), ([delete, broadcast], 1, (N_BOB,), (), False))
    for k, (steps, step, reached, later, passes) in enumerate(cases):
        h = H(); base_world(h)
        h.call(120_000, "h1", "alice", "broadcast", {"body": "all"}, True, broadcast_reply(reached), step=step)
        h.call(180_000, "h1", "alice", "broadcast", {"body": "again"}, True, broadcast_reply(later))
        h.phase(600_000, "end")
        messages = [(ALICE, BOB, body, t, None, 1) for body, t, to in (("all", 120_000, reached),
                                                                        ("again", 180_000, later)) if to]
        db = mail_db(tmp_path / str(k), messages, sessions=((ALICE, N_ALICE, "opencode", 0),))
        with sqlite3.connect(db) as conn:
            conn.execute("INSERT INTO chat_leave_tombstones (session_id, left_at) VALUES (?, ?)", (BOB, "x"))
        v = judge(h, db, make_spec(steps=steps))
        assert (v.status == "pass") == passes, (k, v.message)
        assert passes or f"no mail for {N_BOB}" in v.message, (k, v.message)


@pytest.mark.rules("R7", "R2")
def test_a_delete_of_a_session_out_of_the_directory_may_leave_a_tombstone(tmp_path):
    """R7, R2: carol is out of the directory when her session is deleted; the leave writes its
    tombstone all the same, or not, so her next register may draw a fresh name or say she had
    left. With no delete, nothing says she ever left: 'you had left' fails."""
    delete = [{"at": "1m", "delete": {"session": "carol"}}]
    procs = [{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]}, {"id": "h2", "sessions": [{"id": "carol"}]}]
    rows = ((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0), (CAROL, N_CAROL, "opencode", 0))
    for k, (steps, origin, passes) in enumerate(((delete, ORIGIN_REJOINED, True), ([], ORIGIN_REJOINED, False),
                                                 ([], ORIGIN_DRAWN, True))):
        h = H(); base_world(h)
        h.start(0, "h2", {"carol": CAROL})
        h.sample(30_000, {"carol": (None, False, 0)})
        h.call(120_000, "h2", "carol", "register", {}, True, registered_reply(N_CAROL, CAROL, origin))
        h.phase(600_000, "end")
        v = judge(h, mail_db(tmp_path / str(k), sessions=rows), make_spec(processes=procs, steps=steps))
        assert (v.status == "pass") == passes, (k, v.message)
        assert passes or "origin drawn" in v.message, (k, v.message)


@pytest.mark.rules("R10")
def test_a_stamp_on_mail_no_read_returned_fails(tmp_path):
    """R10: the read stamp is scoped to the rows a read returned."""
    h = H(); base_world(h)
    sent(h, 60_000, "alice", N_BOB, BOB, "one")
    h.read(90_000, "h1", "bob", [(N_ALICE, 60_000, "one")])
    sent(h, 91_000, "alice", N_BOB, BOB, "two")
    db = mail_db(tmp_path, ((ALICE, BOB, "one", 60_000, 90_000, 0), (ALICE, BOB, "two", 91_000, 91_000, 0)))
    v = judge(h, db)
    assert v.status == "fail" and "never returned" in v.message, v.message


@pytest.mark.rules("R7")
def test_a_leave_without_its_tombstone_fails(tmp_path):
    """R7: chat_unregister writes a tombstone that stays until an explicit register."""
    h = H(); base_world(h)
    h.call(60_000, "h1", "bob", "unregister", {}, True, UNREGISTERED_REPLY)
    v = judge(h, mail_db(tmp_path, sessions=((ALICE, N_ALICE, "opencode", 0),)))
    assert v.status == "fail" and "tombstone of bob" in v.message, v.message


@pytest.mark.rules("R7")
def test_an_automatic_join_after_a_leave_fails(tmp_path):
    """R7: an auto-registration after a leave (no explicit register) fails."""
    h = H(); base_world(h)
    h.call(60_000, "h1", "bob", "unregister", {}, True, UNREGISTERED_REPLY)
    h.registered(90_000, "h1", "bob", BOB, "new-name-00001", how="idle")
    v = judge(h, mail_db(tmp_path))
    assert v.status == "fail" and "leave tombstone sticks" in v.message, v.message


@pytest.mark.rules("R10", "R9")
def test_both_outcomes_of_a_read_racing_a_send_pass(tmp_path):
    """R10, R9: in concurrent dispatch a read and a send of one dispatch may commit in either order:
    the read returning the mail and the read finding none both pass."""
    for returned in (True, False):
        h = H(); base_world(h)
        h.start(0, "h2", {"carol": CAROL})
        h.registered(1_000, "h2", "carol", CAROL, N_CAROL)
        r = h.read(60_000, "h2", "carol", [(N_ALICE, 60_000, "race")] if returned else [])
        s = sent(h, 60_000, "alice", N_CAROL, CAROL, "race")
        events = h.done()
        for e in (*r, *s):
            e["dispatch"] = 999
        sessions = ((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0), (CAROL, N_CAROL, "opencode", 0))
        db = mail_db(tmp_path / str(returned), ((ALICE, CAROL, "race", 60_000, 60_000 if returned else None, 0),),
                     sessions)
        view = RunView(make_spec(dispatch="concurrent", processes=[
            {"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]}, {"id": "h2", "sessions": [{"id": "carol"}]}]),
            events, db, RUN_INFO)
        v = REGISTRY["P11"][2](view)
        assert v.status == "pass", (returned, v.message)


def test_p11_is_not_applicable_under_another_design(db):
    """A run whose every process runs a messaging policy other than thatch's is not judged by the model."""
    h = H(); base_world(h)
    sent(h, 60_000, "alice", N_ALICE, ALICE, "note to self")
    vs = {v.check: v for v in check_all(make_spec(policy="qoder"), h.done(), db, RUN_INFO)}
    assert vs["P11"].status == "not-applicable"


@pytest.mark.rules("R2", "R31")
def test_a_hook_line_before_a_fork_names_the_conversation_of_that_time(tmp_path):
    """R31, R2: carol's Claude Code hook line at 2m gives her current conversation a fresh name;
    her session is forked only at 5m (a new host id, a new mcp id). alice's mail to that name
    at 3m reaches the conversation of 3m, not the fork's."""
    from simulator.design import mcp_session_id
    old, new = "host-carol-1", "host-carol-2"
    carol = mcp_session_id(old)
    h = H(); base_world(h)
    h.start(0, "cc", {"carol": old}, kind="claude-code")
    h.registered(1_000, "cc", "carol", carol, N_CAROL)
    h.ev(120_000, "hook", "cc", "carol", hook="UserPromptSubmit", decision=None,
         line="[thatch] chat: you are a-corn-00001 (no unread mail for you).")
    sent(h, 180_000, "alice", "a-corn-00001", carol, "welcome back")
    h.ev(300_000, "fork", "cc", "carol", old_host_id=old, new_host_id=new)
    spec = make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]},
                                {"id": "cc", "kind": "claude-code", "sessions": [{"id": "carol"}]}])
    db = mail_db(tmp_path, ((ALICE, carol, "welcome back", 180_000, None, 0),),
                 sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0),
                           (carol, "a-corn-00001", "mcp", 120_000)))
    v = judge(h, db, spec)
    assert v.status == "pass", v.message


@pytest.mark.rules("R32")
def test_an_anchored_claude_code_send_is_from_its_conversation_whatever_it_claims(tmp_path):
    """R32: carol's prompt hook anchors her Claude Code process at 1m; her send at 2m claims
    bob's name (`as`). The anchor wins, so alice's inbox must show the mail from carol: from bob
    fails. Past the anchor's 600 s, or on Cursor (which trusts `as`), the sender is left open."""
    from simulator.design import mcp_session_id
    carol = mcp_session_id("host-carol-1")
    cases = (("claude-code", 120_000, "a-corn-00001", False), ("claude-code", 120_000, N_BOB, True),
             ("claude-code", 700_000, N_BOB, False), ("cursor", 120_000, N_BOB, False))
    for k, (kind, at, shown, fails) in enumerate(cases):
        h = H(); base_world(h)
        h.start(0, "cc", {"carol": "host-carol-1"}, kind=kind)
        h.registered(1_000, "cc", "carol", carol, "a-corn-00001")
        h.ev(60_000, "hook", "cc", "carol", hook="UserPromptSubmit", decision=None,
             line="[thatch] chat: you are a-corn-00001 (no unread mail for you).")
        h.call(at, "cc", "carol", "send", {"to": N_ALICE, "as": N_BOB, "body": "who am i"}, True,
               f"[sent] to {N_ALICE} ({ALICE[:12]})\n\n{ACTIVE}")
        h.read(at + 60_000, "h1", "alice", [(shown, at, "who am i")])
        spec = make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]},
                                    {"id": "cc", "kind": kind, "sessions": [{"id": "carol"}]}])
        db = mail_db(tmp_path / str(k), ((carol, ALICE, "who am i", at, at + 60_000, 0),),
                     sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0),
                               (carol, "a-corn-00001", "mcp", 60_000)))
        v = judge(h, db, spec)
        assert (v.status == "fail" and "anchored conversation" in v.message) == fails, (k, v.message)


@pytest.mark.rules("R2")
def test_an_explicit_register_keeps_either_name_of_a_legacy_case_twin(tmp_path):
    """R2, D-store-6: bob's 002-era row `Alone` has a case twin `alone`; the migration renamed one
    of them `Alone-2`, and which one depends on their order. bob's register keeping `Alone-2` is
    his own name kept; keeping a name outside the twins (`Other`) is not."""
    spec = make_spec(legacy=[{"name": "alone", "last_seen_ago": "3d"},
                             {"name": "Alone", "session": "bob", "last_seen_ago": "0s"}])
    for kept, fails in (("Alone-2", False), ("Alone", False), ("Other", True)):
        h = H()
        h.ev(0, "run-start", scenario="t", seed=0, dispatch_mode="serial")
        h.start(0, "h1", {"alice": ALICE, "bob": BOB})
        h.registered(1_000, "h1", "alice", ALICE, N_ALICE)
        h.call(60_000, "h1", "bob", "register", {}, True, registered_reply(kept, BOB, ORIGIN_KEPT))
        h.phase(600_000, "end")
        v = judge(h, mail_db(tmp_path / kept), spec)
        assert (v.status == "fail") == fails, (kept, v.message)


@pytest.mark.rules("R9")
def test_a_send_racing_the_recipients_registration_in_its_wave_may_be_sent(tmp_path):
    """R9: in concurrent dispatch alice's send to carol's session id and carol's first registration (in
    h2) run in one wave, and the merge puts h1's events first; the send may have come after the
    registration, so "sent" is allowed. In serial dispatch it is not."""
    for dispatch, fails in (("concurrent", False), ("serial", True)):
        h = H(); base_world(h)
        h.start(0, "h2", {"carol": CAROL})
        call, res = h.call(30_000, "h1", "alice", "send", {"to": CAROL, "body": "hi"}, True,
                           f"[sent] to {N_CAROL} ({CAROL[:12]})\n\n{ACTIVE}")
        reg = h.registered(30_000, "h2", "carol", CAROL, N_CAROL)
        events = h.done()
        res["dispatch"] = reg["dispatch"] = call["dispatch"]  # one wave
        spec = make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]},
                                    {"id": "h2", "sessions": [{"id": "carol"}]}], dispatch=dispatch)
        db = mail_db(tmp_path / dispatch, ((ALICE, CAROL, "hi", 30_000, None, 0),),
                     sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0),
                               (CAROL, N_CAROL, "opencode", 30_000)))
        v = REGISTRY["P11"][2](RunView(spec, events, db, RUN_INFO))
        assert (v.status == "fail") == fails, (dispatch, v.message)


@pytest.mark.rules("R31")
def test_a_hook_line_in_the_wave_of_a_send_to_it_may_count_that_mail(tmp_path):
    """R31: carol's Claude Code prompt hook and alice's send to her run in one concurrent wave, and
    the merge puts carol's process first. The send may have committed before the hook counted, so
    "1 unread" is allowed there; in serial dispatch, where the hook ran first, it is not.
    (Exploration seed 66: a broadcast and a Cursor prompt at one instant.)"""
    from simulator.design import mcp_session_id
    carol = mcp_session_id("host-carol-1")
    for dispatch, fails in (("concurrent", False), ("serial", True)):
        h = H(); base_world(h)
        h.start(0, "cc", {"carol": "host-carol-1"}, kind="claude-code")
        h.registered(1_000, "cc", "carol", carol, "a-corn-00001")
        hook = h.ev(60_000, "hook", "cc", "carol", hook="UserPromptSubmit", decision=None,
                    line="[thatch] chat: you are a-corn-00001 (1 unread message(s) for you).")
        call, res = sent(h, 60_000, "alice", "a-corn-00001", carol, "in the wave")
        events = h.done()
        hook["dispatch"] = res["dispatch"] = call["dispatch"]  # one wave
        spec = make_spec(dispatch=dispatch, processes=[
            {"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]},
            {"id": "cc", "kind": "claude-code", "sessions": [{"id": "carol"}]}])
        db = mail_db(tmp_path / dispatch, ((ALICE, carol, "in the wave", 60_000, None, 0),),
                     sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0),
                               (carol, "a-corn-00001", "mcp", 60_000)))
        v = REGISTRY["P11"][2](RunView(spec, events, db, RUN_INFO))
        assert (v.status == "fail") == fails, (dispatch, v.message)


@pytest.mark.rules("R1", "R30")
def test_an_automatic_join_of_a_child_or_under_auto_register_off_fails(tmp_path):
    """R1: carol, a sub-agent child of alice, never auto-registers; R30: nor does any session of a
    process whose chat.autoRegister is false at the join, read per event (after a config step
    turning it back on, the join is allowed). An explicit register stays allowed in both."""
    child = [{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}, {"id": "carol", "parent": "alice"}]}]
    off = [{"id": "h1", "config": {"autoRegister": False}, "sessions": [{"id": "alice"}, {"id": "bob"}]}]
    back_on = [{"at": "1m", "config": {"process": "h1", "autoRegister": True}}]
    cases = ((child, [], "carol", "first-prompt", True), (child, [], "carol", "explicit", False),
             (off, [], "bob", "idle", True), (off, back_on, "bob", "idle", False))
    for k, (procs, steps, who, how, fails) in enumerate(cases):
        h = H()
        h.ev(0, "run-start", scenario="t", seed=0, dispatch_mode="serial")
        h.start(0, "h1", {"alice": ALICE, "bob": BOB, "carol": CAROL})
        h.registered(1_000, "h1", "alice", ALICE, N_ALICE, how="explicit")
        h.registered(120_000, "h1", who, {"carol": CAROL, "bob": BOB}[who], "jas-per-00001", how=how)
        h.phase(600_000, "end")
        v = judge(h, mail_db(tmp_path / str(k)), make_spec(processes=procs, steps=steps))
        assert (v.status == "fail" and "no automatic join" in v.message) == fails, (k, v.message)


@pytest.mark.rules("R5", "R1")
def test_a_startup_registration_the_command_line_does_not_open_fails(tmp_path):
    """R5: a resumed process registers at startup the session its command line opens: with `-c`
    in a directory listing only alice's sub-agent child carol, it opens none, so no startup join;
    R1: with `-c` opening alice, carol's startup join fails and alice's passes."""
    procs = [{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}, {"id": "carol", "parent": "alice"}]},
             {"id": "h9", "start": "never", "sessions": []}]
    cases = ((None, "carol", "opens no session"), ("alice", "carol", "never a sub-agent child"),
             ("alice", "alice", None))
    for k, (opens, who, why) in enumerate(cases):
        h = H()
        h.ev(0, "run-start", scenario="t", seed=0, dispatch_mode="serial")
        h.start(0, "h1", {"alice": ALICE, "bob": BOB, "carol": CAROL})
        h.registered(1_000, "h1", "bob", BOB, N_BOB, how="explicit")
        h.exit(60_000, "h1", "kill")
        h.start(120_000, "h9", {"alice": ALICE}, how="-c", resumed="alice", opens=opens)
        h.registered(120_000, "h9", who, {"carol": CAROL, "alice": ALICE}[who], "jas-per-00001", how="startup")
        h.phase(600_000, "end")
        v = judge(h, mail_db(tmp_path / str(k)), make_spec(processes=procs))
        if why is None:
            assert "joined automatically" not in v.message, (k, v.message)
        else:
            assert v.status == "fail" and why in v.message, (k, v.message)


@pytest.mark.rules("R36")
def test_a_stop_hook_that_blocks_a_continued_turn_or_follows_up_an_aborted_one_fails(tmp_path):
    """R36: Claude Code's Stop hook must let a turn its own block continued end
    (`stop_hook_active`), and Cursor's stop hook must not follow up after an aborted or errored
    turn; a block on a first Stop and a follow-up after a completed turn are the design's."""
    cases = (({"hook": "Stop", "decision": "block", "stop_hook_active": True}, True),
             ({"hook": "Stop", "decision": "block", "stop_hook_active": False}, False),
             ({"hook": "stop", "decision": "followup", "status": "aborted"}, True),
             ({"hook": "stop", "decision": "followup", "status": "error"}, True),
             ({"hook": "stop", "decision": "followup", "status": "completed"}, False))
    for k, (data, fails) in enumerate(cases):
        h = H(); base_world(h)
        h.ev(120_000, "hook", "h1", "alice", line="[thatch] chat: 1 unread message for you.", **data)
        v = judge(h, mail_db(tmp_path / str(k)))
        assert (v.status == "fail" and "R36" in v.message) == fails, (data, v.message)


@pytest.mark.rules("R9")
def test_an_unregistered_caller_with_an_empty_body_may_get_either_refusal(tmp_path):
    """R9 names both refusals and orders neither: carol, not registered, sends a blank body; "not
    registered" and "empty body" both pass, "sent" does not. (Exploration seed 8271: an MCP call
    with no resolvable identity is refused as a stranger before its body is read.)"""
    for k, (text, fails) in enumerate((("Not sent: " + NOT_REGISTERED_REPLY, False), (EMPTY_BODY_REPLY, False),
                                       (f"[sent] to {N_BOB} ({BOB[:12]})\n\n{ACTIVE}", True))):
        h = H(); base_world(h)
        h.start(0, "h2", {"carol": CAROL})
        h.call(60_000, "h2", "carol", "send", {"to": N_BOB, "body": "   "}, not text.startswith("Not"), text)
        spec = make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]},
                                    {"id": "h2", "sessions": [{"id": "carol"}]}])
        v = judge(h, mail_db(tmp_path / str(k)), spec)
        assert (v.status == "fail") == fails, (text, v.message)
