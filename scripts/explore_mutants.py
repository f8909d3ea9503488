#!/usr/bin/env python3
"""How good is exploration alone at finding real bugs? The mutant catalogue, without scenario files.

For each mutant of scripts/mutation_check.py (the same copies, the same one
edit, the same shadowing of the installed packages), run

    python -m simulator explore --seed 0 --budget 2m --max-failures 1 [--guided]

in the mutated copy: no scenario file is involved, only generated worlds.
`--mode plain` (the default), `guided` (coverage-guided, `--guided` for
short) or `both` (each mutant twice, the columns side by side);
`--jobs J` explores J mutants at once, each in its own copy (on a machine
with fewer cores than J each gets fewer seeds within its budget).
A mutant is FOUND when a generated run fails; the table gives the time to
the first failure (wall time spent running seeds), the failing check, the
size of the shrunk scenario (processes/sessions/steps) and whether the
written file reproduces the failure when run alone. `--baseline` first runs
the unmutated copy: anything it finds is a false alarm, and the table means
little until it finds nothing.

    python scripts/explore_mutants.py                      # every mutant, 2 minutes each
    python scripts/explore_mutants.py --budget 30s -k cap-7 -k stale-90s
    python scripts/explore_mutants.py --json reports/explore-mutants.json
    python scripts/explore_mutants.py --budget 90s --mode both --jobs 2 --markdown reports/explore-mutants.md
    python scripts/explore_mutants.py --budget 90s --baseline --report docs/explore-report.md   # the committed page

The working tree is copied once at the start (later edits do not leak into
a half-done table) and never touched.
"""

from __future__ import annotations

import argparse
import json
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutation_check as mc  # noqa: E402  (a sibling script, not a package)


MODES = ("plain", "guided")


def explore_in(repo: Path, budget: str, size: str, timeout: float, mode: str = "plain", shrink: bool = True) -> dict:
    """Run one exploration campaign in `repo`; its JSON summary (or a `problem`)."""
    summary = repo / f"explore-summary-{mode}.json"
    cmd = [sys.executable, "-m", "simulator", "explore", "--seed", "0", "--budget", budget, "--max-failures", "1",
           "--size", size, "--out", str(repo / f"found-{mode}"), "--json", str(summary)]
    cmd += ["--guided"] if mode == "guided" else []
    cmd += [] if shrink else ["--no-shrink"]
    started = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=repo, env=mc._env(repo), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"problem": f"no answer within {timeout:.0f}s", "wall_s": time.monotonic() - started}
    if not summary.exists():
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-8:])
        return {"problem": f"explore exited {done.returncode} without a summary:\n{tail}",
                "wall_s": time.monotonic() - started}
    out = json.loads(summary.read_text())
    out["wall_s"] = time.monotonic() - started
    return out


def row_of(mutant: mc.Mutant, result: dict, mode: str = "plain") -> dict:
    failures = result.get("failures") or []
    first = failures[0] if failures else {}
    shrunk = first.get("shrunk", {})
    return {
        "id": mutant.id, "mode": mode, "rule": mutant.rule, "bug": mutant.bug, "found": bool(failures),
        "branches": (result.get("coverage") or {}).get("branches"),
        "problem": result.get("problem"), "check": first.get("check"), "seed": first.get("seed"),
        "first_failure_s": result.get("first_failure_s"), "runs": result.get("runs"),
        "shrunk": "/".join(map(str, shrunk.get("after", []))) or None,
        "from": "/".join(map(str, shrunk.get("before", []))) or None,
        "reproduced": first.get("reproduced"), "message": (first.get("message") or "")[:160],
        "equivalent": mutant.equivalent,
    }


def _cells(r: dict) -> list[str]:
    when = f"{r['first_failure_s']:.0f} s" if r["first_failure_s"] is not None else "-"
    found = "**yes**" if r["found"] else ("no (equivalent)" if r["equivalent"] else "no")
    shrunk = f"{r['shrunk']} (from {r['from']})" if r["shrunk"] else "-"
    return [found, when, r["check"] or "-", shrunk, "-" if r["runs"] is None else str(r["runs"])]


def _note(r: dict) -> str:
    note = r["problem"] or ("" if not r["found"] or r["reproduced"] is not False else "does not reproduce alone")
    return note.splitlines()[0] if note else ""


