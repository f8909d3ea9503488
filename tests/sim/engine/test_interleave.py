"""Races on demand: an `interleave` step pauses a store call at a statement boundary while other
processes' calls run, on real processes sharing one WAL file (D-interleave-1)."""

from __future__ import annotations

import pytest

from simulator import Scenario, run_scenario


def _world(steps: list, **extra) -> Scenario:
    base = {
        "name": "interleave", "duration": "4m", "drain": "1m", "seed": 5, "rules": ["R10", "R12"],
        "processes": [
            {"id": "h1", "sessions": [{"id": "alice", "agent": "silent"}]},
            {"id": "h2", "sessions": [{"id": "bob", "agent": "silent"}]},
            {"id": "h3", "sessions": [{"id": "carol", "agent": "silent"}]},
        ],
        "steps": steps,
    }
    base.update(extra)
    return Scenario.model_validate(base)


READ_RACES_SEND = [
    {"at": "30s", "send": {"from": "alice", "to": "bob", "body": "first"}},
    {"at": "1m", "interleave": {"pause": {"session": "bob", "call": "read", "statement": 1, "when": "after"},
                                "run": [{"send": {"from": "alice", "to": "bob", "body": "second"}}]}},
    {"at": "1m", "read": {"session": "bob"}, "expect": {"ok": True, "contains": "first"}},
    {"at": "2m", "read": {"session": "bob"}, "expect": {"ok": True, "contains": "second"}},
]


def _kinds(result, *kinds: str) -> list[tuple[str, str]]:
    return [(e["kind"], e["proc"]) for e in result.history if e["kind"] in kinds]


@pytest.mark.rules("R10")
@pytest.mark.parametrize("engine", ["lockstep", "windowed"])
def test_a_send_runs_inside_a_paused_read_and_its_mail_stays_unread(tmp_path, engine):
    r = run_scenario(_world(READ_RACES_SEND), run_dir=tmp_path, engine=engine)
    assert r.ok, [v.message for v in r.failures()]
    order = _kinds(r, "paused", "interleave-run", "tool-result", "resumed", "fault-fired")
    at = order.index(("paused", "h2"))
    assert order[at:at + 5] == [("paused", "h2"), ("interleave-run", "orchestrator"), ("tool-result", "h1"),
                                ("fault-fired", "orchestrator"), ("resumed", "h2")]
    first_read = next(e for e in r.events("tool-result", session="bob"))
    assert "first" in first_read["data"]["text"] and "second" not in first_read["data"]["text"]


def test_the_same_seed_gives_the_same_interleaving_on_both_engines(tmp_path):
    spec = _world(READ_RACES_SEND)
    runs = [run_scenario(spec, run_dir=tmp_path / f"{engine}{i}", engine=engine)
            for engine in ("lockstep", "windowed") for i in (0, 1)]
    assert runs[0].history_path.read_bytes() == runs[1].history_path.read_bytes()
    assert runs[2].history_path.read_bytes() == runs[3].history_path.read_bytes()
    pauses = [[(e["dispatch"], e["data"]["sql"][:20]) for e in run.events("paused")] for run in runs]
    assert pauses[0] == pauses[1] and pauses[2] == pauses[3] and pauses[0]


@pytest.mark.rules("R12")
def test_a_write_inside_a_paused_transaction_is_a_deadlock_verdict_naming_both_calls_never_a_hang(tmp_path):
    spec = _world([
        {"at": "1m", "interleave": {"pause": {"session": "alice", "call": "broadcast", "statement": 1,
                                              "when": "after"},
                                    "run": [{"send": {"from": "bob", "to": "carol", "body": "x"}}]}},
        {"at": "1m", "broadcast": {"from": "alice", "body": "hello all"}, "expect": {"ok": True}},
    ])
    r = run_scenario(spec, run_dir=tmp_path, wall_timeout_s=60)
    assert r.error is None
    v = r.verdict("fault#0")
    assert v.status == "skipped" and "DEADLOCK" in v.message and r.ok
    assert "h1 broadcast statement 1 (after)" in v.message and "h2 send by bob: begin immediate" in v.message
    # the paused broadcast finished first, then the blocked send; neither failed
    results = [(e["proc"], e["data"]["ok"]) for e in r.events("tool-result") if e["t"] == 60_000]
    assert results == [("h1", True), ("h2", True)]


def test_a_pause_past_the_calls_last_statement_is_not_reached_naming_its_count(tmp_path):
    spec = _world([
        {"at": "1m", "interleave": {"pause": {"session": "alice", "call": "send", "statement": 9},
                                    "run": [{"read": {"session": "carol"}}]}},
        {"at": "1m", "send": {"from": "alice", "to": "bob", "body": "y"}},
    ])
    r = run_scenario(spec, run_dir=tmp_path)
    v = r.verdict("fault#0")
    assert v.status == "not-reached"
    assert "statement 9 of send never ran: the longest of its 1 send call(s) ran 6 statement(s)" in v.message


def test_a_run_call_whose_session_is_in_the_paused_process_is_skipped_with_why(tmp_path):
    spec = _world([
        {"at": "1m", "interleave": {"pause": {"session": "bob", "call": "read", "statement": 1, "when": "after"},
                                    "run": [{"poll": {"process": "h1"}}, {"status": {"session": "bob"}}]}},
        {"at": "1m", "read": {"session": "bob"}},
    ])
    r = run_scenario(spec, run_dir=tmp_path, check=False)
    runs = [e["data"] for e in r.events("interleave-run")]
    assert runs == [{"step": 0, "action": "poll", "target": "h1"},
                    {"step": 0, "action": "status", "target": "h2", "skipped": "h2 is the paused process"}]


def test_a_blocked_run_call_that_then_reaches_a_pause_of_its_own_goes_on(tmp_path):
    """The blocked call resumes under a new dispatch; its own armed pause then stops it inside the other
    interleaving's run: that pause is let go at once (naming the command it serves), never a hang."""
    spec = _world([
        {"at": "1m", "interleave": {"pause": {"session": "carol", "call": "send", "statement": 1},
                                    "run": [{"status": {"session": "alice"}}]}},
        {"at": "1m", "interleave": {"pause": {"session": "bob", "call": "send", "statement": 1, "when": "after"},
                                    "run": [{"send": {"from": "carol", "to": "alice", "body": "inside"}}]}},
        {"at": "1m", "send": {"from": "bob", "to": "alice", "body": "paused"}},
        {"at": "2m", "send": {"from": "carol", "to": "bob", "body": "later"}},
    ])
    r = run_scenario(spec, run_dir=tmp_path, wall_timeout_s=30, check=False)
    assert r.error is None
    assert [(e["proc"], e["data"]["step"]) for e in r.events("paused")] == [("h2", 1), ("h3", 0)]
    assert [e["data"]["ok"] for e in r.events("tool-result")] == [True, True, True]
