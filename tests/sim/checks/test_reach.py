"""Reach claims: each claim passes with a witness when its situation happened,
and is "not-reached" (never a vacuous pass) when it did not."""

from __future__ import annotations

import pytest

from historykit import N_ALICE, N_BOB, RUN_INFO, H, base_world, make_spec
from simulator.checks.view import RunView
from simulator.checks.reach import REACHES, check_reaches
from simulator.design import LEAVE_LINE_PREFIX
from simulator.scenario.model import Reach


def verdict_for(claim, h, db):
    spec = make_spec(reaches=[claim])
    (v,) = check_reaches(spec, RunView(spec, h.done(), db, RUN_INFO))
    return v


def test_every_reach_literal_has_a_predicate():
    """Each Reach literal of the scenario language maps to a registered predicate."""
    assert set(REACHES) == set(Reach.__args__)


def _renudge(h, yes):
    h.wake(30_000, "h1", "bob")
    if not yes:
        h.read(40_000, "h1", "bob", [(N_ALICE, 10_000, "hello")])
    h.wake(930_000, "h1", "bob")


def _rate_cap(h, yes):
    for k in range(6 if yes else 5):
        h.wake(30_000 + k * 300_000, "h1", "bob")


def _ping_pong(h, yes):
    for k in range(2):
        h.call(60_000 + k * 60_000, "h1", "alice", "send", {"to": N_BOB, "body": f"a{k}"}, True,
               f"[sent] to {N_BOB} (ses_x)")
        if yes or k == 0:
            h.call(90_000 + k * 60_000, "h1", "bob", "send", {"to": N_ALICE, "body": f"b{k}"}, True,
                   f"[sent] to {N_ALICE} (ses_x)")


def _broadcast_skip(h, yes):
    text = f"[broadcast] to 1 session\nrecipients: {N_BOB}" + ("\nskipped stale: ze-phyr-00001" if yes else "")
    h.call(60_000, "h1", "alice", "broadcast", {"body": "x"}, True, text)


def _adoption(h, yes):
    h.ev(50_000, "fork", "c1", "carol", old_host_id="a", new_host_id="b")
    if yes:
        h.ev(60_000, "hook", "c1", "carol", hook="UserPromptSubmit",
             line='[thatch] chat: you are o-pal-00001 (no unread mail for you).', decision=None)


def _rehost(h, yes):
    h.exit(50_000, "h1", "restart")
    h.start(50_000, "h2", {}, **({"rehost_of": "h1"} if yes else {}))


def _graduation(h, yes):
    h.status(40_000, "h1", "bob", "idle")  # h1 hosts bob, so bob is in the set h2 re-hosts (R13)
    _rehost(h, True)
    if yes:
        h.ev(70_000, "user-prompt", "h2", "bob", text="hi")
        h.status(70_000, "h2", "bob", "busy")  # the prompt's turn: the status event graduates bob


def _stale(h, yes):
    h.sample(120_000, {"bob": (N_BOB, yes, 0)})


def _prune(h, yes):
    h.sample(120_000, {"bob": (N_BOB, True, 0)})
    if not yes:
        h.call(130_000, "h1", "bob", "unregister", {}, True, "You left the chat directory.")
    h.sample(150_000, {"bob": (None, False, 0)})


def _refusal(h, yes):
    h.call(60_000, "h1", "bob", "send", {"to": "nobody", "body": "x"}, not yes, 'No registered session named "nobody".')


def _echo(h, yes):
    if yes:
        h.ev(60_000, "echo", "h1", "bob", text="[chat] to x: y")


def _tombstone_gate(h, yes):
    h.call(60_000, "h1", "bob", "unregister", {}, True, "You left the chat directory.")
    h.ev(70_000, "status", "h1", "bob", status="idle", compacting=False)
    h.sample(90_000, {"bob": (None if yes else "e-cho-00002", False, 70_000)})


def _store_busy(h, yes):
    if yes:
        h.ev(60_000, "store-error", "h1", None, where="poll", error="StoreBusy")


def _stop_reminder(h, yes):
    h.ev(60_000, "hook", "c1", "carol", hook="Stop", line="[thatch] chat: 1 unread", decision="block" if yes else None)


def _cursor_followup(h, yes):
    h.ev(60_000, "hook", "u1", "dora", hook="stop", line="[thatch] chat: 1 unread" if yes else "",
         decision="followup" if yes else None)


