"""The per-property tally: over every scenario run of the session, how often each
property (P1-P10, and the policies' Q1-Q3 where a policy was in force) and
reach claim was checked, passed, failed, was not reached or was not applicable
(the policy in force does not make the promise), and
how many things (messages, wakes, samples, names...) each property judged in
all (a property that judged nothing shows 0 there, however often it passed).

Under xdist a run happens in a worker and the tally lives in the controller,
so a run's verdicts travel as the report attribute `VERDICTS_ATTR` (a list of
[check, status, title, judged], which xdist carries with the report) and are decoded
back into verdicts there (D-plugin-5). Point expectations and fault checks
are per scenario and are not tallied; a check that no run checked (every run
skipped it) has no row; one that was only ever not applicable has its row,
with its count in `n/a`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

import pytest

from simulator.sut import SUT_ENV, THATCH_CORE
from simulator.result import Verdict
from simulator.verdicts import CATALOGUE, POLICY_PROMISE_IDS, PROPERTY_IDS

VERDICTS_ATTR = "sim_verdicts"
COLUMNS = ("checked", "passed", "failed", "not reached", "n/a", "judged")
PROMISE_IDS = PROPERTY_IDS + POLICY_PROMISE_IDS
# a status not named here (fail) counts as failed
_COLUMN_OF_STATUS = {"pass": "passed", "not-reached": "not reached"}


def encode_verdicts(verdicts: Iterable[Verdict]) -> list[list]:
    """A run's verdicts as plain lists, the form a report attribute travels in between xdist processes."""
    return [[v.check, v.status, v.title, v.judged, v.message] for v in verdicts]


def decode_verdicts(rows: Iterable[list]) -> list[Verdict]:
    return [Verdict(check, title, status, judged=int(rest[0]) if rest else 0, message=rest[1] if len(rest) > 1 else "")
            for check, status, title, *rest in rows]


def is_tallied(check: str) -> bool:
    return check in PROMISE_IDS or check.startswith("reach:")


def _order(check: str) -> tuple:
    if check in PROMISE_IDS:
        return (0, PROMISE_IDS.index(check), check)
    return (1, 0, check)


@dataclass
class TallyRow:
    label: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COLUMNS, 0))


class PropertyTally:
    """check -> runs checked, passed, failed, not reached; printed as one table at the end of the session."""

    def __init__(self, verdicts_json: Optional[Path] = None) -> None:
        self.rows: dict[str, TallyRow] = {}
        # --sim-verdicts-json: every item's verdicts (check, status, message), for tools that compare runs
        self.verdicts_json = verdicts_json
        self.by_item: dict[str, list[list]] = {}

    def add(self, verdicts: Iterable[Verdict]) -> None:
        """Count one run's verdicts; a skipped check gets its row but is not counted as checked."""
        for v in verdicts:
            if not is_tallied(v.check):
                continue
            # reach claims' titles are sentences: their id says enough in a table
            label = f"{v.check} {CATALOGUE[v.check].title}" if v.check in CATALOGUE else v.check
            row = self.rows.setdefault(v.check, TallyRow(label))
            if v.status == "skipped":
                continue
            if v.status == "not-applicable":
                row.counts["n/a"] += 1
                continue
            row.counts["checked"] += 1
            row.counts[_COLUMN_OF_STATUS.get(v.status, "failed")] += 1
            row.counts["judged"] += v.judged

    def checked_rows(self) -> list[TallyRow]:
        """The rows some run checked or found not applicable: properties in id order, then reach claims."""
        return [self.rows[c] for c in sorted(self.rows, key=_order)
                if self.rows[c].counts["checked"] or self.rows[c].counts["n/a"]]

    def table(self) -> list[str]:
        """The header and one line per checked check, columns aligned; no lines when nothing was checked."""
        rows = self.checked_rows()
        if not rows:
            return []
        width = max(len(row.label) for row in rows)
        lines = [f"{'check':<{width}}  " + "  ".join(COLUMNS)]
        for row in rows:
            # a reach claim judges nothing by count: it happened or it did not
            counts = "  ".join(f"{'-' if c == 'judged' and row.label.startswith('reach:') else row.counts[c]:>{len(c)}}"
                               for c in COLUMNS)
            lines.append(f"{row.label:<{width}}  {counts}")
        return lines

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        rows = getattr(report, VERDICTS_ATTR, None)
        if rows:
            self.add(decode_verdicts(rows))
            self.by_item[report.nodeid] = [[v.check, v.status, v.message] for v in decode_verdicts(rows)]

    def pytest_sessionfinish(self) -> None:
        if self.verdicts_json is not None:
            self.verdicts_json.parent.mkdir(parents=True, exist_ok=True)
            self.verdicts_json.write_text(json.dumps({"sut": os.environ.get(SUT_ENV) or THATCH_CORE,
                                                      "items": dict(sorted(self.by_item.items()))}, indent=1),
                                          encoding="utf-8")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        lines = self.table()
        if not lines:
            return
        terminalreporter.write_sep("=", f"scenario checks on {os.environ.get(SUT_ENV) or THATCH_CORE}")
        for line in lines:
            terminalreporter.write_line(line)
