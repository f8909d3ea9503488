"""When a session can be woken: the design's delivery gate, restated over one run.

A wake can be delivered to a session at a moment when (R18, R19, R22, R24,
R25, R29): it is registered; the machine is awake and the database not held
by a lock; a live opencode process whose chat was enabled at its start (its
poller runs) hosts it; that process last saw the session idle and not
compacting, has woken it fewer than 6 times in the last rolling hour, and is
not failing a store call at that instant (the next cycle retries).
`Gate.timeline(label)` cuts the run into stretches where this holds or does
not, each with the reason it does not ("" where a wake can be delivered).
P3 (simulator/checks/delivery.py) holds every unread message against it.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Optional

from simulator.checks.view import Incarnation, RunView
from simulator.design import HOUR_MS, MAX_WAKES_PER_HOUR
from simulator.scenario.kinds import HOSTS
from simulator.events import (
    STATUS, STORE_ERROR, TOOL_CALL, TURN_START, USER_PROMPT, WAKE,
)

TURN_EVENTS = (TOOL_CALL, USER_PROMPT, TURN_START)
# Two of the gate's reasons P3 asks about by name (the idle edge of R19, the startup pass of R5).
NO_HOST = "no live process hosts it"


def not_idle_in(state: str, inc: Incarnation) -> str:
    """The gate's reason while `inc` last saw the session busy or compacting."""
    return f"{state} in {inc.proc}"


@dataclass
class Stretch:
    """[start, end) of virtual time in which the gate is constant."""

    start: int
    end: int
    reason: str                       # "" = a wake can be delivered
    host: Optional[Incarnation]       # the process that can deliver it (reason "")


def chat_enabled(view: RunView, inc: Incarnation) -> bool:
    """chat.enabled as the process read it at its start (R29: the poller reads the gate once, at init)."""
    return view.hosting.config_at_start(inc, "enabled")


