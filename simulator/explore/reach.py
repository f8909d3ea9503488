"""Draws aimed at the design's boundaries and at same-instant races, for the generator.

Uniform times almost never land where a wrong constant shows: a query
exactly 60 s after a dead host's last beat (R14), a poll exactly 15 minutes
after a delivery (R18), wakes on both sides of a clock hour (R22), a return
just before or just after a 7-day TTL (R7, R26), a tool call at the edge of
a hook's 10-minute pid freshness (R32), the CLI's list of a row just under or
just over its one-day stale bound (R16), a hooked session's turn ending with
mail it has not read (R36), a claimed name after a Claude Code fork, where
only the parent-pid anchor still tells the conversation apart (R32, R33).
Each draw here returns a short script: the steps at the drawn time and
follow-ups at the boundary, all checked against the world plan by the
generator when their time comes. The constants are the design's own
(simulator/design.py), never the code's.

A race is several store calls aimed at one recipient at one instant: a
send, a broadcast and the recipient's read (concurrent dispatch runs them at
once; serial dispatch in the seed's order). A read storm repeats a read and
sends to it round after round, for the microseconds between a read's select
and its stamp (R10).
"""

from __future__ import annotations

from typing import Any, Optional

from simulator.clock import START_EPOCH_MS
from simulator.design import (
    AUTO_ROW_TTL_MS, CLI_STALE_DAYS, DAY_MS, DEFAULT_POLL_MS, HOUR_MS, MINUTE_MS, PID_FRESH_MS, RENUDGE_MS,
    SECOND_MS, STALE_MS, TOMBSTONE_TTL_MS,
)
from simulator.explore.plan import WorldPlan
from simulator.scenario.kinds import HOSTS, STEPS
from simulator.scenario.model import Agent

Steps = Optional[list[dict[str, Any]]]
# Off a boundary by nothing or by one stamp's resolution, on either side.
EDGES = (-SECOND_MS, 0, 0, SECOND_MS)
# How far from a 7-day TTL a jump lands: a minute, an hour or six hours, before or after.
TTL_SIDES = (MINUTE_MS, HOUR_MS, 6 * HOUR_MS)
WAKES_ACROSS_AN_HOUR = 8
# A read storm: its share of the races, its rounds, and their spacing.
STORM_RATE, STORM_ROUNDS, STORM_SPACING_MS = 0.5, 8, 2 * SECOND_MS


def interval(proc: dict[str, Any]) -> int:
    return proc.get("poll_interval", DEFAULT_POLL_MS)


