"""Faults: crash points (named and by SQL), kill, sleep, lock, resume, restart, fork."""

from __future__ import annotations

import copy

import pytest

from engine_harness import TinyHarness
from simulator import Scenario, run_scenario
from simulator.child.crash_points import NAMED_POINTS, CrashPoints, normalize_sql
from thatch_core.db import open_db

TINY = {"harness": TinyHarness}


def fire_point(store, conn, point: str, action, nth=None) -> bool:
    """Arm `point` on `conn` and run `action`; True when the point fired.

    The kill is swapped for a note: SQLite swallows exceptions raised in a
    trace callback, so the statement still runs here (in a harness it never
    does: the process is gone).
    """
    cp = CrashPoints()
    fired = []
    cp._kill = lambda: fired.append(True)
    cp.install(conn)
    cp.arm(point=point, nth=nth)
    try:
        action()
    finally:
        cp.disarm()
    return bool(fired)


def two_registered(store):
    a = store.register("ses_a", title="a work")
    b = store.register("ses_b", title="b work")
    return a, b


@pytest.mark.parametrize("point, action", [
    ("heartbeat", lambda s: s.heartbeat(["ses_a"])),
    ("register-insert", lambda s: s.register("ses_c", title="c work")),
    ("unregister", lambda s: s.unregister("ses_a")),
    ("read-stamp", lambda s: s.read("ses_b")),
    ("delivered-stamp", lambda s: s.mark_delivered([1])),
    ("broadcast-insert", lambda s: s.broadcast("ses_a", "all hands")),
])
def test_named_points_match_the_real_store_statements(store, conn, point, action):
    two_registered(store)
    store.send("ses_a", "ses_b", "hello")
    store.register("ses_d", title="d work")  # a third member: a broadcast makes two inserts
    fired = fire_point(store, conn, point, lambda: action(store))
    assert fired, f"{point} never matched a statement of its store call"


def test_named_points_do_not_fire_on_look_alikes(store, conn):
    two_registered(store)
    # chat_status touches last_seen by session_id = ?, not the poller's IN (...) batch
    assert fire_point(store, conn, "heartbeat", lambda: store.status("ses_a")) is False
    # a plain send is one insert: the broadcast point waits for the 2nd
    assert fire_point(store, conn, "broadcast-insert", lambda: store.send("ses_a", "ses_b", "x")) is False
    assert fire_point(store, conn, "broadcast-insert", lambda: store.send("ses_a", "ses_b", "x"), nth=1) is True


def test_arm_refuses_bad_requests():
    cp = CrashPoints()
    with pytest.raises(ValueError, match=r"^unknown crash point 'nope'; known: delivered-stamp, "):
        cp.arm(point="nope")
    with pytest.raises(ValueError, match="exactly one of"):
        cp.arm(point="heartbeat", sql="update")
    assert set(NAMED_POINTS) == {"delivered-stamp", "read-stamp", "broadcast-insert", "register-insert",
                                 "unregister", "heartbeat"}
    assert normalize_sql("  UPDATE  chat_sessions\n SET x ") == "update chat_sessions set x"


def scenario(steps, **extra) -> Scenario:
    return Scenario.model_validate({
        "name": "faults", "duration": "4m", "drain": "1m", "seed": 5,
        "processes": [
            {"id": "h1", "project": "alpha", "sessions": [{"id": "alice"}]},
            {"id": "h2", "project": "alpha", "sessions": [{"id": "bob"}]},
            {"id": "h3", "project": "alpha", "start": "never"},
            {"id": "cc", "kind": "claude-code", "sessions": [{"id": "carol"}]},
        ],
        "steps": steps, **extra,
    })


def kinds(r, proc="orchestrator"):
    return [e["kind"] for e in r.history if e["proc"] == proc]


def test_kill_is_recorded_and_unhosts_the_sessions(tmp_path):
    r = run_scenario(scenario([{"at": "45s", "kill": {"process": "h2"}}]), run_dir=tmp_path, overrides=TINY,
                     check=False)
    fault = r.history[[e["kind"] for e in r.history].index("fault")]
    assert fault["t"] == 45_000 and fault["data"] == {"fault": "kill", "step": 0, "args": {"process": "h2"}}
    exits = [e["data"] for e in r.events("process-exit")]
    assert {"target": "h2", "reason": "killed"} in exits
    assert r.events("fault-fired")[0]["data"]["step"] == 0
    assert max(e["t"] for e in r.events("poll") if e["proc"] == "h2") == 30_000
    assert r.verdict("fault#0").status == "pass"


