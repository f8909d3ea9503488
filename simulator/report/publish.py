"""Keep a run: copy its directory to a report location and write the HTML report.

Shared by the pytest plugin (`--sim-report`) and `python -m simulator run
--report DIR`. A failure inside the report writer never hides the run's
verdict: it comes back as a problem to show next to it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Optional

from simulator.report.html import write_run_report
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
        write_run_report(result, out_dir)
    except Exception as exc:  # the verdict matters more than the page
        return f"write_run_report failed: {exc!r}"
    return None
