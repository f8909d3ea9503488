"""Regressions found by a scenario author: `{label}` in a point expectation
expands to the name at the expectation's time (not the run's last name), and
a `hook_line`'s `hook:` must name a hook the session's host runs (R6, R31, R36)."""

from __future__ import annotations

import pytest

from historykit import ALICE, BOB, N_ALICE, N_BOB, RUN_INFO, H, base_world, make_db, make_spec
from simulator.checks.view import RunView
from simulator.checks.expectations import check_expectations
from simulator.scenario.validate import check_spec

N_BOB2 = "xe-nia-00002"  # bob's fresh name after leaving and registering again
MIN = 60_000


def _leave_and_return(h: H) -> None:
    """alice lists at 3m (bob there), bob leaves at 4m, alice lists at 20m (bob gone),
    bob registers explicitly at 25m under a fresh name, alice lists at 26m."""
    base_world(h, end=30 * MIN)
    h.call(3 * MIN, "h1", "alice", "list", {}, True, f"Active (2):\n- {N_ALICE} (you, 0 unread)\n- {N_BOB}")
    h.call(4 * MIN, "h1", "bob", "unregister", {}, True, "You left the chat directory.")
    h.sample(5 * MIN, {"alice": (N_ALICE, False, 5 * MIN), "bob": (None, False, 0)})
    h.call(20 * MIN, "h1", "alice", "list", {}, True, f"Active (1):\n- {N_ALICE} (you, 0 unread)")
    h.call(25 * MIN, "h1", "bob", "register", {}, True, f"[registered] {N_BOB2}")
    h.registered(25 * MIN, "h1", "bob", BOB, N_BOB2, how="explicit")
    h.call(26 * MIN, "h1", "alice", "list", {}, True, f"Active (2):\n- {N_ALICE} (you, 0 unread)\n- {N_BOB2}")


