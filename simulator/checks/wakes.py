"""Wake prompts per process incarnation, and the rolling hour of the cap (R22).

P2 and P10 judge the cap with these; the rate-cap reach claim shows it at work.
"""

from __future__ import annotations

from simulator.checks.view import RunView
from simulator.design import HOUR_MS, MAX_WAKES_PER_HOUR
from simulator.events import WAKE


def rolling_excess(wakes: list[dict], cap: int = MAX_WAKES_PER_HOUR) -> list[dict] | None:
    """The first cap+1 wakes that fall inside one rolling hour, or None."""
    ts = sorted(wakes, key=lambda e: e["i"])
    for k in range(len(ts) - cap):
        if ts[k + cap]["t"] - ts[k]["t"] < HOUR_MS:
            return ts[k:k + cap + 1]
    return None


def wakes_by_incarnation(view: RunView, labels: set[str] | None = None) -> dict[tuple, list[dict]]:
    """Wakes grouped by (process label, incarnation number, session label), optionally of `labels` only."""
    out: dict[tuple, list[dict]] = {}
    for w in view.of(WAKE):
        if labels is not None and w.get("session") not in labels:
            continue
        inc = view.inc_of(w)
        out.setdefault((w.get("proc"), inc.n if inc else None, w.get("session")), []).append(w)
    return out
