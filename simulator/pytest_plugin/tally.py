"""The per-property tally: over every scenario run of the session, how often each
property and reach claim was checked, passed, failed or was not reached.

Under xdist a run happens in a worker and the tally lives in the controller,
so a run's verdicts travel in its report's `user_properties` as JSON under
`VERDICTS_PROPERTY` (check -> [status, title]) and are decoded back into
verdicts there (D-plugin-5). Point expectations and fault checks are per
scenario and are not tallied.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Iterable

import pytest

from simulator.result import Verdict
from simulator.scenario.model import PROPERTY_IDS

VERDICTS_PROPERTY = "sim_verdicts"
COLUMNS = ("checked", "passed", "failed", "not reached")
# a status not named here (fail) counts as failed
_COLUMN_OF_STATUS = {"pass": "passed", "not-reached": "not reached"}


def encode_verdicts(verdicts: Iterable[Verdict]) -> str:
    """A run's verdicts as the JSON that travels in its report's user_properties."""
    return json.dumps({v.check: [v.status, v.title] for v in verdicts}, sort_keys=True)


def decode_verdicts(text: str) -> list[Verdict]:
    return [Verdict(check, title, status) for check, (status, title) in json.loads(text).items()]


def is_tallied(check: str) -> bool:
    return check in PROPERTY_IDS or check.startswith("reach:")


def _order(check: str) -> tuple:
    if check in PROPERTY_IDS:
        return (0, PROPERTY_IDS.index(check), check)
    return (1, 0, check)


@dataclass
class TallyRow:
    label: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COLUMNS, 0))


class PropertyTally:
    """check -> runs checked, passed, failed, not reached; printed as one table at the end of the session."""

    def __init__(self) -> None:
        self.rows: dict[str, TallyRow] = {}

    def add(self, verdicts: Iterable[Verdict]) -> None:
        """Count one run's verdicts; a skipped check gets its row but is not counted as checked."""
        for v in verdicts:
            if not is_tallied(v.check):
                continue
            # reach claims' titles are sentences: their id says enough in a table
            label = v.check if v.check.startswith("reach:") else f"{v.check} {v.title}"
            row = self.rows.setdefault(v.check, TallyRow(label))
            if v.status == "skipped":
                continue
            row.counts["checked"] += 1
            row.counts[_COLUMN_OF_STATUS.get(v.status, "failed")] += 1

    def table(self) -> list[str]:
        """The header and one line per check (properties in id order, then reach claims), columns aligned."""
        width = max(len(row.label) for row in self.rows.values())
        lines = [f"{'check':<{width}}  " + "  ".join(COLUMNS)]
        for check in sorted(self.rows, key=_order):
            row = self.rows[check]
            counts = "  ".join(f"{row.counts[c]:>{len(c)}}" for c in COLUMNS)
            lines.append(f"{row.label:<{width}}  {counts}")
        return lines

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        props = dict(report.user_properties)
        if VERDICTS_PROPERTY in props:
            self.add(decode_verdicts(props[VERDICTS_PROPERTY]))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.rows:
            return
        terminalreporter.write_sep("=", "scenario checks")
        for line in self.table():
            terminalreporter.write_line(line)
