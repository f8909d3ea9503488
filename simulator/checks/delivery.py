"""Delivery properties: who wakes a session, how often, and that mail gets a wake.

P1 single deliverer, P2 rate cap, P3 at-least-once, P10 ping-pong bounded.
"""

from __future__ import annotations

import math
from typing import Optional

from simulator.checks.registry import passed, prop, skipped, verdict
from simulator.checks.view import RunView
from simulator.checks.wakes import rolling_excess, wakes_by_incarnation
from simulator.design import HOUR_MS, MAX_WAKES_PER_HOUR, RENUDGE_MS
from simulator.result import Verdict


@prop("P1", "single-deliverer", rules=("R25", "R18"))
def p1_single_deliverer(view: RunView) -> Verdict:
    """Every wake is received by a live process hosting that session at that moment, and no two processes wake the same batch (two wakes of one session by different incarnations within 15 min, no read between, the second counting more messages than arrived since the first, the first incarnation still alive)."""
    wakes = view.of("wake")
    if not wakes:
        return skipped(p1_single_deliverer, "no wake prompt in the run")
    for w in wakes:
        inc = view.inc_of(w)
        hosted = w["data"].get("hosted", True)
        if not hosted or inc is None or w.get("session") not in inc.sessions or not inc.alive(w["t"], w["i"]):
            why = "data.hosted is false" if not hosted else f"{w.get('proc')} does not host {w.get('session')} then"
            wit = [w] + ([inc.start_event] if inc and inc.start_event else [])
            return verdict(p1_single_deliverer, "fail", f"wake of {w.get('session')} at t={w['t']} by a non-host: {why}", wit)
    reads = view.calls_of("read", ok=True)
    by_session: dict[str, list[dict]] = {}
    for w in wakes:
        by_session.setdefault(w.get("session"), []).append(w)
    for label, ws in by_session.items():
        for a, b in zip(ws, ws[1:]):
            ia, ib = view.inc_of(a), view.inc_of(b)
            if ia is ib or ia is None or ib is None:
                continue
            if b["t"] - a["t"] >= RENUDGE_MS or not ia.alive(b["t"], b["i"]):
                continue
            if any(c.session == label and a["i"] < c.i < b["i"] for c in reads):
                continue
            if int(b["data"].get("count") or 0) <= view.new_mail(label, a["i"], b["i"]):
                continue  # the second wake is for mail that arrived after the first: another batch
            return verdict(p1_single_deliverer, "fail",
                           f"{label} was woken by {ia.proc}#{ia.n} at t={a['t']} and by {ib.proc}#{ib.n} at t={b['t']} while both were alive: one batch, two deliverers", [a, b])
    return passed(p1_single_deliverer, f"{len(wakes)} wakes, each by the session's live host")


@prop("P2", "rate-cap", rules=("R22",))
def p2_rate_cap(view: RunView) -> Verdict:
    """Per process incarnation and session, at most 6 wake prompts fall in any rolling hour (a window of < 3,600,000 ms)."""
    groups = wakes_by_incarnation(view)
    if not groups:
        return skipped(p2_rate_cap, "no wake prompt in the run")
    for (proc, n, label), ws in groups.items():
        over = rolling_excess(ws)
        if over:
            return verdict(p2_rate_cap, "fail", f"{label} got {len(over)} wakes from {proc}#{n} within one hour "
                           f"(t={over[0]['t']}..{over[-1]['t']}), cap {MAX_WAKES_PER_HOUR}", over)
    return passed(p2_rate_cap, f"{sum(map(len, groups.values()))} wakes, none over the cap")


def _grace(view: RunView, label: str, proc: str | None) -> int:
    """How long a deliverable message may legitimately wait: two poll cycles and a turn."""
    agent = view.agents.get(label)
    turn = int(getattr(agent, "turn", 20_000) or 0)
    return 2 * view.poll_ms(proc) + turn + 1_000


def _busy_at_end(view: RunView, label: str, limit: int) -> bool:
    agent = view.agents.get(label)
    windows = list(getattr(agent, "busy", []) or []) + list(getattr(agent, "compacting", []) or [])
    return any(w.until > limit for w in windows)


def _created_t(view: RunView, msg: dict, sends: dict) -> int | None:
    """Virtual creation time of a db row: its stamp (second resolution), else its send/broadcast call."""
    stamped = view.vt(msg["created_at"])
    if stamped is not None:
        return stamped
    key = (view.label_of.get(msg["from_session"]), msg["body"])
    return sends[key][0] if sends.get(key) else None


def send_times(view: RunView) -> dict[tuple, list[int]]:
    out: dict[tuple, list[int]] = {}
    for c in view.calls:
        if c.tool in ("send", "broadcast") and c.call is not None:
            out.setdefault((c.session, c.body), []).append(c.call["t"])
    return out


