"""Delivery properties: who wakes a session, how often, and that mail gets a wake.

P1 single deliverer, P2 rate cap, P3 at-least-once, P10 ping-pong bounded.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from typing import Optional

from simulator.checks.deliverable import NO_HOST, Gate, Stretch, not_idle_in
from simulator.checks.faults import crash_lost_a_stamp
from simulator.checks.mail import acting_identity
from simulator.checks.registry import Promise, passed, promised_procs, prop, skipped, verdict
from simulator.checks.view import Call, RunView
from simulator.checks.wakes import reload_positions, rolling_excess, wakes_by_incarnation
from simulator.design import HOUR_MS, MAX_WAKES_PER_HOUR, MINUTE_MS, RENUDGE_MS, SECOND_MS, STAMP_RESOLUTION_MS
from simulator.events import (
    CRASH, POLL, STATUS, STORE_ERROR, STREAM_EVENT, TURN_START, WAKE, Crash, Event, Poll, ProcessStart, Status, Wake,
)
from simulator.result import Verdict
from simulator.scenario.durations import format_duration as span


def _one_pass_twice(view: RunView, label: str, a: Wake, b: Wake) -> Optional[Verdict]:
    """Two wakes of `label` by one process within one dispatch for one batch (the second
    counting more messages than arrived since the first): a delivery pass entered while
    another was running, which R24's guard drops (a host event handed over inside a prompt)."""
    if a.dispatch != b.dispatch or b.count <= view.mail.new_mail(label, a.i, b.i):
        return None
    return verdict(p1_single_deliverer, "fail",
                   f"{label} was woken twice by {a.proc} at t={span(b.t)} in one dispatch "
                   "for one batch: a delivery pass re-entered while another ran (R24)", [a, b])


def _names_other_mail(view: RunView, label: str, a: Wake, b: Wake) -> bool:
    """Does wake `b` name a sender that neither wake `a` nor the mail since it holds? Then `b`
    covers mail `a` did not (an older message that came due again, R18), not `a`'s batch again."""
    known = set(a.senders)
    for c in view.mail.new_mail_calls(label, a.i, b.i):
        known.update(view.names.names_of(c.session))
        if c.claim:
            known.add(c.claim)
    return any(s not in known for s in b.senders)


def _due_again(label: str, wakes: list[Wake], b: Wake, reads: list[Call]) -> bool:
    """Could wake `b` re-nudge an older batch (R18)? Some wake of `label` at least the re-nudge
    interval before it, with no read of `label` since, left mail that came due again; another
    process (that wake's host may have died) may send it while the first wake's host holds a
    later batch, so `b` is not that later batch woken twice."""
    return any(b.t - w.t >= RENUDGE_MS and not any(c.session == label and w.i < c.i < b.i for c in reads)
               for w in wakes if w.i < b.i)


@prop("P1")
def p1_single_deliverer(view: RunView) -> Verdict:
    """Every wake comes from a live host of the session, and no batch is woken by two processes or twice by one."""
    wakes = view.history.of(WAKE)
    if not wakes:
        return skipped(p1_single_deliverer, "no wake prompt in the run")
    for w in wakes:
        inc = view.hosting.inc_of(w)
        hosted = w.hosted is not False  # a hand-built wake that leaves it out was a host's
        if not hosted or inc is None or w.session not in inc.sessions or not inc.alive(w.t, w.i):
            why = "data.hosted is false" if not hosted else f"{w.proc} does not host {w.session} then"
            wit = [w] + ([inc.start_event] if inc and inc.start_event else [])
            return verdict(p1_single_deliverer, "fail",
                           f"wake of {w.session} at t={span(w.t)} by a non-host: {why}", wit)
    reads = view.mail.calls_of("read", ok=True)
    by_session: dict[Optional[str], list[Wake]] = {}
    for w in wakes:
        by_session.setdefault(w.session, []).append(w)
    for label, ws in by_session.items():
        for a, b in zip(ws, ws[1:]):
            ia, ib = view.hosting.inc_of(a), view.hosting.inc_of(b)
            if ia is ib and ia is not None:
                twice = _one_pass_twice(view, label, a, b)
                if twice is not None:
                    return twice
            if ia is ib or ia is None or ib is None:
                continue
            if b.t - a.t >= RENUDGE_MS or not ia.alive(b.t, b.i):
                continue
            if any(c.session == label and a.i < c.i < b.i for c in reads):
                continue
            if (b.count <= view.mail.new_mail(label, a.i, b.i)
                    or _names_other_mail(view, label, a, b) or _due_again(label, ws, b, reads)):
                continue  # the second wake is for mail that arrived after the first, or came due again: another batch
            return verdict(p1_single_deliverer, "fail",
                           f"{label} was woken by {ia.proc}#{ia.n} at t={span(a.t)} and by {ib.proc}#{ib.n} "
                           f"at t={span(b.t)} while both were alive: one batch, two deliverers", [a, b])
    return passed(p1_single_deliverer, f"{len(wakes)} wakes, each by the session's live host", len(wakes))


