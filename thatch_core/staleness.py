"""The one liveness rule, the roster order and the roster split (R14, R16, R35).

Heartbeat age is the only liveness signal: a pid cannot serve, because the
same session is re-hosted by a new process on every ``-s`` resume. The roster,
the ``chat_send`` note and the broadcast skip all call :func:`is_stale`, so
they cannot disagree. What stale *means* differs by host kind: an opencode
row's harness stopped, while an mcp row is only between turns and reads its
mail at its next prompt. :func:`liveness` names the four readings
(``fresh``/``stale`` for opencode rows, ``active``/``idle`` for mcp rows) and
:func:`split_roster` keeps every mcp row in Active, so the chat_list tool and
``thatch chat list`` split one directory the same way.
"""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

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


def human_age(last_seen: Any, now_ms: int | None = None) -> str:
    """How long ago a row last beat: ``45s ago``, ``5m ago``, ``3h ago``, ``2d ago``
    (clock skew reads as ``0s ago``); ``unknown age`` when it cannot be read.
    Both rosters (the chat_list tool and ``thatch chat list``) print this."""
    seen = last_seen_ms(last_seen)
    if seen is None:
        return "unknown age"
    now = clock.now_ms() if now_ms is None else now_ms
    seconds = max(0, (now - seen) // 1000)
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def liveness(row: Any, now_ms: int | None = None) -> str:
    """``fresh``/``stale`` for an opencode row, ``active``/``idle`` for an mcp row:
    an mcp session beats only when a turn runs, so its quiet row is reachable,
    not gone. A host kind other than ``mcp`` reads as opencode."""
    stale = is_stale(row, now_ms)
    if getattr(row, "host_kind", None) == "mcp":
        return "idle" if stale else "active"
    return "stale" if stale else "fresh"


class RosterSplit(NamedTuple):
    """The roster's two sections, each in roster order, and how many stale rows the cap hid."""

    active: list
    stale: list
    hidden: int


def split_roster(rows: Iterable[Any], now_ms: int | None = None, *,
                 stale_cap_ms: float | None = None) -> RosterSplit:
    """Active (fresh opencode rows and every mcp row) and Stale (opencode rows
    whose harness stopped), sorted with :func:`sort_roster` under one clock
    reading. With ``stale_cap_ms`` a stale row last seen longer ago than that
    is counted in ``hidden`` instead of listed: the CLI's display bound. A row
    with no readable last_seen has no age to compare, so it stays listed.
    None, the tool surface's default, hides nothing."""
    now = clock.now_ms() if now_ms is None else now_ms
    active, stale, hidden = [], [], 0
    for row in sort_roster(rows):
        seen = last_seen_ms(row)
        if liveness(row, now) != "stale":
            active.append(row)
        elif stale_cap_ms is not None and seen is not None and now - seen > stale_cap_ms:
            hidden += 1
        else:
            stale.append(row)
    return RosterSplit(active, stale, hidden)
