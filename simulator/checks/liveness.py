"""Liveness (P4): a live host keeps its sessions fresh; a dead one lets them go stale on time;
the replies that show a row stale or active agree with its stored stamp (R14's one rule).

Stored stamps have second resolution, so the bounds allow one second of slack.
"""

from __future__ import annotations

import bisect
import re
from typing import Iterator, Optional

from simulator.checks.registry import passed, prop, sample_row, skipped, verdict
from simulator.checks.view import Call, Incarnation, RunView
from simulator.clock import parse_iso_ms
from simulator.design import AUTO_ROW_TTL_MS, CLI_STALE_DAYS, DAY_MS, HOUR_MS, SECOND_MS, STALE_MS
from simulator.replies import SENT
from simulator.events import CRASH, POLL, SAMPLE, STORE_ERROR, Poll, Registered, Sample, SampleRow, ToolCall
from simulator.result import Verdict
from simulator.scenario.kinds import BEATING_ROW_KINDS, DEFAULT_ROW_KIND, HOSTS, hosts_with
from simulator.scenario.durations import format_duration as span

# The host kinds whose own poller beats their sessions' rows (R14).
_POLLING_HOSTS = hosts_with("polls")
# The poller's batch heartbeat as a crash event records it (normalised SQL): a crash armed by a
# statement's text (`sql:`) records point "sql" and the statement, not which write it was.
_HEARTBEAT_SQL = re.compile(r"^update chat_sessions set last_seen = \S+ where session_id in\b")


def _disturbed(view: RunView, proc: str, t: int) -> bool:
    """Inside (or a staleness period after) a sleep, a lock, a stalled poll timer or a caught
    store error of `proc`: two stalls back to back can hold a poll back past the staleness bound."""
    poll = view.hosting.poll_ms(proc)
    if view.disturbances.asleep(t, slack=poll + SECOND_MS):
        return True
    if any(p == proc and a <= t <= b + view.stale_ms + poll for p, a, b in view.disturbances.stall_windows()):
        return True
    if any(a <= t <= b + view.stale_ms + poll for a, b in view.disturbances.lock_windows()):
        return True
    return any(e.t <= t <= e.t + view.stale_ms + poll for e in view.history.of(STORE_ERROR, proc=proc))


def _cut_polls(view: RunView) -> set[float]:
    """Positions of polls a crash stopped before their heartbeat committed. The heartbeat
    statement runs only inside a poll, so a crash at it (not `when: after`) cuts the last
    poll its process recorded before it. The heartbeat is one transaction (R13), so a crash
    at any statement of the heartbeat call but after its commit cuts it too: after the
    `begin`, or after the update but before the commit."""
    cut, last_poll = set(), {}
    for e in view.history.of(POLL, CRASH):
        if isinstance(e, Poll):
            last_poll[e.proc] = e.i
            continue
        sql = e.sql or ""
        at_heartbeat = e.point == "heartbeat" or _HEARTBEAT_SQL.match(sql)
        inside = e.call == "heartbeat" and e.statement is not None
        lost = e.when != "after" or (inside and not sql.lower().startswith("commit"))
        if lost and e.proc in last_poll and (at_heartbeat or inside):
            cut.add(last_poll.pop(e.proc))
    return cut


class _Beats:
    """Per incarnation and session, the polls whose heartbeat beat its row and the first event it
    recorded: P4 asks them for every sample, so each is read from the history once."""

    def __init__(self, view: RunView) -> None:
        self.view = view
        self.cut = _cut_polls(view)
        self._polls: dict[tuple[int, str], list[Poll]] = {}
        self._first: dict[tuple[int, str], float] = {}

    def polls(self, inc: Incarnation, label: str) -> list[Poll]:
        """Polls of `inc` that beat `label` (every poll when the event lists no hosted set) and
        whose heartbeat committed."""
        key = (id(inc), label)
        if key not in self._polls:
            self._polls[key] = [e for e in self.view.history.of(POLL, proc=inc.proc)
                                if self.view.hosting.inc_of(e) is inc and (e.hosted is None or label in e.hosted)
                                and e.i not in self.cut]
        return self._polls[key]

    def first_event_i(self, inc: Incarnation, label: str) -> float:
        """Position of the first event `inc` recorded for `label` (any kind but the record of the
        re-hosting itself, which the restart makes and the session does not; inf: none)."""
        key = (id(inc), label)
        if key not in self._first:
            self._first[key] = next((e.i for e in self.view.history if e.session == label and e.proc == inc.proc
                                     and self.view.hosting.inc_of(e) is inc
                                     and not (isinstance(e, Registered) and e.how == "rehost")),
                                    float("inf"))
        return self._first[key]