def _unread_mail_obligations(view: RunView, registered: set[str]) -> tuple[int, Optional[Verdict]]:
    """Unread mail to a live opencode host's registered session owed a wake: (judged, failure)."""
    sends = send_times(view)
    checked = 0
    end = view.t_end
    for m in view.db["messages"]:
        label = view.label_of.get(m["to_session"])
        if label is None or m["read_at"] or m["to_session"] not in registered:
            continue
        hosts = [h for h in view.incs if label in h.sessions and h.kind == "opencode" and h.start_t <= end
                 and (h.end_t is None or h.reason == "end")]
        if not hosts or view.asleep(end):
            continue
        host = hosts[-1]
        if not view.hosting(host, label, end):
            continue  # a rehosted session that aged out of the grace: nobody delivers to it (R15)
        created = _created_t(view, m, sends)
        limit = end - _grace(view, label, host.proc)
        if created is None or created > limit or _busy_at_end(view, label, limit) or host.start_t > limit:
            continue
        checked += 1
        cap_ws = [w for w in view.of("wake", session=label, proc=host.proc)
                  if view.inc_of(w) is host and w["t"] > end - HOUR_MS]
        if len(cap_ws) >= MAX_WAKES_PER_HOUR:
            continue
        if not any(w["t"] >= created for w in view.of("wake", session=label)):
            sent = [c for c in view.calls if c.call is not None and abs(c.call["t"] - created) < 1_000 and c.body == m["body"]]
            wit = [w for c in sent[:1] for w in c.witness()] + ([host.start_event] if host.start_event else [])
            return checked, verdict(p3_at_least_once, "fail",
                                    f"message #{m['id']} to {label} (created t={created}) is unread at the end and no wake came after it, "
                                    f"though {host.proc}#{host.n} hosted {label} live", wit)
    return checked, None


def _stamp_crash_obligations(view: RunView, registered: set[str]) -> tuple[int, Optional[Verdict]]:
    """A crash at delivered-stamp owes another wake once a live process hosts the session again: (judged, failure)."""
    checked = 0
    end = view.t_end
    for crash in view.of("crash"):
        if crash["data"].get("point") != "delivered-stamp":
            continue
        prior = [w for w in view.of("wake", proc=crash.get("proc")) if w["i"] < crash["i"] and view.inc_of(w) is view.inc_of(crash)]
        label = crash.get("session") or (prior[-1].get("session") if prior else None)
        if label is None:
            continue
        checked += 1
        rehost = next((inc for inc in view.incs if label in inc.sessions and inc.start_i > crash["i"]), None)
        live = [inc for inc in view.hosts(label, crash["t"], crash["i"]) if inc.proc != crash.get("proc")]
        first = rehost.start_t if rehost else (crash["t"] if live else None)
        host_proc = rehost.proc if rehost else (live[0].proc if live else None)
        if first is None or first > end - _grace(view, label, host_proc):
            continue  # no live host again in time: the run never gave it a chance
        if any(w["i"] > crash["i"] for w in view.of("wake", session=label)):
            continue
        if any(c.i > crash["i"] and "BEGIN UNTRUSTED" in c.text for c in view.calls_of("read", label, ok=True)):
            continue  # the batch was read another way
        if label not in {view.label_of.get(s) for s in registered}:
            continue
        wit = prior[-1:] + [crash] + ([rehost.start_event] if rehost and rehost.start_event else [])
        return checked, verdict(p3_at_least_once, "fail",
                                f"{label}'s wake at t={prior[-1]['t'] if prior else '?'} lost its stamp to a crash, and no re-nudge came "
                                f"though a live process hosted {label} again from t={first}", wit)
    return checked, None


@prop("P3", "at-least-once", rules=("R18", "R19", "R20", "R21", "R23"))
def p3_at_least_once(view: RunView) -> Verdict:
    """At the end of the drain every unread message to a registered session hosted by a live opencode process got a wake at or after its creation (unless that host's hourly cap is full or the run left no time), and every crash at delivered-stamp is followed by another wake of that session once a live process hosts it again."""
    registered = {r["session_id"] for r in view.db["sessions"]}
    checked = 0
    for obligations in (_unread_mail_obligations, _stamp_crash_obligations):
        judged, failure = obligations(view, registered)
        if failure is not None:
            return failure
        checked += judged
    if not checked:
        return skipped(p3_at_least_once, "no deliverable unread mail at the end and no crash at delivered-stamp")
    return passed(p3_at_least_once, f"{checked} obligations met")


@prop("P10", "ping-pong-bounded", rules=("R22",))
def p10_ping_pong(view: RunView) -> Verdict:
    """Ping-pong sessions get at most 6 wakes per process incarnation per rolling hour, and each pair exchanges at most (6 x hours x incarnations + non-wake turns, summed over both sides) x seeds + seeds messages, seeds being the scripted sends and broadcasts of the pair."""
    pp = {label for label, a in view.agents.items() if getattr(a, "kind", "") == "ping-pong"}
    if not pp:
        return skipped(p10_ping_pong, "no ping-pong agent in the scenario")
    for (proc, n, label), ws in wakes_by_incarnation(view, pp).items():
        over = rolling_excess(ws)
        if over:
            return verdict(p10_ping_pong, "fail", f"ping-pong {label} got {len(over)} wakes from {proc}#{n} within one hour", over)
    hours = max(1, math.ceil(max(view.t_end, 1) / HOUR_MS))
    pairs: dict[frozenset, list[dict]] = {}
    for r in view.db["messages"]:
        a, b = view.label_of.get(r["from_session"]), view.label_of.get(r["to_session"])
        if a in pp or b in pp:
            pairs.setdefault(frozenset((a, b)), []).append(r)
    for pair, msgs in pairs.items():
        seeds = sum(1 for st in view.steps if st.action in ("send", "broadcast") and st.args.sender in pair)
        budget = 0
        for label in pair:
            incs = max(1, sum(1 for inc in view.incs if label in inc.sessions))
            turns = [e for e in view.of("turn-start", session=label) if e["data"].get("cause") != "wake"]
            budget += MAX_WAKES_PER_HOUR * hours * incs + len(turns)
        bound = budget * max(1, seeds) + seeds
        if len(msgs) > bound:
            return verdict(p10_ping_pong, "fail", f"pair {sorted(map(str, pair))} exchanged {len(msgs)} messages, bound {bound}",
                           [{"db_row": r} for r in msgs[-4:]])
    return passed(p10_ping_pong, f"{len(pp)} ping-pong sessions within the cap")
