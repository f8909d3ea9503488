"""Generate (or check) docs/real-thatch.md: the scenario library on thatch_core and on the seed-002 checkout.

The seed-002 checkout is thatch 0.1.41's own `src/chat.ts` (../shared/seeds/002_*.txt, extracted at run
time with the project's name pool), run by bun behind the sidecar. Every scenario runs on both systems
with its own seed; the page lists each scenario's verdicts side by side and, for every verdict that
differs, whether it is an era difference (the design moved since 0.1.41: the seed-000 line that says
so) or something else, from `CLASSIFY` below. A difference nothing in `CLASSIFY` explains is listed as
unexplained, and the check fails on it as on any change: both systems are deterministic for a seed,
so the page changes only when one of them does.

    python scripts/era_table.py --write        # run both, rewrite the page
    python scripts/era_table.py --check        # run both, exit 1 if the page is not what they give
    python scripts/era_table.py --check --core-json reports/verdicts-core.json   # reuse a library run
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulator.result import SUT_CHECK  # noqa: E402
from simulator.scenario.loader import load_file  # noqa: E402
from simulator.sut.seed_checkout import extract_checkout, find_seed  # noqa: E402

PAGE = ROOT / "docs" / "real-thatch.md"
SEED_000 = "seeds/000_78b05ed8c8c5f566.txt"
ERA = "era difference"
HARNESS = "harness limit"
BUG = "0.1.41 fails"
UNEXPLAINED = "unexplained"

# (check id pattern, message pattern on the 0.1.41 side, classification, why). First match wins.
CLASSIFY: tuple[tuple[str, str, str, str], ...] = (
    (r".", r"staleness at two missed beats", ERA,
     f"0.1.41 calls a session stale after 10 minutes; seed 000 after two missed beats, 60 s ({SEED_000}:112)"),
    (r".", r"assigned counter names", ERA,
     f"0.1.41 claims pool names; seed 000 assigns a pool base plus a counter, minted once ({SEED_000}:34)"),
    (r".", r"tombstones", ERA, f"0.1.41 has no leave tombstones; seed 000 has them ({SEED_000}:44)"),
    (r".", r"continuation", ERA, f"0.1.41 has no continuation adoption ({SEED_000}:106)"),
    (r".", r"prune", ERA, f"0.1.41 never prunes; seed 000 prunes silent auto rows after 7 days ({SEED_000}:34)"),
    (r".", r"host-pid anchors", ERA, "0.1.41 has no host-pid anchors (seed 000, the MCP identity section)"),
    (r".", r"topic refresh", ERA,
     f"0.1.41 has no refreshAutoTopic; seed 000 refreshes auto rows' topics on idle ({SEED_000}:34)"),
    (r".", r"machinery markers|split bodies|retry de-duplication", ERA,
     "0.1.41 predates the later design's retry de-duplication, split bodies and machinery markers "
     "(the thatch-later incidents reproduce their absence on thatch_core as expected failures)"),
    (r".", r"lacks 'The recipient is (stale|between)", ERA,
     f"0.1.41 calls the recipient active until 10 minutes of silence ({SEED_000}:112)"),
    (r".", r"\[sent\] to [A-Z][a-z]+ |\[registered\] [A-Z][a-z]+\b|\"from\":\"[A-Z][a-z]+\"", ERA,
     f"the reply names a claimed pool name where seed 000 assigns base-counter names ({SEED_000}:34)"),
    (r"^sut$", r"policy", ERA, "the scenario turns on thatch_core's own design options, which no checkout has"),
    (r"^fault#\d+$", r"never took effect", HARNESS,
     "the crash names a statement number of thatch_core's call; the checkout numbers its own statements "
     "(0.1.41's send runs three, outside any transaction), so the point is never reached there"),
    (r".", r"SQLITE_BUSY_SNAPSHOT", BUG,
     "0.1.41's broadcast reads its roster in a deferred transaction, so a write another process commits after "
     "that read makes its first insert fail at once (SQLITE_BUSY_SNAPSHOT), whatever the busy timeout: the real "
     "contention bug, which P15 judges"),
    (r".", r"database is locked|SQLITE_BUSY", BUG,
     "0.1.41 surfaces a busy database to the model: it has no retry once the busy timeout runs out, where "
     "thatch_core retries a whole atomic call (seed 000 calls concurrent access solved under WAL plus a busy "
     f"timeout, {SEED_000}); what P15 judges"),
    (r".", r"thatch-core: expected-fail.*\|\| 0\.1\.41: fail", ERA,
     "the incident reproduces on 0.1.41 as it does under seed 000's design, which it shares there (no paging: "
     "a host that clips a read loses the rest)"),
    (r"^fault#\d+$", r"DEADLOCK.*\|\| 0\.1\.41: pass", BUG,
     "thatch_core's BEGIN IMMEDIATE serialises the two calls (a deadlock verdict, by design); 0.1.41's deferred "
     "transaction lets the other write in, and its broadcast then fails (P15)"),
    (r".", r"0\.1\.41: (fail|not-reached): .*(wakes? by|re-nudge)", BUG,
     "0.1.41's poll cycle ends at a failed heartbeat (busy): its delivery waits for the next cycle, where "
     "thatch_core catches each step of the cycle and still delivers (R24)"),
    (r"^P11$", r"tombstone", ERA, f"the model predicts seed 000's leave tombstone; 0.1.41 writes none ({SEED_000}:44)"),
    (r"^P11$", r"name|register", ERA,
     f"the model predicts seed 000's assigned names and reclaim; 0.1.41 claims pool names ({SEED_000}:34)"),
    (r"^(P4|P8|reach:broadcast-skip)$", r"stale|skip", ERA,
     f"0.1.41 skips a broadcast recipient only after 10 minutes of silence ({SEED_000}:112)"),
)


def run_library(out: Path, checkout: Optional[Path]) -> None:
    """The whole scenario library with every verdict written to `out` (on `checkout`, else thatch_core)."""
    argv = [sys.executable, "-m", "pytest", "-q", "-n", "auto", "-p", "no:cacheprovider", "scenarios",
            "--sim-report", "never", "--sim-verdicts-json", str(out)]
    if checkout is not None:
        argv += ["--sim-sut", str(checkout)]
    subprocess.run(argv, cwd=ROOT, stdout=subprocess.DEVNULL, check=False)
    if not out.is_file():
        raise SystemExit(f"era table: the library run wrote no {out}")


def scenario_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def load(path: Path) -> dict[str, dict[str, tuple[str, str]]]:
    items = json.loads(path.read_text(encoding="utf-8"))["items"]
    return {scenario_of(node): {c: (status, message) for c, status, message in rows} for node, rows in items.items()}


def classify(check: str, message: str, fault_unfired: bool = False) -> tuple[str, str]:
    """`message`: both sides' verdicts, `thatch-core: ... || 0.1.41: ...`."""
    for check_re, message_re, kind, why in CLASSIFY:
        if re.search(check_re, check) and re.search(message_re, message, re.I):
            return kind, why
    if fault_unfired:
        return HARNESS, "a consequence of the scenario's crash fault, which never fired on the checkout"
    return UNEXPLAINED, "no known era difference explains it: a bug in one of the two, or a new change"