def test_crash_point_fires_on_the_next_matching_statement(tmp_path):
    r = run_scenario(scenario([{"at": "45s", "crash": {"process": "h2", "before": "heartbeat"}}]),
                     run_dir=tmp_path, overrides=TINY, check=False)
    assert r.error is None
    crash = r.events("crash")
    assert len(crash) == 1 and crash[0]["proc"] == "h2" and crash[0]["t"] == 60_000
    assert crash[0]["data"]["point"] == "heartbeat" and crash[0]["data"]["sql"].startswith("update chat_sessions")
    assert {"target": "h2", "reason": "crashed"} in [e["data"] for e in r.events("process-exit")]
    fired = r.events("fault-fired")
    assert fired[0]["data"]["detail"]["point"] == "heartbeat" and fired[0]["t"] == 60_000
    assert not [e for e in r.events("poll") if e["proc"] == "h2" and e["t"] >= 60_000]  # died before its poll event
    assert r.verdict("fault#0").status == "pass"


def test_crash_by_sql_substring_and_nth(tmp_path):
    steps = [{"at": "10s", "crash": {"process": "h1", "sql": "UPDATE chat_sessions SET last_seen", "nth": 2}}]
    r = run_scenario(scenario(steps), run_dir=tmp_path, overrides=TINY, check=False)
    assert [(e["proc"], e["t"]) for e in r.events("crash")] == [("h1", 60_000)]


def test_a_crash_point_that_never_fires_is_not_reached(tmp_path):
    steps = [{"at": "10s", "crash": {"process": "h1", "before": "read-stamp"}}]
    r = run_scenario(scenario(steps), run_dir=tmp_path, overrides=TINY, check=False)
    assert r.events("fault-not-fired")[0]["data"] == {"fault": "crash", "step": 0}
    v = r.verdict("fault#0")
    assert v.status == "not-reached" and "step 0 (crash at 10s) never took effect" in v.message
    assert not r.ok


def test_sleep_drops_polls_then_every_process_catches_up(tmp_path):
    steps = [{"at": "40s", "sleep": {"for": "2m"}}, {"at": "1m", "status": {"session": "alice"}}]
    r = run_scenario(scenario(steps), run_dir=tmp_path, overrides=TINY, check=False)
    polls = [(e["t"], e["proc"]) for e in r.events("poll")]
    assert not [p for p in polls if 40_000 <= p[0] < 160_000]
    assert [p for p in polls if p[0] == 160_000] == [(160_000, "h1"), (160_000, "h2")]
    assert (190_000, "h1") in polls  # the timers beat on from the wake
    assert [e["t"] for e in r.events("tool-call")] == [160_000]  # the scripted step waited for the wake
    assert [(e["kind"], e["t"]) for e in r.history if e["kind"] in ("sleep-start", "sleep-end")] == [
        ("sleep-start", 40_000), ("sleep-end", 160_000)]
    assert r.events("sleep-start")[0]["data"] == {"until": 160_000}
    assert [e["t"] for e in r.events("sample") if e["t"] >= 30_000][:3] == [30_000, 180_000, 210_000]
    assert r.verdict("fault#0").status == "pass"


def test_lock_fires_when_a_store_call_meets_it(tmp_path):
    steps = [{"at": "20s", "lock": {"for": "15s"}}]
    r = run_scenario(scenario(steps), run_dir=tmp_path, overrides=TINY, check=False)
    assert [e["proc"] for e in r.events("store-error")] == ["h1", "h2"]
    fired = r.events("fault-fired")
    assert fired[0]["t"] == 35_000 and fired[0]["data"]["detail"] == {"store_errors": 2}
    assert r.events("poll")[-1]["t"] == 300_000  # the writers recovered after the release


def test_a_lock_nobody_meets_is_not_reached(tmp_path):
    r = run_scenario(scenario([{"at": "31s", "lock": {"for": "10s"}}]), run_dir=tmp_path, overrides=TINY, check=False)
    assert r.verdict("fault#0").status == "not-reached"


