"""Windowed dispatch: each process runs its own timers up to a safe horizon in one round trip.

The lockstep engine sends every agenda entry down a pipe and waits for the
answer. Most entries of a long run are a process's own timers (poll beats,
turn ends, busy/compacting window edges) whose work touches only that
process's own rows, so the order in which two processes run them does not
change what either sees. The windowed engine takes every such entry due
before the horizon (the first agenda entry that is not one: a scripted step
or fault, a start, a sample, an expectation, a phase, a sleep edge, a
process that may not join, the end) out of the agenda, hands each process
its own share in one OP_RUN_WINDOW command (simulator/child/window.py), and
lets the processes run in parallel. The argument for why this is safe, and
where a process falls back to lockstep, is D-sim-23 in
docs/decisions/sim.md.

Numbering: the processes record window events under provisional dispatch
numbers; the replies say what ran, and the orchestrator numbers every entry
that ran in agenda order `(t, priority, process declaration order, local
order)`, keeping the table (`Windows.renumbering`) that `history.merge`
applies to each event as it reads the per-process files: the merged history
carries final numbers, and nothing rewrites a file (D-history-3). A scenario
and seed give one history per engine.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Optional, Protocol

from simulator import clock as vclock
from simulator import design
from simulator.child.window import LOCAL_OPS
from simulator.clock import VirtualClock
from simulator.engine.agenda import PRIORITY, Agenda, Entry, HarnessFollowUp, Poll, Priority
from simulator.engine.dispatch import Dispatcher, FaultStatus
from simulator.engine.dispatch_log import DispatchLog
from simulator.engine.processes import ForkGuard, Live, Processes
from simulator.engine.world import World
from simulator.history import Renumbering
from simulator.protocol import OP_POLL, OP_RUN_WINDOW, Command, send_msg
from simulator.scenario.kinds import HOSTS
from simulator.scenario.policies import process_options

ENGINES = ("lockstep", "windowed")
# Both give one judged history per scenario and seed (D-speed-harness-1); lockstep stays on request.
DEFAULT_ENGINE = "windowed"
# Agents whose turns only read their own inbox: a mail turn of any other kind may send.
LOCAL_AGENTS = frozenset({"reader", "silent"})
_NEVER = (float("inf"), 0)
# How many window commands run at once: one per core this process may use.
WINDOW_PARALLEL = max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


@dataclass
class _Safety:
    """Which processes may join a window now, and the instant a prune sweep could touch shared rows."""

    labels: frozenset
    prune_risk_at: float


@dataclass
class _Share:
    """One process's entries in one window."""

    live: Live
    entries: list = field(default_factory=list)
    poll_from: Optional[int] = None


class WindowedRun(Protocol):
    """What the windowed engine uses of the run it is part of (the orchestrator)."""

    world: World
    processes: Processes
    agenda: Agenda
    clock: VirtualClock
    log: DispatchLog
    sleep_until: Optional[int]

    @property
    def faults(self) -> Mapping[int, FaultStatus]: ...


