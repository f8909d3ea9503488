"""thatch-sim (or python -m simulator): run, lint and scaffold scenarios; the schema, the rule matrix, the bench.

examples:
  thatch-sim run scenarios/delivery/crash-between-wake-and-stamp.yaml --seed 7
  thatch-sim run tests/failing_scenarios/renudge-never-comes.yaml --report out/renudge
  thatch-sim lint scenarios
  thatch-sim new basic/first-send
  thatch-sim schema --check
  thatch-sim matrix --check -v
  thatch-sim texts
  thatch-sim bench --quick
  thatch-sim compare scenarios/ratecap/ping-pong-three-hours.yaml --policies thatch,qoder

exit codes:
  0    ok
  1    a scenario failed, or lint, matrix --check or schema --check found a problem
  2    bad usage, or a scenario file that does not load
  3    the run outlived its wall budget (run --wall-budget); its run directory is kept
  130  interrupted (Ctrl-C); a run's directory is kept
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Callable, Optional, Union

from simulator.api import run_scenario
from simulator.engine.orchestrator import SimulationTimeout
from simulator.engine.window import ENGINES
from simulator import compare, design
from simulator.explore import cli as explore_cli
from simulator.matrix import build_matrix
from simulator.report.publish import publish_run
from simulator.report.text import format_failure, verdict_table
from simulator.result import RunResult
from simulator.scenario.cost import warn_if_costly
from simulator.scenario.loader import SCHEMA_HEADER, ScenarioError, display_path, exclusion_reason, load_file
from simulator.scenario.positions import place_verdicts
from simulator.sut import Sut, SutError
from simulator.sut.capabilities import choose_sut, sut_argument
from simulator.scenario.schema import SCHEMA_PATH, schema_text, write_schema

PROG = "thatch-sim"
DISTRIBUTION = "thatch-chat-sim"
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_WALL_BUDGET, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
DEFAULT_WALL_BUDGET_S = 120.0
BENCH_SCRIPT = Path("bench") / "bench.py"
CHECKOUT = Path(__file__).resolve().parents[1]  # the repository, for an editable install
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def _progress_printer(stream=sys.stderr) -> tuple[Optional[Callable[[int, int], None]], Callable[[], None]]:
    """A progress callback that stays quiet for short runs and prints at most once a second after.

    Only on a terminal: a `\r`-rewritten line is noise in a log file or CI output."""
    state = {"start": time.perf_counter(), "last": 0.0, "shown": False}
    if not stream.isatty():
        return None, lambda: None

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
            state["shown"] = False

    return progress, finish


def _run_dir(given: Optional[str], name: str) -> Optional[Path]:
    """The run's directory: `--run-dir` (new or empty), else a fresh one under the system temp dir."""
    if given is None:
        return Path(tempfile.mkdtemp(prefix=f"thatch-sim-{name}-"))
    run_dir = Path(given)
    if run_dir.is_file() or (run_dir.is_dir() and any(run_dir.iterdir())):
        print(f"{run_dir} is not an empty directory — give --run-dir a new or empty one", file=sys.stderr)
        return None
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir


def _guarded_run(spec, run_dir: Path, seed: int, wall_budget_s: float,
                 engine: Optional[str] = None) -> Union[RunResult, int]:
    """The run's result; or, when the wall guard fires or Ctrl-C comes, one line on stderr and the exit code."""
    progress, finish = _progress_printer()
    try:
        try:
            return run_scenario(spec, run_dir=run_dir, seed=seed, wall_timeout_s=wall_budget_s, progress=progress,
                                engine=engine)
        finally:
            finish()
    except SimulationTimeout as exc:
        reason = " ".join(str(exc).split())
        print(f"{PROG} run: {reason}; run dir kept: {run_dir} (raise the budget with --wall-budget S)", file=sys.stderr)
        return EXIT_WALL_BUDGET
    except KeyboardInterrupt:
        print(f"{PROG} run: interrupted {spec.name} seed={seed}; run dir kept: {run_dir}", file=sys.stderr)
        return EXIT_INTERRUPTED


def _show_result(result: RunResult, loaded, report: Optional[str], keep: bool) -> int:
    """The verdict table, the failure story or where the kept run is; a passing run not kept is removed."""
    place_verdicts(result.verdicts, loaded)
    print(verdict_table(result))
    if report:
        problem = publish_run(result, Path(report))
        if problem:
            print(problem, file=sys.stderr)
    if not result.ok:
        print()
        print(format_failure(result, file=loaded.file, name=loaded.spec.name, report_dir=report))
        return EXIT_FAILED
    if keep:
        print(f"run dir: {result.run_dir}" + (f"  report: {report}" if report else ""))
    else:
        shutil.rmtree(result.run_dir, ignore_errors=True)
        if report:
            print(f"report: {report}")
    return EXIT_OK