# thatch's receiver-side cap (R22); a policy with `wake_cap: off` (qoder) or a looser cap does not promise it.
WAKE_CAP = Promise(lambda o: o.wake_cap is not None and o.wake_cap <= MAX_WAKES_PER_HOUR)


def _capped(view: RunView, fn, groups: dict[tuple, list[Wake]]) -> dict[tuple, list[Wake]]:
    """The wake groups of the processes whose options make `fn`'s wake-cap promise."""
    procs = promised_procs(fn, view.spec)
    return {key: ws for key, ws in groups.items() if key[0] in procs}


@prop("P2", promise=WAKE_CAP)
def p2_rate_cap(view: RunView) -> Verdict:
    """Per process runtime (an incarnation, anew after a plugin reload) and session, at most 6 wake prompts fall in
    any rolling hour."""
    groups = _capped(view, p2_rate_cap, wakes_by_incarnation(view))
    if not groups:
        return skipped(p2_rate_cap, "no wake prompt in the run")
    for (proc, n, label), ws in groups.items():
        over = rolling_excess(ws)
        if over:
            return verdict(p2_rate_cap, "fail", f"{label} got {len(over)} wakes from {proc}#{n} within one hour "
                           f"(t={span(over[0].t)}..{span(over[-1].t)}), cap {MAX_WAKES_PER_HOUR}", over)
    judged = sum(map(len, groups.values()))
    return passed(p2_rate_cap, f"{judged} wakes, none over the cap", judged)


def _creations(view: RunView, calls_out: Optional[dict[int, Call]] = None) -> dict[int, tuple[int, float]]:
    """Row id -> (t, i) of the send or broadcast result that stored it: the stamp has second
    resolution, the call's position says which same-time wake came after it. A row no call
    explains stands at its stamp, before every event of that time. `calls_out` gets each
    explained row's call."""
    calls: dict[str, list] = {}
    for c in view.mail.calls:
        if c.tool in ("send", "broadcast") and c.ok:
            calls.setdefault(c.body, []).append(c)
    out: dict[int, tuple[int, float]] = {}
    for m in view.db["messages"]:
        stamp = view.vt(m["created_at"])
        near = [c for c in calls.get(m["body"], ()) if stamp is None or stamp <= c.t < stamp + STAMP_RESOLUTION_MS]
        mine = [c for c in near if c.session == view.names.label_of.get(m["from_session"])] or near
        if mine:
            out[m["id"]] = (mine[0].t, mine[0].i)
            if calls_out is not None:
                calls_out[m["id"]] = mine[0]
        elif stamp is not None:
            out[m["id"]] = (stamp, -1)
    return out