class Windows:
    """The windowed engine's side of the orchestrator: horizon, shares, numbering."""

    def __init__(self, run: WindowedRun, dispatcher: Dispatcher) -> None:
        self.run = run                 # the orchestrator (it owns this object), seen through WindowedRun
        self.dispatcher = dispatcher   # sends the windows and collects their replies
        # (label, incarnation) -> {provisional dispatch number: final one}, for `history.merge`
        self._final: dict[tuple[str, int], dict[int, int]] = {}
        self._safety: Optional[_Safety] = None
        self._window_id = 0
        self._static: dict[str, bool] = {}
        self._facts_stamp: Optional[tuple] = None
        self._facts_seen: tuple[set[str], float] = (set(), float("inf"))

    def invalidate(self) -> None:
        """Something ran in lockstep (it may have registered, pruned, armed...): check again next time."""
        self._safety = None

    # -- which entries may join ----------------------------------------------------

    def _label_of(self, entry: Entry) -> Optional[str]:
        if isinstance(entry, Poll):
            return entry.label
        if isinstance(entry, HarnessFollowUp) and entry.followup.op in LOCAL_OPS:
            return entry.label
        return None

    def _joins(self, entry: Entry, safety: _Safety) -> bool:
        label = self._label_of(entry)
        return label is not None and (label in safety.labels or self.run.processes.alive(label) is None)

    def _static_ok(self, label: str) -> bool:
        """An opencode process whose agents never send on their own turns."""
        if label not in self._static:
            spec = self.run.world.procs[label].spec
            kinds = {getattr(s.agent, "kind", "reader") for s in spec.sessions}
            # A messaging policy's poll cycle may write another session's row (an expiry notice).
            self._static[label] = (HOSTS[spec.kind].polls and kinds <= LOCAL_AGENTS
                                   and process_options(self.run.world.spec, spec).is_thatch)
        return self._static[label]

    def _current_safety(self) -> _Safety:
        if self._safety is None:
            self._safety = self._measure()
        return self._safety

    def _measure(self) -> _Safety:
        """Read the store once: which processes are settled, and when a prune could reach a shared row."""
        run = self.run
        armed = {f.process for f in run.faults.values() if f.fault == "crash" and not f.fired}
        running = [lv for lv in run.processes.live.values() if lv.alive]
        if any(f.fault == "interleave" and not f.fired for f in run.faults.values()):
            # A pause waits inside some process's call, and its run calls go to others: lockstep.
            return _Safety(frozenset(), _NEVER[0])
        alive = len(running)
        tabs = [s for lv in running for s in lv.ctx.sessions]
        # Every live process must be a candidate; the cheap tests first, for all of them.
        if (not running or not all(self._static_ok(lv.label) and lv.label not in armed for lv in running)
                or not all(_local_agents(lv) for lv in running) or len(tabs) != len(set(tabs))):
            # Some live process cannot join, so no window opens (below), or two live processes
            # hold a tab of one session (a `-c` opened it again) and both beat its row, which no
            # longer commutes with the other's beats: skip the store read,
            # which a run held in lockstep would otherwise repeat after every entry. Without
            # joiners the prune instant changes nothing: only dead processes' timers pass, dropped.
            return _Safety(frozenset(), _NEVER[0])
        known, risk = self._facts(run.processes.guard, run.world.db_path)
        labels = frozenset(lv.label for lv in running if all(
            info.session_id in known or info.parent_id is not None for info in lv.ctx.sessions.values()))
        if len(labels) < alive:
            # A process that cannot join may write into a joiner's inbox (a ping-pong reply, a hook's
            # send) at an instant one of the joiner's beats shares; the two engines would order that
            # pair differently and the beat would see different mail. Windows only when all join.
            return _Safety(frozenset(), risk)
        return _Safety(labels, risk)

    def _facts(self, guard: ForkGuard, db_path: Path) -> tuple[set[str], float]:
        """`_store_facts`, read again only when another connection committed since the last read
        on this one (`PRAGMA data_version`): most lockstep entries change nothing the check reads
        about, and none of them ran through this connection (D-speed-harness-5)."""
        (version,), = guard.read(db_path, "PRAGMA data_version")
        stamp = (guard.opened, version)  # a new path opens a new connection
        if self._facts_stamp != stamp:
            self._facts_seen = _store_facts(guard, db_path)
            self._facts_stamp = stamp
        return self._facts_seen

    # -- one window ------------------------------------------------------------------

    def try_run(self, t: int, first: Entry) -> bool:
        """Run a window starting with `first` (already popped, due at t); False: run it in lockstep."""
        run = self.run
        if run.sleep_until is not None or run.processes.locks or self._label_of(first) is None:
            return False
        safety = self._current_safety()
        if not self._joins(first, safety) or safety.prune_risk_at <= t:
            return False
        shares: dict[str, _Share] = {}
        self._take(t, first, shares)
        until = self._scan(shares, safety)
        for share in shares.values():
            self._add_polls(share, until)
        shares = {label: s for label, s in shares.items() if s.entries}
        if shares:
            self._exchange(t, shares, until)
        return True

    def _scan(self, shares: dict[str, _Share], safety: _Safety) -> tuple:
        """Take every joining entry before the horizon out of the agenda; returns the horizon (t, priority)."""
        agenda = self.run.agenda
        cap = (safety.prune_risk_at, Priority.OBSERVE_FIRST)
        while True:
            nxt = agenda.peek()
            if nxt is None:
                return cap
            t, entry = nxt
            here = (t, PRIORITY[type(entry)])
            if here >= cap or not self._joins(entry, safety):
                return min(here, cap)
            agenda.pop()
            self._take(t, entry, shares)

    def _take(self, t: int, entry: Entry, shares: dict[str, _Share]) -> None:
        live = self.run.processes.alive(entry.label)
        if live is None or live.incarnation != entry.incarnation:
            return  # an older incarnation's timer: lockstep drops it too
        share = shares.setdefault(entry.label, _Share(live))
        if isinstance(entry, Poll):
            if live.poll_gen == entry.generation:
                share.poll_from = t
            return
        fu = entry.followup
        share.entries.append([t, int(Priority.FOLLOWUP), fu.op, fu.session, dict(fu.args)])

    def _add_polls(self, share: _Share, until: tuple) -> None:
        """The process's beats from its next one to the horizon; the first beat after it goes back on the agenda."""
        if share.poll_from is None:
            return
        live, t = share.live, share.poll_from
        while (t, Priority.POLL) < until:
            share.entries.append([t, int(Priority.POLL), OP_POLL, None, {}])
            t += live.ctx.poll_interval_ms
        self.run.agenda.push(t, Poll(live.label, live.incarnation, live.poll_gen))

    def _exchange(self, t: int, shares: dict[str, _Share], until: tuple) -> None:
        """One OP_RUN_WINDOW per process (sent, at most one per core running at once; then all
        collected in process order), then the numbering."""
        run = self.run
        self._window_id += 1
        queued = []
        for label in run.world.proc_order():
            share = shares.get(label)
            if share is None:
                continue
            share.entries.sort(key=lambda e: (e[0], e[1]))  # stable: same-time follow-ups keep their order
            queued.append((share.live, Command(-self._window_id, t, OP_RUN_WINDOW, None, {
                "entries": share.entries, "until": [until[0], int(until[1])],
                "followup_priority": int(Priority.FOLLOWUP)})))
        self._send_bounded(queued)
        ran = []
        for rank, (live, cmd) in enumerate(queued):
            ran += [(e[0], e[1], rank, i, live, e[2], e[3]) for i, e in enumerate(self._collect(live, cmd))]
        self._number(sorted(ran, key=lambda r: r[:4]))

    def _send_bounded(self, queued: list[tuple[Live, Command]]) -> None:
        """Send every window command, with at most one running per core: more processes than cores
        running at once only take turns at the store's write lock, and one preempted while holding
        it leaves the others asleep in SQLite's busy backoff (D-speed-harness-8). Replies stay
        unread here: `_exchange` collects them in process order, as before."""
        running: list[Live] = []
        for live, cmd in queued:
            if len(running) >= WINDOW_PARALLEL:
                running.remove(self.dispatcher.wait_any(running))
            self.dispatcher.last_desc = f"a window of {len(cmd.args['entries'])} entries to {live.label} from t={cmd.t}"
            try:
                send_msg(live.conn, cmd)
            except (OSError, EOFError):
                pass  # it died; the collection sees EOF
            running.append(live)

    def _collect(self, live: Live, cmd: Command) -> list:
        reply = self.dispatcher.collect(live, cmd, doing="in a window")
        return [] if reply is None else (reply.result or {}).get("ran", [])

    def _number(self, ran: list) -> None:
        """Give every entry that ran its dispatch number, in agenda order across processes."""
        run = self.run
        for t, _prio, _rank, _i, live, provisional, session in ran:
            run.clock.advance_to(t)
            self._final.setdefault((live.label, live.incarnation), {})[provisional] = run.log.next_dispatch()
            if session:
                self.dispatcher.last_activity[session] = t

    # -- the history -------------------------------------------------------------------

    @property
    def renumbering(self) -> Renumbering:
        """Every window event's final dispatch number, by process incarnation and provisional number."""
        return self._final


