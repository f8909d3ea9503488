"""`python -m simulator`: run, lint, scaffold, schema, matrix, bench.

    run FILE [--seed N] [--report DIR]   one scenario; verdict table; exit 1 on failure
    lint [PATHS...]                      validate files/dirs (default scenarios/); every error; exit 1 if any
    new NAME [--theme T]                 scaffold scenarios/<theme>/NAME.yaml (or NAME as a .yaml path)
    schema [--write | --check]           print (or write, or compare) the JSON Schema
    matrix [--check] [--root DIR]        rule -> scenarios and tests; --check: exit 1 if a rule has none or an id is undefined
    bench [ARGS...]                      bench/bench.py's main()

Exit codes: 0 ok, 1 a failure or finding, 2 bad usage or a file that does not load.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

from simulator.api import run_scenario
from simulator.matrix import build_matrix
from simulator.report.publish import publish_run
from simulator.report.text import format_failure, verdict_table
from simulator.scenario.loader import SCHEMA_HEADER, ScenarioError, display_path, load_file
from simulator.scenario.schema import SCHEMA_PATH, schema_text, write_schema

_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def _progress_printer(stream=sys.stderr) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A progress callback that stays quiet for short runs and prints at most once a second after."""
    state = {"start": time.perf_counter(), "last": 0.0, "shown": False}

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - state["start"] < 1.0 or now - state["last"] < 1.0:
            return
        state["last"], state["shown"] = now, True
        pct = f" ({100 * done // total}%)" if total else ""
        stream.write(f"\r  running: {done}/{total}{pct} after {now - state['start']:.0f}s")
        stream.flush()

    def finish() -> None:
        if state["shown"]:
            stream.write("\n")

    return progress, finish


def cmd_run(args: argparse.Namespace) -> int:
    try:
        loaded = load_file(args.file)
    except ScenarioError as exc:
        print(exc, file=sys.stderr)
        return 2
    spec = loaded.spec
    seed = spec.seed if args.seed is None else args.seed
    run_dir = Path(tempfile.mkdtemp(prefix=f"sim-{spec.name}-"))
    progress, finish = _progress_printer()
    try:
        result = run_scenario(spec, run_dir=run_dir, seed=seed, progress=progress)
    finally:
        finish()
    print(verdict_table(result))
    report = None
    if args.report:
        problem = publish_run(result, Path(args.report))
        report = args.report
        if problem:
            print(problem, file=sys.stderr)
    if not result.ok:
        print()
        print(format_failure(result, file=loaded.file, name=spec.name, report_dir=report))
    else:
        print(f"run dir: {result.run_dir}" + (f"  report: {report}" if report else ""))
    return 0 if result.ok else 1


def _scenario_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
        else:
            files.append(path)
    return files


def header_problem(path: Path, text: str) -> Optional[str]:
    """Why the file's first line is not the schema comment pointing at the committed schema, or None."""
    expected = os.path.relpath(SCHEMA_PATH.absolute(), path.absolute().parent)
    first = text.splitlines()[0] if text else ""
    if not first.startswith(SCHEMA_HEADER):
        return f"missing schema comment — start the file with `{SCHEMA_HEADER}{expected}`"
    target = (path.resolve().parent / first[len(SCHEMA_HEADER):].strip()).resolve()
    if target != SCHEMA_PATH.resolve():
        return f"the schema comment points at {first[len(SCHEMA_HEADER):].strip()} — write `{SCHEMA_HEADER}{expected}`"
    return None


def lint_paths(paths: list[str]) -> list[str]:
    """Every problem of every scenario file under paths, as printable lines."""
    problems: list[str] = []
    names: dict[str, str] = {}
    for path in _scenario_files(paths):
        file = display_path(path)
        if not path.exists():
            problems.append(f"{file}: no such file — give a scenario .yaml file or a directory")
            continue
        try:
            loaded = load_file(path, display=file)
        except ScenarioError as exc:
            problems += [e.format() for e in exc.errors]
            continue
        head = header_problem(path, path.read_text(encoding="utf-8"))
        if head:
            problems.append(f"{file}:1: {head}")
        other = names.setdefault(loaded.spec.name, file)
        if other != file:
            line = loaded.positions.line_of(("name",))[0]
            problems.append(f"{file}:{line}: name: scenario name `{loaded.spec.name}` is also used by {other} "
                            "— give each scenario its own name (reports are filed by name)")
    return problems


def cmd_lint(args: argparse.Namespace) -> int:
    paths = args.paths or ["scenarios"]
    files = _scenario_files(paths)
    problems = lint_paths(paths)
    for line in problems:
        print(line)
    print(f"{len(files)} scenario file(s), {len(problems)} problem(s)")
    return 1 if problems else 0


