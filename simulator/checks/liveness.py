"""Liveness (P4): a live host keeps its sessions fresh; a dead one lets them go stale on time.

Stored stamps have second resolution, so the bounds allow one second of slack.
"""

from __future__ import annotations

import re
from typing import Optional

from simulator.checks.registry import passed, prop, sample_row, skipped, verdict
from simulator.checks.view import Incarnation, RunView
from simulator.design import SECOND_MS
from simulator.events import CRASH, POLL, SAMPLE, STORE_ERROR, data_of, sample_rows
from simulator.result import Verdict
from simulator.scenario.kinds import BEATING_ROW_KINDS, DEFAULT_ROW_KIND, HOSTS, hosts_with
from simulator.scenario.durations import format_duration as span

# The host kinds whose own poller beats their sessions' rows (R14).
_POLLING_HOSTS = hosts_with("polls")
# The poller's batch heartbeat as a crash event records it (normalised SQL).
_HEARTBEAT_SQL = re.compile(r"^update chat_sessions set last_seen = \S+ where session_id in\b")


def _disturbed(view: RunView, proc: str, t: int) -> bool:
    """Inside (or a staleness period after) a sleep, a lock, a stalled poll timer or a caught
    store error of `proc`: two stalls back to back can hold a poll back past the staleness bound."""
    poll = view.poll_ms(proc)
    if view.asleep(t, slack=poll + SECOND_MS):
        return True
    if any(p == proc and a <= t <= b + view.stale_ms + poll for p, a, b in view.stall_windows()):
        return True
    if any(a <= t <= b + view.stale_ms + poll for a, b in view.lock_windows()):
        return True
    return any(e["t"] <= t <= e["t"] + view.stale_ms + poll for e in view.of(STORE_ERROR, proc=proc))


def _cut_polls(view: RunView) -> set[int]:
    """Positions of polls a crash stopped before their heartbeat committed, cached. The
    heartbeat statement runs only inside a poll, so a crash at it (not `when: after`)
    cuts the last poll its process recorded before it. The heartbeat is one transaction
    (R13), so a crash at any statement of the heartbeat call but after its commit cuts
    it too: after the `begin`, or after the update but before the commit."""
    if "_cut_polls" not in view.__dict__:
        cut, last_poll = set(), {}
        for e in view.of(POLL, CRASH):
            d = data_of(e)
            sql = str(d.get("sql") or "")
            at_heartbeat = d.get("point") == "heartbeat" or _HEARTBEAT_SQL.match(sql)
            inside = d.get("call") == "heartbeat" and d.get("statement") is not None
            lost = d.get("when") != "after" or (inside and not sql.lower().startswith("commit"))
            if e["kind"] == POLL:
                last_poll[e.get("proc")] = e["i"]
            elif lost and e.get("proc") in last_poll and (at_heartbeat or inside):
                cut.add(last_poll.pop(e.get("proc")))
        view.__dict__["_cut_polls"] = cut
    return view.__dict__["_cut_polls"]


def _polls(view: RunView, inc: Incarnation, label: str) -> list[dict]:
    """Polls of `inc` that beat `label` (every poll when the event lists no hosted set) and
    whose heartbeat committed, cached."""
    cache = view.__dict__.setdefault("_poll_cache", {})
    key = (id(inc), label)
    if key not in cache:
        cache[key] = [e for e in view.of(POLL, proc=inc.proc) if view.inc_of(e) is inc
                      and ("hosted" not in data_of(e) or label in (data_of(e).get("hosted") or ()))
                      and e["i"] not in _cut_polls(view)]
    return cache[key]


def _last_before(events: list[dict], i: float) -> Optional[dict]:
    """The last event of an i-sorted list with position < i."""
    lo, hi = 0, len(events)
    while lo < hi:
        mid = (lo + hi) // 2
        if events[mid]["i"] < i:
            lo = mid + 1
        else:
            hi = mid
    return events[lo - 1] if lo else None


def _first_event_i(view: RunView, inc: Incarnation, label: str) -> float:
    """Position of the first event `inc` recorded for `label` (any kind; inf: none), cached."""
    cache = view.__dict__.setdefault("_first_event_cache", {})
    key = (id(inc), label)
    if key not in cache:
        cache[key] = next((e["i"] for e in view.history if e.get("session") == label and e.get("proc") == inc.proc
                           and view.inc_of(e) is inc), float("inf"))
    return cache[key]


def _aged_out(view: RunView, hosts: list[Incarnation], label: str, sample: dict) -> Optional[Incarnation]:
    """The daemon whose re-hosting of `label` ran out a staleness period (and a poll) before
    `sample`, when that is all that holds it: every live host is an opencode process that only
    re-hosted it and saw no event of it at all (R15: silent tabs age out and go stale)."""
    for inc in hosts:
        if not HOSTS[inc.kind].restarts or label not in inc.rehosted or _disturbed(view, inc.proc, sample["t"]):
            return None
        if _first_event_i(view, inc, label) < sample["i"]:
            return None
        if sample["t"] <= view.rehost_deadline(inc, label) + view.stale_ms + view.poll_ms(inc.proc) + SECOND_MS:
            return None
    return hosts[-1]