def _last_before(events: list[Poll], i: float) -> Optional[Poll]:
    """The last event of an i-sorted list with position < i."""
    lo, hi = 0, len(events)
    while lo < hi:
        mid = (lo + hi) // 2
        if events[mid].i < i:
            lo = mid + 1
        else:
            hi = mid
    return events[lo - 1] if lo else None


def _silent_rehost(view: RunView, beats: _Beats, hosts: list[Incarnation], label: str,
                   sample: Sample) -> Optional[tuple[Incarnation, int, int]]:
    """When all that holds `label` at `sample` is re-hosting that ran out more than a poll before
    it: every live host is an opencode process that only re-hosted it and saw no event of it at
    all (R15: silent tabs age out, are beaten no more and go stale). Then (the daemon started
    last, the latest of their rehost deadlines, how long after every deadline and its poll the
    sample came); else None."""
    deadline, past = 0, None
    for inc in hosts:
        if not HOSTS[inc.kind].restarts or label not in inc.rehosted or _disturbed(view, inc.proc, sample.t):
            return None
        if beats.first_event_i(inc, label) < sample.i:
            return None
        end = view.hosting.rehost_deadline(inc, label)
        late = sample.t - end - view.hosting.poll_ms(inc.proc) - SECOND_MS
        if late <= 0:
            return None
        deadline, past = max(deadline, end), late if past is None else min(past, late)
    return (hosts[-1], deadline, past) if past is not None else None


def _beat_unreliable(view: RunView, proc: str, label: str, beat: Poll) -> bool:
    """Is the last beat a dead host gave `label` unreliable (a store error near it, a machine
    sleep, an unregistered row)? Then how soon it sampled stale is not judged."""
    return (any(e.t >= beat.t - view.stale_ms for e in view.history.of(STORE_ERROR, proc=proc))
            or view.disturbances.asleep(beat.t) or not view.names.name_at(label, beat.i))


def _joined_since(view: RunView, label: str, i0: float, sample: Sample) -> bool:
    """Did `label` register (an ok chat_register) after position i0 and within a stale window of
    the sample? Registration writes last_seen; no host beats it afterwards (R13, R14)."""
    return any(i0 < c.i < sample.i and sample.t - c.t <= view.stale_ms + SECOND_MS
               for c in view.mail.calls_of("register", session=label, ok=True))


def _judge_orphan(view: RunView, beats: _Beats, label: str, row: SampleRow,
                  s: Sample) -> tuple[int, Optional[Verdict]]:
    """P4 for a session no live process hosts: (samples judged, a failing verdict or None). It goes
    stale within 60 s plus a poll of its host's death, and not before 60 s after its last beat."""
    dead = [inc for inc in view.hosting.incs
            if label in inc.sessions and inc.died and inc.end_i is not None and inc.end_i < s.i]
    if not dead:
        return 0, None
    inc = max(dead, key=lambda x: x.end_i)  # the host that died last, not the one started last
    if _joined_since(view, label, inc.end_i, s):
        return 0, None  # an explicit join stamps last_seen without hosting the session (R13)
    last = _last_before(beats.polls(inc, label), inc.end_i)
    since_kill = s.t - inc.end_t
    if since_kill > view.stale_ms + view.hosting.poll_ms(inc.proc) + SECOND_MS:
        if row.stale:
            return 1, None
        return 1, verdict(p4_liveness, "fail", f"{label} still sampled live at t={span(s.t)}, "
                          f"{since_kill} ms after its host {inc.proc}#{inc.n} died",
                          [inc.exit_event, sample_row(s, label)])
    if last and row.stale and s.t < last.t + view.stale_ms - SECOND_MS:
        if _beat_unreliable(view, inc.proc, label, last):
            return 0, None
        return 1, verdict(p4_liveness, "fail", f"{label} sampled stale at t={span(s.t)}, less than 60 s "
                          f"after its last beat (t={span(last.t)}) by its dead host {inc.proc}#{inc.n}",
                          [last, inc.exit_event, sample_row(s, label)])
    return 0, None