SCAFFOLD = """{header}
# A scenario: the world (processes and their sessions), a timeline of steps,
# and what must hold. Field reference: docs/authoring-scenarios.md.
# Check it with `python -m simulator lint {path}`, run it with
# `python -m simulator run {path}`.

name: {name}
story: >-
  alice sends bob one message; bob is idle, so within a poll cycle bob gets a
  single wake prompt naming alice, and reads the mail.
rules: [R9, R18, R20]          # the design rules this scenario covers
seed: 0                        # the one seeded random generator (names, ids, bodies)
duration: 10m                  # the scripted phase; a fault-free drain follows
# markers: [slow]              # pytest markers (slow, race)
# properties: all              # or a list: [P1, P3]
# reaches: [re-nudge]          # situations that must happen, or the run fails "not reached"

processes:
  - id: h1                     # the author's label; steps refer to it
    kind: opencode             # opencode | claude-code | cursor
    project: demo
    sessions:
      - id: alice
      - id: bob
        agent: reader          # reader | ping-pong | silent (or a mapping: kind, turn, busy, ...)

steps:
  - at: 1m
    send: {{from: alice, to: bob, body: "ready for review"}}
    expect: {{ok: true}}
  # - at: 5m
  #   kill: {{process: h1}}     # faults: kill, crash, sleep, resume, restart, fork, lock

expect:
  - wakes: {{session: bob, count: 1}}
  - unread: {{session: bob, count: 0}}
"""


def _scaffold_target(name: str, theme: str) -> Path:
    if name.endswith((".yaml", ".yml")):
        return Path(name)
    if "/" in name:
        theme, name = name.rsplit("/", 1)
    return Path("scenarios") / theme / f"{name}.yaml"


def cmd_new(args: argparse.Namespace) -> int:
    target = _scaffold_target(args.name, args.theme)
    name = target.stem
    if not _NAME.match(name):
        print(f"{name!r} is not a scenario name — write kebab-case: lowercase letters, digits and dashes", file=sys.stderr)
        return 2
    if target.exists():
        print(f"{target} already exists — pick another name or edit it", file=sys.stderr)
        return 1
    target.parent.mkdir(parents=True, exist_ok=True)
    header = SCHEMA_HEADER + os.path.relpath(SCHEMA_PATH.absolute(), target.absolute().parent)
    target.write_text(SCAFFOLD.format(header=header, name=name, path=target.as_posix()), encoding="utf-8")
    print(target)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    text = schema_text()
    if args.write:
        print(write_schema())
        return 0
    if args.check:
        same = SCHEMA_PATH.exists() and SCHEMA_PATH.read_text(encoding="utf-8") == text
        print(f"{SCHEMA_PATH}: " + ("up to date" if same else "differs from spec.Scenario — run `python -m simulator schema --write`"))
        return 0 if same else 1
    sys.stdout.write(text)
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    matrix = build_matrix(args.root)
    print(matrix.format())
    return 1 if args.check and not matrix.ok else 0


def cmd_bench(args: argparse.Namespace) -> int:
    path = Path("bench/bench.py")
    if not path.exists():
        print("no bench/bench.py here — run from the repository root", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("bench_main", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "main"):
        print("bench/bench.py has no main()", file=sys.stderr)
        return 2
    rc = module.main(args.rest) if args.rest else module.main()
    return rc if isinstance(rc, int) else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m simulator", description="thatch chat simulator")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run one scenario and print its verdicts")
    p.add_argument("file")
    p.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    p.add_argument("--report", metavar="DIR", help="keep the run directory (and report) in DIR")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("lint", help="validate scenario files and directories")
    p.add_argument("paths", nargs="*")
    p.set_defaults(func=cmd_lint)
    p = sub.add_parser("new", help="scaffold a commented scenario")
    p.add_argument("name", help="NAME, THEME/NAME, or a path ending in .yaml")
    p.add_argument("--theme", default="misc", help="the scenarios/ subdirectory (default misc)")
    p.set_defaults(func=cmd_new)
    p = sub.add_parser("schema", help="print the scenario JSON Schema")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="write the committed schema file")
    group.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")
    p.set_defaults(func=cmd_schema)
    p = sub.add_parser("matrix", help="rule -> scenarios and tests that name it")
    p.add_argument("--check", action="store_true", help="exit 1 if a rule of docs/rules.md is named by nothing or a named id is not defined there")
    p.add_argument("--root", default=".", help="repository root (default .)")
    p.set_defaults(func=cmd_matrix)
    p = sub.add_parser("bench", help="run bench/bench.py's main()")
    p.add_argument("rest", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_bench)
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