def _came_after(view: RunView, w: Wake, created: tuple, call: Optional[Call]) -> bool:
    """Did wake `w` come after the message was stored? Its history position says so, except
    within one concurrent wave: the wave's processes run at once and the merge orders their
    events by process, so another process's wake in the send's wave that names the sender
    may have come after it; and within the call itself: a host whose events are
    synchronous runs the runtime's delivery from an event the call raised (its echo's
    turn end), between the commit and the tool's reply, so a wake of the sender's own
    process between the call and its result that names the sender may be for it. The
    sender is who the send acted as (a Cursor send claiming another session's name is
    that session's mail, R32)."""
    if (w.t, w.i) > created:
        return True
    if call is None or call.result is None or w.t != call.t:
        return False
    if w.dispatch is None or w.dispatch != call.result.dispatch:
        return False
    if w.proc == call.proc and not (call.call is not None and call.call.i < w.i < call.result.i):
        return False
    sender = acting_identity(view, call)
    return any(view.names.label_for_name(n) == sender for n in w.senders)


def _lost_stamps(view: RunView) -> dict[float, Crash]:
    """Wake position -> the crash between it and its stamp (before delivered-stamp, after
    wake-prompt: checks/faults.py) that followed it in the same process life
    (the batch stays never-delivered: it is due again at once, R23)."""
    out = {}
    for crash in view.history.of(CRASH):
        if not crash_lost_a_stamp(crash):
            continue
        prior = [w for w in view.history.of(WAKE, proc=crash.proc)
                 if w.i < crash.i and view.hosting.inc_of(w) is view.hosting.inc_of(crash)
                 and (crash.session is None or w.session == crash.session)]
        if prior:
            out[prior[-1].i] = crash
    return out


def _first_window(view: RunView, runs: list[tuple[int, int, list[Stretch]]], need: int,
                  until: int) -> Optional[tuple[int, int, Stretch]]:
    """(from, deadline, stretch) of the first time at or after `need` from which the session stays
    wakeable for a whole poll cycle of its host (plus a stamp's resolution) before `until`."""
    for start, end, parts in runs:
        if end <= need:
            continue
        a = max(start, need)
        if a >= until:
            return None
        part = next(p for p in parts if p.start <= a < p.end)
        deadline = a + view.hosting.poll_ms(part.host.proc) + STAMP_RESOLUTION_MS
        if deadline <= min(end, until):
            return a, deadline, part
    return None


def _next_due(wakes: list[Wake], woken: Wake, lost: dict[float, Crash]) -> tuple[int, float, Wake]:
    """When the message is due a wake again after `woken`: at once after a crash that lost its
    stamp, else 15 minutes after the last of the wakes that kept re-stamping it (R18, R21)."""
    w = woken
    while True:
        if w.i in lost:
            return lost[w.i].t, lost[w.i].i, w
        due = w.t + RENUDGE_MS + STAMP_RESOLUTION_MS
        later = [x for x in wakes if x.i > w.i and x.t < due]
        if not later:
            return due, -1, w
        w = later[-1]


def _renudge_poll(view: RunView, runs: list[tuple[int, int, list[Stretch]]], prev: Wake,
                  lost: dict[float, Crash], label: str, until: int) -> Optional[Poll]:
    """R18 to the second: a wake at a whole second stamps `delivered_at` exactly, so the mail is
    due again at the host's first poll at or after 15 minutes from it (`delivered_at <= now -
    15 min`), not a poll later. That poll, where nothing near it blurs the instant: the session
    deliverable by that host from a whole poll cycle before the due time until after the poll,
    still unread, and the poll meeting no lock, store error, crash, stall or sleep. None where
    the bound is not that exact."""
    if prev.i in lost or prev.t % SECOND_MS:
        return None
    exact = prev.t + RENUDGE_MS
    part = next((p for _s, _e, parts in runs for p in parts if p.start <= exact < p.end), None)
    if part is None or part.host is None or part.start > exact - view.hosting.poll_ms(part.host.proc):
        return None
    inc = part.host
    poll = next((e for e in view.history.of(POLL, proc=inc.proc) if e.i > prev.i and e.t >= exact
                 and view.hosting.inc_of(e) is inc and label in (e.hosted or ())), None)
    if poll is None or poll.t >= min(part.end, until) or view.disturbances.asleep(poll.t, slack=SECOND_MS):
        return None
    if any(a <= poll.t <= b + SECOND_MS for a, b in view.disturbances.lock_windows()):
        return None
    if any(p in (None, inc.proc) and a <= poll.t <= b + SECOND_MS for p, a, b in view.disturbances.stall_windows()):
        return None
    if any(abs(e.t - poll.t) <= SECOND_MS for e in view.history.of(STORE_ERROR, CRASH, proc=inc.proc)):
        return None
    return poll


