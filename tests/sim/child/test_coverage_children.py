"""Coverage sees code that only ever runs inside forked `multiprocess` children.

The simulator's harnesses run in children forked with `multiprocess`, which
end with `os._exit` (and some die by SIGKILL on purpose). These tests run a
tiny program under `coverage run` with the project's own [tool.coverage.run]
settings (only `source` and `data_file` pointed at a temp dir), combine, and
read the JSON report:

- a function called only in a fork-context child is reported as covered;
- a child that saved its data (`Coverage.current().save()`) and then
  SIGKILLed itself keeps its lines;
- the control: without `patch = fork, _exit` the child-only lines are missed,
  so the first check is not vacuous (docs/pitfalls.md, "coverage of
  multiprocess children").
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path
import repo


ROOT = repo.ROOT

MODULE = textwrap.dedent('''\
    import os
    import signal


    def child_only(x):
        doubled = x * 2
        return doubled + 1


    def killed_child(x):
        import coverage
        bumped = x + 3
        cov = coverage.Coverage.current()
        if cov is not None:
            cov.save()
        os.kill(os.getpid(), signal.SIGKILL)


    def never_called():
        return 42
''')

MAIN = textwrap.dedent('''\
    import multiprocess as mp
    import childmod

    ctx = mp.get_context("fork")
    p = ctx.Process(target=childmod.child_only, args=(3,))
    p.start(); p.join()
    assert p.exitcode == 0, p.exitcode
    q = ctx.Process(target=childmod.killed_child, args=(3,))
    q.start(); q.join()
    assert q.exitcode == -9, q.exitcode
''')


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(v)


def _run_under_coverage(tmp_path: Path, *, patch: bool) -> dict[str, list[int]]:
    """Run MAIN under coverage with the project settings; return {function: executed lines}."""
    (tmp_path / "childmod.py").write_text(MODULE)
    (tmp_path / "main.py").write_text(MAIN)
    run = dict(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["coverage"]["run"])
    run.update(source=["childmod"], data_file="data/.coverage")
    if not patch:
        run.pop("patch", None)
    rc = tmp_path / "rc.toml"
    rc.write_text("[tool.coverage.run]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in run.items()))
    (tmp_path / "data").mkdir()

    def cov(command: str, *args: str) -> None:
        # --rcfile must come before a `run` target, or it is passed to the script.
        proc = subprocess.run([sys.executable, "-m", "coverage", command, f"--rcfile={rc}", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    cov("run", "main.py")
    cov("combine")
    cov("json", "-o", "cov.json")
    report = json.loads((tmp_path / "cov.json").read_text())
    executed = set(report["files"]["childmod.py"]["executed_lines"])
    lines = MODULE.splitlines()

    def body(name: str, upto: str) -> list[int]:
        start = next(k for k, ln in enumerate(lines, 1) if ln.startswith(f"def {name}("))
        end = next(k for k, ln in enumerate(lines, 1) if k > start and upto in ln)
        return [k for k in range(start + 1, end + 1) if k in executed or lines[k - 1].strip()]

    return {
        name: [k for k in body(name, upto) if k in executed] + [-k for k in body(name, upto) if k not in executed]
        for name, upto in (("child_only", "return doubled"), ("killed_child", "cov.save()"),
                           ("never_called", "return 42"))
    }


def test_fork_child_only_function_is_covered(tmp_path):
    got = _run_under_coverage(tmp_path, patch=True)
    # Every statement of child_only ran in the child only, and is reported.
    assert got["child_only"] and all(k > 0 for k in got["child_only"]), got
    # The SIGKILLed child saved first: everything up to the save is covered.
    assert got["killed_child"] and all(k > 0 for k in got["killed_child"]), got
    # And an uncalled function stays uncovered (the report is not just "all lines").
    assert all(k < 0 for k in got["never_called"]), got


def test_without_fork_patch_children_are_missed(tmp_path):
    got = _run_under_coverage(tmp_path, patch=False)
    assert all(k < 0 for k in got["child_only"]), got
