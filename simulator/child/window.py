"""The child side of windowed dispatch: a process runs its own timers up to a horizon.

The orchestrator (simulator/engine/window.py) hands a process every entry of
its own that falls before the horizon (its poll beats, turn ends, busy and
compacting window edges) in one OP_RUN_WINDOW command. The process runs them
here in agenda order `(t, priority, insertion order)`, moving its freezer to
each entry's time, exactly as one command per entry would; follow-ups a run
asks for (a turn end) join the local agenda when they fall before the
horizon and go back to the orchestrator otherwise.

Events recorded inside a window carry provisional dispatch numbers (-1, -2,
... per process incarnation); the reply lists what ran so the orchestrator
can give each entry its place among every process's entries and map the
provisional numbers to real ones before the history is merged.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable

from simulator.protocol import OP_TURN_END, OP_WINDOW, Command, FollowUp, Reply

# Follow-ups a windowed entry may run locally: they touch the process's own rows only.
LOCAL_OPS = frozenset({OP_TURN_END, OP_WINDOW})


class WindowRunner:
    """Runs OP_RUN_WINDOW for one process; `serve(cmd)` is the one-command path it repeats."""

    def __init__(self, serve: Callable[[Command], Reply], move_to: Callable[[int], None], recorder: Any) -> None:
        self.serve = serve
        self.move_to = move_to
        self.recorder = recorder
        self.provisional = 0  # the last provisional dispatch number handed out (they count down)

    def run(self, cmd: Command) -> Reply:
        args = cmd.args
        until = tuple(args["until"])
        followup_priority = int(args["followup_priority"])
        heap = [(int(t), int(p), i, op, session, a) for i, (t, p, op, session, a) in enumerate(args["entries"])]
        heapq.heapify(heap)
        seq = len(heap)
        ran: list[list[Any]] = []
        later: list[FollowUp] = []
        while heap:
            t, prio, _, op, session, entry_args = heapq.heappop(heap)
            self.provisional -= 1
            d = self.provisional
            self.move_to(t)
            self.recorder.current(d, t)
            reply = self.serve(Command(d, t, op, session, entry_args))
            ran.append([t, prio, d, session])
            if reply.fatal or reply.crashes:
                # The orchestrator stops (fatal) or books the crash; what is left is not run.
                return Reply(cmd.dispatch, ok=reply.ok, fatal=reply.fatal, error=reply.error, crashes=reply.crashes,
                             result={"ran": ran}, followups=tuple(later) + reply.followups)
            for fu in reply.followups:
                at = max(int(fu.at), t)
                if fu.op in LOCAL_OPS and (at, followup_priority) < until:
                    heapq.heappush(heap, (at, followup_priority, seq, fu.op, fu.session, dict(fu.args)))
                    seq += 1
                else:
                    later.append(FollowUp(at, fu.op, fu.session, dict(fu.args)))
        return Reply(cmd.dispatch, result={"ran": ran}, followups=tuple(later))