def _local_agents(lv: Live) -> bool:
    """Every session the process hosts now runs a local agent: a session a resume or a fork brought
    in keeps the agent it was declared with elsewhere, which the process's own spec does not list."""
    return all(getattr(info.spec.agent, "kind", "reader") in LOCAL_AGENTS for info in lv.ctx.sessions.values()
               if info.spec is not None)


def _store_facts(guard: ForkGuard, db_path: Path) -> tuple[set[str], float]:
    """(session ids with a directory row or a leave tombstone, the first virtual instant a
    prune sweep could delete a row or sweep mail: never when nothing is old enough). Unread
    mail is at risk once it is older than the sweep age, whoever it is addressed to: its
    recipient may leave or be pruned before then (R26)."""
    known = {r[0] for r in guard.read(
        db_path, "SELECT session_id FROM chat_sessions UNION SELECT session_id FROM chat_leave_tombstones")}
    (oldest_auto, oldest_leave, oldest_unread), = guard.read(
        db_path, "SELECT (SELECT min(last_seen) FROM chat_sessions WHERE auto = 1),"
                 " (SELECT min(left_at) FROM chat_leave_tombstones),"
                 " (SELECT min(created_at) FROM chat_messages WHERE read_at IS NULL)")
    risks = [vclock.virtual_ms(ms) + ttl for ms, ttl in (
        (vclock.parse_iso_ms(oldest_auto), design.AUTO_ROW_TTL_MS),
        (vclock.parse_iso_ms(oldest_leave), design.TOMBSTONE_TTL_MS),
        (vclock.parse_iso_ms(oldest_unread), design.MAIL_SWEEP_AGE_MS))
        if ms is not None]
    return known, float(min(risks, default=float("inf")))


__all__ = ["DEFAULT_ENGINE", "ENGINES", "Windows"]
