"""Every fault key of the scenario language has its parent-side handler, and no handler is orphaned."""

from __future__ import annotations

from simulator.engine.faults import FAULTS
from simulator.scenario.model import FAULT_KEYS


def test_every_fault_key_has_a_handler():
    assert sorted(FAULTS) == sorted(FAULT_KEYS)