def markdown_table(rows: list[dict], budget: str, modes: tuple[str, ...]) -> str:
    """The table of docs/explore-report.md: one row per mutant, one column group per mode."""
    by = {(r["id"], r["mode"]): r for r in rows}
    ids = list(dict.fromkeys(r["id"] for r in rows))
    group = ["found", "first failure", "check", "shrunk to (processes/sessions/steps)", "seeds run"]
    head = ["mutant", "rule"] + [f"{m}: {g}" if len(modes) > 1 else g for m in modes for g in group] + ["note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i in ids:
        cells, notes, rule = [], [], ""
        for m in modes:
            r = by.get((i, m))
            rule = r["rule"] if r else rule
            cells += _cells(r) if r else ["-"] * len(group)
            if r and _note(r):
                notes.append(f"{m}: {_note(r)}" if len(modes) > 1 else _note(r))
        lines.append("| " + " | ".join([i, rule] + cells + ["; ".join(notes)]) + " |")
    lines.append("")
    for m in modes:
        mine = [r for r in rows if r["mode"] == m]
        real = [r for r in mine if not r["equivalent"]]
        lines.append(f"{m}: found by exploration alone ({budget} per mutant from seed 0): "
                     f"{sum(r['found'] for r in mine)}/{len(mine)}"
                     + (f"; without equivalent mutants {sum(r['found'] for r in real)}/{len(real)}"
                        if len(real) != len(mine) else ""))
    return "\n".join(lines) + "\n"


def print_table(rows: list[dict], budget: str, modes: tuple[str, ...] = ("plain",)) -> None:
    print()
    print(markdown_table(rows, budget, modes))


def one_mutant(base: Path, tmp: Path, m: mc.Mutant, mode: str, args: argparse.Namespace, timeout: float) -> dict:
    """Explore mutant `m` in a copy of its own (removed after)."""
    repo = tmp / f"m-{m.id}-{mode}"
    shutil.copytree(base, repo, symlinks=True)
    try:
        mc.apply(repo, m)
    except SystemExit as exc:
        return row_of(m, {"problem": str(exc)}, mode)
    try:
        return row_of(m, explore_in(repo, args.budget, args.size, timeout, mode, args.shrink), mode)
    finally:
        shutil.rmtree(repo, ignore_errors=True)


def _baseline(base: Path, args: argparse.Namespace, modes: tuple[str, ...], timeout: float) -> None:
    for mode in modes:
        result = explore_in(base, args.budget, args.size, timeout, mode, args.shrink)
        print(f"baseline (unmutated, {mode}): {len(result.get('failures') or [])} failure(s) in {result.get('runs')} "
              f"runs {result.get('problem') or ''}", flush=True)
        for f in result.get("failures") or []:
            print(f"  FALSE ALARM seed {f['seed']} {f['check']}: {f['message'][:200]}", flush=True)


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", dest="only", action="append", default=[], help="only this mutant id (repeatable)")
    ap.add_argument("--budget", default="2m", help="exploration budget per mutant and mode (default 2m; e.g. 90s)")
    ap.add_argument("--size", default="default", choices=("small", "default"), help="world size (default: default)")
    ap.add_argument("--mode", choices=(*MODES, "both"), default=None, help="plain swarm (default), guided or both")
    ap.add_argument("--guided", action="store_true", help="short for --mode guided")
    ap.add_argument("--jobs", type=int, default=1, metavar="J", help="explore J mutants at once (default 1)")
    ap.add_argument("--baseline", action="store_true", help="first explore the unmutated copy (must find nothing)")
    ap.add_argument("--no-shrink", dest="shrink", action="store_false",
                    help="report each mutant's first failure without shrinking it (the whole catalogue in about "
                         "half an hour on 2 cores: shrinking can take minutes per found mutant)")
    ap.add_argument("--json", default=None, help="write the rows as JSON here (updated after every mutant)")
    ap.add_argument("--markdown", default=None, help="write the table as markdown here")
    ap.add_argument("--report", default=None, metavar="FILE",
                    help="also write a generated page with the table (docs/explore-report.md)")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error("--jobs must be 1 or more")
    if args.guided and args.mode not in (None, "guided"):
        ap.error("--guided and --mode disagree")
    mode = "guided" if args.guided else (args.mode or "plain")
    args.modes = MODES if mode == "both" else (mode,)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    mutants = [m for m in mc.MUTANTS if not args.only or m.id in args.only]
    timeout = 60 * 30
    rows: list[dict] = []
    lock = threading.Lock()

    def done(r: dict) -> None:
        with lock:
            rows.append(r)
            print(f"{r['id']:28} {r['mode']:6} {r['rule']:4} {'FOUND' if r['found'] else 'missed':7} "
                  f"{r['check'] or '':6} {r['first_failure_s'] or 0:6.0f}s  shrunk {r['shrunk'] or '-':9} "
                  f"runs {r['runs']}  {r['problem'] or r['message'][:90]}", flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")

    with tempfile.TemporaryDirectory(prefix="explore-mutants-") as tmp:
        base = mc._copy(Path(tmp))
        mc._probe(base)
        if args.baseline:
            _baseline(base, args, args.modes, timeout)
        work = [(m, mode) for m in mutants for mode in args.modes]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for future in [pool.submit(one_mutant, base, Path(tmp), m, mode, args, timeout) for m, mode in work]:
                done(future.result())
    order = {(m.id, mode): i for i, (m, mode) in enumerate(work)}
    rows.sort(key=lambda r: order[(r["id"], r["mode"])])
    print_table(rows, args.budget, args.modes)
    if args.markdown:
        Path(args.markdown).write_text(markdown_table(rows, args.budget, args.modes), encoding="utf-8")
    if args.report:
        mc.write_report(Path(args.report), "Exploration alone against the mutant catalogue", __doc__,
                        ["python scripts/explore_mutants.py", *(argv if argv is not None else sys.argv[1:])],
                        markdown_table(rows, args.budget, args.modes).splitlines())
    return 0


if __name__ == "__main__":
    sys.exit(main())
