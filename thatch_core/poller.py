"""The per-process chat poller: heartbeat, gated delivery, rate cap, prune.

A synchronous mirror of seed 002's ChatPoller. One cycle (`poll`, R13):
heartbeat the hosted sessions, deliver their pending mail, and every
PRUNE_INTERVAL_MS run the store's prune sweep (R26). Delivery is local: only
sessions in `hosted_sessions()` are ever considered (R25), so each message has
exactly one possible deliverer.

Shape carried over from 002, because each piece stops a real failure:
- re-entrant calls are dropped (R24): an overlapping cycle would deliver the
  same batch twice. `poll` and `deliver_pending` guard separately, since the
  runtime's idle flush calls `deliver_pending` directly;
- store failures are caught and logged, never raised (R24): a timer thread
  would die on an exception and the next cycle is the retry;
- the nudge is counted before `mark_delivered` (R21, R23): the cap binds on
  prompts actually sent, so a stamp that keeps failing cannot turn into an
  uncounted wake every cycle (the ping-pong the cap exists to stop).

Time is read only through `thatch_core.clock`, so freezegun drives the cap
window and the prune schedule.
"""

from __future__ import annotations

import sys
import threading
from typing import Callable, Iterable

from thatch_core import clock
from thatch_core.constants import (
    MAX_NUDGES_PER_HOUR,
    NUDGE_WINDOW_MS,
    POLL_INTERVAL_MS,
    PRUNE_INTERVAL_MS,
    RENUDGE_MINUTES,
)
from thatch_core.names import render_participant

Log = Callable[[str], None]


def _stderr_log(message: str) -> None:
    print(message, file=sys.stderr)


class RepeatingTimer:
    """Calls `fn` every `interval_s` seconds on a daemon thread until cancelled.

    Built from one-shot `threading.Timer`s re-armed after each call, so a slow
    tick delays the next instead of stacking. Daemon threads never keep the
    host process alive just for the poller (002's `unref`).
    """

    def __init__(self, interval_s: float, fn: Callable[[], None]):
        self.interval_s = interval_s
        self._fn = fn
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._cancelled = False

    def start(self) -> None:
        with self._lock:
            self._cancelled = False
            self._arm()

    def _arm(self) -> None:
        t = threading.Timer(self.interval_s, self._tick)
        t.daemon = True
        self._timer = t
        t.start()

    def _tick(self) -> None:
        try:
            self._fn()
        finally:
            with self._lock:
                if not self._cancelled:
                    self._arm()

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None


