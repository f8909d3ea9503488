"""P15 contention-safe: what another process's write at the same time must never do to a call.

The design takes concurrent access as solved "under WAL plus a busy timeout"
(seed 000): every read-modify-write takes the write lock first and waits for
it, so no tool call, hook, poll or prune fails because another process wrote
meanwhile. The judge reads the replies, hook lines and the poller's caught
store errors (`store-error`, R24) for SQLite's own words for a lock it could
not get (`contention_error` in simulator/replies.py), outside the windows
where a `lock` fault holds the lock on purpose past any busy timeout. The
witness is the failed call with the interleaving around it: the pause it ran
inside or the calls that ran inside its own pause (`paused`, `interleave-run`,
`deadlock`, `blocked`).
"""

from __future__ import annotations

from typing import Optional

from simulator.checks.registry import WITNESS_MAX, passed, prop, verdict
from simulator.checks.view import RunView
from simulator.events import (
    BLOCKED, DEADLOCK, HOOK, INTERLEAVE_RUN, PAUSED, RESUMED, STORE_ERROR, TOOL_RESULT, Event, Hook, StoreError,
    ToolResult,
)
from simulator.replies import contention_error
from simulator.result import Verdict

_INTERLEAVING = (PAUSED, RESUMED, INTERLEAVE_RUN, DEADLOCK, BLOCKED)


def _error_text(e: ToolResult | Hook | StoreError) -> Optional[str]:
    """The text of a reply, hook line or caught store error that may carry a store error."""
    if isinstance(e, ToolResult):
        return e.text
    if isinstance(e, Hook):
        return e.line
    return e.error


def _witness(view: RunView, failed: Event) -> list[Event]:
    """The interleaving of the failed call's instant (from its pause: the calls that ran meanwhile, the
    resume), then the call itself."""
    pauses = [e.i for e in view.history.of(PAUSED) if e.t == failed.t and e.i < failed.i]
    if not pauses:
        return [failed]
    around = [e for e in view.history.of(*_INTERLEAVING, TOOL_RESULT) if pauses[-1] <= e.i < failed.i]
    return around[:WITNESS_MAX - 1] + [failed]


@prop("P15")
def p15_contention_safe(view: RunView) -> Verdict:
    """No tool call, hook, poll or prune fails because another process wrote at the same time: no store
    error of a lock not got (database is locked, a busy error) reaches a reply, a hook line or the poller's
    log, under WAL and the busy timeout (outside a `lock` fault, which holds the lock past any timeout)."""
    locks = view.disturbances.lock_windows()
    judged = 0
    for e in view.history.of(TOOL_RESULT, HOOK, STORE_ERROR):
        judged += 1
        text = _error_text(e)
        if not contention_error(text):
            continue
        if any(start <= e.t <= end for start, end in locks):
            continue
        what = {TOOL_RESULT: "tool call", HOOK: "hook", STORE_ERROR: "poll cycle"}[e.kind]
        who = e.session or e.proc
        paused = any(x.t == e.t for x in view.history.of(PAUSED))
        return verdict(p15_contention_safe, "fail",
                       f"a {what} of {who} at t={e.t} ms failed on another process's write: "
                       f"{text.strip()[:160]!r}" + (" (inside an interleaving)" if paused else ""),
                       _witness(view, e))
    return passed(p15_contention_safe, f"{judged} replies, hook lines and poll cycles without a contention error",
                  judged)