def test_resume_starts_the_never_process_with_the_session(tmp_path):
    steps = [{"at": "30s", "kill": {"process": "h2"}},
             {"at": "50s", "resume": {"session": "bob", "process": "h3", "how": "-s"}}]
    r = run_scenario(scenario(steps), run_dir=tmp_path, overrides=TINY, check=False)
    start = [e for e in r.events("process-start") if e["data"]["target"] == "h3"][0]
    bob = start["data"]["sessions"]["bob"]
    assert start["t"] == 50_000 and start["data"]["resumed"] == "bob" and start["data"]["how"] == "-s"
    clock = [e for e in r.events("clock") if e["proc"] == "h3"][0]["data"]
    assert clock["startup"] == ["-s", bob] and clock["resumed"] == "bob"
    assert {e["proc"] for e in r.events("poll") if e["t"] > 60_000} == {"h1", "h3"}
    assert r.verdict("fault#1").status == "pass"


def test_restart_rehosts_the_old_daemons_sessions(tmp_path):
    steps = [{"at": "50s", "restart": {"process": "h2", "into": "h3", "grace": "1h"}}]
    r = run_scenario(scenario(steps), run_dir=tmp_path, overrides=TINY, check=False)
    assert {"target": "h2", "reason": "restart"} in [e["data"] for e in r.events("process-exit")]
    start = [e for e in r.events("process-start") if e["data"]["target"] == "h3"][0]
    assert start["data"]["rehost_of"] == "h2" and start["data"]["sessions"] == {}
    assert [e for e in r.events("clock") if e["proc"] == "h3"][0]["data"]["rehosted"] == ["bob"]
    assert [e["data"]["hosted"] for e in r.events("poll") if e["proc"] == "h3"][0] == ["bob"]


def test_fork_sends_a_fresh_host_id_to_the_claude_code_process(tmp_path):
    r = run_scenario(scenario([{"at": "20s", "fork": {"session": "carol"}}]), run_dir=tmp_path, overrides=TINY,
                     check=False)
    fork = r.events("fork")[0]
    assert fork["proc"] == "cc" and fork["data"]["new_host_id"] != fork["data"]["old_host_id"]
    assert r.events("fault-fired")[0]["data"]["detail"]["new_host_id"] == fork["data"]["new_host_id"]


@pytest.mark.rules("R23")
def test_every_fault_kind_fires_with_the_real_harnesses(tmp_path):
    """Each fault kind takes effect with the real harnesses; the crash between the
    wake prompt and the delivered stamp re-nudges the same mail after the resume (R23)."""
    spec = Scenario.model_validate({
        "name": "real-faults", "duration": "8m", "drain": "2m", "seed": 3,
        "processes": [
            {"id": "h1", "project": "alpha", "sessions": [{"id": "alice"}]},
            {"id": "h2", "project": "alpha", "sessions": [{"id": "bob", "agent": "reader"}]},
            {"id": "h3", "project": "alpha", "start": "never"},
            {"id": "h4", "project": "alpha", "start": "never"},
            {"id": "cc", "kind": "claude-code", "project": "alpha", "sessions": [{"id": "carol"}]},
        ],
        "steps": [
            {"at": "10s", "crash": {"process": "h2", "before": "delivered-stamp"}},
            {"at": "30s", "send": {"from": "alice", "to": "bob", "body": "hi"}},
            {"at": "2m", "resume": {"session": "bob", "process": "h3"}},
            {"at": "3m", "restart": {"process": "h3", "into": "h4"}},
            {"at": "265s", "lock": {"for": "10s"}},
            {"at": "5m", "fork": {"session": "carol"}},
            {"at": "6m", "sleep": {"for": "1m"}},
            {"at": "7m", "kill": {"process": "h1"}},
        ],
    })
    r = run_scenario(spec, run_dir=tmp_path, check=False)
    assert r.error is None, r.error
    assert [v.status for v in r.verdicts] == ["pass"] * 7, [v.message for v in r.verdicts]
    crash = r.events("crash")[0]
    assert crash["proc"] == "h2" and crash["data"]["point"] == "delivered-stamp"
    wake_then_crash = [e["kind"] for e in r.history if e["proc"] == "h2"][-2:]
    assert wake_then_crash == ["wake", "crash"]  # the prompt landed, the stamp never ran
    assert [e["data"]["reason"] for e in r.events("process-exit")] == ["crashed", "restart", "killed", "end", "end"]
    # at-least-once: the resumed process wakes bob again for the same mail
    assert [e["proc"] for e in r.events("wake", session="bob")][:2] == ["h2", "h3"]


def test_snapshot_and_adopt_hand_armed_points_to_another_registry():
    """A forked hook/MCP child adopts its host's armed crash points through the public pair."""
    host, child = CrashPoints(), CrashPoints()
    host.arm(point="read-stamp", step=3)
    child.adopt(host.snapshot())
    assert child.armed and [a.step for a in child.snapshot()] == [3]
    child.adopt([])
    assert not child.armed


