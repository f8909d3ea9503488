"""Small text helpers for the pytest plugin's end-of-run summary and junit output.

The plugin owns the junit properties themselves (seed, rerun command); this
module only turns per-property tallies into an aligned text table and builds
those tallies from verdicts, so the formatting is testable on its own.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

COLUMNS = ("checked", "passed", "failed", "not reached")
_ALIASES = {"not reached": ("not reached", "not-reached", "not_reached"), "passed": ("passed", "pass"),
            "failed": ("failed", "fail"), "checked": ("checked",)}
_PID = re.compile(r"^P(\d+)$")


def _get(counts: dict[str, int], column: str) -> int:
    return sum(int(counts.get(alias, 0)) for alias in _ALIASES[column])


def _order(name: str) -> tuple:
    # P1..P10 in numeric order first, then anything else (reach claims, expectations) alphabetically.
    m = _PID.match(name)
    return (0, int(m.group(1)), "") if m else (1, 0, name)


def property_summary_table(tallies: dict[str, dict[str, int]]) -> str:
    """Format {property: {checked, passed, failed, not reached}} as an aligned text table.

    Counts may use "not reached", "not-reached" or "not_reached" (and pass/fail)
    as keys; missing counts are 0; `checked` defaults to passed+failed+not reached.
    Numbers are right-aligned under their headers; the last line is a total.
    """
    rows: list[tuple[str, ...]] = []
    totals = [0, 0, 0, 0]
    for name in sorted(tallies, key=_order):
        counts = tallies[name]
        passed, failed, nr = _get(counts, "passed"), _get(counts, "failed"), _get(counts, "not reached")
        checked = _get(counts, "checked") if any(k in counts for k in _ALIASES["checked"]) else passed + failed + nr
        values = [checked, passed, failed, nr]
        totals = [a + b for a, b in zip(totals, values)]
        rows.append((name, *map(str, values)))
    header = ("property", *COLUMNS)
    body = rows + ([("total", *map(str, totals))] if rows else [])
    widths = [max(len(r[k]) for r in [header, *body]) for k in range(len(header))]

    def line(r: tuple[str, ...]) -> str:
        return "  ".join([r[0].ljust(widths[0])] + [r[k].rjust(widths[k]) for k in range(1, len(r))]).rstrip()

    out = [line(header), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    if rows:
        out += ["  ".join("-" * w for w in widths), line(body[-1])]
    return "\n".join(out)


def tally_verdicts(verdicts: Iterable, tallies: Optional[dict[str, dict[str, int]]] = None, *,
                   properties_only: bool = True) -> dict[str, dict[str, int]]:
    """Add one run's verdicts to `tallies` (created when None) and return it.

    A skipped verdict is not counted as checked. With `properties_only`, only
    P-ids are tallied (reach claims and expectations belong to their scenario).
    """
    tallies = {} if tallies is None else tallies
    for v in verdicts:
        if properties_only and not _PID.match(v.check):
            continue
        counts = tallies.setdefault(v.check, {c: 0 for c in COLUMNS})
        if v.status == "skipped":
            continue
        counts["checked"] += 1
        column = {"pass": "passed", "fail": "failed", "not-reached": "not reached"}.get(v.status)
        if column:
            counts[column] += 1
    return tallies
