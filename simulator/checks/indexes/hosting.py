"""Which process incarnation hosted which session label, and when (R13, R15, D-sim-22)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from simulator.checks.indexes.disturbances import Disturbances
from simulator.checks.indexes.mail import Mail
from simulator.design import DEFAULT_POLL_MS, DEFAULT_REHOST_GRACE_MS
from simulator.events import (
    FAULT_FIRED, POLL, PROCESS_EXIT, PROCESS_START, STATUS, TOOL_CALL, TURN_START, USER_PROMPT, ABSENT,
    FaultFired, Poll, ProcessExit, ProcessStart,
)
from simulator.history import History
from simulator.scenario.kinds import DEFAULT_HOST, HOSTS


@dataclass
class Incarnation:
    """One life of a process label: from its process-start to its process-exit."""

    proc: str
    n: int
    kind: str
    start_t: int
    start_i: float
    sessions: set[str]
    rehosted: set[str] = field(default_factory=set)
    rehost_of: Optional[str] = None
    resumed: Optional[str] = None
    # A resumed session its command line does not open (a bare `-s`, a `-c`
    # that continues another or none): hosted only once it is used (D-sim-22).
    dormant: set[str] = field(default_factory=set)
    # The session that command line opens instead (a `-c` continuing the newest one): the
    # process hosts it from its start, like a resumed session it opens.
    opened: Optional[str] = None
    predecessor: Optional["Incarnation"] = None      # the dead incarnation this one re-hosts from
    end_t: Optional[int] = None
    end_i: Optional[float] = None
    reason: Optional[str] = None
    start_event: Optional[ProcessStart] = None
    exit_event: Optional[ProcessExit] = None

    def alive(self, t: int, i: Optional[float] = None) -> bool:
        """Alive at virtual time t (and, when given, at history position i)."""
        if t < self.start_t or (i is not None and i < self.start_i):
            return False
        if self.end_t is None:
            return True
        if i is not None and self.end_i is not None:
            return i < self.end_i
        return t < self.end_t

    @property
    def died(self) -> bool:
        return self.reason in ("killed", "crashed", "restart")


class Hosting:
    def __init__(self, history: History, spec: Any, steps: list[Any], mail: Mail, disturbances: Disturbances,
                 t_end: int, run_info: dict[str, Any], proc_kind: dict[str, str]) -> None:
        self.history = history
        self.spec = spec
        self.steps = steps
        self.mail = mail
        self.dropped = disturbances.dropped
        self.t_end = t_end
        self.run_info = run_info
        self.proc_kind = proc_kind
        # Sub-agent children: a polling host never hosts one, even once it joined the directory (R13).
        self.children = {s.id for p in getattr(spec, "processes", []) for s in p.sessions if s.parent}
        self._activity: dict[tuple[int, str, float], Optional[int]] = {}
        self.rehost_graces: dict[str, int] = {}
        for step in steps:
            if step.action == "restart" and step.restart.grace is not None:
                self.rehost_graces.setdefault(step.restart.into, int(step.restart.grace))
        self.incs = self._incarnations()
        self._incs_of: dict[Optional[str], list[Incarnation]] = {}  # process label -> its incarnations, in order
        for inc in self.incs:
            self._incs_of.setdefault(inc.proc, []).append(inc)
        self.reloads = self._reloads()
        self._trim_rehosted()
        self._mark_unjoinable_startups()

    def _incarnations(self) -> list[Incarnation]:
        incs: list[Incarnation] = []
        latest: dict[str, Incarnation] = {}
        for e in self.history.of(PROCESS_START, PROCESS_EXIT):
            if isinstance(e, ProcessStart):
                inc = self._started(e, latest)
                incs.append(inc)
                latest[e.target] = inc
            else:
                inc = latest.get(e.target)
                if inc is not None and inc.end_t is None:
                    inc.end_t, inc.end_i, inc.reason, inc.exit_event = e.t, e.i, e.reason, e
        return incs

    def _started(self, e: ProcessStart, latest: dict[str, Incarnation]) -> Incarnation:
        sessions = set(e.sessions)
        if e.resumed:
            sessions.add(e.resumed)
        # A resume whose command line opens another session (or none): the resumed one
        # is dormant, the opened one hosted.
        opens_other = bool(e.resumed) and e.opens is not ABSENT and e.opens != e.resumed
        opened = e.opens if opens_other else None
        if opened:
            sessions.add(opened)
        old = latest.get(e.rehost_of) if e.rehost_of else None
        rehosted = set(old.sessions) - sessions if old is not None else set()
        inc = Incarnation(e.target, int(e.incarnation or 0), e.proc_kind or self.proc_kind.get(e.target, DEFAULT_HOST),
                          e.t, e.i, sessions | rehosted, rehosted, e.rehost_of, e.resumed, start_event=e)
        if opens_other:
            inc.dormant, inc.opened = {e.resumed}, opened
        inc.predecessor = old
        return inc

    def _reloads(self) -> dict[str, list[FaultFired]]:
        """Process label -> its plugin reloads in history order: each a fresh runtime in the same
        process, which re-hosts what the old one hosted as a restarted daemon would (D-later-sim-2)."""
        out: dict[str, list[FaultFired]] = {}
        for e in self.history.of(FAULT_FIRED):
            if e.fault == "reload":
                out.setdefault(e.detail["target"], []).append(e)
        return out

    def reloads_in(self, inc: Incarnation, t: int) -> list[FaultFired]:
        """The reloads of `inc`'s life up to virtual time t."""
        reloads = self.reloads.get(inc.proc)
        if not reloads:  # most processes never reload: asked at every hosting question
            return []
        return [r for r in reloads
                if inc.start_i < r.i and (inc.end_i is None or r.i < inc.end_i) and r.t <= t]

    def _trim_rehosted(self) -> None:
        """A restarted polling daemon re-hosts what its predecessor was hosting when it ended, not
        every session of the predecessor's process (R13, R15): a session it never saw a status
        event for, a sub-agent child, or a re-hosted one whose grace had run out is not in it. Such
        a tab is still open in the new daemon, which hosts it from its first status event on."""
        for inc in self.incs:
            old = inc.predecessor
            if old is None or not HOSTS[old.kind].polls:
                continue
            polls = [e for e in self.history.of(POLL, proc=old.proc)
                     if old.start_i < e.i and (old.end_i is None or e.i < old.end_i)]
            last_poll = polls[-1] if polls else None
            drop = {label for label in inc.rehosted if not self._hosted_at_end(old, label, last_poll)}
            inc.rehosted -= drop
            inc.dormant |= drop

    def _hosted_at_end(self, old: Incarnation, label: str, last_poll: Optional[Poll]) -> bool:
        if label in self.children:
            return False
        if last_poll is not None and (last_poll.hosted is None or label in last_poll.hosted):
            return True  # its last poll beat it (a poll that lists no hosted set beat them all)
        if label in old.rehosted:
            return self.hosted_from(old, label, old.end_t if old.end_t is not None else self.t_end) is not None
        if label in (old.resumed, old.opened) and label not in old.dormant:
            return True
        return self.first_activity(old, label) is not None

    def config_at_start(self, inc: Incarnation, key: str) -> bool:
        """`chat.enabled` (key "enabled") or `chat.autoRegister` ("auto_register") as `inc` read it
        at its start (`config_at`)."""
        return self.config_at(inc, key, inc.start_t)

    def config_at(self, inc: Incarnation, key: str, at: int) -> bool:
        """The setting as a runtime of `inc` starting at `at` (its process start or a plugin reload) read it:
        the spec's value, then every config step before. A config step at that very time counts only when it
        turns the setting off (the order is unknown)."""
        spec = next((p for p in getattr(self.spec, "processes", []) if p.id == inc.proc), None)
        value = getattr(spec.config, key) if spec is not None else True
        for idx, step in enumerate(self.steps):
            if step.action != "config" or idx in self.dropped or step.args.process != inc.proc:
                continue
            new = getattr(step.args, key)
            if new is None:
                continue
            if step.at < at:
                value = new
            elif step.at == at:
                value = value and new
        return value

    def _mark_unjoinable_startups(self) -> None:
        """The session a resume's command line opens is neither registered nor hosted at the
        process's start when auto-registration was off then or the session had left (a tombstone,
        D-real-host-3): like a resumed session its command line does not open, it is hosted
        from its first use."""
        for inc in self.incs:
            label = inc.opened or inc.resumed
            if not label or label in inc.dormant or not HOSTS[inc.kind].polls:
                continue
            if not self.config_at_start(inc, "auto_register") or self._left_before(label, inc.start_i):
                inc.dormant.add(label)

    def _left_before(self, label: str, i: float) -> bool:
        """Had `label` left the directory (an ok leave not followed by an explicit register) before
        history position i?"""
        leaves = [e.i for e in self.mail.leaves(label) if e.i < i]
        if not leaves:
            return False
        return not any(leaves[-1] < e.i < i for e in self.mail.explicit_registers(label))

    def poll_ms(self, proc: Optional[str]) -> int:
        table = self.run_info.get("poll_interval_ms") or {}
        if proc in table:
            return int(table[proc])
        for p in getattr(self.spec, "processes", []):
            if p.id == proc:
                return int(p.poll_interval)
        return DEFAULT_POLL_MS

    def inc_of(self, e: Any) -> Optional[Incarnation]:
        """The incarnation of the process that recorded a harness event."""
        best = None
        for inc in self._incs_of.get(e.proc, ()):
            if inc.start_i <= e.i and (inc.end_i is None or e.i <= inc.end_i):
                best = inc
        return best

    def hosts(self, label: str, t: int, i: Optional[float] = None, kinds: Iterable[str] = ()) -> list[Incarnation]:
        """Live incarnations hosting `label` at (t, i)."""
        return [inc for inc in self.incs
                if label in inc.sessions and inc.alive(t, i) and (not kinds or inc.kind in kinds)]

    def rehost_grace(self, inc: Incarnation) -> int:
        """The re-hosting grace of a process a `restart` step starts (the first such step naming one)."""
        return self.rehost_graces.get(inc.proc, DEFAULT_REHOST_GRACE_MS)

    def is_hosting(self, inc: Incarnation, label: str, t: int) -> bool:
        """Does `inc` (alive) host `label` at t? (`hosted_from`)"""
        return self.hosted_from(inc, label, t) is not None

    def hosted_from(self, inc: Incarnation, label: str, t: int) -> Optional[int]:
        """Since when `inc` (alive) hosts `label` without a break up to t; None when it does not
        at t. A rehosted session counts within the grace, or for good once it showed activity
        there (R15 graduation); a dormant resumed one (its command line opened another session
        or none) only from its first use. A graduation is never seen ahead of time. A polling
        host never hosts a sub-agent child (R13). A plugin reload is a restart in the same
        process: the fresh runtime re-hosts what the old one hosted at the reload (`_runtime`)."""
        if label not in inc.sessions or (label in self.children and HOSTS[inc.kind].polls):
            return None
        hosting = self._runtime(inc, label, t, self.reloads_in(inc, t))
        return hosting[0] if hosting is not None else None

    def _runtime(self, inc: Incarnation, label: str, t: int,
                 reloads: list[FaultFired]) -> Optional[tuple[int, Optional[int]]]:
        """(since when, the deadline while it is only re-hosted) of the runtime in force at t after
        `reloads`, or None. As `HostedSet.load_previous` does, a reloaded runtime re-hosts a session
        the old one hosted for real with a full grace from the reload and keeps the deadline of one
        the old one only re-hosted; its startup path hosts the command line's session again."""
        if not reloads:
            return self._first_runtime(inc, label, t)
        reload = reloads[-1]
        if not self.config_at(inc, "enabled", reload.t):
            return None  # chat disabled when the fresh runtime read its config: no poller, nothing hosted (R29)
        before = self._runtime(inc, label, reload.t, reloads[:-1])
        first = self.first_activity(inc, label, after=reload.i)
        if label == (inc.opened or inc.resumed) and label not in inc.dormant:
            first = reload.t
        if before is None:
            return (first, None) if first is not None and first <= t else None
        since, deadline = before
        deadline = reload.t + self.rehost_grace(inc) if deadline is None else deadline
        if first is not None and first <= t:
            return (since, None) if first < deadline else (first, None)
        return (since, deadline) if t < deadline else None

    def _first_runtime(self, inc: Incarnation, label: str, t: int) -> Optional[tuple[int, Optional[int]]]:
        """`_runtime` for the runtime the process started with."""
        first = self.first_activity(inc, label)
        if label in inc.dormant:
            return (first, None) if first is not None and first <= t else None
        if label not in inc.rehosted:
            return inc.start_t, None
        grace_end = self.rehost_deadline(inc, label)
        if first is not None and first <= t:
            return (inc.start_t, None) if first < grace_end else (first, None)
        return (inc.start_t, grace_end) if t < grace_end else None

    def rehost_deadline(self, inc: Incarnation, label: str) -> int:
        """When `inc`'s re-hosting of `label` ends unless the session shows activity first: the
        process start plus its grace, except for a session the predecessor was itself only
        re-hosting, which keeps the predecessor's deadline (a chain of daemon restarts must not
        keep a closed tab fresh forever, D-runtime-15)."""
        old = inc.predecessor
        if old is not None and label in old.rehosted:
            first = self.first_activity(old, label)
            deadline = self.rehost_deadline(old, label)
            if first is None or first >= deadline:
                return deadline
        return inc.start_t + self.rehost_grace(inc)

    @staticmethod
    def activity_kinds(inc: Incarnation) -> tuple[str, ...]:
        """The history events that count as a session's activity in `inc` (`first_activity`)."""
        return (STATUS,) if HOSTS[inc.kind].polls else (TOOL_CALL, USER_PROMPT, TURN_START)

    def first_activity(self, inc: Incarnation, label: str, after: Optional[float] = None) -> Optional[int]:
        """Virtual time of `label`'s first activity in `inc`'s life (after history position `after`
        when given: a reload's), cached: P4 and the delivery
        gate ask it for every sample and every cut. In a polling host (opencode) that is the
        session's first status report: only session.status events host a session there, a
        prompt or a tool call alone does not (the real runtime's hosted set). Elsewhere any
        call, prompt or turn counts."""
        start = inc.start_i if after is None else after
        key = (id(inc), label, start)
        if key not in self._activity:
            self._activity[key] = next(
                (e.t for e in self.history.of(*self.activity_kinds(inc), proc=inc.proc)
                 if e.session == label and start < e.i and (inc.end_i is None or e.i < inc.end_i)),
                None)
        return self._activity[key]