def _chosen_sut(given: Optional[str]) -> Optional[Sut]:
    """`--sut` (simulator.sut.capabilities.choose_sut), or None after printing why it cannot be used."""
    try:
        return choose_sut(given)
    except SutError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return None


def cmd_run(args: argparse.Namespace) -> int:
    try:
        loaded = load_file(args.file)
    except ScenarioError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    spec = loaded.spec
    seed = spec.seed if args.seed is None else args.seed
    sut = _chosen_sut(args.sut)
    if sut is None:
        return EXIT_USAGE
    run_dir = _run_dir(args.run_dir, spec.name)
    if run_dir is None:
        return EXIT_USAGE
    print(f"running {spec.name} seed={seed} on {sut.name} in {run_dir}", flush=True)
    result = _guarded_run(spec, run_dir, seed, args.wall_budget, args.engine)
    if isinstance(result, int):
        return result
    return _show_result(result, loaded, args.report, keep=args.keep or args.run_dir is not None)


def _scenario_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            # a file whose first line excludes it is no scenario (D-plugin-13)
            files += sorted(p for p in path.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file()
                            and exclusion_reason(p) is None)
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
        except Exception as exc:  # noqa: BLE001 - one file's failure never stops the others (D-loader-8)
            problems.append(f"{file}:1: cannot be loaded ({type(exc).__name__}: {exc})")
            continue
        head = header_problem(path, path.read_text(encoding="utf-8-sig"))
        if head:
            problems.append(f"{file}:1: {head}")
        warn_if_costly(loaded)
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
# Check it with `thatch-sim lint {path}`, run it with
# `thatch-sim run {path}`.

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
        print(f"{name!r} is not a scenario name — write kebab-case: lowercase letters, digits and dashes",
              file=sys.stderr)
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
        print(f"{SCHEMA_PATH}: "
              + ("up to date" if same else "differs from spec.Scenario — run `thatch-sim schema --write`"))
        return 0 if same else 1
    sys.stdout.write(text)
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    matrix = build_matrix(args.root)
    # --check is a gate: its log gets the one summary line; the listing is for a reader (-v)
    print(matrix.format() if args.verbose or not args.check else matrix.summary())
    return EXIT_FAILED if args.check and not matrix.ok else EXIT_OK


def bench_script() -> Optional[Path]:
    """bench/bench.py of the working directory, else of the checkout this package runs from."""
    for base in (Path.cwd(), CHECKOUT):
        if (base / BENCH_SCRIPT).is_file():
            return base / BENCH_SCRIPT
    return None


def cmd_bench(args: argparse.Namespace) -> int:
    path = bench_script()
    if path is None:
        print(f"no {BENCH_SCRIPT} here or in {CHECKOUT} — run from the repository root", file=sys.stderr)
        return EXIT_USAGE
    spec = importlib.util.spec_from_file_location("bench_main", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "main"):
        print(f"{path} has no main()", file=sys.stderr)
        return EXIT_USAGE
    try:
        # always a list: main(None) would read sys.argv, whose first argument is the word `bench`
        rc = module.main(list(args.rest))
    except SystemExit as exc:  # the bench's own argument parser: --help, or a usage error
        return exc.code if isinstance(exc.code, int) else EXIT_OK if exc.code is None else EXIT_FAILED
    return rc if isinstance(rc, int) else EXIT_OK


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help="the scenario YAML file")
    p.add_argument("--seed", type=int, default=None, metavar="N", help="run with seed N instead of the file's `seed:`")
    p.add_argument("--report", metavar="DIR", help="copy the run directory to DIR and write its HTML report there")
    p.add_argument("--keep", action="store_true",
                   help="keep the run directory when the run passes (a failing run's is always kept)")
    p.add_argument("--run-dir", metavar="DIR", help="run in DIR (new or empty; kept) instead of a fresh temp directory")
    p.add_argument("--wall-budget", type=float, default=DEFAULT_WALL_BUDGET_S, metavar="S",
                   help=f"stop the run after S seconds of wall time, exit {EXIT_WALL_BUDGET} "
                        f"(default {DEFAULT_WALL_BUDGET_S:g})")
    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="serial dispatch engine: lockstep (one round trip per agenda entry) or windowed (one per "
                        "window, D-sim-23); default $THATCH_SIM_ENGINE, else windowed")
    sut_argument(p)


