"""Keep a run: copy its directory to a report location and write the HTML report.

Shared by the pytest plugin (`--sim-report`) and `python -m simulator run
--report DIR`. The report writer (`simulator.report.html.write_run_report`) is
another module's job; it is called only when it exists, and a failure inside
it never hides the run's verdict.
"""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path
from typing import Optional

from simulator.result import RunResult


def publish_run(result: RunResult, out_dir: Path) -> Optional[str]:
    """Copy result.run_dir to out_dir (replacing it) and write the report; return a problem, or None."""
    out_dir = Path(out_dir)
    if Path(result.run_dir).resolve() != out_dir.resolve():
        shutil.rmtree(out_dir, ignore_errors=True)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        if Path(result.run_dir).is_dir():
            shutil.copytree(result.run_dir, out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        reporting = importlib.import_module("simulator.report.html")
    except ImportError:
        return None
    writer = getattr(reporting, "write_run_report", None)
    if writer is None:
        return None
    try:
        writer(result, out_dir)
    except Exception as exc:  # the verdict matters more than the page
        return f"write_run_report failed: {exc!r}"
    return None