# ---------------------------------------------------------------------------
# After a step: a committed statement, a host step
# ---------------------------------------------------------------------------

class _Notes:
    """Stands in for the recorder: keeps the crash events."""

    def __init__(self):
        self.events = []

    def emit(self, kind, session=None, **data):
        self.events.append((kind, session, data))


def _watching(conn, db_path, **arm):
    """A registry on `conn` whose kill, instead of dying, notes what a second
    connection sees of the database at that instant (what survives the crash)."""
    cp, seen = CrashPoints(), []
    other = open_db(db_path)

    def look():
        seen.append({
            "rows": [r[0] for r in other.execute("SELECT session_id FROM chat_sessions ORDER BY session_id")],
            "tombstones": [r[0] for r in other.execute("SELECT session_id FROM chat_leave_tombstones")],
        })

    cp._kill = look
    cp.bind(_Notes())
    cp.install(conn)
    cp.arm(**arm)
    return cp, seen, other


@pytest.mark.rules("R7")
def test_a_crash_after_a_statement_comes_once_its_transaction_is_durable(store, conn, db_path):
    """R7: `after: unregister` fires once the leave's transaction committed:
    another connection already sees the row gone and the tombstone written;
    `before: unregister` fires with neither done."""
    two_registered(store)
    cp, seen, other = _watching(conn, db_path, point="unregister", when="after", step=4)
    store.unregister("ses_a")
    cp.disarm()
    assert seen == [{"rows": ["ses_b"], "tombstones": ["ses_a"]}]
    assert cp.recorder.events == [("crash", None, {
        "point": "unregister", "sql": "delete from chat_sessions where session_id = 'ses_a'", "step": 4,
        "when": "after"})]
    cp, seen, _ = _watching(conn, db_path, point="unregister", step=5)
    store.unregister("ses_b")
    assert seen == [{"rows": ["ses_b"], "tombstones": ["ses_a"]}]
    assert "when" not in cp.recorder.events[0][2]  # a crash before its step records what it always did
    other.close()


def test_a_crash_after_waits_out_a_rolled_back_match(store, conn, db_path):
    """A match whose transaction rolls back never committed: the point waits for
    the next match, here one outside BEGIN ... COMMIT, which commits as it finishes."""
    two_registered(store)
    cp, seen, other = _watching(conn, db_path, sql="delete from chat_sessions where session_id = 'ses_a'",
                                when="after")
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("DELETE FROM chat_sessions WHERE session_id = 'ses_a'")
    conn.execute("ROLLBACK")
    assert seen == []
    conn.execute("DELETE FROM chat_sessions WHERE session_id = 'ses_a'")
    observed = copy.deepcopy(seen)  # the crash comes at the first call after the statement returned
    assert observed == [{"rows": ["ses_b"], "tombstones": []}]
    other.close()


def test_host_step_points_fire_on_their_own_side_of_the_step():
    """A host step is announced before and after; an armed point counts only its own side."""
    cp, fired = CrashPoints(), []
    cp._kill = lambda: fired.append(True)
    cp.bind(_Notes())
    cp.arm(point="wake-prompt", when="after", nth=2, step=1)
    for _ in range(2):
        cp.reached("wake-prompt", "before", session="bob")
    cp.reached("wake-prompt", "after", session="bob")
    assert not fired
    cp.reached("wake-prompt", "after", session="bob")
    assert fired and cp.recorder.events == [("crash", "bob", {"point": "wake-prompt", "step": 1, "when": "after"})]
    with pytest.raises(ValueError, match="before or after"):
        cp.arm(point="wake-prompt", when="during")