def _lint_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="*", metavar="PATH", help="scenario files or directories (default scenarios)")


def _new_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", metavar="NAME", help="NAME, THEME/NAME, or a path ending in .yaml")
    p.add_argument("--theme", default="misc", metavar="THEME", help="the scenarios/ subdirectory (default misc)")


def _schema_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="write the committed schema file")
    group.add_argument("--check", action="store_true", help="exit 1 if the committed file is stale")


def _matrix_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", action="store_true",
                   help="exit 1 if a rule of docs/rules.md is named by nothing or a named id is not defined there; "
                        "prints the summary line only")
    p.add_argument("-v", "--verbose", action="store_true", help="with --check, print the whole listing too")
    p.add_argument("--root", default=".", metavar="DIR", help="repository root (default .)")


def _texts_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("words", nargs="*", metavar="WORD",
                   help="only the texts whose key, surface, occasion or text holds every WORD (any case)")


def cmd_texts(args: argparse.Namespace) -> int:
    """Print the reference of every text the system shows (simulator.design.SHOWN_TEXTS)."""
    words = [w.lower() for w in args.words]
    chosen = [t for t in design.SHOWN_TEXTS
              if all(w in " ".join((t.key, t.surface, t.when, t.shows)).lower() for w in words)]
    if not chosen:
        print(f"no text holds {' '.join(args.words)!r}", file=sys.stderr)
        return 1
    print(design.texts_reference(chosen), end="")
    return 0


@dataclass(frozen=True)
class Command:
    """One subcommand: its help line, its examples, its arguments and what it does."""

    name: str
    help: str
    examples: tuple[str, ...]
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    passthrough: bool = False  # its arguments are another program's (bench): handed on unparsed


COMMANDS: tuple[Command, ...] = (
    Command("run", "run one scenario and print its verdicts",
            ("thatch-sim run scenarios/delivery/one-wake-many-senders.yaml", "thatch-sim run FILE --seed 7 --keep",
             "thatch-sim run FILE --run-dir /tmp/one-wake --wall-budget 600", "thatch-sim run FILE --engine lockstep"),
            _run_arguments, cmd_run),
    Command("lint", "validate scenario files and directories: every error, as FILE:LINE",
            ("thatch-sim lint", "thatch-sim lint scenarios/delivery my-scenario.yaml"), _lint_arguments, cmd_lint),
    Command("new", "scaffold a commented scenario",
            ("thatch-sim new first-send", "thatch-sim new basic/first-send", "thatch-sim new path/to/x.yaml"),
            _new_arguments, cmd_new),
    Command("schema", "print, write or check the scenario JSON Schema",
            ("thatch-sim schema", "thatch-sim schema --check", "thatch-sim schema --write"),
            _schema_arguments, cmd_schema),
    Command("matrix", "each design rule with the scenarios and tests that name it",
            ("thatch-sim matrix", "thatch-sim matrix --check", "thatch-sim matrix --check -v"),
            _matrix_arguments, cmd_matrix),
    Command("texts", "every text the system shows (tool replies, refusals, hook lines, wakes, turn ends, echoes)",
            ("thatch-sim texts", "thatch-sim texts hook", "thatch-sim texts later page"), _texts_arguments, cmd_texts),
    Command("explore", explore_cli.HELP, explore_cli.EXAMPLES, explore_cli.arguments, explore_cli.run),
    Command("compare", compare.HELP, compare.EXAMPLES, compare.arguments, compare.run),
    Command("bench", "the speed benchmark, bench/bench.py (its arguments follow)",
            ("thatch-sim bench", "thatch-sim bench --quick", "thatch-sim bench --help"), lambda p: None, cmd_bench,
            passthrough=True),
)


def package_version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    description, _, details = __doc__.partition("\n\n")
    parser = argparse.ArgumentParser(prog=PROG, description=description, epilog=details,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"{PROG} {package_version()}")
    sub = parser.add_subparsers(dest="command_name", required=True, metavar="COMMAND")
    for command in COMMANDS:
        p = sub.add_parser(command.name, help=command.help, description=command.help,
                           epilog="examples:\n" + "\n".join(f"  {e}" for e in command.examples),
                           formatter_class=argparse.RawDescriptionHelpFormatter, add_help=not command.passthrough)
        command.arguments(p)
        p.set_defaults(command=command)
    return parser


def main(argv: Optional[list[str]] = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if rest and not args.command.passthrough:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    args.rest = rest
    try:
        return args.command.run(args)
    except KeyboardInterrupt:
        print(f"{PROG} {args.command.name}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
