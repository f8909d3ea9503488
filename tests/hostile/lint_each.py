"""Lint each scenario file in its own forked process and write one JSON record per file: the lint
exit code and output, any traceback that escaped, the seconds the lint took, and the peak memory
(resident set) of that process, as `wait4` reports it.

Run by test_hostile_scenarios.py as `python lint_each.py OUT.json TIMEOUT_S FILE...`. The imports
happen once, before the forks: a child starts as a fresh lint process would be after importing,
and its peak counts everything it holds. An address-space limit keeps a regression (an alias bomb
that expands again) from taking the machine down, and a child past TIMEOUT_S is killed: either
way the record says so and the test fails.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import resource
import signal
import sys
import tempfile
import time
import traceback

from simulator import cli

ADDRESS_SPACE_LIMIT = 2 << 30  # far above the 200 MB the test allows; only a runaway reaches it


def _child(path: str, out_path: str) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, hard))
    out, err = io.StringIO(), io.StringIO()
    started = time.perf_counter()
    rc, escaped = None, None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(["lint", path])
    except BaseException:  # noqa: BLE001 - recorded: the test fails on any traceback
        escaped = traceback.format_exc()
    record = {"rc": rc, "stdout": out.getvalue(), "stderr": err.getvalue(), "traceback": escaped,
              "seconds": round(time.perf_counter() - started, 3)}
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump(record, handle)


def lint_in_child(path: str, timeout_s: float) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as tmp:
        out_path = tmp.name
    pid = os.fork()
    if pid == 0:
        try:
            _child(path, out_path)
        finally:
            os._exit(0)
    deadline = time.monotonic() + timeout_s
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.005)
    try:
        with open(out_path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        record = {"rc": None, "stdout": "", "stderr": "", "traceback": f"no record (exit status {status})",
                  "seconds": None}
    os.unlink(out_path)
    record["peak_mb"] = round(usage.ru_maxrss / 1024, 1)
    return record


def main(argv: list[str]) -> None:
    out, timeout_s, files = argv[0], float(argv[1]), argv[2:]
    records = {path: lint_in_child(path, timeout_s) for path in files}
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(records, handle)


if __name__ == "__main__":
    main(sys.argv[1:])