@pytest.mark.rules("R7")
@pytest.mark.parametrize("statement, when, rows, tombstones, point_when", [
    (1, "before", ["ses_a", "ses_b"], [], "before"),      # BEGIN IMMEDIATE: nothing done
    (3, "before", ["ses_a", "ses_b"], [], "before"),      # before the tombstone insert: rolled back
    (4, "before", ["ses_a", "ses_b"], [], "before"),      # before COMMIT: rolled back all the same
    (2, "after", ["ses_b"], ["ses_a"], "after"),          # after the delete: once the leave committed
])
def test_a_statement_crash_fires_at_the_nth_statement_of_its_call(store, conn, db_path, statement, when, rows,
                                                                  tombstones, point_when):
    """R7: a crash by statement count inside `unregister` (BEGIN, DELETE, INSERT tombstone,
    COMMIT) fires at exactly that statement; before COMMIT the leave is all undone, after it
    all done. The event names the call's own point and the statement."""
    two_registered(store)
    store.status("ses_a")  # another call's statements never count
    cp, seen, other = _watching(conn, db_path, call="unregister", statement=statement, when=when, step=2)
    store.unregister("ses_a")
    cp.disarm()
    assert seen[:1] == [{"rows": rows, "tombstones": tombstones}]
    (kind, _, data), = cp.recorder.events[:1]
    assert kind == "crash" and data["call"] == "unregister" and data["statement"] == statement
    assert data["point"] == "unregister" and data.get("when", "before") == point_when
    other.close()


def test_a_statement_crash_counts_calls_and_statements_per_call(store, conn, db_path):
    """`nth` counts the calls that reach the statement: the 2nd send's 1st statement here,
    not the 1st send's later ones; a call with no named point records `sql`."""
    two_registered(store)
    cp, seen, other = _watching(conn, db_path, call="send", statement=1, nth=2)
    store.send("ses_a", "ses_b", "one")
    assert seen == []
    store.send("ses_a", "ses_b", "two")
    cp.disarm()
    assert len(seen) == 1 and cp.recorder.events[0][2]["point"] == "sql"
    assert cp.recorder.events[0][2]["statement"] == 1
    with pytest.raises(ValueError, match="statement crash"):
        CrashPoints().arm(call="send")
    with pytest.raises(ValueError, match="exactly one of"):
        CrashPoints().arm(call="send", statement=1, point="heartbeat")
    other.close()


@pytest.mark.rules("R10", "R23")
def test_a_statement_crash_fires_in_a_real_harness_between_a_reads_select_and_its_stamp(tmp_path):
    """R10, R23: `call: read, statement: 3` kills the opencode process just before the read's
    stamp (after its select): the crash event names the call, the statement and read-stamp,
    and the mail stays unread for the next host."""
    spec = Scenario.model_validate({
        "name": "statement-crash", "duration": "3m", "drain": "2m", "seed": 3,
        "processes": [
            {"id": "h1", "project": "alpha", "sessions": [{"id": "alice"}]},
            {"id": "h2", "project": "alpha", "sessions": [{"id": "bob", "agent": "silent"}]},
        ],
        "steps": [
            {"at": "10s", "crash": {"process": "h2", "call": "read", "statement": 3}},
            {"at": "20s", "send": {"from": "alice", "to": "bob", "body": "hi"}},
            {"at": "40s", "read": {"session": "bob"}},
        ],
    })
    r = run_scenario(spec, run_dir=tmp_path, check=False)
    assert r.error is None, r.error
    crash, = r.events("crash")
    assert crash["proc"] == "h2" and crash["data"]["call"] == "read" and crash["data"]["statement"] == 3
    assert crash["data"]["point"] == "read-stamp"
    assert crash["data"]["sql"].startswith("update chat_messages set read_at")
    assert r.verdict("fault#0").status == "pass"


@pytest.mark.rules("R13", "R14")
def test_a_stall_skips_poll_cycles_and_polls_late(tmp_path):
    """R13, R14: a stall of 45 s at 32 s loses h2's polls at 45, 60 and 75 s (every 15 s); it polls
    at 77 s, then every interval. Its session's beat gap stays within 60 s (P4), and mail sent
    just before is not owed a wake while the timer is lost (P3)."""
    spec = Scenario.model_validate({
        "name": "stall", "duration": "3m", "drain": "1m", "seed": 5,
        "processes": [{"id": "h1", "sessions": [{"id": "alice"}]},
                      {"id": "h2", "poll_interval": "15s", "sessions": [{"id": "bob"}]}],
        "steps": [{"at": "31s", "send": {"from": "alice", "to": "bob", "body": "hi"}},
                  {"at": "32s", "stall": {"process": "h2", "for": "45s"}}],
    })
    r = run_scenario(spec, run_dir=tmp_path)
    polls = [e["t"] for e in r.events("poll") if e["proc"] == "h2"]
    assert not {45_000, 60_000, 75_000} & set(polls) and {77_000, 92_000} <= set(polls)
    assert r.verdict("fault#1").status == "pass" and r.verdict("P4").status == "pass"
    assert r.verdict("P3").status == "pass", r.verdict("P3").message
