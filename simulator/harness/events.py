"""The fake opencode server's event stream in `events: synchronous` mode.

By default (`events: queued`) the server hands each host event to the thatch
runtime in the command that makes it happen: a turn ends, the session goes
idle, the runtime's idle handler runs. A real plugin reads a stream, and a
stream can hand it an event in the middle of something else: while the
poller awaits a prompt call, another session's idle arrives and the runtime's
idle handler calls the poller's `deliver_pending` again (R24: the re-entrant
pass must be dropped, or the batch being delivered is woken twice).

In synchronous mode the harness keeps the host events it asked the
orchestrator for (turn ends, busy/compacting window boundaries) as the
stream's pending events. Every prompt call first delivers, in order, each
pending event due at its instant (or earlier: a machine sleep deferred it),
on the caller's stack, before the prompt itself; the orchestrator's own
dispatch of that event later finds it delivered and does nothing. Each
delivery is recorded as `stream-event` {op, inside, prompted} just before
the event's own records (docs/history.md).
"""

from __future__ import annotations

from typing import Any, Callable

from simulator.events import STREAM_EVENT
from simulator.protocol import OP_TURN_END, OP_WINDOW, Command, FollowUp

# The host events the stream carries: the follow-ups a harness asks for that
# the host itself would report (a turn's end, a window boundary), not user input.
STREAM_OPS = (OP_TURN_END, OP_WINDOW)


def _same(f: FollowUp, cmd: Command) -> bool:
    return f.op == cmd.op and f.session == cmd.session and dict(f.args) == dict(cmd.args or {})


class HostEventStream:
    """The pending host events of one fake opencode server (see the module docstring)."""

    def __init__(self, deliver: Callable[[Command], Any], emit: Callable[..., Any]) -> None:
        self._deliver = deliver   # runs one event as its command would (the base handlers)
        self._emit = emit
        self._pending: list[FollowUp] = []
        self._delivered: list[FollowUp] = []

    def scheduled(self, followup: FollowUp) -> None:
        """A follow-up the harness just asked for: a pending event if the stream carries it."""
        if followup.op in STREAM_OPS:
            self._pending.append(followup)

    def already_delivered(self, cmd: Command) -> bool:
        """The orchestrator dispatches `cmd` now: True when the stream delivered it
        inside a prompt call (nothing left to do), else it is no longer pending."""
        for f in self._delivered:
            if _same(f, cmd):
                self._delivered.remove(f)
                return True
        for f in self._pending:
            if _same(f, cmd):
                self._pending.remove(f)
                break
        return False

    def deliver_due(self, now: int, dispatch: int, *, inside: str, prompted: str) -> None:
        """Inside a prompt call at `now`: deliver every pending event due by then, oldest first."""
        while True:
            due = [f for f in self._pending if f.at <= now]
            if not due:
                return
            f = min(due, key=lambda x: x.at)
            self._pending.remove(f)
            self._delivered.append(f)
            self._emit(STREAM_EVENT, f.session, op=f.op, inside=inside, prompted=prompted)
            self._deliver(Command(dispatch, now, f.op, f.session, dict(f.args)))