@pytest.mark.rules("R6")
def test_point_expectation_expands_the_name_at_its_time(tmp_path):
    """R6: a fresh name minted at 25m does not leak into a 3m or 20m expectation;
    `at: end` uses the final name."""
    db = make_db(tmp_path / "t.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB2, "opencode", 25 * MIN)))
    h = H(); _leave_and_return(h)
    spec = make_spec(expect=[
        {"at": "3m", "roster": {"session": "alice", "contains": "{bob}"}},        # was: lacks 'xe-nia-00002'
        {"at": "3m", "roster": {"session": "alice", "not_contains": "{bob}"}},    # was: a vacuous pass
        {"at": "20m", "roster": {"session": "alice", "not_contains": "{bob}"}},   # the old name is gone
        {"roster": {"session": "alice", "contains": "{bob}"}},                    # end: the fresh name
        {"roster": {"session": "alice", "contains": "- {bob}\n", "not_contains": "{alice}x"}},
    ])
    vs = check_expectations(spec, RunView(spec, h.done(), db, RUN_INFO))
    assert [v.status for v in vs] == ["pass", "fail", "pass", "pass", "fail"]
    assert repr(N_BOB) in vs[1].message and "contains" in vs[1].message
    assert repr(f"- {N_BOB2}\n") in vs[4].message  # the end list ends with bob's line: no newline after it


@pytest.mark.rules("R6")
def test_expand_by_time_and_literal_without_a_name(tmp_path):
    """R6: `view.names.expand(text, at)`: the name at that time (kept after a leave),
    the literal `{label}` before any name, and for an undeclared label."""
    db = make_db(tmp_path / "t.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB2, "opencode", 25 * MIN)))
    h = H(); _leave_and_return(h)
    view = RunView(make_spec(), h.done(), db, RUN_INFO)
    assert view.names.expand("to {bob}", 500) == "to {bob}"          # registered at 1s: no name yet
    assert view.names.expand("to {bob}", 3 * MIN) == f"to {N_BOB}"
    assert view.names.expand("to {bob}", 20 * MIN) == f"to {N_BOB}"  # left at 4m: its last name still names it
    assert view.names.expand("to {bob}", 25 * MIN) == f"to {N_BOB2}"
    assert view.names.expand("to {bob}") == view.names.expand("to {bob}", "end") == f"to {N_BOB2}"
    assert view.names.expand("{nobody} {alice}", 3 * MIN) == f"{{nobody}} {N_ALICE}"


HOSTS = [{"id": "h1", "sessions": [{"id": "alice"}]},
         {"id": "c1", "kind": "claude-code", "sessions": [{"id": "carol"}]},
         {"id": "w1", "kind": "cursor", "sessions": [{"id": "eve"}]}]


def _hook_spec(*bodies: dict):
    return make_spec(processes=HOSTS, expect=[{"hook_line": b} for b in bodies])


@pytest.mark.rules("R31", "R36")
def test_validate_refuses_hooks_the_host_does_not_run():
    """R31, R36: `hook:` must be one of the host's hooks (case-sensitive), and an
    opencode session prints no hook line at all: refused at load, with the valid names."""
    spec = _hook_spec(
        {"session": "carol", "hook": "Stop", "absent": True},
        {"session": "carol", "hook": "SessionStart", "count": 1},
        {"session": "eve", "hook": "stop", "count": 0},
        {"session": "eve", "hook": "UserPromptSubmit", "contains": "you are"},
        {"session": "carol", "hook": "stop", "absent": True},
        {"session": "carol", "hook": "Stoop", "absent": True},
        {"session": "eve", "hook": "Stop", "count": 0},
        {"session": "carol", "hook": "PreToolUse", "count": 0},
        {"session": "alice", "absent": True},
    )
    msgs = [str(e) for e in check_spec(spec)]
    assert msgs == [
        "<scenario>: expect[4].hook_line.hook: unknown hook `stop` for `carol`, a session of a claude-code process — "
        "did you mean `Stop`? (a claude-code session runs: SessionStart, UserPromptSubmit, Stop)",
        "<scenario>: expect[5].hook_line.hook: unknown hook `Stoop` for `carol`, a session of a claude-code process — "
        "did you mean `Stop`? (a claude-code session runs: SessionStart, UserPromptSubmit, Stop)",
        "<scenario>: expect[6].hook_line.hook: unknown hook `Stop` for `eve`, a session of a cursor process — "
        "did you mean `stop`? (a cursor session runs: SessionStart, UserPromptSubmit, stop)",
        "<scenario>: expect[7].hook_line.hook: unknown hook `PreToolUse` for `carol`, "
        "a session of a claude-code process — "
        "write one of the hooks a claude-code session runs: SessionStart, UserPromptSubmit, Stop (case-sensitive)",
        "<scenario>: expect[8].hook_line.session: `alice` is a session of an opencode process, "
        "which prints no hook line — "
        "hook_line checks claude-code or cursor sessions; "
        "for an opencode session check `wakes`, `echoes` or `registered` instead",
    ]


@pytest.mark.rules("R31", "R36")
def test_python_built_hook_line_with_a_bad_hook_fails_instead_of_passing(tmp_path):
    """R31, R36: the same mistakes in a Scenario built in Python (never validated) fail
    their verdict with the reason, where `absent` / `count: 0` used to pass vacuously."""
    db = make_db(tmp_path / "t.db")
    h = H(); base_world(h)
    h.ev(10_000, "hook", "c1", "carol", hook="Stop", line="[thatch] chat: 1 unread message for x", decision="block")
    spec = _hook_spec({"session": "carol", "hook": "stop", "absent": True},
                      {"session": "carol", "hook": "Stoop", "count": 0},
                      {"session": "alice", "absent": True},
                      {"session": "carol", "hook": "Stop", "absent": True})
    vs = check_expectations(spec, RunView(spec, h.done(), db, RUN_INFO))
    assert [v.status for v in vs] == ["fail", "fail", "fail", "fail"]
    assert (vs[0].message.startswith("hook_line.hook: unknown hook `stop` for `carol`")
            and "did you mean `Stop`?" in vs[0].message)
    assert "unknown hook `Stoop`" in vs[1].message
    assert vs[2].message.startswith(
        "hook_line.session: `alice` is a session of an opencode process, which prints no hook line")
    assert "printed a hook line" in vs[3].message  # the right name judges the line