def _beat_unreliable(view: RunView, proc: str, label: str, beat: dict) -> bool:
    """Is the last beat a dead host gave `label` unreliable (a store error near it, a machine
    sleep, an unregistered row)? Then how soon it sampled stale is not judged."""
    return (any(e["t"] >= beat["t"] - view.stale_ms for e in view.of(STORE_ERROR, proc=proc))
            or view.asleep(beat["t"]) or not view.name_at(label, beat["i"]))


def _joined_since(view: RunView, label: str, i0: int, sample: dict) -> bool:
    """Did `label` register (an ok chat_register) after position i0 and within a stale window of
    the sample? Registration writes last_seen; no host beats it afterwards (R13, R14)."""
    return any(i0 < c.i < sample["i"] and sample["t"] - c.t <= view.stale_ms + SECOND_MS
               for c in view.calls_of("register", session=label, ok=True))


def _judge_orphan(view: RunView, label: str, row: dict, s: dict) -> tuple[int, Optional[Verdict]]:
    """P4 for a session no live process hosts: (samples judged, a failing verdict or None). It goes
    stale within 60 s plus a poll of its host's death, and not before 60 s after its last beat."""
    dead = [inc for inc in view.incs
            if label in inc.sessions and inc.died and inc.end_i is not None and inc.end_i < s["i"]]
    if not dead:
        return 0, None
    inc = max(dead, key=lambda x: x.end_i)  # the host that died last, not the one started last
    if _joined_since(view, label, inc.end_i, s):
        return 0, None  # an explicit join stamps last_seen without hosting the session (R13)
    last = _last_before(_polls(view, inc, label), inc.end_i)
    since_kill = s["t"] - inc.end_t
    if since_kill > view.stale_ms + view.poll_ms(inc.proc) + SECOND_MS:
        if row.get("stale"):
            return 1, None
        return 1, verdict(p4_liveness, "fail", f"{label} still sampled live at t={span(s['t'])}, "
                          f"{since_kill} ms after its host {inc.proc}#{inc.n} died",
                          [inc.exit_event, sample_row(s, label)])
    if last and row.get("stale") and s["t"] < last["t"] + view.stale_ms - SECOND_MS:
        if _beat_unreliable(view, inc.proc, label, last):
            return 0, None
        return 1, verdict(p4_liveness, "fail", f"{label} sampled stale at t={span(s['t'])}, less than 60 s "
                          f"after its last beat (t={span(last['t'])}) by its dead host {inc.proc}#{inc.n}",
                          [last, inc.exit_event, sample_row(s, label)])
    return 0, None


@prop("P4", "liveness", rules=("R14", "R15", "R35"))
def p4_liveness(view: RunView) -> Verdict:
    """A live opencode host's session never samples stale; a dead host's does within 60 s plus a poll, not before."""
    checked = 0
    for s in view.of(SAMPLE):
        for label, row in sample_rows(s).items():
            if not row.get("registered") or row.get("host_kind", DEFAULT_ROW_KIND) not in BEATING_ROW_KINDS:
                continue
            live = [inc for inc in view.hosts(label, s["t"], s["i"], kinds=_POLLING_HOSTS)
                    if view.hosting(inc, label, s["t"])]
            if live:
                inc = live[-1]
                last = _last_before(_polls(view, inc, label), s["i"])
                if (last is None or view.poll_ms(inc.proc) + SECOND_MS >= view.stale_ms
                        or _disturbed(view, inc.proc, s["t"])):
                    continue
                since = view.hosted_from(inc, label, s["t"])
                if since != inc.start_t and last["t"] <= since:
                    continue  # hosted again from an activity (R15) that no poll has beaten yet
                checked += 1
                if row.get("stale"):
                    return verdict(p4_liveness, "fail", f"{label} sampled stale at t={span(s['t'])} "
                                   f"though {inc.proc}#{inc.n} hosts it live (last poll t={span(last['t'])})",
                                   [sample_row(s, label), last, inc.start_event])
                continue
            hosts = view.hosts(label, s["t"], s["i"])
            if hosts:
                aged = _aged_out(view, hosts, label, s)
                if aged is None:
                    continue  # hosted live by a non-opencode process, or just out of grace: not judged
                checked += 1
                if not row.get("stale"):
                    return verdict(p4_liveness, "fail", f"{label} still sampled live at t={span(s['t'])}: "
                                   f"{aged.proc}#{aged.n} only re-hosted it, and it stayed silent past "
                                   f"its rehost deadline t={span(view.rehost_deadline(aged, label))} (R15)",
                                   [aged.start_event, sample_row(s, label)])
                continue
            judged, failure = _judge_orphan(view, label, row, s)
            checked += judged
            if failure is not None:
                return failure
    if not checked:
        return skipped(p4_liveness, "no sample of a hosted or orphaned opencode session to judge")
    return passed(p4_liveness, f"{checked} sampled sessions consistent with their hosts", checked)
