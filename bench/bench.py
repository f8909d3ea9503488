"""Simulator benchmark: virtual/wall speedup, engine overhead, scaling with processes, the suite.

    python -m simulator bench            # the reference run (24 virtual hours, 16 x 4 sessions)
    python -m simulator bench --quick    # a CI smoke version of everything
    python bench/bench.py [--quick]      # the same, without the CLI

Prints, side by side in one run:
- the reference run: 16 opencode harness processes hosting 64 sessions that
  mail each other for 24 virtual hours; wall time and virtual/wall speedup
  (target >= 15,000x) under each engine: `windowed` (serial dispatch; each
  process runs its own timers up to the next instant anything crosses a
  process boundary, one round trip per window: D-sim-23), `lockstep` (serial
  dispatch, one round trip per agenda entry) and `concurrent` dispatch (the
  race mode: commands due at one instant go out as one wave);
- the floors (bench/floors.py): the same SQL statements issued straight
  through sqlite3 in ONE process (a connection per simulated process; the
  statement mix replayed from the run's history: heartbeats and pending
  notification queries per poll, sends, reads, delivered stamps), the same
  statements from N free-running forked processes on one WAL file, and the
  code under test alone (thatch_core's runtimes, pollers and stores for the
  same sessions, polls and mail, driven in one process under a patched
  clock, no simulator); and every ratio: forked / one process, code under
  test / raw SQL (target <= 1.5x), harness = run / code under test (targets:
  windowed <= 1.3x, lockstep <= 2x), run / raw SQL (target <= 3x);
- the cost per simulated poll for 1, 2, 4, 8, 16, 32 processes over a
  shorter virtual span, per engine (target: flat within 1.5x);
- what each connection setting of the real ThatchDB (synchronous FULL, foreign
  keys on) costs thatch_core's sends, one setting changed at a time;
- the scenario suite's wall time on 2 cores (`pytest -n 2 scenarios -q` in a
  subprocess; target <= 20 s); `--no-suite` skips it, `--no-scaling` the scaling rows.

`--record` adds what it printed, dated, with the command, the core count and
the load, at the top of bench/RESULTS.md (the figures' history: nothing else
writes that file). Numbers depend on the machine and its load: run it on a
quiet one.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import io
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simulator import Scenario, run_scenario  # noqa: E402
from simulator.sut import CORE, THATCH_CORE, Sut, parse_sut, sut_from_env  # noqa: E402
from simulator.sut.seed_checkout import extract_checkout, find_seed  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import floors  # noqa: E402

SESSIONS_PER_PROC = 4
HOUR = 3_600_000
# column -> (dispatch mode, engine): the two serial engines are deterministic; concurrent is the race mode
MODES = {"windowed": ("serial", "windowed"), "lockstep": ("serial", "lockstep"),
         "concurrent": ("concurrent", "lockstep")}


def build(procs: int, virtual_ms: int, *, mail_every_ms: int = 600_000, seed: int = 1,
          dispatch: str = "serial") -> Scenario:
    """`procs` opencode processes x 4 reader sessions; one send every `mail_every_ms`."""
    processes = [{
        "id": f"h{p:02d}", "project": f"proj{p % 4}",
        "sessions": [{"id": f"s{p:02d}x{k}", "agent": "reader", "title": f"task {p}.{k}"}
                     for k in range(SESSIONS_PER_PROC)],
    } for p in range(procs)]
    labels = [s["id"] for p in processes for s in p["sessions"]]
    rng = random.Random(seed)
    steps = []
    for at in range(60_000, virtual_ms, mail_every_ms):
        a, b = rng.sample(labels, 2)
        steps.append({"at": at, "send": {"from": a, "to": b, "body": f"status at {at // 60_000} min"}})
    return Scenario.model_validate({
        "name": f"bench-{procs}" + ("" if dispatch == "serial" else f"-{dispatch}"), "seed": seed,
        "duration": virtual_ms, "drain": 0, "dispatch": dispatch, "processes": processes, "steps": steps,
    })


def run(spec: Scenario, root: Path, wall_timeout_s: float, engine: str = "lockstep", tag: str = "ref",
        sut: Sut = CORE):
    t0 = time.perf_counter()
    result = run_scenario(spec, run_dir=root / f"{tag}-{spec.name}-{engine}", sample_interval_ms=6 * HOUR, check=False,
                          wall_timeout_s=wall_timeout_s, engine=engine, sut=sut)
    return result, time.perf_counter() - t0


def real_sut(option: Optional[str], root: Path) -> Optional[Sut]:
    """The checkout the bench sets beside thatch_core: --sut, else $THATCH_SIM_SUT, else the seed-002 checkout
    (extracted under `root`, beside the runs); None for `--sut thatch-core` or when none is found."""
    sut = sut_from_env(option)
    if not sut.is_core or option == THATCH_CORE:
        return None if sut.is_core else sut
    seed = find_seed(ROOT)
    if seed is None:
        return None
    return parse_sut(str(extract_checkout(seed, root / "checkout-0.1.41")))


def print_real_sut(sut: Sut, core_wall: float, ref_procs: int, ref_ms: int, root: Path, wall_timeout_s: float) -> int:
    """The reference world (same seed, windowed) on the checkout, beside thatch_core's windowed column."""
    result, wall = run(build(ref_procs, ref_ms), root, wall_timeout_s, "windowed", tag="real", sut=sut)
    if result.error:
        print(f"reference run on {sut.name} failed: {result.error}", file=sys.stderr)
        return 1
    row("system under test", ("thatch-core", "checkout"), f"same world, same seed, windowed; checkout {sut.name}")
    row("wall time", (f"{core_wall:.2f} s", f"{wall:.2f} s"))
    row("speedup (virtual / wall)", (f"{ref_ms / 1000 / core_wall:,.0f}x", f"{ref_ms / 1000 / wall:,.0f}x"))
    row("checkout / thatch-core", ("1.00x", f"{ratio(wall, core_wall):.2f}x"), "the sidecar's whole cost")
    return 0