class ChatPoller:
    """Heartbeats hosted sessions and wake-prompts them about pending mail.

    `deliver(session_id, senders, count)` sends one wake prompt and raises on
    failure; `can_deliver(session_id)` is the idle-and-not-compacting gate
    (R19). The per-recipient nudge counter is in memory on purpose (R22): it
    is a loop guard, not accounting, and a restarted process starts fresh.
    """

    def __init__(
        self,
        store,
        *,
        hosted_sessions: Callable[[], Iterable[str]],
        deliver: Callable[[str, list[str], int], None],
        can_deliver: Callable[[str], bool],
        poll_interval_ms: int = POLL_INTERVAL_MS,
        renudge_minutes: float = RENUDGE_MINUTES,
        max_nudges_per_hour: int = MAX_NUDGES_PER_HOUR,
        prune_interval_ms: int = PRUNE_INTERVAL_MS,
        log: Log | None = None,
        upkeep: Callable[[], None] | None = None,
    ):
        self.store = store
        self._hosted = hosted_sessions
        self._deliver = deliver
        self._can_deliver = can_deliver
        self.poll_interval_ms = poll_interval_ms
        self.renudge_minutes = renudge_minutes
        self.max_nudges_per_hour = max_nudges_per_hour
        self.prune_interval_ms = prune_interval_ms
        self._log = log or _stderr_log
        # Per-cycle work of a messaging policy (expiring held messages), before delivery.
        self._upkeep = upkeep
        # Non-blocking acquires make both guards drop a re-entrant call,
        # whether it comes from another thread (timer vs idle flush) or from
        # the same thread (a deliver() whose host fires an idle event).
        self._poll_guard = threading.Lock()
        self._deliver_guard = threading.Lock()
        self._nudges: dict[str, list[int]] = {}
        self._last_prune_ms: int | None = None
        self._timer: RepeatingTimer | None = None

    # -- lifecycle ---------------------------------------------------------

    @property
    def running(self) -> bool:
        """True while the real timer is armed."""
        return self._timer is not None

    def start(self) -> None:
        if self._timer is not None:
            return
        self._timer = RepeatingTimer(self.poll_interval_ms / 1000.0, self.poll)
        self._timer.start()

    def stop(self) -> None:
        if self._timer is None:
            return
        self._timer.cancel()
        self._timer = None

    def dispose(self) -> None:
        """Stops polling and forgets the nudge counters. The inbox is shared
        SQLite state and outlives this process by design."""
        self.stop()
        self._nudges.clear()

    # -- one cycle -----------------------------------------------------------

    def poll(self) -> None:
        """One cycle: heartbeat, deliver, and the prune sweep when it is due."""
        if not self._poll_guard.acquire(blocking=False):
            return
        try:
            try:
                self.store.heartbeat(list(self._hosted()))
            except Exception as err:  # noqa: BLE001 - any failure: log, retry next cycle
                self._log(f"[thatch] chat heartbeat failed: {err!r}")
            if self._upkeep is not None:
                try:
                    self._upkeep()
                except Exception as err:  # noqa: BLE001 - retried next cycle
                    self._log(f"[thatch] chat policy upkeep failed: {err!r}")
            self.deliver_pending()
            self._maybe_prune()
        finally:
            self._poll_guard.release()

    def _maybe_prune(self) -> None:
        now = clock.now_ms()
        if self._last_prune_ms is not None and now - self._last_prune_ms < self.prune_interval_ms:
            return
        try:
            self.store.prune()
        except Exception as err:  # noqa: BLE001
            # Not stamped: a failed sweep is retried on the next cycle.
            self._log(f"[thatch] chat prune failed: {err!r}")
            return
        self._last_prune_ms = now

    def deliver_pending(self) -> None:
        """Wake every hosted, deliverable recipient that has pending mail.

        Never raises. Busy or compacting recipients, capped ones and failed
        deliveries all stay pending and retry later (R19). A crash between
        the wake prompt and the stamp re-nudges the same batch (R23).
        """
        if not self._deliver_guard.acquire(blocking=False):
            return
        try:
            try:
                hosted = list(self._hosted())
                if not hosted:
                    return
                cutoff = clock.iso_minutes_ago(self.renudge_minutes)
                pending = self.store.pending_notifications(hosted, cutoff)
            except Exception as err:  # noqa: BLE001
                self._log(f"[thatch] chat delivery query failed: {err!r}")
                return
            if not pending:
                return
            hosted_set = set(hosted)
            by_recipient: dict[str, list] = {}
            for row in pending:
                # The store filters by the hosted list already; re-checking
                # here keeps R25 true whatever a store implementation returns.
                if row.to_session in hosted_set:
                    by_recipient.setdefault(row.to_session, []).append(row)
            for recipient, rows in by_recipient.items():
                self._deliver_one(recipient, rows)
        finally:
            self._deliver_guard.release()

    def _deliver_one(self, recipient: str, rows: list) -> None:
        try:
            if not self._can_deliver(recipient):
                return
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat delivery gate for {recipient} failed: {err!r}")
            return
        if self._nudge_budget(recipient) <= 0:
            return
        # dict.fromkeys: deduplicate, keep first-seen (oldest message) order.
        senders = list(dict.fromkeys(render_participant(r.from_name, r.from_session) for r in rows))
        try:
            self._deliver(recipient, senders, len(rows))
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat delivery to {recipient} failed: {err!r}")
            return
        # Count before the stamp (R21): see the module docstring.
        self._record_nudge(recipient)
        try:
            self.store.mark_delivered([r.id for r in rows])
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat delivered-stamp for {recipient} failed: {err!r}")

    # -- rate cap ------------------------------------------------------------

    def _nudge_budget(self, recipient: str) -> int:
        """Wake prompts this recipient may still get in the rolling hour."""
        now = clock.now_ms()
        fresh = [t for t in self._nudges.get(recipient, ()) if now - t < NUDGE_WINDOW_MS]
        self._nudges[recipient] = fresh
        return self.max_nudges_per_hour - len(fresh)

    def _record_nudge(self, recipient: str) -> None:
        self._nudges.setdefault(recipient, []).append(clock.now_ms())

    def nudge_count(self, recipient: str) -> int:
        """Wake prompts sent to `recipient` within the rolling hour (for tests
        and reports; the simulator observes prompts, not this)."""
        return self.max_nudges_per_hour - self._nudge_budget(recipient)
