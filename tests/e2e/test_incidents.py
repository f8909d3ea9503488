"""The incidents of scenarios/incidents/ under both designs, through the real simulator.

Under seed 000's design each story fails the property that catches it, by name
(its `expect_outcome`), and the run is ok; under the later design (`thatch-later`)
the same story must pass with every property held.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import repo
from simulator.api import run_scenario
from simulator.compare import under
from simulator.scenario.loader import load_file
from simulator.scenario.policies import POLICY_SETS

# The incidents as they happened; each `NAME-later.yaml` is the same story under the later design, run by the gate.
INCIDENTS = sorted(p for p in (repo.ROOT / "scenarios" / "incidents").glob("*.yaml") if not p.stem.endswith("-later"))


@pytest.mark.parametrize("path", INCIDENTS, ids=lambda p: p.stem)
def test_each_incident_fails_by_name_under_seed_000s_design(path: Path, tmp_path):
    spec = load_file(path).spec
    result = run_scenario(spec, run_dir=tmp_path / "run")
    expected = spec.expect_outcome.fails["thatch"]
    assert result.ok, [v.check for v in result.failures()]
    assert [v.check for v in result.verdicts if v.status == "expected-fail"] == expected


@pytest.mark.parametrize("path", INCIDENTS, ids=lambda p: p.stem)
def test_each_incident_passes_under_the_later_design(path: Path, tmp_path):
    spec = under(load_file(path).spec, POLICY_SETS["thatch-later"])
    result = run_scenario(spec, run_dir=tmp_path / "run")
    assert result.ok and not [v for v in result.verdicts if v.status == "expected-fail"], \
        [(v.check, v.message) for v in result.failures()]