def statement_mix(result) -> Counter:
    """How much store work the run did, from what its history shows."""
    mix: Counter = Counter()
    for e in result.history:
        kind, data = e["kind"], e["data"]
        if kind == "poll":
            mix["pending_notifications"] += 1
            if data.get("hosted"):
                mix["heartbeat"] += 1
        elif kind == "wake":
            mix["mark_delivered"] += 1
        elif kind == "tool-result" and data.get("ok"):
            tool = str(data.get("tool", "")).removeprefix("thatch_chat_")
            if tool in ("send", "read"):
                mix[tool] += 1
    return mix


def reference(ref_procs: int, ref_ms: int, root: Path, wall_timeout_s: float) -> tuple[dict, dict]:
    """Each column's (dispatches, wall s, statement mix, floors) for the reference run, and
    the code under test alone (wall s and what it did)."""
    cols = {}
    raws: dict = {}
    for col, (dispatch, engine) in MODES.items():
        result, wall = run(build(ref_procs, ref_ms, dispatch=dispatch), root, wall_timeout_s, engine)
        if result.error:
            raise RuntimeError(f"reference run ({col}) failed: {result.error}")
        mix = statement_mix(result)
        key = tuple(sorted(mix.items()))
        if key not in raws:  # the same work costs the same raw SQL: measure each distinct mix once
            raws[key] = (floors.raw_sql(mix, ref_procs, root / f"raw{len(raws)}"),
                         floors.raw_sql_forked(mix, ref_procs, root / f"raw{len(raws)}"))
        # Keep the figures, not the run: a parent holding several 24-hour
        # histories makes every later fork (the scaling rows) pay for
        # copy-on-write of that heap.
        cols[col] = (result.dispatches, wall, mix, raws[key])
        del result
        gc.collect()
    core = floors.core_alone(ref_procs, ref_ms)
    return cols, {"wall": core[0], "did": core[1]}


def row(label, values, target=""):
    print(f"{label:<34}" + "".join(f"{v:>16}" for v in values) + (f"  {target}" if target else ""))