def next_tick(proc: dict[str, Any], t: int) -> int:
    """The first poll of an initial process strictly after `t` (its timer runs from 0)."""
    i = interval(proc)
    return (t // i + 1) * i


def _proc(d, label: str) -> dict[str, Any]:
    return next(p for p in d.processes if p["id"] == label)


def _pollers(d, plan: WorldPlan, t: int) -> list[dict[str, Any]]:
    """Running initial processes that poll and host a usable session."""
    return [p for p in d.processes if plan.runs(p["id"]) and HOSTS[p["kind"]].polls and p["id"] not in plan.never
            and any(plan.usable(s["id"], t) for s in p["sessions"])]


def _asker(d, plan: WorldPlan, t: int, not_on: str) -> Optional[str]:
    who = [s for s in d._usable(plan, t) if plan.host[s] != not_on]
    return d.rng.choice(who) if who else None


def _query(d, session: str, at: int) -> dict[str, Any]:
    action = d.rng.choice(("list", "status", "broadcast", "cli_list"))
    if action == "cli_list":
        return {"at": at, "cli_list": {"stale": "all"}}
    if action == "broadcast":
        d.broadcasts += 1
        return {"at": at, "broadcast": {"from": session, "body": f"{d.fake.sentence(nb_words=4)} (#{d.broadcasts})"}}
    return {"at": at, action: {"session": session}}


def stale_probe(d, plan: WorldPlan, t: int) -> Steps:
    """R14: a host killed between two polls, then a query 60 s (59, 61) after its last beat."""
    victims = _pollers(d, plan, t)
    if not victims:
        return None
    proc = d.rng.choice(victims)
    beat = next_tick(proc, t)
    asker = _asker(d, plan, t, proc["id"])
    if asker is None:
        return None
    probe = beat + STALE_MS + d.rng.choice(EDGES)
    return [{"at": beat + interval(proc) // 2, "kill": {"process": proc["id"]}}, _query(d, asker, probe)]


def renudge(d, plan: WorldPlan, t: int) -> Steps:
    """R18: mail to a silent session just before its host's poll, and the run going on past the
    re-nudge 15 minutes after that delivery (with a query on the boundary)."""
    silent = [s for p in _pollers(d, plan, t) for s in p["sessions"]
              if plan.usable(s["id"], t) and s.get("agent", {}).get("kind") == "silent"]
    if not silent:
        return None
    target = d.rng.choice(silent)["id"]
    proc = _proc(d, plan.host[target])
    senders = [s for s in d._usable(plan, t) if s != target]
    if not senders:
        return None
    delivered = next_tick(proc, t + 5 * SECOND_MS)
    send = {"at": delivered - d.rng.randint(1, 5) * SECOND_MS, "send": {"from": d.rng.choice(senders), "to": target}}
    d._body(send["send"])
    probe = delivered + RENUDGE_MS + d.rng.choice(EDGES)
    d.min_length = max(d.min_length, probe + 2 * interval(proc))
    asker = _asker(d, plan, t, proc["id"]) or send["send"]["from"]
    return [send, {"at": probe, "list": {"session": asker}}]


def hour_burst(d, plan: WorldPlan, t: int) -> Steps:
    """R22: wakes of one recipient on both sides of a clock hour (the cap's window rolls; a
    clock-hour bucket would reset at the hour). A machine sleep brings the hour near."""
    pollers = _pollers(d, plan, t)
    if not pollers:
        return None
    proc = d.rng.choice(pollers)
    target = d.rng.choice([s["id"] for s in proc["sessions"] if plan.usable(s["id"], t)])
    senders = [s for s in d._usable(plan, t) if s != target]
    if not senders:
        return None
    hour = HOUR_MS - (START_EPOCH_MS + t) % HOUR_MS + t   # the next clock hour, in scenario time
    steps: list[dict[str, Any]] = []
    gap = interval(proc) * 2
    first = hour - gap * (WAKES_ACROSS_AN_HOUR // 2)
    if first - t > 2 * MINUTE_MS:
        steps.append({"at": t, "sleep": {"for": first - t - MINUTE_MS}})
        d.shifting.add(id(steps[-1]))
    else:
        first = max(first, t + SECOND_MS)
    for k in range(WAKES_ACROSS_AN_HOUR):
        send = {"at": first + k * gap, "send": {"from": d.rng.choice(senders), "to": target}}
        d._body(send["send"])
        steps.append(send)
    return steps


def ttl_return(d, plan: WorldPlan, t: int) -> Steps:
    """R7, R26: a session leaves (or its host dies), the machine sleeps to just before or just
    after the 7-day TTLs, and the session comes back (a prompt; a resume for a killed host)."""
    if d.jumped:
        return None
    side = d.rng.choice((-1, 1)) * d.rng.choice(TTL_SIDES)
    ttl = d.rng.choice((TOMBSTONE_TTL_MS, AUTO_ROW_TTL_MS))
    who = [s for s in d._usable(plan, t)]
    if not who:
        return None
    session = d.rng.choice(who)
    leave = {"at": t, "unregister": {"session": session}}
    back: dict[str, Any] = {"prompt": {"session": session}}
    if d.rng.random() < 0.5 and plan.parent.get(session) is None and STEPS["resume"].accepts(plan.host_kind(session)):
        target = d._target(plan, plan.host[session])
        if target is not None:
            leave = {"at": t, "kill": {"process": plan.host[session]}}
            back = {"resume": {"session": session, "process": target}}
    d.jumped = True
    jump = {"at": t + 5 * SECOND_MS, "sleep": {"for": ttl + side}}
    d.shifting.add(id(jump))
    back["at"] = jump["at"] + ttl + side + MINUTE_MS
    return [leave, jump, back]


def pid_freshness(d, plan: WorldPlan, t: int) -> Steps:
    """R32: a prompt (its hook records the host pid), then a tool call by the same session
    10 minutes (one second less, one more) later, sometimes claiming another name."""
    mcp = [s for s in d._usable(plan, t) if HOSTS[plan.host_kind(s)].mcp]
    others = d.sessions()
    if not mcp or len(others) < 2:
        return None
    session = d.rng.choice(mcp)
    call: dict[str, Any] = {"from": session, "to": d.rng.choice([s for s in others if s != session])}
    d._body(call)
    if d.rng.random() < 0.5:
        call["as"] = "{%s}" % d.rng.choice([s for s in others if s != session])
    at = t + PID_FRESH_MS + d.rng.choice(EDGES)
    d.min_length = max(d.min_length, at + MINUTE_MS)
    return [{"at": t, "prompt": {"session": session}}, {"at": at, "send": call}]


def cli_bound(d, plan: WorldPlan, t: int) -> Steps:
    """R16: a host dies between two polls, the machine sleeps to just under or just over the CLI's
    one-day stale bound, and `thatch chat list` runs with its default bound and with `all`."""
    victims = _pollers(d, plan, t)
    if d.jumped or not victims:
        return None
    proc = d.rng.choice(victims)
    kill = {"at": next_tick(proc, t) + interval(proc) // 2, "kill": {"process": proc["id"]}}
    side = d.rng.choice((-1, 1)) * d.rng.choice((MINUTE_MS, HOUR_MS))
    d.jumped = True
    jump = {"at": kill["at"] + 5 * SECOND_MS, "sleep": {"for": CLI_STALE_DAYS * DAY_MS + side}}
    d.shifting.add(id(jump))
    at = jump["at"] + CLI_STALE_DAYS * DAY_MS + side + MINUTE_MS
    return [kill, jump, {"at": at, "cli_list": {}}, {"at": at, "cli_list": {"stale": "all"}}]


def hook_turn(d, plan: WorldPlan, t: int) -> Steps:
    """R36: a prompt to a session whose host runs a turn-end hook, mail for it a third of the way
    into that turn and again halfway into the turn that may follow. Claude Code's Stop blocks
    with a reminder and the reminder's own end meets the second message (`stop_hook_active`);
    a Cursor turn ends inside a window the user aborts it in (added here when the agent has none
    there), or completes and is followed up. Uniform draws rarely put unread mail at a turn end
    of a hooked session at all."""
    hooked = [s["id"] for p in d.processes if HOSTS[p["kind"]].hooks and plan.runs(p["id"])
              for s in p["sessions"] if s["id"] in plan.host and s["id"] not in plan.closed]
    senders = d._usable(plan, t)
    if not hooked or not senders:
        return None
    target = d.rng.choice(hooked)
    senders = [s for s in senders if s != target]
    if not senders:
        return None
    session = next(s for p in d.processes for s in p["sessions"] if s["id"] == target)
    agent = session.setdefault("agent", {})
    turn = agent.get("turn", Agent.model_fields["turn"].default)
    end = t + turn
    if HOSTS[plan.host_kind(target)].aborts and d.rng.random() < 0.5:
        windows = agent.setdefault("aborted", [])
        if not any(w["from"] <= end < w["until"] for w in windows):
            windows.append({"from": end - SECOND_MS, "until": end + SECOND_MS})
    steps: list[dict[str, Any]] = [{"at": t, "prompt": {"session": target}}]
    for at in (t + max(SECOND_MS, turn // 3 // SECOND_MS * SECOND_MS), end + turn // 2 // SECOND_MS * SECOND_MS):
        send = {"at": at, "send": {"from": d.rng.choice(senders), "to": target}}
        d._body(send["send"])
        steps.append(send)
    return steps


def fork_spoof(d, plan: WorldPlan, t: int) -> Steps:
    """R32, R33: a Claude Code conversation forks, its next prompt's hook adopts the new id and
    re-anchors the host pid, then it sends claiming another session's name, and the recipient
    reads. The MCP server's own environment still names the id from before the fork, whose row
    moved: only the anchor keeps the claim from being believed. Without a fork the environment
    names the same conversation, and a server that skips the anchor acts the same."""
    forking = [s for s in d._usable(plan, t) if STEPS["fork"].accepts(plan.host_kind(s))
               and not HOSTS[plan.host_kind(s)].trusts_as]
    if not forking:
        return None
    session = d.rng.choice(forking)
    others = [s for s in d.sessions() if s != session]
    readers = [s for s in d._usable(plan, t) if s != session]
    if not readers:
        return None
    to = d.rng.choice(readers)
    send: dict[str, Any] = {"from": session, "to": to, "as": "{%s}" % d.rng.choice(others)}
    d._body(send)
    return [{"at": t, "fork": {"session": session}}, {"at": t + MINUTE_MS, "prompt": {"session": session}},
            {"at": t + 2 * MINUTE_MS, "send": send}, {"at": t + 3 * MINUTE_MS, "read": {"session": to}}]


BOUNDARY_DRAWS = (stale_probe, renudge, hour_burst, ttl_return, pid_freshness, cli_bound, hook_turn, fork_spoof)


def boundary(d, plan: WorldPlan, t: int) -> Steps:
    return d.rng.choice(BOUNDARY_DRAWS)(d, plan, t)


def race(d, plan: WorldPlan, t: int) -> Steps:
    """A send, a broadcast and a read (and a second send) aimed at one recipient at one instant;
    in a seed that drew concurrent dispatch, sometimes a storm of them (`read_storm`): only
    overlapping calls can land inside a read. A world forced into serial dispatch keeps its
    storms (they follow the dispatch the seed drew)."""
    who = d._usable(plan, t)
    if len(who) < 2:
        return None
    if d.swarm.drawn_dispatch == "concurrent" and d.rng.random() < STORM_RATE:
        storm = read_storm(d, plan, t, who)
        if storm:
            return storm
    target = d.rng.choice(who)
    senders = [s for s in who if s != target]
    steps: list[dict[str, Any]] = []
    for action in d.rng.sample(("send", "broadcast", "read", "send2"), d.rng.randint(2, 4)):
        if action == "read":
            steps.append({"at": t, "read": {"session": target}})
        elif action == "broadcast":
            d.broadcasts += 1
            body = f"{d.fake.sentence(nb_words=5)} (#{d.broadcasts})"
            steps.append({"at": t, "broadcast": {"from": d.rng.choice(senders), "body": body}})
        else:
            send = {"at": t, "send": {"from": d.rng.choice(senders), "to": target}}
            d._body(send["send"])
            steps.append(send)
    return steps


def read_storm(d, plan: WorldPlan, t: int, who: list[str]) -> Steps:
    """R10: round after round, a recipient's read at the very instant two or three sessions of
    other processes send to it. A read stamps exactly the rows its select returned; the window
    between its select and its stamp is microseconds wide, so one race in a world almost never
    lands a commit inside it, and a storm of rounds on real parallel processes does."""
    target = d.rng.choice(who)
    senders = [s for s in who if plan.host[s] != plan.host[target]]
    if not senders:
        return None
    steps: list[dict[str, Any]] = []
    for k in range(STORM_ROUNDS):
        at = t + k * STORM_SPACING_MS
        steps.append({"at": at, "read": {"session": target}})
        for sender in d.rng.sample(senders, min(len(senders), d.rng.randint(2, 3))):
            send = {"at": at, "send": {"from": sender, "to": target}}
            d._body(send["send"])
            steps.append(send)
    return steps
