"""scripts/explore_mutants.py: its options and its markdown table (no mutant is explored here)."""

from __future__ import annotations

import importlib.util
import sys

import pytest

import repo


@pytest.fixture(scope="module")
def script():
    sys.path.insert(0, str(repo.ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("explore_mutants", repo.ROOT / "scripts" / "explore_mutants.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    sys.path.remove(str(repo.ROOT / "scripts"))


def test_modes_jobs_and_a_90_second_budget_parse(script):
    args = script.parse_args(["--budget", "90s", "--mode", "both", "--jobs", "3"])
    assert args.budget == "90s" and args.modes == ("plain", "guided") and args.jobs == 3
    assert script.parse_args(["--guided"]).modes == ("guided",)
    assert script.parse_args([]).modes == ("plain",) and script.parse_args([]).budget == "2m"
    with pytest.raises(SystemExit):
        script.parse_args(["--jobs", "0"])


def test_the_table_puts_both_modes_of_a_mutant_on_one_row(script):
    m = script.mc.MUTANTS[0]
    found = {"failures": [{"check": "P2", "seed": 4, "shrunk": {"before": [2, 5, 5], "after": [1, 2, 1]},
                           "reproduced": True, "message": "x"}], "first_failure_s": 7.2, "runs": 6}
    rows = [script.row_of(m, found, "plain"), script.row_of(m, {"runs": 40}, "guided")]
    table = script.markdown_table(rows, "90s", ("plain", "guided"))
    lines = table.splitlines()
    assert lines[0].startswith("| mutant | rule | plain: found |") and "guided: seeds run" in lines[0]
    assert lines[2].startswith(f"| {m.id} | {m.rule} | **yes** | 7 s | P2 | 1/2/1 (from 2/5/5) | 6 | no | - |")
    assert "plain: found by exploration alone (90s per mutant from seed 0): 1/1" in table
    assert "guided: found by exploration alone (90s per mutant from seed 0): 0/1" in table


def test_no_shrink_reports_a_found_mutant_without_calling_it_unreproducible(script):
    """--no-shrink: the first failure is reported as found, with no shrunk size and no
    "does not reproduce" note (nothing was rerun alone)."""
    assert script.parse_args(["--no-shrink"]).shrink is False and script.parse_args([]).shrink is True
    m = script.mc.MUTANTS[0]
    row = script.row_of(m, {"failures": [{"check": "P4", "seed": 3, "message": "x"}], "first_failure_s": 5.0,
                            "runs": 4}, "plain")
    assert row["found"] and row["shrunk"] is None and script._note(row) == ""
    assert script._note({**row, "reproduced": False}) == "does not reproduce alone"
