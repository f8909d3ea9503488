"""The one liveness rule and the roster order (R14, R16, R35).

Heartbeat age is the only liveness signal: a pid cannot serve, because the
same session is re-hosted by a new process on every ``-s`` resume. The roster,
the ``chat_send`` note and the broadcast skip all call :func:`is_stale`, so
they cannot disagree. What stale *means* differs by host kind (an opencode
row's harness stopped; an mcp row is between turns), and that reading
belongs to the callers (broadcast skips only stale opencode rows).
"""

from __future__ import annotations

from typing import Any, Iterable

from thatch_core import clock
from thatch_core.constants import STALE_MS


def _last_seen_of(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict):
        return value.get("last_seen")
    return getattr(value, "last_seen", None)


def last_seen_ms(value: Any) -> int | None:
    """Epoch ms of a row's (or a bare string's) ``last_seen``; None if unreadable."""
    text = _last_seen_of(value)
    if not text:
        return None
    try:
        return clock.parse_iso_ms(text)
    except (ValueError, TypeError, OverflowError):
        return None


def is_stale(last_seen_iso_or_row: Any, now_ms: int | None = None) -> bool:
    """True when the last beat is more than ``STALE_MS`` (two missed beats) old.

    Exactly 60 s is still fresh: the threshold is "more than two intervals".
    An unreadable ``last_seen`` (a hand-edited legacy row) counts as stale:
    nothing proves that session alive.
    """
    seen = last_seen_ms(last_seen_iso_or_row)
    if seen is None:
        return True
    now = clock.now_ms() if now_ms is None else now_ms
    return now - seen > STALE_MS


def _roster_key(row: Any):
    project = getattr(row, "project", None)
    seen = last_seen_ms(row)
    return (
        project is None,                      # no-project rows last
        (project or "").casefold(), project or "",  # alphabetical, stable on case
        -(seen if seen is not None else -(1 << 62)),  # most recently seen first
        (getattr(row, "name", "") or "").casefold(),  # deterministic tie-break
        getattr(row, "session_id", ""),
    )


def sort_roster(rows: Iterable[Any]) -> list:
    """Project first (alphabetical), no-project rows last; newest beat first within one."""
    return sorted(rows, key=_roster_key)


def group_roster(rows: Iterable[Any], now_ms: int | None = None) -> tuple[list, list]:
    """Split into ``(active, stale)``, each in roster order, one clock reading for all."""
    now = clock.now_ms() if now_ms is None else now_ms
    active, stale = [], []
    for row in sort_roster(rows):
        (stale if is_stale(row, now) else active).append(row)
    return active, stale