def _flush_edge(view: RunView, gate: Gate, label: str, runs: list[tuple[int, int, list[Stretch]]],
                created: tuple, until: int) -> Optional[Event]:
    """R19 and R5 to the instant: the idle event flushes pending mail at once, and so does the
    startup path of a process that hosts the session from its start. The idle status event (or
    the process start) that first opened the gate after the message was created, where the
    session was busy or compacting in that same host just before it (or no live process hosted
    it), and no crash or store error of the host at that instant. None where the gate did not
    open so."""
    first = next(((start, parts[0]) for start, end, parts in runs if end > created[0]), None)
    if first is None or first[0] <= created[0] or first[0] >= until or first[1].host is None:
        return None
    a, inc = first[0], first[1].host
    before = next((x for x in gate.timeline(label) if x.start < a and x.end == a), None)
    if before is not None and before.reason == NO_HOST and a == inc.start_t:
        edge = inc.start_event  # R5: the startup path's delivery pass, for every session it hosts from its start
    elif before is None or before.reason not in (not_idle_in("busy", inc), not_idle_in("compacting", inc)):
        return None
    else:
        edge = next((e for e in view.history.of(STATUS, session=label, proc=inc.proc) if e.t == a
                     and view.hosting.inc_of(e) is inc and e.status == "idle" and not e.compacting), None)
    if edge is None or any(e.t == a for e in view.history.of(STORE_ERROR, CRASH, proc=inc.proc)):
        return None
    if any(e.t == a and e.inside for e in view.history.of(STREAM_EVENT, session=label)):
        return None  # handed over inside a call: a wake prompt's call re-enters a poller already delivering (R24)
    return edge


def _exempt_reason(timeline: list[Stretch], created: int, until: int, read: Optional[int]) -> str:
    """Why a message was never owed a wake: the gate's reason over most of its unread time."""
    spent: Counter = Counter()
    for s in timeline:
        overlap = min(s.end, until) - max(s.start, created)
        if s.reason and overlap > 0:
            spent[s.reason] += overlap
    if spent:
        return spent.most_common(1)[0][0]
    return "read before a wake was due" if read is not None else "created too close to the end"


