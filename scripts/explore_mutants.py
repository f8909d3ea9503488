#!/usr/bin/env python3
"""How good is exploration alone at finding real bugs? The mutant catalogue, without scenario files.

For each mutant of scripts/mutation_check.py (the same copies, the same one
edit, the same shadowing of the installed packages), run

    python -m simulator explore --seed 0 --budget 2m --max-failures 1

in the mutated copy: no scenario file is involved, only generated worlds.
A mutant is FOUND when a generated run fails; the table gives the time to
the first failure (wall time spent running seeds), the failing check, the
size of the shrunk scenario (processes/sessions/steps) and whether the
written file reproduces the failure when run alone. `--baseline` first runs
the unmutated copy: anything it finds is a false alarm, and the table means
little until it finds nothing.

    python scripts/explore_mutants.py                      # every mutant, 2 minutes each
    python scripts/explore_mutants.py --budget 30s -k cap-7 -k stale-90s
    python scripts/explore_mutants.py --json reports/explore-mutants.json

The working tree is copied once at the start (later edits do not leak into
a half-done table) and never touched.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutation_check as mc  # noqa: E402  (a sibling script, not a package)


def explore_in(repo: Path, budget: str, size: str, timeout: float) -> dict:
    """Run one exploration campaign in `repo`; its JSON summary (or a `problem`)."""
    summary = repo / "explore-summary.json"
    cmd = [sys.executable, "-m", "simulator", "explore", "--seed", "0", "--budget", budget, "--max-failures", "1",
           "--size", size, "--out", str(repo / "found"), "--json", str(summary)]
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


def row_of(mutant: mc.Mutant, result: dict) -> dict:
    failures = result.get("failures") or []
    first = failures[0] if failures else {}
    shrunk = first.get("shrunk", {})
    return {
        "id": mutant.id, "rule": mutant.rule, "bug": mutant.bug, "found": bool(failures),
        "problem": result.get("problem"), "check": first.get("check"), "seed": first.get("seed"),
        "first_failure_s": result.get("first_failure_s"), "runs": result.get("runs"),
        "shrunk": "/".join(map(str, shrunk.get("after", []))) or None,
        "from": "/".join(map(str, shrunk.get("before", []))) or None,
        "reproduced": first.get("reproduced"), "message": (first.get("message") or "")[:160],
        "equivalent": mutant.equivalent,
    }


def print_table(rows: list[dict], budget: str) -> None:
    print()
    print("| mutant | rule | found | first failure | check | shrunk to (proc/sess/steps) | runs | note |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        when = f"{r['first_failure_s']:.0f}s" if r["first_failure_s"] is not None else "-"
        note = r["problem"] or (("reproduces" if r["reproduced"] else "does not reproduce alone") if r["found"] else "")
        if r["equivalent"] and not r["found"]:
            note = f"equivalent: {r['equivalent']}"
        print(f"| {r['id']} | {r['rule']} | {'yes' if r['found'] else 'no'} | {when} | {r['check'] or '-'} | "
              f"{r['shrunk'] or '-'} | {r['runs'] if r['runs'] is not None else '-'} | "
              f"{note.splitlines()[0] if note else ''} |")
    found = sum(r["found"] for r in rows)
    real = [r for r in rows if not r["equivalent"]]
    print()
    print(f"found by exploration alone ({budget} per mutant from seed 0): {found}/{len(rows)}"
          + (f"; without equivalent mutants {sum(r['found'] for r in real)}/{len(real)}"
             if len(real) != len(rows) else ""))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", dest="only", action="append", default=[], help="only this mutant id (repeatable)")
    ap.add_argument("--budget", default="2m", help="exploration budget per mutant (default 2m)")
    ap.add_argument("--size", default="default", choices=("small", "default"), help="world size (default: default)")
    ap.add_argument("--baseline", action="store_true", help="first explore the unmutated copy (must find nothing)")
    ap.add_argument("--json", default=None, help="write the rows as JSON here (updated after every mutant)")
    args = ap.parse_args(argv)
    mutants = [m for m in mc.MUTANTS if not args.only or m.id in args.only]
    timeout = 60 * 30
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="explore-mutants-") as tmp:
        base = mc._copy(Path(tmp))
        mc._probe(base)
        if args.baseline:
            result = explore_in(base, args.budget, args.size, timeout)
            print(f"baseline (unmutated): {len(result.get('failures') or [])} failure(s) in {result.get('runs')} runs "
                  f"{result.get('problem') or ''}", flush=True)
            for f in result.get("failures") or []:
                print(f"  FALSE ALARM seed {f['seed']} {f['check']}: {f['message'][:200]}", flush=True)
        for m in mutants:
            repo = Path(tmp) / f"m-{m.id}"
            shutil.copytree(base, repo, symlinks=True)
            try:
                mc.apply(repo, m)
            except SystemExit as exc:
                rows.append(row_of(m, {"problem": str(exc)}))
            else:
                rows.append(row_of(m, explore_in(repo, args.budget, args.size, timeout)))
            shutil.rmtree(repo, ignore_errors=True)
            r = rows[-1]
            print(f"{m.id:28} {m.rule:4} {'FOUND' if r['found'] else 'missed':7} "
                  f"{r['check'] or '':6} {r['first_failure_s'] or 0:6.0f}s  shrunk {r['shrunk'] or '-':9} "
                  f"runs {r['runs']}  {r['problem'] or r['message'][:90]}", flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps(rows, indent=2), encoding="utf-8")
    print_table(rows, args.budget)
    return 0


if __name__ == "__main__":
    sys.exit(main())