def unfired(diffs: list[tuple[str, str, str]]) -> bool:
    return any(re.match(r"fault#\d+$", check) and "never took effect" in r for check, _, r in diffs)


def short(text: str, limit: int = 140) -> str:
    flat = " ".join(text.split()).replace("|", "/")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def summary(verdicts: dict[str, tuple[str, str]]) -> str:
    if list(verdicts) == [SUT_CHECK]:
        return "n/a"
    if list(verdicts) == ["race"]:
        return "timing-dependent"
    failed = [c for c, (status, _) in verdicts.items() if status in ("fail", "not-reached")]
    return "pass" if not failed else "fail: " + ", ".join(failed)


def differences(core: dict[str, tuple[str, str]], real: dict[str, tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(check, thatch-core, 0.1.41) for each check whose status differs (a scenario not run: one row)."""
    if list(real) == [SUT_CHECK]:
        status, message = real[SUT_CHECK]
        return [(SUT_CHECK, "run", f"{status}: {message}")]
    out = []
    for check in dict.fromkeys([*core, *real]):
        c, r = core.get(check, ("absent", "")), real.get(check, ("absent", ""))
        if c[0] != r[0] and not (r[0] == "not-applicable" and c[0] in ("skipped", "not-applicable")):
            out.append((check, f"{c[0]}: {c[1]}" if c[1] else c[0], f"{r[0]}: {r[1]}" if r[1] else r[0]))
    return out


def timing_dependent(names) -> set[str]:
    """Scenarios with `dispatch: concurrent`: their calls overlap as the OS schedules them, so on a checkout
    (whose busy failures depend on that overlap) their verdicts differ from run to run."""
    out = set()
    for name in names:
        path = ROOT / name
        if path.is_file() and load_file(path).spec.dispatch == "concurrent":
            out.add(name)
    return out


def page(core: dict, real: dict) -> str:
    lines = ["# The scenario library on the real thatch 0.1.41",
             "",
             "Generated by `python scripts/era_table.py --write`; `bash scripts/main.sh` checks it with `--check`.",
             "Each scenario runs with its own seed on thatch_core and on the seed-002 checkout (thatch 0.1.41's",
             "own `src/chat.ts`, extracted from `../shared/seeds/002_*.txt`, run by bun in each harness",
             "process's sidecar). `n/a`: the checkout lacks a behaviour the scenario's rules need, so it is not",
             "run there. Each differing verdict is classified: an era difference (the design moved since",
             "0.1.41, with the seed-000 line that says so), a failure of 0.1.41 under the design it shares",
             "with seed 000, a harness limit, or unexplained.",
             ""]
    names = sorted(set(core) | set(real))
    racing = timing_dependent(names)
    real = {n: ({"race": ("timing-dependent", "")} if n in racing and list(v) != [SUT_CHECK] else v)
            for n, v in real.items()}
    diffs = {n: [] if n in racing else differences(core.get(n, {}), real.get(n, {})) for n in names}
    kinds: dict[str, int] = {}
    for n in names:
        for check, c, r in diffs[n]:
            kind, _ = classify(check, f"thatch-core: {c} || 0.1.41: {r}", unfired(diffs[n]))
            kinds[kind] = kinds.get(kind, 0) + 1
    counts = {s: sum(1 for n in names if summary(real.get(n, {})).startswith(s))
              for s in ("pass", "fail", "n/a", "timing")}
    lines += [f"{len(names)} scenarios. On 0.1.41: {counts['pass']} pass, {counts['fail']} fail, "
              f"{counts['n/a']} not applicable, {counts['timing']} timing-dependent (concurrent dispatch: "
              "the calls overlap as the OS schedules them, and so do the checkout's busy failures; listed, not "
              "pinned: `scenarios/races/` holds the replayable form of each race as an `interleave`). "
              "Differing verdicts: "
              + (", ".join(f"{v} {k}" for k, v in sorted(kinds.items())) or "none") + ".", "",
              "| scenario | thatch-core | 0.1.41 |", "|---|---|---|"]
    lines += [f"| `{n}` | {short(summary(core.get(n, {})), 80)} | {short(summary(real.get(n, {})), 80)} |"
              for n in names]
    lines += ["", "## Differences", ""]
    for n in names:
        if not diffs[n]:
            continue
        lines.append(f"### `{n}`")
        lines.append("")
        for check, c, r in diffs[n]:
            kind, why = classify(check, f"thatch-core: {c} || 0.1.41: {r}", unfired(diffs[n]))
            lines.append(f"- **{check}** ({kind}): {why}.")
            lines.append(f"  - thatch-core: {short(c)}")
            lines.append(f"  - 0.1.41: {short(r)}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help=f"rewrite {PAGE.relative_to(ROOT)}")
    mode.add_argument("--check", action="store_true", help="exit 1 if the committed page is not what the runs give")
    parser.add_argument("--core-json", default=None, metavar="FILE",
                        help="thatch_core's verdicts from an earlier library run (--sim-verdicts-json)")
    parser.add_argument("--real-json", default=None, metavar="FILE",
                        help="the seed-002 checkout's verdicts from an earlier library run")
    args = parser.parse_args(argv)
    seed = find_seed(ROOT)
    if seed is None:
        print("era table: not run: no ../shared/seeds/002_*.txt beside the repository", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="thatch-era-") as tmp:
        tmp = Path(tmp)
        core_json = Path(args.core_json) if args.core_json else tmp / "core.json"
        if not args.core_json:
            run_library(core_json, None)
        real_json = Path(args.real_json) if args.real_json else tmp / "real.json"
        if not args.real_json:
            run_library(real_json, extract_checkout(seed, tmp / "checkout-0.1.41"))
        text = page(load(core_json), load(real_json))
    if args.write:
        PAGE.write_text(text, encoding="utf-8")
        print(f"wrote {PAGE.relative_to(ROOT)}")
        return 0
    committed = PAGE.read_text(encoding="utf-8") if PAGE.is_file() else ""
    if committed == text:
        print(f"{PAGE.relative_to(ROOT)} is current")
        return 0
    sys.stdout.writelines(difflib.unified_diff(committed.splitlines(True), text.splitlines(True),
                                               "committed", "generated"))
    print(f"{PAGE.relative_to(ROOT)} differs from what the two systems give: rerun with --write and review the "
          "change (a new difference is an era difference, a bug in one of them, or a change to explain)",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
