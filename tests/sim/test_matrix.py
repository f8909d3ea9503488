"""The spec matrix: which scenarios and tests name each design rule, read without importing anything."""

from __future__ import annotations

import textwrap
from pathlib import Path

from simulator.matrix import RULE_IDS, build_matrix, rules_in_text
import repo


ROOT = repo.ROOT


def make_repo(root: Path) -> Path:
    (root / "scenarios" / "basic").mkdir(parents=True)
    (root / "scenarios" / "basic" / "a.yaml").write_text("name: alpha\nrules: [R9, R18]\n")
    (root / "scenarios" / "basic" / "broken.yaml").write_text("name: [unclosed\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text(textwrap.dedent('''\
        """Module about R2."""
        import pytest

        pytestmark = [pytest.mark.rules("R3")]

        @pytest.mark.rules("R9", "R10")
        def test_marked():
            pass

        def test_docstring():
            """Checks R18-R20 and R33."""

        def helper():
            """Mentions R36 but is not a test."""

        class TestGroup:
            """About R14."""

            @pytest.mark.rules("R15")
            def test_inner(self):
                pass
        '''))
    (root / "tests" / "test_broken.py").write_text("def oops(:\n")
    return root


def test_rules_in_text_expands_ranges_and_ignores_non_rules():
    assert rules_in_text("R18-R20, R33 and R18") == ["R18", "R19", "R20", "R33"]
    assert rules_in_text("R37 R0 PR1 R1x") == []
    assert rules_in_text(None) == []


def test_matrix_of_a_small_repo(tmp_path):
    matrix = build_matrix(make_repo(tmp_path))
    assert matrix.scenarios["R9"] == ["scenarios/basic/a.yaml (alpha)"]
    assert matrix.tests["R9"] == ["tests/test_x.py::test_marked"]
    assert matrix.tests["R10"] == ["tests/test_x.py::test_marked"]
    assert matrix.tests["R2"] == matrix.tests["R3"] == ["tests/test_x.py"]
    assert matrix.tests["R19"] == ["tests/test_x.py::test_docstring"]
    assert matrix.tests["R14"] == ["tests/test_x.py::TestGroup"]
    assert matrix.tests["R15"] == ["tests/test_x.py::TestGroup::test_inner"]
    assert matrix.tests["R36"] == []  # helpers do not count
    covered = {"R2", "R3", "R9", "R10", "R14", "R15", "R18", "R19", "R20", "R33"}
    assert matrix.uncovered() == [r for r in RULE_IDS if r not in covered]


def test_format_marks_uncovered_rules(tmp_path):
    text = build_matrix(make_repo(tmp_path)).format()
    assert "R9    1 scenarios   1 tests\n       scenarios/basic/a.yaml (alpha)\n       tests/test_x.py::test_marked" in text
    assert "R1    0 scenarios   0 tests   <- NOT COVERED" in text
    assert text.splitlines()[-1].startswith("10/36 rules covered; missing: R1, R4,")


def test_the_repository_matrix_builds():
    matrix = build_matrix(ROOT)
    assert set(matrix.scenarios) == set(RULE_IDS)