def _missed(view: RunView, m: dict, label: str, created: tuple, window: tuple, prev: Optional[Wake],
            lost: dict[float, Crash], exact: Optional[Event] = None) -> Verdict:
    """The failure: which wake was owed (the first, one after a lost stamp, or a re-nudge) and from when;
    `exact`: the poll a re-nudge was due at to the second."""
    a, deadline, stretch = window
    host = stretch.host
    live = f"{host.proc}#{host.n} hosted {label} live, idle and under the cap"
    if prev is None:
        story = (f"message #{m['id']} to {label} (created t={span(created[0])}) "
                 f"was deliverable from t={span(a)} ({live})")
    elif prev.i in lost:
        story = (f"message #{m['id']} to {label}: its wake at t={span(prev.t)} lost its stamp to a crash (R23); "
                 f"from t={span(a)} {live}")
    else:
        story = (f"message #{m['id']} to {label} was woken at t={span(prev.t)} "
                 f"and still unread {RENUDGE_MS // MINUTE_MS} min later, "
                 f"so due a re-nudge (R18); from t={span(a)} {live}")
    sent = [c for c in view.mail.calls if c.tool in ("send", "broadcast") and (c.t, c.i) == created]
    status = [e for e in view.history.of(STATUS, session=label, proc=host.proc)
              if e.t <= a and view.hosting.inc_of(e) is host]
    wit = ([w for c in sent[:1] for w in c.witness()] + ([prev] if prev else [])
           + ([lost[prev.i]] if prev and prev.i in lost else []))
    wit += ([host.start_event] if host.start_event else []) + status[-1:]
    if isinstance(exact, Status):
        return verdict(p3_at_least_once, "fail", f"{story}, but its idle event at t={span(exact.t)} did not "
                       f"flush it at once (R19)", wit + [exact])
    if isinstance(exact, ProcessStart):
        return verdict(p3_at_least_once, "fail", f"{story}, but the startup of {host.proc} at t={span(exact.t)} "
                       f"did not wake it at once (R5: the startup path kicks a delivery pass)", wit)
    if exact is not None:
        return verdict(p3_at_least_once, "fail", f"{story}, but the poll at t={span(exact.t)}, 15 min to the "
                       f"second after that wake (its stamp is exact), did not re-nudge it", wit + [exact])
    return verdict(p3_at_least_once, "fail", f"{story}, but no wake came after it by t={span(deadline)}", wit)


def _message_duties(view: RunView, gate: Gate, m: dict, label: str, created: tuple, lost: dict[float, Crash],
                    call: Optional[Call] = None) -> tuple[int, Optional[Verdict], str]:
    """(wakes the message was owed or got, the first one missed, why it was owed none). A wake is
    owed once the session stays deliverable for a whole window while the message is unread; a
    wake that came earlier (before a read it prompted, or before the gate closed again) counts."""
    read = view.vt(m["read_at"]) if m["read_at"] else None
    until = min(read, view.t_end) if read is not None else view.t_end
    wakes = view.history.of(WAKE, session=label)
    runs = gate.wakeable(label)
    need_t, need_i, prev = created[0], created[1], None
    duties = 0
    while True:
        first = prev is None
        woken = next((w for w in wakes if w.t <= until and (_came_after(view, w, created, call) if first
                                                                 else (w.t, w.i) > (need_t, need_i))), None)
        window = _first_window(view, runs, need_t, until)
        exact = (_renudge_poll(view, runs, prev, lost, label, until) if prev is not None
                 else _flush_edge(view, gate, label, runs, created, until))
        if exact is not None and (woken is None or woken.t > exact.t):
            due = next(p for _s, _e, parts in runs for p in parts if p.start <= exact.t < p.end)
            return duties + 1, _missed(view, m, label, created, (exact.t, exact.t, due), prev, lost, exact), ""
        if woken is not None and (window is None or woken.t <= window[1]):
            duties += 1
            need_t, need_i, prev = _next_due(wakes, woken, lost)
            continue
        if window is None:
            return duties, None, "" if duties else _exempt_reason(gate.timeline(label), created[0], until, read)
        return duties + 1, _missed(view, m, label, created, window, prev, lost), ""


def _gate_breach(view: RunView) -> Optional[Verdict]:
    """R19: no wake lands while its host last saw the session busy or compacting (a status change
    at the wake's own instant may have reached the runtime on either side of it: not judged)."""
    statuses: dict[tuple, list[Status]] = {}
    for e in view.history.of(STATUS):
        statuses.setdefault((e.proc, e.session), []).append(e)
    at = {key: [e.i for e in evs] for key, evs in statuses.items()}
    reloads = reload_positions(view)
    for w in view.history.of(WAKE):
        key = (w.proc, w.session)
        k = bisect.bisect_left(at.get(key, []), w.i)
        last = statuses[key][k - 1] if k else None
        if last is None or last.t >= w.t or view.hosting.inc_of(last) is not view.hosting.inc_of(w):
            continue
        if any(last.i < i < w.i for i in reloads.get(w.proc, ())):
            continue  # a plugin reload between: the fresh runtime knows no status it was told before
        state = "compacting" if last.compacting else last.status
        if state in ("busy", "compacting"):
            return verdict(p3_at_least_once, "fail", f"{w.session} was woken at t={span(w.t)} by "
                           f"{w.proc}, which last saw it {state} (t={span(last.t)}): the gate is idle "
                           f"and not compacting (R19)", [last, w])
    return None


