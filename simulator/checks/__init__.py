"""Judging one run from its history (JSONL events) and its final SQLite database.

`check_all` is the one entry: the properties P1-P15 (registered by the
delivery, liveness, messages, identity, later and contention modules), the messaging policies'
promises Q1-Q3 (only where a process runs under a policy), the reach claims, the
point and step-reply expectations, and one verdict per fault step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Union

from simulator.checks import delivery, identity, liveness, messages, model_rows  # noqa: F401 - importing registers P1-P11
from simulator.checks import later  # noqa: F401 - importing registers P12-P14 (after P11)
from simulator.checks import contention  # noqa: F401 - importing registers P15 (after P14)
from simulator.checks.expectations import check_expectations
from simulator.checks.outcome import expected_outcome
from simulator.checks.faults import fault_verdicts
from simulator.checks.reach import check_reaches
from simulator.checks.policies import check_policies
from simulator.checks.registry import check_properties
from simulator.checks.view import RunView
from simulator.history import History
from simulator.result import Verdict
from simulator.scenario.model import CHECKOUT_DESIGN, Scenario


def check_all(spec: Scenario, history: Union[History, list[dict[str, Any]]], db_path: Union[str, Path, None],
              run_info: Optional[dict] = None) -> list[Verdict]:
    """Every verdict of a run: properties, reach claims, expectations, faults."""
    view = RunView(spec, history, db_path, run_info)
    verdicts = (check_properties(spec, view) + check_policies(spec, view) + check_reaches(spec, view)
                + check_expectations(spec, view) + fault_verdicts(spec, view.history))
    on_checkout = bool((run_info or {}).get("sut_is_checkout"))
    return expected_outcome(spec, verdicts, design=CHECKOUT_DESIGN if on_checkout else None)


__all__ = ["check_all"]
