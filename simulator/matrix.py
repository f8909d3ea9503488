"""The spec matrix: which scenarios and tests name each design rule (R1..R36).

A scenario names rules in its `rules:` list. A test names them with
`@pytest.mark.rules("R9", ...)` (on the function, its class, or a module
`pytestmark`) or in the docstring of a test function, a Test class or the
module; a range like `R18-R23` in a docstring names every rule in it. Tests
are read with `ast`, never imported, so a broken test file cannot hide its
coverage and the matrix costs nothing to build.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

import yaml

RULE_IDS = tuple(f"R{i}" for i in range(1, 37))
_RULE = re.compile(r"\bR(3[0-6]|[12]\d|[1-9])\b")
_RANGE = re.compile(r"\bR(3[0-6]|[12]\d|[1-9])\s*(?:-|–|\.\.)\s*R(3[0-6]|[12]\d|[1-9])\b")


def rules_in_text(text: Optional[str]) -> list[str]:
    """R-ids named in free text, ranges expanded, in R-order without repeats."""
    if not text:
        return []
    found = {int(m.group(1)) for m in _RULE.finditer(text)}
    for m in _RANGE.finditer(text):
        low, high = sorted((int(m.group(1)), int(m.group(2))))
        found.update(range(low, high + 1))
    return [f"R{n}" for n in sorted(found)]


@dataclass
class Matrix:
    """rule -> the scenarios and tests that name it."""

    scenarios: dict[str, list[str]] = field(default_factory=lambda: {r: [] for r in RULE_IDS})
    tests: dict[str, list[str]] = field(default_factory=lambda: {r: [] for r in RULE_IDS})

    def add(self, kind: str, rules: Iterable[str], ref: str) -> None:
        table = self.scenarios if kind == "scenario" else self.tests
        for rule in rules:
            if rule in table and ref not in table[rule]:
                table[rule].append(ref)

    def uncovered(self) -> list[str]:
        """Rules that no scenario and no test names."""
        return [r for r in RULE_IDS if not self.scenarios[r] and not self.tests[r]]

    def format(self) -> str:
        lines = []
        for rule in RULE_IDS:
            refs = self.scenarios[rule] + self.tests[rule]
            lines.append(f"{rule:<4} {len(self.scenarios[rule]):>2} scenarios {len(self.tests[rule]):>3} tests"
                         + ("   <- NOT COVERED" if not refs else ""))
            lines += [f"       {ref}" for ref in refs]
        missing = self.uncovered()
        lines.append(f"{len(RULE_IDS) - len(missing)}/{len(RULE_IDS)} rules covered"
                     + (f"; missing: {', '.join(missing)}" if missing else ""))
        return "\n".join(lines)


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

    def visit(body: list[ast.stmt], prefix: str, inherited: list[str]) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                own = _marker_rules(node.decorator_list) + rules_in_text(ast.get_docstring(node))
                if own:
                    refs.append((own, f"{rel}::{prefix}{node.name}"))
                visit(node.body, f"{prefix}{node.name}::", inherited + own)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                own = _marker_rules(node.decorator_list) + rules_in_text(ast.get_docstring(node))
                if own:
                    refs.append((own, f"{rel}::{prefix}{node.name}"))

    visit(tree.body, "", module_rules)
    return refs


def scan_tests(matrix: Matrix, root: Path, test_dir: str = "tests") -> None:
    for path in sorted((root / test_dir).glob("*.py")):
        for rules, ref in _test_file_refs(path, root):
            matrix.add("test", rules, ref)


def build_matrix(root: Path | str = ".") -> Matrix:
    """The matrix of a repository checkout (scenarios/ and tests/ under root)."""
    root = Path(root)
    matrix = Matrix()
    scan_scenarios(matrix, root)
    scan_tests(matrix, root)
    return matrix
