"""Wall time, read only through ``time.time()`` so freezegun controls it.

Every timestamp thatch stores is ISO-8601 UTC with second resolution
(``2026-11-29T13:45:07Z``): string comparison between stored timestamps is
then chronological comparison, which the pending-notification and prune
queries rely on. SQLite's own ``now`` is never used: freezegun cannot freeze it.
"""

from __future__ import annotations

import calendar
import time
from datetime import datetime, timezone

ISO_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def now_ms() -> int:
    """Current wall time in epoch milliseconds."""
    # Looked up on the module each call: freezegun swaps time.time in place.
    return int(time.time() * 1000)


# Formatted seconds: a poll formats "now" and its re-nudge cutoff, which
# change once a second at most. A pure function of the second, so a cached
# text is the text strftime would give (D-speed-core-3); cleared when full.
_ISO_CACHE: dict[int, str] = {}
_ISO_CACHE_MAX = 256


def iso(ms: int | None = None) -> str:
    """Second-resolution UTC ISO timestamp of ``ms`` (epoch ms), or of now."""
    if ms is None:
        ms = now_ms()
    sec = ms // 1000
    text = _ISO_CACHE.get(sec)
    if text is None:
        # gmtime with an explicit argument is a pure conversion (never frozen).
        text = time.strftime(ISO_FORMAT, time.gmtime(sec))
        if len(_ISO_CACHE) >= _ISO_CACHE_MAX:
            _ISO_CACHE.clear()
        _ISO_CACHE[sec] = text
    return text


def iso_ms_ago(ms: int) -> str:
    """The ISO timestamp ``ms`` milliseconds before now."""
    return iso(now_ms() - int(ms))


def iso_minutes_ago(minutes: float) -> str:
    """The ISO timestamp ``minutes`` before now (the poller's re-nudge cutoff)."""
    return iso(now_ms() - int(minutes * 60_000))


def parse_iso_ms(s: str) -> int:
    """Epoch milliseconds of a stored timestamp.

    Accepts the canonical ``...Z`` form and, for rows written by older code
    or by hand, anything ``datetime.fromisoformat`` reads (naive = UTC).
    Raises ``ValueError`` for text that is not a timestamp.
    """
    try:
        return calendar.timegm(time.strptime(s, ISO_FORMAT)) * 1000
    except (ValueError, TypeError):
        pass
    if not isinstance(s, str):
        raise ValueError(f"not a timestamp: {s!r}")
    text = s.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    dt = datetime.fromisoformat(text)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    delta = dt - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return int(delta.total_seconds() * 1000)
