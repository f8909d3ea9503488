"""The spec matrix: each design rule of docs/rules.md with the scenarios and tests that name it.

The rule book is docs/rules.md: one `### R<n>` heading per rule (its link
target, `docs/rules.md#r<n>`) with the rule's text on the first non-blank
line under it. The ids the gate knows are the ones a reader can look up
there, so the book, not a range in code, says which rules exist.

A scenario names rules in its `rules:` list. A test names them with
`@pytest.mark.rules("R9", ...)` (on the function, its class, or a module
`pytestmark`) or in the docstring of a test function, a Test class or the
module; a range like `R18-R23` in a docstring names every rule in it. Tests
(`test_*.py` and `*_test.py` anywhere under tests/) are read with `ast`, never
imported, so a broken test file cannot hide its coverage and the matrix
costs nothing to build.

Each rule also lists the verdicts that judge it: the properties and policy
promises whose catalogue entry (simulator/verdicts.py) names it.

`matrix --check` fails when the book defines no rule, when a rule of the book
is named by nothing, when a scenario or test names an id the book does not
define, or when the book defines an id twice.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

import yaml

from simulator.verdicts import CATALOGUE

RULE_BOOK = "docs/rules.md"
# The checkout this simulator belongs to: its rule book serves a root that has none.
_HOME = Path(__file__).resolve().parent.parent
_DEFINITION = re.compile(r"^#{2,6}[ \t]+(R[1-9]\d*)[ \t]*$")
_HEADING = re.compile(r"^#{1,6}\s")
_RULE = re.compile(r"\bR([1-9]\d*)\b")
_RANGE = re.compile(r"\bR([1-9]\d*)\s*(?:-|–|\.\.)\s*R([1-9]\d*)\b")
SUMMARY_WIDTH = 76


def _number(rule_id: str) -> int:
    return int(rule_id[1:])


def rules_in_text(text: Optional[str]) -> list[str]:
    """R-ids named in free text, ranges expanded, in R-order without repeats."""
    if not text:
        return []
    found = {int(m.group(1)) for m in _RULE.finditer(text)}
    for m in _RANGE.finditer(text):
        low, high = sorted((int(m.group(1)), int(m.group(2))))
        found.update(range(low, high + 1))
    return [f"R{n}" for n in sorted(found)]


@dataclass(frozen=True)
class Rule:
    """One rule of the book: its id and its one-line text."""

    id: str
    text: str

    @property
    def link(self) -> str:
        return f"{RULE_BOOK}#{self.id.lower()}"

    def summary(self, width: int = SUMMARY_WIDTH) -> str:
        """The text, cut to `width` characters with an ellipsis when longer."""
        if len(self.text) <= width:
            return self.text
        return self.text[: width - 1].rstrip() + "…"


def parse_rules(text: str) -> list[Rule]:
    """Every `### R<n>` definition of a rule book, in book order (repeats kept)."""
    rules: list[Rule] = []
    pending: Optional[str] = None
    for line in text.splitlines():
        definition = _DEFINITION.match(line)
        if definition or _HEADING.match(line):
            if pending:
                rules.append(Rule(pending, ""))
            pending = definition.group(1) if definition else None
        elif pending and line.strip():
            rules.append(Rule(pending, line.strip()))
            pending = None
    if pending:
        rules.append(Rule(pending, ""))
    return rules


def find_rule_book(root: Path) -> Optional[Path]:
    """root's docs/rules.md, else the one of the checkout this simulator lives in."""
    for base in (root, _HOME):
        path = base / RULE_BOOK
        if path.is_file():
            return path
    return None


