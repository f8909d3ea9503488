"""The world plan the generator and the shrinker share, and the shrinker itself (with a stand-in runner)."""

from __future__ import annotations

from simulator.explore.judge import Finding, Outcome
from simulator.explore.plan import keep_fitting, replay_problems
from simulator.explore.shrink import MIN_DRAIN, shrink, size_of, to_spec

MIN = 60_000


def world(*steps, mcp=False, **extra):
    """Two opencode processes (alice; bob and carol), a resume target, optionally a Claude Code host (dave)."""
    procs = [
        {"id": "oc1", "kind": "opencode", "sessions": [{"id": "alice"}]},
        {"id": "oc2", "kind": "opencode", "sessions": [{"id": "bob"}, {"id": "carol"}]},
        {"id": "oc3", "kind": "opencode", "start": "never", "sessions": []},
    ]
    if mcp:
        procs.append({"id": "cc4", "kind": "claude-code", "sessions": [{"id": "dave"}]})
    return {"name": "w", "seed": 1, "duration": 20 * MIN, "drain": 5 * MIN, "processes": procs,
            "steps": list(steps), **extra}


def at(t, **step):
    return {"at": t, **step}


def test_a_resume_needs_its_sessions_host_killed_first():
    resume = at(3 * MIN, resume={"session": "bob", "process": "oc3"})
    assert replay_problems(world(resume)) == ["steps[0]: bob cannot be resumed here"]
    assert replay_problems(world(at(MIN, kill={"process": "oc2"}), resume)) == []
    twice = world(at(MIN, kill={"process": "oc2"}), resume, at(4 * MIN, resume={"session": "carol", "process": "oc3"}))
    assert "not a free start: never" in replay_problems(twice)[0]


def test_dropping_a_kill_drops_the_resume_that_needed_it():
    doc = world(at(MIN, kill={"process": "oc2"}), at(3 * MIN, resume={"session": "bob", "process": "oc3"}),
                at(4 * MIN, send={"from": "alice", "to": "bob"}))
    kept = keep_fitting({**doc, "steps": doc["steps"][1:]})
    assert [list(s)[1] for s in kept["steps"]] == ["send"]


def test_locks_stay_apart_and_out_of_worlds_with_hooks():
    first = at(MIN, lock={"for": 30_000})
    assert replay_problems(world(first, at(MIN + 10_000, lock={"for": 5000}))) == [
        "steps[1]: a lock while another is held"]
    assert replay_problems(world(first, at(2 * MIN, lock={"for": 5000}))) == []
    assert replay_problems(world(first, mcp=True)) == ["steps[0]: a lock in a world with hosts a held lock stops"]
    restart = at(MIN + 20_000, restart={"process": "oc2", "into": "oc3"})
    assert replay_problems(world(first, restart)) == ["steps[1]: restart while the database lock is held"]


def test_a_lock_deferred_by_nested_sleeps_meets_a_lock_deferred_to_the_same_wake():
    """Explore seed 7253: a sleep deferred to an earlier wake defers a lock again, to its own
    wake, where a lock scripted inside the second sleep lands too: the second holder cannot
    take the lock the first holds, and the clock does not move between them."""
    steps = [at(MIN, sleep={"for": 10 * MIN}), at(2 * MIN, sleep={"for": 60 * MIN}),
             at(3 * MIN, lock={"for": 10_000}), at(30 * MIN, lock={"for": 9000})]
    assert replay_problems(world(*steps)) == ["steps[3]: a lock while another is held"]
    assert replay_problems(world(*steps[:3], at(80 * MIN, lock={"for": 9000}))) == []


def test_an_mcp_session_acts_only_after_its_first_prompt():
    assert replay_problems(world(at(0, register={"session": "dave"}), mcp=True))
    assert replay_problems(world(at(1000, register={"session": "dave"}), mcp=True)) == []
    assert replay_problems(world(at(0, register={"session": "bob"}))) == []
    # Exploration seed 8614: a sleep from the start defers dave's first prompt to the wake, where a
    # register scripted inside the sleep lands too, ahead of the prompt: a second, hookless identity.
    asleep = at(0, sleep={"for": 75_000})
    assert replay_problems(world(asleep, at(70_000, register={"session": "dave"}), mcp=True))
    assert replay_problems(world(asleep, at(80_000, register={"session": "dave"}), mcp=True)) == []


def test_no_leave_step_where_a_crash_point_sits_inside_the_leave():
    armed = at(MIN, crash={"process": "oc2", "before": "unregister"})
    assert replay_problems(world(armed, at(2 * MIN, delete={"session": "bob"})))
    assert replay_problems(world(armed, at(2 * MIN, unregister={"session": "bob"}))) == []
    other = at(MIN, crash={"process": "oc2", "before": "read-stamp"})
    assert replay_problems(world(other, at(2 * MIN, exit={"session": "bob"}))) == []


def _outcome(check="P5"):
    return Outcome(seed=1, findings=[Finding(check, check, "broken")])


def test_shrinking_keeps_the_one_step_the_failure_needs():
    """A stand-in runner "fails" while alice still mails carol: everything else goes."""
    steps = [at(i * MIN, send={"from": "alice", "to": "bob", "body": f"b{i}"}) for i in range(1, 9)]
    steps.insert(5, at(5 * MIN + 1000, send={"from": "alice", "to": "carol", "body": "the one"}))
    doc = world(*steps)
    doc["processes"][1]["sessions"][0]["agent"] = {"kind": "silent", "busy": [{"from": 60_000, "until": 90_000}]}
    assert to_spec(doc) is not None

    def fails(spec):
        return _outcome() if any(s.action == "send" and s.send.to == "carol" for s in spec.steps) else None

    shrunk = shrink(doc, _outcome(), fails, max_runs=500)
    assert size_of(shrunk.doc) == (2, 2, 1)
    assert [[s["id"] for s in p["sessions"]] for p in shrunk.doc["processes"]] == [["alice"], ["carol"]]
    assert shrunk.doc["steps"][0]["send"]["to"] == "carol"
    assert shrunk.doc["steps"][0]["at"] == 0
    assert shrunk.doc["steps"][0]["send"]["body"] == "ping"
    assert shrunk.doc["drain"] == MIN_DRAIN
    assert shrunk.after == (2, 2, 1) and shrunk.before == (3, 3, 9)


def test_shrinking_stops_at_its_run_budget():
    doc = world(*[at(i * MIN, send={"from": "alice", "to": "bob"}) for i in range(1, 9)])
    calls = []

    def fails(spec):
        calls.append(1)
        return None

    shrunk = shrink(doc, _outcome(), fails, max_runs=5)
    assert len(calls) == 5 and shrunk.runs == 5 and shrunk.doc == doc