def stale_marks(c: Call) -> list[tuple[str, bool]]:
    """(name, shown stale) for every name an ok reply places by its liveness (R14, R16): the two
    sections of chat_list and of the CLI's list, a send's note, a broadcast's recipients and skips."""
    o = c.outcome
    if c.tool == "send":
        return [(o.to, o.recipient_stale)] if o.kind == SENT and o.recipient_stale is not None else []
    if c.tool == "broadcast":
        return [(n, False) for n in o.recipients] + [(n, True) for n in o.skipped]
    return list(o.rows) if c.tool in ("list", "cli_list") else []


def _touch_index(view: RunView) -> tuple[dict[str, list[float]], list[float]]:
    """Positions of the events that may write each label's last_seen or remove its row (any event
    of that session, a poll that beats it, its leave), and of those that may write anyone's (a
    poll naming no hosted set, a call claiming another session with `as`)."""
    own: dict[str, list[float]] = {}
    anyone: list[float] = []
    for e in view.history:
        if isinstance(e, Sample):
            continue
        if e.session:
            own.setdefault(e.session, []).append(e.i)
        if isinstance(e, Poll):
            if e.hosted is None:
                anyone.append(e.i)
            for label in e.hosted or ():
                own.setdefault(label, []).append(e.i)
        elif isinstance(e, ToolCall) and e.args.get("as") is not None:
            anyone.append(e.i)
    for e in view.mail.leaves():  # a delete or exit step records no event of its own
        own.setdefault(e.session or "", []).append(e.i)
    for positions in own.values():
        positions.sort()
    return own, anyone


def _between(positions: list[float], a: float, b: float) -> bool:
    k = bisect.bisect_right(positions, a)
    return k < len(positions) and positions[k] < b


def _cli_bound_ms(c: Call) -> Optional[float]:
    """How old a stale row the CLI's list still shows (R16): `--stale N` days, one day by
    default, None for `--stale all`."""
    stale = c.args.get("stale")
    return None if stale == "all" else float(stale if stale is not None else CLI_STALE_DAYS) * DAY_MS


def _beaten_rows(s: Sample) -> Iterator[tuple[str, SampleRow]]:
    """(label, row) of each registered row of a kind a live host beats, in sample `s`."""
    for label, row in s.sessions.items():
        if row.registered and (row.host_kind or DEFAULT_ROW_KIND) in BEATING_ROW_KINDS:
            yield label, row


def _known_rows(s: Sample, c: Call, own: dict[str, list[float]]) -> dict[str, tuple[SampleRow, int]]:
    """label -> (sampled row, last_seen ms) for the registered rows of polled kinds whose stamp at
    `c` is the one sample `s` read: no event that could write it ran in between."""
    out = {}
    for label, row in _beaten_rows(s):
        seen = parse_iso_ms(row.last_seen)
        if seen is not None and not _between(own.get(label, []), s.i, c.result.i):
            out[label] = (row, seen)
    return out


def _judge_stale_marks(view: RunView) -> tuple[int, Optional[Verdict]]:
    """R14, R16: a reply's stale marks follow the one staleness rule (stale exactly when the row's
    last_seen is more than 60 s old), chat_list lists every registered row, and the CLI's list
    every row but the stale ones older than its bound. Judged where the stored stamp is known: the
    last sample before the reply read it, and nothing that could write it ran in between (serial
    dispatch only: a concurrent wave's events are merged by process, not in the order they ran)."""
    if getattr(view.spec, "dispatch", "serial") == "concurrent" or view.epoch_ms is None:
        return 0, None
    samples = view.history.of(SAMPLE)
    at = [s.i for s in samples]
    own, anyone = _touch_index(view)
    checked = 0
    for c in view.mail.calls:
        if c.result is None or not c.ok or c.tool not in ("send", "broadcast", "list", "cli_list"):
            continue
        marks = stale_marks(c)
        k = bisect.bisect_left(at, c.result.i) - 1
        if not marks or k < 0 or _between(anyone, samples[k].i, c.result.i):
            continue
        s = samples[k]
        now = view.epoch_ms + (c.call or c.result).t
        known = _known_rows(s, c, own)
        shown = {name.lower(): stale for name, stale in marks}
        bound = _cli_bound_ms(c) if c.tool == "cli_list" else None
        where = f"{c.tool} reply of {c.session or c.proc} at t={span(c.t)}"
        for label, (row, seen) in known.items():
            name, age = str(row.name or ""), now - seen
            near = now % SECOND_MS != 0  # a sub-second instant: the code's clock may round it
            stale = age > STALE_MS
            wit = [sample_row(s, label), *([c.call] if c.call else []), c.result]
            if name.lower() in shown and not (near and abs(age - STALE_MS) < SECOND_MS):
                checked += 1
                if shown[name.lower()] != stale:
                    return checked, verdict(
                        p4_liveness, "fail",
                        f"{where} shows {name} {'stale' if shown[name.lower()] else 'active'}, but its last_seen "
                        f"({row.last_seen}) is {age / SECOND_MS:g} s old: {'stale' if stale else 'active'} "
                        f"(R14: stale only past 60 s)", wit)
            if c.tool not in ("list", "cli_list") or age >= AUTO_ROW_TTL_MS - HOUR_MS:
                continue  # only the rosters list every row; an old row may have been pruned meanwhile
            hidden = c.tool == "cli_list" and stale and bound is not None and age > bound
            if abs(age - STALE_MS) < SECOND_MS or (bound is not None and abs(age - bound) < SECOND_MS):
                continue
            checked += 1
            if hidden == (name.lower() in shown):
                want = (f"hidden: stale and last seen more than {bound / DAY_MS:g} day(s) ago (R16)" if hidden
                        else "listed (R16: " + ("the tool lists every row)" if c.tool == "list"
                                                else "the CLI hides only stale rows older than its bound)"))
                return checked, verdict(
                    p4_liveness, "fail", f"{where} {'lists' if name.lower() in shown else 'leaves out'} {name}, "
                    f"last seen {age / SECOND_MS:g} s before: it should be {want}", wit)
    return checked, None


