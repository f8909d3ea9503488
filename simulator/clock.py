"""The run's virtual clock: milliseconds since the scenario start.

The orchestrator owns the only `VirtualClock`. Harness processes never read
it: each command carries its virtual time `t`, and the child moves its own
freezegun freezer to `instant(t)` before doing any work (see `worker.py`).
So every process sees the same frozen wall time for the same dispatch, and a
24-hour scenario needs no real sleeping at all.

Invariants:
- `now` only grows: `advance_to(t)` with `t < now` raises
  ``ValueError("time can't go backwards")`` and leaves the clock untouched.
- virtual ms `t` maps to the wall instant ``START_INSTANT + t ms``; the start
  instant is a constant, so the same scenario always runs on the same dates
  (byte-identical histories depend on it).
- the clock never reads real time: wall time is the wall guard's business.

`parse_iso_ms` reads a stored timestamp back into epoch ms: the one rule
the engine's samplers and the judges both date rows by (D-props-8).
"""

from __future__ import annotations

import calendar
import functools
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

# A Monday morning, fixed forever: stored timestamps in a run are then a pure
# function of the scenario and the seed.
START_INSTANT = datetime(2026, 1, 5, 9, 0, 0, tzinfo=timezone.utc)
START_EPOCH_MS = int(START_INSTANT.timestamp() * 1000)


def instant(t_ms: int) -> datetime:
    """The (aware, UTC) wall instant of virtual time `t_ms`."""
    return START_INSTANT + timedelta(milliseconds=t_ms)


def epoch_ms(t_ms: int) -> int:
    """Epoch milliseconds of virtual time `t_ms` (what `thatch_core.clock.now_ms` reads)."""
    return START_EPOCH_MS + t_ms


def virtual_ms(epoch: int) -> int:
    """The inverse of `epoch_ms`: virtual ms of an epoch-ms wall reading."""
    return epoch - START_EPOCH_MS


# The stored timestamp format (`2026-01-05T09:00:00Z`, second resolution, UTC).
ISO_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def iso_stamp(epoch: int) -> str:
    """The stored timestamp of an epoch-ms wall reading (`ISO_FORMAT`)."""
    return time.strftime(ISO_FORMAT, time.gmtime(epoch // 1000))


def parse_iso_ms(text: Any) -> Optional[int]:
    """Epoch ms of a stored timestamp, or None when it is not one.

    The canonical `...Z` form, or anything `datetime.fromisoformat` reads
    (naive = UTC): a hand-made legacy row may hold either, or nothing
    readable (D-store-12, D-props-8).
    """
    if not text or not isinstance(text, str):
        return None
    return _parse_stamp(text)


@functools.lru_cache(maxsize=1 << 14)
def _parse_stamp(text: str) -> Optional[int]:
    # The sampler and the judges read the same few stamps over and over (every sample repeats
    # each row's last_seen): a pure function of the text, parsed once (D-speed-harness-5).
    try:
        return calendar.timegm(time.strptime(text, ISO_FORMAT)) * 1000
    except ValueError:
        pass
    stripped = text.strip()
    if stripped.endswith(("Z", "z")):
        stripped = stripped[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(stripped)
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int((moment - _EPOCH).total_seconds() * 1000)


class VirtualClock:
    """Monotonic virtual time in ms since the scenario start (starts at 0)."""

    __slots__ = ("_now",)

    def __init__(self, start: int = 0) -> None:
        if start < 0:
            raise ValueError("virtual time starts at or after 0")
        self._now = start

    @property
    def now(self) -> int:
        return self._now

    def advance_to(self, t: int) -> int:
        """Move to `t` (staying put is allowed); never backwards."""
        if t < self._now:
            raise ValueError("time can't go backwards")
        self._now = t
        return t

    def instant(self) -> datetime:
        return instant(self._now)

    def epoch_ms(self) -> int:
        return epoch_ms(self._now)

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now})"