class Gate:
    """The delivery gate of every session of a run, computed once per label."""

    def __init__(self, view: RunView) -> None:
        self.view = view
        self.enabled = {id(inc): chat_enabled(view, inc) for inc in view.hosting.incs}
        self.errors: dict[str, list[int]] = {}
        for e in view.history.of(STORE_ERROR):
            self.errors.setdefault(e.proc, []).append(e.t)
        # (start, end) of each machine sleep, one still asleep at the run's end ending never
        self.sleeps: list[tuple[int, float]] = [(a, float("inf") if b is None else b)
                                                for a, b in view.disturbances.sleeps]
        self._cache: dict[str, list[Stretch]] = {}

    # -- the facts, each at a virtual time (after every event of that time) ------------

    def _registered(self, label: str) -> tuple[list[int], list[bool]]:
        """Times and states of the label's directory membership, from observations and leaves."""
        marks = [(e.i, e.t, name is not None) for e, _, name in self.view.names.seen_as(label)]
        marks += [(e.i, e.t, False) for e in self.view.mail.leaves(label)]
        marks.sort(key=lambda m: m[0])
        return [m[1] for m in marks], [m[2] for m in marks]

    def _statuses(self, inc: Incarnation, label: str) -> tuple[list[int], list[str]]:
        """Times and states ("idle", "busy", "compacting") the host saw the session in.
        A session the process resumed, opened or re-hosted counts idle from its start (an open tab
        that reconnects emits nothing); any other is unknown until its first status."""
        opened = label in (inc.resumed, inc.opened) and label not in inc.dormant
        first = "idle" if opened or label in inc.rehosted else "unknown"
        times, states = [inc.start_t], [first]
        for e in self.view.history.of(STATUS, session=label, proc=inc.proc):
            if self.view.hosting.inc_of(e) is inc:
                times.append(e.t)
                states.append("compacting" if e.compacting else str(e.status))
        if label in inc.rehosted:
            # A re-hosted tab that stays silent past its deadline drops out with what was
            # assumed of it; once it is back (activity), its status is unknown until seen.
            deadline = self.view.hosting.rehost_deadline(inc, label)
            active = self.view.hosting.first_activity(inc, label)
            if (active is None or active >= deadline) and all(t >= deadline for t in times[1:]):
                k = bisect.bisect_left(times, deadline)
                times.insert(k, deadline)
                states.insert(k, "unknown")
        return times, states

    def _wakes(self, inc: Incarnation, label: str) -> list[int]:
        return [w.t for w in self.view.history.of(WAKE, session=label, proc=inc.proc)
                if self.view.hosting.inc_of(w) is inc]

    @staticmethod
    def _at(times: list[int], states: list, t: int, default):
        k = bisect.bisect_right(times, t)
        return states[k - 1] if k else default

    # -- the gate -----------------------------------------------------------------------

    def timeline(self, label: str) -> list[Stretch]:
        """The gate of `label` from 0 to the end of the run, as constant stretches."""
        if label not in self._cache:
            self._cache[label] = self._build(label)
        return self._cache[label]

    def wakeable(self, label: str) -> list[tuple[int, int, list[Stretch]]]:
        """(start, end, stretches) of each unbroken run of time in which `label` can be woken."""
        runs: list[tuple[int, int, list[Stretch]]] = []
        for s in self.timeline(label):
            if s.reason:
                continue
            if runs and runs[-1][1] == s.start:
                runs[-1] = (runs[-1][0], s.end, runs[-1][2] + [s])
            else:
                runs.append((s.start, s.end, [s]))
        return runs

    def _build(self, label: str) -> list[Stretch]:
        view = self.view
        incs = [inc for inc in view.hosting.incs if label in inc.sessions]
        reg = self._registered(label)
        status = {id(inc): self._statuses(inc, label) for inc in incs}
        wakes = {id(inc): self._wakes(inc, label) for inc in incs}
        cuts = {0, view.t_end, *reg[0]}
        for inc in incs:
            deadline = view.hosting.rehost_deadline(inc, label)
            cuts |= {inc.start_t, inc.end_t or view.t_end, deadline, *status[id(inc)][0]}
            cuts |= {t + d for t in wakes[id(inc)] for d in (0, HOUR_MS)}
            cuts |= {t + d for t in self.errors.get(inc.proc, ()) for d in (0, 1)}
        cuts |= {e.t for e in view.history.of(*TURN_EVENTS, session=label)}
        cuts |= {t for a, b in self.sleeps for t in (a, b)}
        cuts |= {t for window in view.disturbances.lock_windows() for t in window}
        cuts |= {t for _, a, b in view.disturbances.stall_windows() for t in (a, b)}
        points = sorted(t for t in cuts if 0 <= t <= view.t_end)
        out: list[Stretch] = []
        for start, end in zip(points, points[1:]):
            reason, host = self._why_not(label, start, incs, reg, status, wakes)
            if out and out[-1].reason == reason and out[-1].host is host:
                out[-1].end = end
            else:
                out.append(Stretch(start, end, reason, host))
        return out

    def _why_not(self, label: str, t: int, incs: list[Incarnation], reg, status,
                 wakes) -> tuple[str, Optional[Incarnation]]:
        """Why no wake can be delivered to `label` at t ("" and the host when one can)."""
        view = self.view
        if not self._at(reg[0], reg[1], t, False):
            return "not registered", None
        if any(a <= t < b for a, b in self.sleeps):
            return "the machine sleeps", None
        if any(a <= t < b for a, b in view.disturbances.lock_windows()):
            return "the database is locked", None
        live = [inc for inc in incs if inc.alive(t)]
        if not live:
            return NO_HOST, None
        pollers = [inc for inc in live if HOSTS[inc.kind].polls]
        if not pollers:
            return f"hosted by {live[-1].kind} {live[-1].proc}: MCP hosts get no wakes", None
        enabled = [inc for inc in pollers if self.enabled[id(inc)]]
        if not enabled:
            return f"chat disabled in {pollers[-1].proc}: its poller never started", None
        hosting = [inc for inc in enabled if view.hosting.is_hosting(inc, label, t)]
        if not hosting:
            return f"{enabled[-1].proc} does not host it (rehost grace over, or a resumed tab not used yet)", None
        reason = ""
        for inc in reversed(hosting):
            reason = self._host_gate(inc, t, status[id(inc)], wakes[id(inc)])
            if not reason:
                return "", inc
        return reason, None

    def _host_gate(self, inc: Incarnation, t: int, status, wakes: list[int]) -> str:
        """Why the hosting process `inc` cannot wake the session at t ("" when it can)."""
        if any(proc == inc.proc and a <= t < b for proc, a, b in self.view.disturbances.stall_windows()):
            return f"{inc.proc}'s poll timer stalls (poll jitter)"
        state = self._at(status[0], status[1], t, "unknown")
        if state == "unknown":
            return f"{inc.proc} has seen no status of it yet"
        if state != "idle":
            return not_idle_in(state, inc)
        if bisect.bisect_right(wakes, t) - bisect.bisect_right(wakes, t - HOUR_MS) >= MAX_WAKES_PER_HOUR:
            return f"rate cap: {MAX_WAKES_PER_HOUR} wakes by {inc.proc} within the hour"
        if any(te <= t < te + 1 for te in self.errors.get(inc.proc, ())):
            return f"a store error in {inc.proc}: the next cycle retries"
        return ""