def print_reference(cols: dict, core: dict, ref_procs: int, ref_ms: int) -> None:
    speed = {m: ref_ms / 1000 / c[1] for m, c in cols.items()}
    raw = {m: c[3][0] for m, c in cols.items()}
    over = {m: ratio(c[1], raw[m]) for m, c in cols.items()}
    harness = {m: ratio(c[1], core["wall"]) for m, c in cols.items()}
    code = {m: ratio(core["wall"], raw[m]) for m in cols}

    def verdicts(ok):
        return ", ".join(f"{m} {'ok' if ok(m) else 'MISSED'}" for m in MODES)

    row("reference run", MODES, "target")
    row("", ("(deterministic)", "(deterministic)", "(race mode)"))
    row("processes x sessions", [f"{ref_procs} x {SESSIONS_PER_PROC}"] * len(MODES))
    row("virtual time", [f"{ref_ms / HOUR:g} h"] * len(MODES))
    row("dispatches", [cols[m][0] for m in MODES])
    row("wall time", [f"{cols[m][1]:.2f} s" for m in MODES])
    row("speedup (virtual / wall)", [f"{speed[m]:,.0f}x" for m in MODES],
        ">= 15000x " + verdicts(lambda m: speed[m] >= 15000))
    mixes = {m: ", ".join(f"{k}={v}" for k, v in sorted(cols[m][2].items())) for m in MODES}
    same = len(set(mixes.values())) == 1
    for m in (list(MODES)[:1] if same else MODES):
        print(f"{'statement mix' + ('' if same else f' ({m})'):<34}{'':>{16 * len(MODES)}}  {mixes[m]}")
    did = ", ".join(f"{k}={v}" for k, v in sorted(core["did"].items()))
    print(f"{'code under test alone did':<34}{'':>{16 * len(MODES)}}  {did}")
    row("raw SQL, one process", [f"{raw[m]:.2f} s" for m in MODES])
    row(f"raw SQL, {ref_procs} forked processes", [f"{cols[m][3][1]:.2f} s" for m in MODES],
        "free-running, one WAL file")
    row("code under test alone", [f"{core['wall']:.2f} s"] * len(MODES), "thatch_core, one process, no simulator")
    row("forked / one process (SQL)", [f"{ratio(cols[m][3][1], raw[m]):.2f}x" for m in MODES])
    row("code under test / raw SQL", [f"{code[m]:.2f}x" for m in MODES],
        "<= 1.5x " + ("ok" if code["windowed"] <= 1.5 else "MISSED"))
    row("harness (run / code under test)", [f"{harness[m]:.2f}x" for m in MODES],
        "windowed <= 1.3x " + ("ok" if harness["windowed"] <= 1.3 else "MISSED")
        + ", lockstep <= 2x " + ("ok" if harness["lockstep"] <= 2 else "MISSED"))
    row("overhead (run / raw SQL)", [f"{over[m]:.1f}x" for m in MODES],
        "<= 3x " + verdicts(lambda m: over[m] <= 3))
    base = cols["windowed"][1]
    row("wall time / windowed", [f"{cols[m][1] / base:.2f}x" for m in MODES])


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("inf")


def scaling(scale: tuple, scale_ms: int, root: Path, wall_timeout_s: float) -> None:
    """Microseconds of wall time per simulated poll, per engine, as the process count grows."""
    engines = ("windowed", "lockstep")
    print(f"scaling over {scale_ms / 60_000:g} virtual minutes, {SESSIONS_PER_PROC} sessions per process "
          f"(us of wall time per simulated poll; target: flat within 1.5x)")
    print(f"{'processes':>10}{'polls':>10}" + "".join(f"{e + ' us/poll':>20}" for e in engines))
    per_poll: dict = {e: [] for e in engines}
    for procs in scale:
        cells, polls = [], 0
        for engine in engines:
            res, w = run(build(procs, scale_ms), root, wall_timeout_s, engine, tag="scale")
            polls = statement_mix(res)["pending_notifications"]
            us = w / max(polls, 1) * 1e6
            per_poll[engine].append(us)
            cells.append(f"{us:>20.0f}" if res.error is None else f"{'error':>20}")
            del res
            gc.collect()
        print(f"{procs:>10}{polls:>10}" + "".join(cells))
    for engine, values in per_poll.items():
        spread = max(values) / min(values) if values and min(values) > 0 else float("inf")
        print(f"{engine} spread (max / min us per poll): {spread:.2f}x  {'ok' if spread <= 1.5 else 'MISSED'}")