def _event_in_wake(h, yes):
    h.ev(45_000, "stream-event", "h1", "carol", op="turn-end", inside="wake" if yes else "echo", prompted="bob")


WORLDS = {
    "re-nudge": (_renudge, ("R21", "R23")), "rate-cap": (_rate_cap, ("R22",)), "ping-pong": (_ping_pong, ("R22",)),
    "broadcast-skip": (_broadcast_skip, ("R12",)), "adoption": (_adoption, ("R33",)), "rehost": (_rehost, ("R15",)),
    "graduation": (_graduation, ("R15",)), "stale": (_stale, ("R14",)), "prune": (_prune, ("R26",)),
    "refusal": (_refusal, ("R9",)), "echo": (_echo, ("R27",)), "tombstone-gate": (_tombstone_gate, ("R7",)),
    "store-busy": (_store_busy, ("R24",)), "stop-reminder": (_stop_reminder, ("R36",)),
    "cursor-followup": (_cursor_followup, ("R36",)),
    "event-in-wake": (_event_in_wake, ("R24",)),
}


def test_every_claim_has_a_world_here():
    """This file exercises every claim."""
    assert set(WORLDS) == set(REACHES)


@pytest.mark.rules("R7", "R9", "R12", "R14", "R15", "R21", "R22", "R23", "R24", "R26", "R27", "R33", "R36")
@pytest.mark.parametrize("claim", sorted(WORLDS))
def test_claim_reached_with_witness(claim, db):
    """Reach claims (R7 R9 R12 R14 R15 R21 R22 R23 R24 R26 R27 R33 R36): the situation happened
    -> pass with a witness."""
    h = H(); base_world(h)
    WORLDS[claim][0](h, True)
    v = verdict_for(claim, h, db)
    assert (v.check, v.status) == (f"reach:{claim}", "pass") and v.witness


@pytest.mark.rules("R7", "R9", "R12", "R14", "R15", "R21", "R22", "R23", "R24", "R26", "R27", "R33", "R36")
@pytest.mark.parametrize("claim", sorted(WORLDS))
def test_claim_not_reached(claim, db):
    """Reach claims (R7 R9 R12 R14 R15 R21 R22 R23 R24 R26 R27 R33 R36): the situation never happened -> not-reached."""
    h = H(); base_world(h)
    WORLDS[claim][0](h, False)
    v = verdict_for(claim, h, db)
    assert v.status == "not-reached" and claim in v.message


@pytest.mark.rules("R7", "R31")
def test_a_hooks_leave_line_reaches_the_tombstone_gate(db):
    """R7, R31: the hook of a conversation that left prints the leave line instead of an identity: its
    registration was refused by the tombstone."""
    for line, want in ((LEAVE_LINE_PREFIX + " (chat_unregister) and will not receive mail.", "pass"),
                       ("[thatch] chat: you are o-pal-00001 (no unread mail for you).", "not-reached")):
        h = H(); base_world(h)
        h.ev(60_000, "hook", "c1", "carol", hook="UserPromptSubmit", line=line, decision=None)
        assert verdict_for("tombstone-gate", h, db).status == want, line


def _pingpong_cap(h, held):
    """bob reads every wake (ping-pong); after 6 wakes alice's next reply waits for the hour."""
    for k in range(6):
        h.wake(30_000 + k * 40_000, "h1", "bob")
        h.read(35_000 + k * 40_000, "h1", "bob", [(N_ALICE, 20_000 + k * 40_000, f"m{k}")])
    h.send(300_000, "h1", "alice", N_BOB, "m6")
    h.poll(330_000, "h1", ["alice", "bob"])
    if not held:
        h.wake(330_000, "h1", "bob")  # a seventh wake inside the hour: the cap did not hold


@pytest.mark.rules("R22")
@pytest.mark.parametrize("held", [True, False])
def test_rate_cap_reached_by_a_reader_whose_next_mail_is_held(held, db):
    """R22: a recipient that reads every wake (ping-pong) reaches the cap when, after 6 wakes
    within an hour, an idle poll finds newer unread mail and no wake comes until the hour ends."""
    h = H(); base_world(h)
    _pingpong_cap(h, held)
    v = verdict_for("rate-cap", h, db)
    assert v.status == ("pass" if held else "not-reached")
