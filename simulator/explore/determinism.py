"""The determinism check: the same seed in serial dispatch gives the same history, event for event.

Serial dispatch promises a byte-identical history for a scenario and seed
(docs/history.md). `first_difference` compares two histories and names the
first event where they part, with both versions, so a leak of wall time, a
pid or an unseeded random draw into the history shows where it enters.
"""

from __future__ import annotations

import json
from typing import Any, Optional


def _line(event: Optional[dict[str, Any]]) -> str:
    return "(none: the history ended)" if event is None else json.dumps(event, sort_keys=True, default=str)


def first_difference(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> Optional[str]:
    """None when the histories are equal, else the first differing event of each (run 1, run 2)."""
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x != y:
            return f"event {i} differs:\n  run 1: {_line(x)[:400]}\n  run 2: {_line(y)[:400]}"
    return None
