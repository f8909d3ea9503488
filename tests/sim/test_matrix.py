"""The spec matrix: the rule book's rules with the scenarios and tests naming them, read without importing anything.

(Docstrings here name no rule id on purpose: the repository's own matrix would count them.)
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from simulator import cli
from simulator.matrix import RULE_BOOK, Rule, build_matrix, parse_rules, rules_in_text
from simulator.verdicts import CATALOGUE
import repo


ROOT = repo.ROOT
BOOK = """\
# Rules

Intro text that defines nothing.

## Group

### R2
Second rule.

### R3

Third rule, with `code` in it.

### R9
Send rule.

### R10
Read rule.

### R14
Stale rule.

### R15
Rehost rule.

### R18
### R19
Gate rule.

### R20
One wake rule.

### R33
Adoption rule.

### R36
Turn-end rule.
"""


def make_repo(root: Path, book: str = BOOK) -> Path:
    (root / "docs").mkdir(parents=True)
    (root / RULE_BOOK).write_text(book)
    (root / "scenarios" / "basic").mkdir(parents=True)
    (root / "scenarios" / "basic" / "a.yaml").write_text("name: alpha\nrules: [R9, R18]\n")
    (root / "scenarios" / "basic" / "broken.yaml").write_text("name: [unclosed\n")
    (root / "tests" / "sub").mkdir(parents=True)
    (root / "tests" / "sub" / "test_x.py").write_text(textwrap.dedent('''\
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
    (root / "tests" / "kit.py").write_text('"""A helper module about R36: not a test file."""\n')
    (root / "tests" / "test_broken.py").write_text("def oops(:\n")
    return root


def test_rules_in_text_expands_ranges_and_ignores_non_rules():
    assert rules_in_text("R18-R20, R33 and R18") == ["R18", "R19", "R20", "R33"]
    assert rules_in_text("R37 R0 PR1 R1x") == ["R37"]
    assert rules_in_text(None) == []


def test_parse_rules_reads_each_heading_with_its_first_line():
    rules = parse_rules(BOOK)
    assert [r.id for r in rules] == ["R2", "R3", "R9", "R10", "R14", "R15", "R18", "R19", "R20", "R33", "R36"]
    assert rules[1] == Rule("R3", "Third rule, with `code` in it.")
    assert rules[6] == Rule("R18", "")  # a heading straight after a heading has no text
    assert parse_rules("### R4 and more\ntext\n#### R5\nfive\n") == [Rule("R5", "five")]


def test_rule_link_and_summary():
    rule = Rule("R12", "x" * 100)
    assert rule.link == "docs/rules.md#r12"
    assert rule.summary(10) == "x" * 9 + "…"
    assert Rule("R1", "short").summary(10) == "short"


def test_matrix_of_a_small_repo(tmp_path):
    matrix = build_matrix(make_repo(tmp_path))
    assert matrix.book == Path(RULE_BOOK)
    assert matrix.scenarios["R9"] == ["scenarios/basic/a.yaml (alpha)"]
    assert matrix.tests["R9"] == ["tests/sub/test_x.py::test_marked"]
    assert matrix.tests["R10"] == ["tests/sub/test_x.py::test_marked"]
    assert matrix.tests["R2"] == matrix.tests["R3"] == ["tests/sub/test_x.py"]
    assert matrix.tests["R19"] == ["tests/sub/test_x.py::test_docstring"]
    assert matrix.tests["R14"] == ["tests/sub/test_x.py::TestGroup"]
    assert matrix.tests["R15"] == ["tests/sub/test_x.py::TestGroup::test_inner"]
    assert matrix.tests["R36"] == []  # helper functions and helper modules do not count
    assert matrix.uncovered() == ["R36"]
    assert matrix.undefined() == []
    assert matrix.problems() == ["named by nothing: R36"]
    assert not matrix.ok


def test_an_id_named_by_a_check_but_missing_from_the_rule_book_is_reported(tmp_path):
    root = make_repo(tmp_path, BOOK + "\n### R1\nFirst rule.\n")
    (root / "tests" / "test_more.py").write_text(
        'import pytest\n\n@pytest.mark.rules("R36", "R40")\ndef test_more():\n    """Also R1."""\n')
    matrix = build_matrix(root)
    assert matrix.uncovered() == []
    assert matrix.undefined() == ["R40"]
    assert matrix.problems() == ["named but not defined in docs/rules.md: R40"]
    text = matrix.format()
    assert "R40   0 scenarios   1 tests   <- NOT DEFINED in docs/rules.md\n       tests/test_more.py::test_more" in text
    assert text.splitlines()[-1] == "12/12 rules covered; named but not defined in docs/rules.md: R40"
    assert cli.main(["matrix", "--check", "--root", str(root)]) == 1
    (root / "tests" / "test_more.py").write_text('def test_more():\n    """Only R1 and R36."""\n')
    assert build_matrix(root).ok
    assert cli.main(["matrix", "--check", "--root", str(root)]) == 0


def test_a_rule_defined_twice_or_a_book_without_rules_fails(tmp_path):
    root = make_repo(tmp_path, BOOK + "\n### R9\nSend rule again.\n")
    assert build_matrix(root).duplicates() == ["R9"]
    assert "defined more than once in docs/rules.md: R9" in build_matrix(root).problems()
    (root / RULE_BOOK).write_text("# Rules\n\nNone yet.\n")
    empty = build_matrix(root)
    assert empty.rules == {}
    assert empty.problems()[0] == "no rules: docs/rules.md defines none"
    assert empty.undefined() == ["R2", "R3", "R9", "R10", "R14", "R15", "R18", "R19", "R20", "R33"]


def test_format_shows_each_rule_with_its_link_and_text(tmp_path):
    text = build_matrix(make_repo(tmp_path)).format()
    assert text.splitlines()[0] == "rules: docs/rules.md"
    assert ("R9    1 scenarios   1 tests   docs/rules.md#r9\n     Send rule.\n"
            "       scenarios/basic/a.yaml (alpha)\n       tests/sub/test_x.py::test_marked") in text
    assert "R36   0 scenarios   0 tests   docs/rules.md#r36   <- NOT COVERED\n     Turn-end rule." in text
    assert text.splitlines()[-1] == "10/11 rules covered; missing: R36"


def test_a_root_without_a_rule_book_uses_the_project_s(tmp_path):
    matrix = build_matrix(tmp_path)
    assert matrix.book == ROOT / RULE_BOOK
    assert list(matrix.rules) == [r.id for r in parse_rules((ROOT / RULE_BOOK).read_text())]
    assert matrix.uncovered() == list(matrix.rules)


def test_the_repository_rule_book_defines_each_rule_once_with_its_text():
    rules = parse_rules((ROOT / RULE_BOOK).read_text(encoding="utf-8"))
    assert [r.id for r in rules] == [f"R{n}" for n in range(1, 37)]
    assert all(r.text for r in rules)


def test_the_repository_matrix_builds_and_reads_tests_in_subdirectories():
    matrix = build_matrix(ROOT)
    assert set(matrix.rules) == set(matrix.scenarios) - set(matrix.undefined())
    assert any(ref.startswith("tests/core/") for rule in matrix.rules for ref in matrix.tests[rule])
    assert any(ref.startswith("tests/sim/") for rule in matrix.rules for ref in matrix.tests[rule])


def test_each_rule_lists_the_catalogue_verdicts_that_judge_it(tmp_path):
    """The verdicts' catalogue (simulator/verdicts.py) says which rules each property judges: R9 (send) is
    judged by no-loss, the reply model and contention-safety."""
    text = build_matrix(make_repo(tmp_path)).format()
    r9 = text[text.index("R9  "):text.index("R10 ")]
    assert r9.rstrip().splitlines()[-1] == "     judged by P5 no-loss, P11 reply-model, P15 contention-safe"
    r36 = text[text.index("R36 "):]
    assert r36.splitlines()[2] == "     judged by P11 reply-model"  # after its (no) references


def test_every_rule_the_catalogue_names_is_in_the_rule_book():
    book = build_matrix(ROOT)
    named = {r for e in CATALOGUE.values() for r in e.rules}
    assert named <= set(book.rules), sorted(named - set(book.rules))
