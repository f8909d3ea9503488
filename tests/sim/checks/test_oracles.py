"""The judges are independent of the judged: every yardstick a checker (or the engine's
sampler) uses is stated by the simulator itself, in simulator/design.py.

An ast scan over simulator/checks/ and simulator/engine/observer.py: no import of
thatch_core anywhere in a module (a function-level import counts), no module-level
restatement of a number or format simulator/design.py already states (two copies drift
apart), and no bare time span in the code (60_000, 900_000, 3_600_000 ... come from
design.py by name). tests/sim/test_design.py holds design.py itself to the design's text.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import repo
from simulator import design

JUDGES = (sorted((repo.ROOT / "simulator" / "checks").glob("*.py"))
          + [repo.ROOT / "simulator" / "engine" / "observer.py"])
DESIGN_NAMES = {name for name in vars(design) if name.isupper()}
# Below this an integer is a count, an index or a conversion (ms per second), not a span of the design.
SPAN_MS = 10_000


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def core_imports(tree: ast.Module) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.split(".")[0] == "thatch_core"]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "thatch_core":
            out.append(node.module)
    return out


def restated(tree: ast.Module) -> list[str]:
    """Module-level names assigned here that simulator/design.py defines."""
    names = []
    for node in tree.body:
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, ast.AnnAssign) else [])
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id in DESIGN_NAMES]
    return names


def bare_spans(tree: ast.Module) -> list[int]:
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and type(n.value) is int and n.value >= SPAN_MS]


@pytest.mark.rules("R14", "R18", "R22", "R31", "R33")
@pytest.mark.parametrize("path", JUDGES, ids=lambda p: str(p.relative_to(repo.ROOT)))
def test_a_judge_takes_its_yardsticks_from_the_design_module(path):
    """R14, R18, R22, R31, R33: no checker or sampler imports thatch_core, restates a design
    number or format of its own, or writes a time span as a bare literal."""
    tree = _tree(path)
    assert core_imports(tree) == [], "a judge must not share logic with the system under test"
    assert restated(tree) == [], "state it once, in simulator/design.py"
    assert bare_spans(tree) == [], "name the span in simulator/design.py"


def test_the_scan_sees_what_it_forbids(tmp_path):
    """The scan itself: a lazy thatch_core import, a restated constant and a bare span are all found."""
    bad = tmp_path / "bad.py"
    bad.write_text("STALE_MS = 60_000\n\n"
                   "def f():\n    from thatch_core.staleness import is_stale\n    return 900_000\n")
    tree = _tree(bad)
    assert core_imports(tree) == ["thatch_core.staleness"]
    assert restated(tree) == ["STALE_MS"]
    assert bare_spans(tree) == [60_000, 900_000]
