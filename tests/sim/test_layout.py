"""The tree is the architecture: imports point one way, functions stay short.

An import graph is built with `ast` over `thatch_core/` and `simulator/`,
counting every import statement wherever it stands (a function-level import
hides a cycle from Python's loader, not from this test).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import repo

PACKAGES = ("thatch_core", "simulator")
MAX_FUNCTION_LINES = 60

# Who may import whom inside simulator/, by first component after `simulator.`.
# The leaf vocabulary (clock, protocol, history, events, result, design) is open to all.
LEAVES = {"clock", "protocol", "history", "events", "result", "design", "verdicts", "replies"}
ALLOWED = {
    "scenario": {"sut"},
    "child": set(),
    # the system under test's naming, bun and capabilities (no thatch_core in it)
    "sut": set(),
    "harness": {"child", "scenario", "sut"},
    "engine": {"child", "scenario", "sut"},
    "checks": {"scenario", "sut"},
    "report": {"scenario", "sut"},
    "explore": {"scenario", "api", "sut"},
}
# The one part that drives thatch_core: the fake hosts run its runtime, tools and hooks. Every
# other part judges it or builds its world, and states the design itself (simulator/design.py),
# so the judged cannot move its own yardstick.
DRIVES_CORE = "harness"
# The one module that binds the fake hosts to the engine (SystemUnderTest): the composition root.
BINDS_CORE = "simulator.api"


def _modules(root: Path) -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in (root / pkg).rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _targets(module: str, path: Path, node: ast.AST, known: dict[str, Path]) -> list[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            here = here[: len(here) - (node.level - 1)]
            base = ".".join(here + ([node.module] if node.module else []))
        subs = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in known]
        names = subs + ([base] if len(subs) < len(node.names) else [])
    out = []
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.append(name)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> the project modules it imports (anywhere in its body)."""
    known = _modules(root)
    graph = {}
    for module, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[module] = {t for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                         for t in _targets(module, path, node, known)}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


@pytest.fixture(scope="module")
def graph():
    return import_graph(repo.ROOT)


def test_no_import_cycles(graph):
    assert cycles(graph) == []


def test_the_cycle_finder_finds_a_lazy_cycle(tmp_path):
    pkg = tmp_path / "simulator"
    pkg.mkdir()
    (tmp_path / "thatch_core").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from simulator.b import x\n")
    (pkg / "b.py").write_text("def x():\n    from simulator import a\n")
    assert cycles(import_graph(tmp_path)) == [["simulator.a", "simulator.b"]]


def _area(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "simulator" and len(parts) > 1 else None


def test_imports_point_one_way(graph):
    wrong = []
    for module, targets in sorted(graph.items()):
        area = _area(module)
        if area not in ALLOWED:
            continue
        for target in sorted(targets):
            other = _area(target)
            if target.startswith("simulator") and other not in LEAVES and other != area \
                    and other not in ALLOWED[area]:
                wrong.append(f"{module} -> {target}")
    assert wrong == []


def test_only_the_harness_imports_thatch_core(graph):
    """R14, R31, R22, R33: the sampler, the checkers, the engine and the rest state the design's
    staleness, ids, caps and hop limit themselves; only the fake hosts call thatch_core."""
    wrong = [f"{m} -> {t}" for m, ts in sorted(graph.items())
             if m.startswith("simulator") and _area(m) != DRIVES_CORE
             for t in sorted(ts) if t.startswith("thatch_core")]
    assert wrong == []


def test_nothing_but_the_composition_root_reaches_thatch_core_through_the_harness(graph):
    """R14, R31, R22, R33: the engine (its sampler included) and the checkers load no thatch_core
    code even indirectly; simulator.api alone binds the fake hosts into the run."""
    wrong = [f"{m} -> {t}" for m, ts in sorted(graph.items())
             if m.startswith("simulator") and _area(m) != DRIVES_CORE and m != BINDS_CORE
             for t in sorted(ts) if _area(t) == DRIVES_CORE]
    assert wrong == []


def test_importing_any_module_outside_the_harness_loads_no_thatch_core():
    """R14, R31, R22, R33: every module but the fake hosts (api, the CLI, the pytest plugin and
    the explore judge included) imports without thatch_core; only a run loads it, by name."""
    modules = sorted(m for m in _modules(repo.ROOT) if m.startswith("simulator") and _area(m) != DRIVES_CORE
                     and not m.endswith("__main__"))
    probe = ("import importlib, sys\n"
             f"for m in {modules!r}:\n"
             "    importlib.import_module(m)\n"
             "    core = sorted(k for k in sys.modules if k.split('.')[0] == 'thatch_core')\n"
             "    if core:\n"
             "        sys.exit(f'{m} loads {core[0]}')\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=repo.ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_leaf_modules_import_only_leaves(graph):
    wrong = [f"{m} -> {t}" for m, ts in graph.items() if _area(m) in LEAVES
             for t in ts if t.startswith("simulator") and _area(t) not in LEAVES]
    assert wrong == []


def test_thatch_core_knows_nothing_of_the_simulator(graph):
    assert [m for m, ts in graph.items()
            if m.startswith("thatch_core") and any(t.startswith("simulator") for t in ts)] == []


def test_no_function_is_longer_than_sixty_lines():
    long = []
    for path in sorted(_modules(repo.ROOT).values()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(repo.ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_forks_use_multiprocess_not_the_stdlib_beside_it():
    stdlib = []
    for module, path in sorted(_modules(repo.ROOT).items()):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            stdlib += [f"{module}: {n}" for n in names if n.split(".")[0] == "multiprocessing"]
    assert stdlib == []