@prop("P4")
def p4_liveness(view: RunView) -> Verdict:
    """A live opencode host's session never samples stale; a dead host's does within 60 s plus a poll, not before;
    and every reply that places a row by its age (list, send, broadcast, the CLI) follows the one rule."""
    checked = 0
    beats = _Beats(view)
    for s in view.history.of(SAMPLE):
        for label, row in _beaten_rows(s):
            live = [inc for inc in view.hosting.hosts(label, s.t, s.i, kinds=_POLLING_HOSTS)
                    if view.hosting.is_hosting(inc, label, s.t)]
            if live:
                inc = live[-1]
                last = _last_before(beats.polls(inc, label), s.i)
                if (last is None or view.hosting.poll_ms(inc.proc) + SECOND_MS >= view.stale_ms
                        or _disturbed(view, inc.proc, s.t)):
                    continue
                since = view.hosting.hosted_from(inc, label, s.t)
                if since != inc.start_t and last.t <= since:
                    continue  # hosted again from an activity (R15) that no poll has beaten yet
                checked += 1
                if row.stale:
                    return verdict(p4_liveness, "fail", f"{label} sampled stale at t={span(s.t)} "
                                   f"though {inc.proc}#{inc.n} hosts it live (last poll t={span(last.t)})",
                                   [sample_row(s, label), last, inc.start_event])
                continue
            hosts = view.hosting.hosts(label, s.t, s.i)
            if hosts:
                found = _silent_rehost(view, beats, hosts, label, s)
                if found is None:
                    continue  # hosted live by a non-opencode process, or just out of grace: not judged
                silent, deadline, past = found
                checked += 1
                seen = view.vt(row.last_seen)
                if seen is not None and seen > deadline + SECOND_MS:
                    return verdict(p4_liveness, "fail", f"{label} was beaten at t={span(seen)}, after its rehost "
                                   f"deadline t={span(deadline)}: {silent.proc}#{silent.n} only re-hosted it and "
                                   f"it stayed silent, so its grace ran out (R15)",
                                   [silent.start_event, sample_row(s, label)])
                if past > view.stale_ms and not row.stale:
                    return verdict(p4_liveness, "fail", f"{label} still sampled live at t={span(s.t)}: "
                                   f"{silent.proc}#{silent.n} only re-hosted it, and it stayed silent past "
                                   f"its rehost deadline t={span(deadline)} (R15)",
                                   [silent.start_event, sample_row(s, label)])
                continue
            judged, failure = _judge_orphan(view, beats, label, row, s)
            checked += judged
            if failure is not None:
                return failure
    marks, failure = _judge_stale_marks(view)
    if failure is not None:
        return failure
    checked += marks
    if not checked:
        return skipped(p4_liveness, "no sample of a hosted or orphaned opencode session to judge")
    return passed(p4_liveness, f"{checked} sampled sessions consistent with their hosts", checked)
