"""Reach: the generator draws the worlds and instants where bugs hide (boundary times, races,
statement crashes, legacy rows, config edits, synchronous events, `as` claims, leaves with mail)."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest

from simulator.clock import START_EPOCH_MS
from simulator.design import (
    AUTO_ROW_TTL_MS, HOUR_MS, PID_FRESH_MS, RENUDGE_MS, SECOND_MS, STALE_MS, TOMBSTONE_TTL_MS,
)
from simulator.explore import reach
from simulator.explore.generator import _Draw, _faker, generate
from simulator.explore.plan import WorldPlan, replay_problems
from simulator.explore.swarm import DEFAULT, SMALL, Swarm

WEEK = 7 * 86_400_000


def _world(seed: int = 1, *, silent: bool = False, mcp: bool = False) -> tuple[_Draw, WorldPlan]:
    rng = random.Random(seed)
    d = _Draw(rng, _faker(rng), DEFAULT)
    d.swarm = Swarm(hosts=("opencode",), agents=("reader",), windows=(), actions={"send": 10})
    agent = {"kind": "silent"} if silent else {"kind": "reader"}
    d.processes = [
        {"id": "oc1", "kind": "opencode", "sessions": [{"id": "alice", "agent": agent}]},
        {"id": "oc2", "kind": "opencode", "poll_interval": 15_000, "sessions": [{"id": "bob", "agent": agent}]},
    ]
    if mcp:
        d.processes.append({"id": "cu3", "kind": "cursor", "sessions": [{"id": "carol"}]})
    return d, WorldPlan(d.processes)


@pytest.mark.rules("R14")
def test_a_stale_probe_queries_60_seconds_after_the_dead_hosts_last_beat():
    """R14: the host dies between two polls; the query lands 59, 60 or 61 s after its last beat."""
    seen = set()
    for seed in range(40):
        d, plan = _world(seed)
        kill, probe = reach.stale_probe(d, plan, 47_000)
        proc = next(p for p in d.processes if p["id"] == kill["kill"]["process"])
        every = proc.get("poll_interval", 30_000)
        beat = kill["at"] - every // 2
        assert beat % every == 0 and beat > 47_000 - every
        seen.add(probe["at"] - beat - STALE_MS)
    assert seen == {-SECOND_MS, 0, SECOND_MS}


@pytest.mark.rules("R18")
def test_a_renudge_script_lands_15_minutes_after_the_delivery():
    """R18: mail to a silent session just before its host polls, the run going on past the re-nudge."""
    d, plan = _world(3, silent=True)
    send, probe = reach.renudge(d, plan, 20_000)
    proc = next(p for p in d.processes if any(s["id"] == send["send"]["to"] for s in p["sessions"]))
    every = proc.get("poll_interval", 30_000)
    delivered = (send["at"] // every + 1) * every
    assert delivered - send["at"] <= 5 * SECOND_MS
    assert abs(probe["at"] - delivered - RENUDGE_MS) <= SECOND_MS
    assert d.min_length > delivered + RENUDGE_MS


@pytest.mark.rules("R22")
def test_an_hour_burst_straddles_a_clock_hour():
    """R22: the burst's wakes fall on both sides of a clock hour (after a sleep that brings it near)."""
    d, plan = _world(4)
    steps = reach.hour_burst(d, plan, 60_000)
    sends = [s["at"] for s in steps if "send" in s]
    hour = [(START_EPOCH_MS + t) // HOUR_MS for t in sends]
    assert len(set(hour)) == 2 and len(sends) == reach.WAKES_ACROSS_AN_HOUR
    assert "sleep" in steps[0] and id(steps[0]) in d.shifting


@pytest.mark.rules("R7", "R26")
def test_a_ttl_return_jumps_to_just_before_or_after_the_7_day_ttls():
    """R7, R26: a leave (or a dead host), a jump within six hours of the TTL, the session back."""
    sides, backs = set(), set()
    for seed in range(40):
        d, plan = _world(seed)
        leave, jump, back = reach.ttl_return(d, plan, 30_000)
        length = jump["sleep"]["for"]
        assert TOMBSTONE_TTL_MS == AUTO_ROW_TTL_MS == WEEK
        assert 0 < abs(length - WEEK) <= 6 * HOUR_MS and back["at"] > jump["at"] + length
        sides.add(length > WEEK)
        backs.add(next(k for k in back if k != "at"))
        assert reach.ttl_return(d, plan, 40_000) is None  # one jump a run
    assert sides == {True, False} and backs == {"prompt", "resume"}


@pytest.mark.rules("R16")
def test_a_cli_bound_script_lists_a_dead_row_just_under_or_over_one_day_old():
    """R16: a host killed between polls, a jump to within an hour of the CLI's one-day stale
    bound, then `thatch chat list` with its default bound and with `all`."""
    day, sides = 86_400_000, set()
    for seed in range(40):
        d, plan = _world(seed)
        kill, jump, default, every = reach.cli_bound(d, plan, 30_000)
        assert "kill" in kill and 0 < abs(jump["sleep"]["for"] - day) <= HOUR_MS
        assert default["cli_list"] == {} and every["cli_list"] == {"stale": "all"} and default["at"] > jump["at"]
        sides.add(jump["sleep"]["for"] > day)
        assert reach.cli_bound(d, plan, 40_000) is None  # one jump a run
    assert sides == {True, False}


@pytest.mark.rules("R32")
def test_a_pid_freshness_script_calls_at_the_ten_minute_edge():
    """R32: a prompt records the host pid; the same session's tool call lands 600 s (+-1 s) later."""
    edges = set()
    for seed in range(30):
        d, plan = _world(seed, mcp=True)
        prompt, send = reach.pid_freshness(d, plan, 90_000)
        assert prompt["prompt"]["session"] == send["send"]["from"] == "carol"
        edges.add(send["at"] - prompt["at"] - PID_FRESH_MS)
    assert edges == {-SECOND_MS, 0, SECOND_MS}


@pytest.mark.rules("R36")
def test_a_hook_turn_script_leaves_mail_unread_at_a_hooked_sessions_turn_ends():
    """R36: a prompt to the hooked session, mail inside that turn and inside the turn a Stop
    reminder or a Cursor follow-up would continue it with; some Cursor turns end aborted."""
    aborted_ends = 0
    for seed in range(40):
        d, plan = _world(seed, mcp=True)
        turn = 20_000  # the design's default model turn (the agent names none)
        prompt, first, second = reach.hook_turn(d, plan, 90_000)
        assert prompt == {"at": 90_000, "prompt": {"session": "carol"}}
        assert first["send"]["to"] == second["send"]["to"] == "carol"
        assert first["send"]["from"] in ("alice", "bob") and second["send"]["from"] in ("alice", "bob")
        assert 90_000 < first["at"] < 90_000 + turn < second["at"] < 90_000 + 2 * turn
        end = 90_000 + turn
        aborted = d.processes[2]["sessions"][0]["agent"].get("aborted", [])
        aborted_ends += any(w["from"] <= end < w["until"] for w in aborted)
    assert 0 < aborted_ends < 40


def test_a_race_aims_several_calls_at_one_recipient_at_one_instant():
    d, plan = _world(5)
    steps = reach.race(d, plan, 10_000)
    assert len(steps) >= 2 and {s["at"] for s in steps} == {10_000}
    targets = {s["send"]["to"] for s in steps if "send" in s} | {s["read"]["session"] for s in steps if "read" in s}
    assert len(targets) == 1


@pytest.mark.rules("R32", "R33")
def test_a_fork_spoof_forks_prompts_then_claims_another_name_and_the_recipient_reads():
    """R32, R33: only a Claude Code session forks; its next prompt re-anchors the host pid, then
    it sends claiming another session's name, and the recipient reads that mail."""
    d, plan = _world(2, mcp=True)
    assert reach.fork_spoof(d, plan, 60_000) is None  # Cursor trusts `as` and never forks
    d.processes.append({"id": "cc4", "kind": "claude-code", "sessions": [{"id": "dora"}]})
    plan = WorldPlan(d.processes)
    fork, prompt, send, read = reach.fork_spoof(d, plan, 60_000)
    assert fork == {"at": 60_000, "fork": {"session": "dora"}}
    assert prompt == {"at": 120_000, "prompt": {"session": "dora"}}
    assert send["at"] == 180_000 and send["send"]["from"] == "dora" and send["send"]["as"] != "{dora}"
    assert read == {"at": 240_000, "read": {"session": send["send"]["to"]}}


@pytest.mark.rules("R10")
def test_a_read_storm_races_reads_with_sends_from_other_processes_round_after_round():
    """R10: in a seed that drew concurrent dispatch a race is sometimes a storm: each round, the
    recipient's read and sends to it from sessions of other processes at one instant; a seed
    that drew serial dispatch never storms (its calls cannot overlap)."""
    d, plan = _world(3, mcp=True)
    assert all(len({s["at"] for s in reach.race(d, plan, 10_000)}) == 1 for _ in range(20))
    storms = 0
    for seed in range(30):
        d, plan = _world(seed, mcp=True)
        d.swarm = replace(d.swarm, dispatch="serial", drawn_dispatch="concurrent")  # forced serial
        steps = reach.race(d, plan, 10_000)
        rounds = sorted({s["at"] for s in steps})
        if len(rounds) == 1:
            continue  # a plain race
        storms += 1
        assert len(rounds) == reach.STORM_ROUNDS
        for at in rounds:
            calls = [s for s in steps if s["at"] == at]
            (reader,) = [s["read"]["session"] for s in calls if "read" in s]
            sends = [s["send"] for s in calls if "send" in s]
            assert sends and all(x["to"] == reader and plan.host[x["from"]] != plan.host[reader] for x in sends)
    assert 0 < storms < 30


def test_every_reach_family_is_drawn_and_every_world_fits_its_plan():
    """Across seeds: boundary scripts, races, statement crashes, 002-era rows, config edits,
    synchronous events, `as` claims and leaves right after mail all appear, each world valid."""
    drawn: Counter = Counter()
    for seed in range(200):
        g = generate(seed, SMALL)
        assert replay_problems(g.doc) == [], seed
        drawn.update(f for f in reach_features if g.swarm.on(f))
        drawn["legacy rows"] += bool(g.doc.get("legacy"))
        drawn["sync"] += any(p.get("events") == "synchronous" for p in g.doc["processes"])
        for st in g.doc["steps"]:
            action = next(k for k in st if k not in ("at", "name", "expect"))
            args = st[action]
            drawn["statement crash"] += action == "crash" and "call" in args
            drawn["config"] += action == "config"
            drawn["as"] += isinstance(args, dict) and "as" in args
            drawn["week jump"] += action == "sleep" and abs(args["for"] - WEEK) <= 6 * HOUR_MS
    for feature in (*reach_features, "legacy rows", "sync", "statement crash", "config", "as", "week jump"):
        assert drawn[feature] > 0, feature


reach_features = ("boundaries", "races", "legacy", "sync-events", "spoofing", "unread-leaves")


@pytest.mark.rules("R13", "R14")
def test_poll_jitter_stalls_stay_within_the_staleness_rule():
    """R13, R14: a drawn stall loses at most 60 s minus the process's poll interval, so no beat
    gap passes 60 s; stalls are drawn in some runs."""
    stalls = 0
    for seed in range(300):
        g = generate(seed, SMALL)
        procs = {p["id"]: p for p in g.doc["processes"]}
        for st in g.doc["steps"]:
            if "stall" in st:
                stalls += 1
                every = procs[st["stall"]["process"]].get("poll_interval", 30_000)
                assert 0 < st["stall"]["for"] <= STALE_MS - every
    assert stalls > 0
