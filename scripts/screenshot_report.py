#!/usr/bin/env python3
"""Render a run report (index.html) to a PNG with headless Chromium.

    python scripts/screenshot_report.py REPORT_DIR_OR_HTML OUT.png [--size 1400,1000]
    python scripts/screenshot_report.py --example OUT.png      # the hand-built failing run

Chromium runs with networking features off and a throwaway profile, so the
screenshot also shows that the page needs nothing from the network. Install
it with `apt-get install -y chromium` when /usr/bin/chromium is missing.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "chromium", "google-chrome")


def find_chromium() -> str:
    for cand in CHROMIUM_CANDIDATES:
        path = cand if cand.startswith("/") and Path(cand).exists() else shutil.which(cand)
        if path:
            return path
    raise SystemExit("chromium not found: apt-get install -y chromium")


def screenshot(html: Path, png: Path, size: str = "1400,1000", timeout: float = 60.0) -> Path:
    """Write a PNG of `html` rendered at `size` (width,height in CSS px); return the PNG path."""
    html, png = Path(html).resolve(), Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="report-shot-") as profile:
        cmd = [
            find_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", f"--user-data-dir={profile}", f"--screenshot={png}",
            f"--window-size={size}", html.as_uri(),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0 or not png.exists():
        raise SystemExit(f"chromium failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return png


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?", help="a report directory or its index.html")
    ap.add_argument("out", help="PNG to write")
    ap.add_argument("--example", action="store_true", help="render the hand-built failing run instead")
    ap.add_argument("--long", action="store_true", help="with --example: the 24-hour variant")
    ap.add_argument("--size", default="1400,1000", help="window size WIDTH,HEIGHT (default 1400,1000)")
    args = ap.parse_args(argv)
    if args.example:
        sys.path.insert(0, str(ROOT / "tests"))
        from reportkit import example_result, long_example
        from simulator.report.html import write_run_report

        out_dir = Path(tempfile.mkdtemp(prefix="report-example-"))
        result = (long_example if args.long else example_result)(out_dir / "run")
        html = write_run_report(result, out_dir / "report")
    elif args.report:
        html = Path(args.report)
        html = html / "index.html" if html.is_dir() else html
    else:
        ap.error("give a report path or --example")
    print(screenshot(html, Path(args.out), args.size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