def settings(root: Path, sends: int) -> None:
    """What each connection setting of the real ThatchDB costs thatch_core's sends (D-store-23)."""
    print(f"connection settings, {sends} sends in one process on the bench's scratch directory:")
    for label, rate in floors.settings_cost(root, sends):
        print(f"  {label:<22}{rate:>10.0f} sends/s")


def suite_wall() -> None:
    """The scenario suite on 2 cores, as CI runs it."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "scenarios", "-q", "-p", "no:cacheprovider"],
                          cwd=ROOT, capture_output=True, text=True, env={**os.environ})
    wall = time.perf_counter() - t0
    last = (proc.stdout.strip().splitlines() or ["(no output)"])[-1]
    print(f"scenario suite (pytest -n 2 scenarios): {wall:.1f} s wall, exit {proc.returncode}: {last}  "
          f"target <= 20 s {'ok' if wall <= 20 and proc.returncode == 0 else 'MISSED'}")


RESULTS = ROOT / "bench" / "RESULTS.md"
RESULTS_HEAD = """# Benchmark results

Written by `thatch-sim bench --record` (bench/bench.py), newest first: each
entry is one run's output as it printed it, with its command, machine and
load. What the rows mean and their targets: the docstring of bench/bench.py.
"""


class _Tee(io.StringIO):
    """Prints as usual and keeps a copy for --record."""

    def __init__(self, out) -> None:
        super().__init__()
        self.out = out

    def write(self, text: str) -> int:
        self.out.write(text)
        return super().write(text)

    def flush(self) -> None:
        self.out.flush()


def record(output: str, argv: list[str], path: Path = RESULTS) -> None:
    """Put one run's output, dated and described, at the top of `path`'s entries."""
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    command = " ".join(["thatch-sim bench", *argv])
    entry = (f"## {when}: `{command}`\n\n{os.cpu_count()} cores, load average {load} at the end.\n\n"
             "```\n" + output.strip("\n") + "\n```\n")
    old = path.read_text(encoding="utf-8") if path.exists() else RESULTS_HEAD
    head, _, entries = old.partition("\n## ")
    path.write_text(head.rstrip("\n") + "\n\n" + entry + ("\n## " + entries if entries else ""), encoding="utf-8")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--record" not in argv:
        return measure(argv)
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        status = measure(argv)
    if status == 0:
        record(tee.getvalue(), [a for a in argv if a != "--record"])
        print(f"recorded in {RESULTS.relative_to(ROOT)}")
    return status


def measure(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="shrink everything (CI smoke)")
    ap.add_argument("--no-suite", action="store_true", help="skip the scenario suite's wall time")
    ap.add_argument("--no-scaling", action="store_true", help="skip the scaling rows")
    ap.add_argument("--wall-timeout", type=float, default=900.0)
    ap.add_argument("--record", action="store_true", help="add the output, dated, to bench/RESULTS.md")
    ap.add_argument("--sut", default=None, metavar="PATH",
                    help="the checkout whose column stands beside thatch_core's on the reference world "
                         "(default $THATCH_SIM_SUT, else the seed-002 checkout; thatch-core: none)")
    opts = ap.parse_args(argv)
    ref_procs, ref_ms = (4, HOUR) if opts.quick else (16, 24 * HOUR)
    scale_ms = 10 * 60_000 if opts.quick else 2 * HOUR
    scale = (1, 2, 4) if opts.quick else (1, 2, 4, 8, 16, 32)
    with tempfile.TemporaryDirectory(prefix="thatch-bench-") as tmp:
        root = Path(tmp)
        checkout = real_sut(opts.sut, root)
        try:
            cols, core = reference(ref_procs, ref_ms, root, opts.wall_timeout)
        except RuntimeError as err:
            print(err, file=sys.stderr)
            return 1
        print_reference(cols, core, ref_procs, ref_ms)
        if checkout is not None:
            print()
            if print_real_sut(checkout, cols["windowed"][1], ref_procs, ref_ms, root, opts.wall_timeout):
                return 1
        if not opts.no_scaling:
            print()
            scaling(scale, scale_ms, root, opts.wall_timeout)
        print()
        settings(root, 200 if opts.quick else 1000)
    if not (opts.quick or opts.no_suite):
        print()
        suite_wall()
    return 0


if __name__ == "__main__":
    sys.exit(main())