@dataclass
class Matrix:
    """rule -> the scenarios and tests that name it, against the rule book's definitions."""

    definitions: list[Rule] = field(default_factory=list)
    book: Optional[Path] = None
    scenarios: dict[str, list[str]] = field(default_factory=dict)
    tests: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rules: dict[str, Rule] = {}
        for rule in self.definitions:
            self.rules.setdefault(rule.id, rule)
            self.scenarios.setdefault(rule.id, [])
            self.tests.setdefault(rule.id, [])

    def add(self, kind: str, rules: Iterable[str], ref: str) -> None:
        table = self.scenarios if kind == "scenario" else self.tests
        for rule in rules:
            refs = table.setdefault(rule, [])
            if ref not in refs:
                refs.append(ref)

    def refs(self, rule: str) -> list[str]:
        return self.scenarios.get(rule, []) + self.tests.get(rule, [])

    @staticmethod
    def judges(rule: str) -> list[str]:
        """The catalogue's verdicts that judge `rule` ("P3 at-least-once"), in catalogue order."""
        return [f"{e.id} {e.title}" for e in CATALOGUE.values() if rule in e.rules]

    def uncovered(self) -> list[str]:
        """Rules of the book that no scenario and no test names."""
        return [r for r in self.rules if not self.refs(r)]

    def undefined(self) -> list[str]:
        """Ids a scenario or test names that the book does not define."""
        named = {r for r in (*self.scenarios, *self.tests) if self.refs(r)}
        return sorted(named - set(self.rules), key=_number)

    def duplicates(self) -> list[str]:
        """Ids the book defines more than once (a link could reach only one)."""
        ids = [rule.id for rule in self.definitions]
        return sorted({i for i in ids if ids.count(i) > 1}, key=_number)

    def problems(self) -> list[str]:
        """Why the gate fails, one line each; empty when it passes."""
        out = []
        if not self.rules:
            out.append(f"no rules: {RULE_BOOK} " + ("defines none" if self.book else "not found"))
        if self.uncovered():
            out.append("named by nothing: " + ", ".join(self.uncovered()))
        if self.undefined():
            out.append(f"named but not defined in {RULE_BOOK}: " + ", ".join(self.undefined()))
        if self.duplicates():
            out.append(f"defined more than once in {RULE_BOOK}: " + ", ".join(self.duplicates()))
        return out

    @property
    def ok(self) -> bool:
        return not self.problems()

    def _rule_lines(self, rule_id: str) -> list[str]:
        n_scenarios, n_tests = len(self.scenarios.get(rule_id, [])), len(self.tests.get(rule_id, []))
        counts = f"{rule_id:<4} {n_scenarios:>2} scenarios {n_tests:>3} tests"
        rule = self.rules.get(rule_id)
        if rule is None:
            lines = [f"{counts}   <- NOT DEFINED in {RULE_BOOK}"]
        else:
            lines = [f"{counts}   {rule.link}" + ("   <- NOT COVERED" if not self.refs(rule_id) else ""),
                     f"     {rule.summary()}"]
        lines += [f"       {ref}" for ref in self.refs(rule_id)]
        judges = self.judges(rule_id)
        return lines + ([f"     judged by {', '.join(judges)}"] if judges else [])

    def format(self) -> str:
        """The whole listing: every rule with the scenarios and tests naming it, then the summary line."""
        lines = [f"rules: {self.book}" if self.book else f"rules: no {RULE_BOOK} found"]
        for rule_id in [*self.rules, *self.undefined()]:
            lines += self._rule_lines(rule_id)
        return "\n".join(lines + [self.summary()])

    def summary(self) -> str:
        """One line: how many rules are covered, and what is missing, undefined or defined twice."""
        missing, undefined = self.uncovered(), self.undefined()
        summary = f"{len(self.rules) - len(missing)}/{len(self.rules)} rules covered"
        if missing:
            summary += f"; missing: {', '.join(missing)}"
        if undefined:
            summary += f"; named but not defined in {RULE_BOOK}: {', '.join(undefined)}"
        if self.duplicates():
            summary += f"; defined more than once: {', '.join(self.duplicates())}"
        if not self.rules:
            summary += f"; no rules in {RULE_BOOK}"
        return summary


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def scan_scenarios(matrix: Matrix, root: Path, scenario_dir: str = "scenarios") -> None:
    """Add every `rules:` of scenarios/**/*.yaml (files that do not parse are `lint`'s business)."""
    for path in sorted((root / scenario_dir).rglob("*.y*ml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, OSError, UnicodeDecodeError):
            continue
        if isinstance(data, dict) and isinstance(data.get("rules"), list):
            rules = [r for r in data["rules"] if isinstance(r, str)]
            matrix.add("scenario", rules, f"{_rel(path, root)} ({data.get('name', '?')})")


def _marker_rules(decorators: list[ast.expr]) -> list[str]:
    """R-ids in `rules(...)` marker calls (pytest.mark.rules("R1"), mark.rules, a list of marks)."""
    found: list[str] = []
    for node in decorators:
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "rules":
                found += [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    return found


def _test_file_refs(path: Path, root: Path) -> list[tuple[list[str], str]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, OSError, UnicodeDecodeError):
        return []
    rel = _rel(path, root)
    module_rules = rules_in_text(ast.get_docstring(tree))
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in stmt.targets):
            module_rules += _marker_rules([stmt.value])
    refs = [(module_rules, rel)] if module_rules else []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                own = _marker_rules(node.decorator_list) + rules_in_text(ast.get_docstring(node))
                if own:
                    refs.append((own, f"{rel}::{prefix}{node.name}"))
                visit(node.body, f"{prefix}{node.name}::")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                own = _marker_rules(node.decorator_list) + rules_in_text(ast.get_docstring(node))
                if own:
                    refs.append((own, f"{rel}::{prefix}{node.name}"))

    visit(tree.body, "")
    return refs


def _is_test_file(path: Path) -> bool:
    return path.name.startswith("test_") or path.name.endswith("_test.py")


def scan_tests(matrix: Matrix, root: Path, test_dir: str = "tests") -> None:
    """Add the rules every test module under tests/ (at any depth) names."""
    for path in sorted((root / test_dir).rglob("*.py")):
        if _is_test_file(path):
            for rules, ref in _test_file_refs(path, root):
                matrix.add("test", rules, ref)


def build_matrix(root: Path | str = ".") -> Matrix:
    """The matrix of a repository checkout: its rule book, scenarios/ and tests/ under root."""
    root = Path(root)
    book = find_rule_book(root)
    definitions = parse_rules(book.read_text(encoding="utf-8")) if book else []
    matrix = Matrix(definitions, Path(_rel(book, root)) if book else None)
    scan_scenarios(matrix, root)
    scan_tests(matrix, root)
    return matrix