@prop("P3")
def p3_at_least_once(view: RunView) -> Verdict:
    """Unread mail to a session is woken within one poll cycle of the session becoming deliverable, again 15 min
    after each wake while it stays unread, and at once after a crash lost the wake's stamp."""
    breach = _gate_breach(view)
    if breach is not None:
        return breach
    gate = Gate(view)
    calls: dict[int, Call] = {}
    created = _creations(view, calls)
    lost = _lost_stamps(view)
    judged = duties = 0
    exempt: Counter = Counter()
    for m in view.db["messages"]:
        label = view.names.label_of.get(m["to_session"])
        if label is None or m["id"] not in created:
            continue
        owed, failure, reason = _message_duties(view, gate, m, label, created[m["id"]], lost, calls.get(m["id"]))
        if failure is not None:
            failure.judged = judged + 1
            return failure
        judged += owed > 0
        duties += owed
        exempt[reason] += not owed
    exempt.pop("", None)
    why = "; ".join(f"{n} {reason}" for reason, n in exempt.most_common(4)) or "none"
    if not judged:
        return skipped(p3_at_least_once, f"no message was ever owed a wake (not owed: {why})")
    return passed(p3_at_least_once, f"{judged} messages owed {duties} wakes, each came in time (not owed: {why})",
                  judged)


@prop("P10", promise=WAKE_CAP)
def p10_ping_pong(view: RunView) -> Verdict:
    """Ping-pong sessions stay under the wake cap, and each pair's messages stay bounded by its turns and seeds."""
    pp = {label for label, a in view.agents.items() if getattr(a, "kind", "") == "ping-pong"}
    if not pp:
        return skipped(p10_ping_pong, "no ping-pong agent in the scenario")
    capped = _capped(view, p10_ping_pong, wakes_by_incarnation(view, pp))
    for (proc, n, label), ws in capped.items():
        over = rolling_excess(ws)
        if over:
            return verdict(p10_ping_pong, "fail",
                           f"ping-pong {label} got {len(over)} wakes from {proc}#{n} within one hour", over)
    hours = max(1, math.ceil(max(view.t_end, 1) / HOUR_MS))
    pairs: dict[frozenset, list[dict]] = {}
    for r in view.db["messages"]:
        a, b = view.names.label_of.get(r["from_session"]), view.names.label_of.get(r["to_session"])
        if a in pp or b in pp:
            pairs.setdefault(frozenset((a, b)), []).append(r)
    for pair, msgs in pairs.items():
        seeds = sum(1 for st in view.steps if st.action in ("send", "broadcast") and st.args.sender in pair)
        budget = 0
        for label in pair:
            incs = max(1, sum(1 for inc in view.hosting.incs if label in inc.sessions))
            turns = [e for e in view.history.of(TURN_START, session=label) if e.cause != "wake"]
            budget += MAX_WAKES_PER_HOUR * hours * incs + len(turns)
        bound = budget * max(1, seeds) + seeds
        if len(msgs) > bound:
            return verdict(p10_ping_pong, "fail",
                           f"pair {sorted(map(str, pair))} exchanged {len(msgs)} messages, bound {bound}",
                           [{"db_row": r} for r in msgs[-4:]])
    wakes = sum(len(ws) for ws in capped.values())
    exchanged = sum(map(len, pairs.values()))
    return passed(p10_ping_pong, f"{len(pp)} ping-pong sessions within the cap ({wakes} wakes, {exchanged} messages)",
                  wakes + exchanged)
