"""Regression tests for the scenario-writer additions: counted hook lines, a
claimed `as` on send steps, aborted turns, P5 on Cursor's trusted `as`, and
P7 after a tombstone aged out (R7, R26, R32, R36)."""

from __future__ import annotations

import pytest

from historykit import ALICE, BOB, N_ALICE, N_BOB, RUN_INFO, H, base_world, make_db, make_spec
from simulator.checks.view import RunView
from simulator.design import MAIL_SWEEP_AGE_MS
from simulator.checks.expectations import check_expectations
from simulator.checks.identity import p7_tombstones
from simulator.checks.messages import p5_no_loss
from simulator.scenario.kinds import SendArgs
from simulator.scenario.model import Agent

DAY = 86_400_000


@pytest.mark.rules("R36")
def test_hook_line_count_counts_matching_lines(db):
    """R36: hook_line with count/min/max counts the matching printed lines of the named hook."""
    h = H(); base_world(h)
    for t in (10_000, 20_000, 30_000):
        h.ev(t, "hook", "w1", "bob", hook="stop", line=f"thatch chat: 1 unread message for {N_BOB}",
             decision="followup")
    h.ev(40_000, "hook", "w1", "bob", hook="stop", line=None, decision=None)
    procs = [{"id": "h1", "sessions": [{"id": "alice"}]}, {"id": "w1", "kind": "cursor", "sessions": [{"id": "bob"}]}]
    spec = make_spec(processes=procs, expect=[
        {"hook_line": {"session": "bob", "hook": "stop", "contains": "unread message for {bob}", "count": 3}},
        {"at": "15s", "hook_line": {"session": "bob", "hook": "stop", "count": 1}},
        {"hook_line": {"session": "bob", "hook": "stop", "max": 2}},
        {"hook_line": {"session": "bob", "hook": "Stop", "count": 0}},
    ])
    vs = check_expectations(spec, RunView(spec, h.done(), db, RUN_INFO))
    # Cursor's turn-end hook is `stop`: `Stop` is a typo there and fails instead of counting 0 (no vacuous pass).
    assert [v.status for v in vs] == ["pass", "pass", "fail", "fail"]
    assert "printed 3 matching hook lines" in vs[2].message
    assert "unknown hook `Stop`" in vs[3].message and "did you mean `stop`?" in vs[3].message


@pytest.mark.rules("R32", "R36")
def test_language_accepts_claimed_as_and_aborted_windows():
    """R32, R36: a send step may claim an `as`; an agent may have aborted-turn windows."""
    args = SendArgs.model_validate({"from": "eve", "to": "alice", "as": "{frank}"})
    assert args.claimed_as == "{frank}" and args.model_dump(by_alias=True)["as"] == "{frank}"
    agent = Agent.model_validate({"kind": "reader", "aborted": [{"from": "1m", "until": "2m"}]})
    assert agent.aborted[0].start == 60_000


@pytest.mark.rules("R32")
def test_p5_credits_cursor_claimed_as_to_the_claimed_session(tmp_path):
    """R32: on Cursor the server trusts `as`, so a send claiming bob is stored from bob: no loss."""
    procs = [{"id": "h1", "sessions": [{"id": "alice"}]},
             {"id": "w1", "kind": "cursor", "sessions": [{"id": "bob"}, {"id": "eve"}]}]
    db = make_db(tmp_path / "c.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "mcp", 0)),
                 messages=((BOB, ALICE, "spoof", 10_000, None, 0),))
    h = H(); base_world(h)
    h.call(10_000, "w1", "eve", "send", {"to": N_ALICE, "body": "spoof", "as": N_BOB}, True,
           f"Message sent to {N_ALICE} (active).")
    spec = make_spec(processes=procs)
    assert p5_no_loss(RunView(spec, h.done(), db, RUN_INFO)).status == "pass"
    # The same claim from an opencode session is not trusted: a row from bob is not eve's send.
    h2 = H(); base_world(h2)
    h2.call(10_000, "h1", "alice", "send", {"to": N_BOB, "body": "x", "as": N_BOB}, True,
            f"Message sent to {N_BOB} (active).")
    db2 = make_db(tmp_path / "d.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)))
    assert p5_no_loss(RunView(make_spec(), h2.done(), db2, RUN_INFO)).status == "fail"


@pytest.mark.rules("R7", "R26")
def test_p7_allows_rejoin_after_the_tombstone_aged_out(db):
    """R7, R26: a registration more than 7 days after the leave is allowed (tombstone pruned); before, it fails."""
    def run(t_back):
        h = H(); base_world(h, end=t_back + 60_000)
        h.call(60_000, "h1", "bob", "unregister", {}, True, "You left the chat directory.")
        h.registered(t_back, "h1", "bob", BOB, "ri-ver-00001", how="first-prompt")
        spec = make_spec(duration="8d")
        return p7_tombstones(RunView(spec, h.done(), db, RUN_INFO)).status

    assert run(60_000 + 7 * DAY + 3_600_000) == "pass"
    assert run(60_000 + 6 * DAY) == "fail"


@pytest.mark.rules("R26")
def test_p5_excuses_mail_lost_by_a_recipient_pruned_before_it_came_back(tmp_path):
    """R26: bob was pruned (registered, then gone with no leave) and later came back:
    his chat_pruned row is gone, but the sweep in between may have taken his mail
    once it was older than the sweep age."""
    db = make_db(tmp_path / "p.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, "ri-ver-00001", "opencode", 0)))
    week = {**RUN_INFO, "duration_ms": MAIL_SWEEP_AGE_MS + 90_000}
    h = H(); base_world(h)
    h.send(10_000, "h1", "alice", N_BOB, "swept")
    h.sample(20_000, {"alice": (N_ALICE, False, 19_000), "bob": (N_BOB, True, 0)})
    h.sample(50_000, {"alice": (N_ALICE, False, 49_000), "bob": (None, False, 0)})
    h.sample(80_000, {"alice": (N_ALICE, False, 79_000), "bob": ("ri-ver-00001", False, 79_000)})
    assert p5_no_loss(RunView(make_spec(), h.done(), db, week)).status == "pass"
    h2 = H(); base_world(h2)
    h2.send(10_000, "h1", "alice", N_BOB, "lost")
    h2.sample(20_000, {"alice": (N_ALICE, False, 19_000), "bob": (N_BOB, False, 19_000)})
    assert p5_no_loss(RunView(make_spec(), h2.done(), db, RUN_INFO)).status == "fail"  # never out, too young


@pytest.mark.rules("R2", "R6")
def test_registered_name_kept_false_wants_a_fresh_name(db):
    """R2, R6: name_kept: false passes only when the label now goes by a name other than its first."""
    h = H(); base_world(h)
    spec = make_spec(expect=[{"registered": {"session": "bob", "name_kept": False}},
                             {"registered": {"session": "bob", "name_kept": True}}])
    vs = check_expectations(spec, RunView(spec, h.done(), db, RUN_INFO))
    assert [v.status for v in vs] == ["fail", "pass"]
