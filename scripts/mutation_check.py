#!/usr/bin/env python3
"""Mutation check: how good is the scenario library at finding real bugs?

A small, dependency-free mutation runner. MUTANTS below is a hand-written list
of plausible bugs in thatch_core (each one exact snippet -> replacement, the
bug it models and the design rule it breaks). For each mutant the repository
is copied to a temp dir (without .git, reports, caches), the one edit is
applied (the snippet must occur exactly once, or the run stops loudly), and
``python -m pytest -q -n 2 -p no:cacheprovider scenarios`` (or ``tests`` with
``--tests``) runs with the copy as cwd and PYTHONPATH, so the copy's packages
shadow the installed editable ones (checked once per run: see _probe). A
mutant is KILLED when pytest fails and the failing items fail again when
rerun on the same mutant (a failure that does not reproduce is reported as
FLAKY and counts as survived).

    python scripts/mutation_check.py                 # every mutant against scenarios/
    python scripts/mutation_check.py --tests         # ... against tests/
    python scripts/mutation_check.py -k cap-7 -k stale-90s   # only these ids
    python scripts/mutation_check.py --list          # the mutants, nothing run
    python scripts/mutation_check.py --baseline --report docs/mutation-report.md   # the committed page

thatch_core in the working tree is never touched: edits happen in the copies.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IGNORE = shutil.ignore_patterns(".git", "reports", "__pycache__", "*.pyc", ".pytest_cache",
                                "*.egg-info", ".coverage*")


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str          # relative to the repository root
    original: str      # exact snippet; must occur exactly once
    replacement: str
    bug: str           # the real bug it models, one line
    rule: str          # the R-id it violates
    equivalent: str = ""  # why no observable behaviour can differ (judged after a run)


M = Mutant
MUTANTS: list[Mutant] = [
    M("stale-90s", "thatch_core/constants.py",
      "STALE_MS = 2 * POLL_INTERVAL_MS", "STALE_MS = 3 * POLL_INTERVAL_MS",
      "stale threshold 60 s -> 90 s (three missed beats)", "R14"),
    M("stale-at-60s", "thatch_core/staleness.py",
      "return now - seen > STALE_MS", "return now - seen >= STALE_MS",
      "exactly 60 s old already counts as stale", "R14"),
    M("renudge-strict-cutoff", "thatch_core/store.py",
      "AND (m.delivered_at IS NULL OR m.delivered_at <= ?)",
      "AND (m.delivered_at IS NULL OR m.delivered_at < ?)",
      "`<=` -> `<` in the re-nudge cutoff (re-nudge one poll late)", "R18"),
    M("renudge-never", "thatch_core/store.py",
      "AND (m.delivered_at IS NULL OR m.delivered_at <= ?)",
      "AND (m.delivered_at IS NULL)",
      "delivered mail is never re-nudged", "R21"),
    M("cap-7", "thatch_core/constants.py",
      "MAX_NUDGES_PER_HOUR = 6", "MAX_NUDGES_PER_HOUR = 7",
      "rate cap 6 -> 7 wake prompts per hour", "R22"),
    M("count-after-stamp", "thatch_core/poller.py",
      """        # Count before the stamp (R21): see the module docstring.
        self._record_nudge(recipient)
        try:
            self.store.mark_delivered([r.id for r in rows])
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat delivered-stamp for {recipient} failed: {err!r}")
""",
      """        try:
            self.store.mark_delivered([r.id for r in rows])
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat delivered-stamp for {recipient} failed: {err!r}")
            return
        self._record_nudge(recipient)
""",
      "the nudge is counted after a successful stamp (a failing stamp = uncounted wakes)", "R21"),
    M("unscoped-read-stamp", "thatch_core/store.py",
      """            for chunk in chunks([r[0] for r in rows]):
                claimed.update(x[0] for x in self.conn.execute(
                    f"UPDATE chat_messages SET read_at = ? WHERE id IN ({marks(len(chunk))})"
                    " AND read_at IS NULL RETURNING id", (now, *chunk)).fetchall())
""",
      """            claimed.update(x[0] for x in self.conn.execute(
                "UPDATE chat_messages SET read_at = ? WHERE to_session = ?"
                " AND read_at IS NULL RETURNING id", (now, session_id)).fetchall())
""",
      "chat_read re-derives its stamp (stamps mail that arrived after the select)", "R10"),
    M("broadcast-skips-mcp", "thatch_core/store.py",
      'if row.host_kind == "opencode" and is_stale(row, now_ms):',
      "if is_stale(row, now_ms):",
      "broadcast skips stale mcp rows too (between turns read as gone)", "R35"),
    M("broadcast-includes-sender", "thatch_core/store.py",
      'f"SELECT {ROW_COLS} FROM chat_sessions WHERE session_id != ? "',
      'f"SELECT {ROW_COLS} FROM chat_sessions WHERE session_id != ? OR 1 "',
      "broadcast fans out to the sender too", "R12"),
    M("deleted-no-tombstone", "thatch_core/runtime.py",
      """        \"\"\"session.deleted: leave at once (row + tombstone), stop hosting (R17).\"\"\"
        if self.enabled and _usable_id(session_id):
            self._leave(session_id)
""",
      """        \"\"\"session.deleted: leave at once (row + tombstone), stop hosting (R17).\"\"\"
        if self.enabled and _usable_id(session_id):
            with self._lock:
                self._gone.add(session_id)
                self._status.pop(session_id, None)
            self._hostset.drop(session_id)
            with self.store._lock:
                self.store.conn.execute("DELETE FROM chat_sessions WHERE session_id = ?",
                                        (session_id,))
""",
      "session.deleted deletes the row but writes no tombstone", "R7"),
    M("deleted-ignored", "thatch_core/runtime.py",
      """        \"\"\"session.deleted: leave at once (row + tombstone), stop hosting (R17).\"\"\"
        if self.enabled and _usable_id(session_id):
            self._leave(session_id)
""",
      """        \"\"\"session.deleted: leave at once (row + tombstone), stop hosting (R17).\"\"\"
        return
""",
      "session.deleted is ignored (the row lingers until prune)", "R17"),
    M("continue-picks-child", "thatch_core/runtime.py",
      'if not _field(s, "parent_id"):', "if True:",
      "-c resumes the newest session even when it is a child (sub-agent)", "R5"),
    M("startup-no-flush", "thatch_core/runtime.py",
      """            self._log(f"[thatch] chat startup heartbeat failed: {err!r}")
        self.poller.deliver_pending()
""",
      """            self._log(f"[thatch] chat startup heartbeat failed: {err!r}")
""",
      "the -s/-c startup path does not kick a delivery pass", "R5"),
    M("heartbeat-skips-first", "thatch_core/poller.py",
      "self.store.heartbeat(list(self._hosted()))",
      "self.store.heartbeat(list(self._hosted())[1:])",
      "the heartbeat skips the first hosted session", "R13"),
    M("prune-ttl-6d", "thatch_core/constants.py",
      "AUTO_TTL_DAYS = 7", "AUTO_TTL_DAYS = 6",
      "prune TTL 7 -> 6 days", "R26"),
    M("prune-legacy-rows", "thatch_core/store_upkeep.py",
      '"DELETE FROM chat_sessions WHERE auto = 1 AND last_seen < ? RETURNING session_id"',
      '"DELETE FROM chat_sessions WHERE last_seen < ? RETURNING session_id"',
      "prune deletes legacy rows too", "R26"),
    M("sweep-young-mail", "thatch_core/store_upkeep.py",
      '''"DELETE FROM chat_messages WHERE read_at IS NULL AND created_at < ?"''',
      '''"DELETE FROM chat_messages WHERE read_at IS NULL AND created_at <> ?"''',
      "the sweep takes unread mail to absent recipients whatever its age", "R26"),
    M("prune-resets-counters", "thatch_core/store_upkeep.py",
      """        return PruneResult(pruned=tuple(sorted(pruned)),""",
      """        if pruned:
            self.conn.execute("DELETE FROM chat_name_counters")
        return PruneResult(pruned=tuple(sorted(pruned)),""",
      "prune resets the name counters (names reissued after prune)", "R2"),
    M("tombstone-ttl-6d", "thatch_core/constants.py",
      "TOMBSTONE_TTL_DAYS = 7", "TOMBSTONE_TTL_DAYS = 6",
      "tombstones expire after 6 days instead of 7", "R7"),
    M("hook-ignores-tombstone", "thatch_core/mcp.py",
      """        if store.has_tombstone(mcp_id):
            return leave_line(mcp_id)
""",
      """        if store.has_tombstone(mcp_id):
            store.register(mcp_id, kind="mcp", project=project, directory=directory, auto=True,
                           explicit=True)
""",
      "the MCP identity hook rejoins a conversation that left", "R7"),
    M("ppid-fresh-6000s", "thatch_core/constants.py",
      "HOST_PID_FRESH_S = 600", "HOST_PID_FRESH_S = 6000",
      "parent-pid anchors trusted for 6000 s instead of 600 s", "R32"),
    M("ppid-below-env", "thatch_core/mcp.py",
      """    if ppid is not None:
        anchored = store.resolve_host_pid(ppid)
        if anchored:
            return anchored
""",
      "",
      "the MCP server ignores its parent-pid anchor", "R32"),
    M("echo-on-refusal", "thatch_core/tools.py",
      """def _refuse(text: str) -> ToolReply:
    return ToolReply(text=text, ok=False, echo=None)""",
      """def _refuse(text: str) -> ToolReply:
    return ToolReply(text=text, ok=False, echo="[chat] " + text)""",
      "failed tool calls leave a [chat] echo bubble", "R27"),
    M("disabled-read-once", "thatch_core/tools.py",
      """        if not self.config_source.load().enabled:
            return _refuse(DISABLED_REPLY)""",
      """        if not hasattr(self, "_enabled_once"):
            self._enabled_once = self.config_source.load().enabled
        if not self._enabled_once:
            return _refuse(DISABLED_REPLY)""",
      "tools read chat.enabled once, not per call", "R29"),
    M("legacy-topic-refreshed", "thatch_core/store.py",
      "if existing.auto and topic is not None and topic != existing.topic:",
      "if topic is not None and topic != existing.topic:",
      "a reclaim with a title overwrites a legacy row's topic", "R3"),
    M("topic-never-refreshed", "thatch_core/runtime.py",
      """        if not self._auto_register(session_id):
            self._refresh_topic(session_id)""",
      """        self._auto_register(session_id)""",
      "the idle event no longer refreshes the topic", "R3"),
    M("hop-limit-1", "thatch_core/constants.py",
      "CONTINUATION_MAX_HOPS = 10", "CONTINUATION_MAX_HOPS = 1",
      "continuation adoption walks 1 hop instead of 10", "R33"),
    M("idle-flush-removed", "thatch_core/runtime.py",
      """        if self.poller is not None:
            self.poller.deliver_pending()""",
      "        pass",
      "the idle event no longer flushes pending mail at once", "R19"),
    M("compacting-ignored", "thatch_core/runtime.py",
      """return self._status.get(session_id) == "idle" and session_id not in self._compacting""",
      """return self._status.get(session_id) == "idle\"""",
      "delivery gate ignores compaction", "R19"),
    M("child-auto-registers", "thatch_core/runtime.py",
      """        if not self._is_top_level(session_id):
            return False  # child sessions never join""",
      """        if False:
            return False  # child sessions never join""",
      "sub-agent (child) sessions auto-register", "R1"),
    M("autoregister-flag-ignored", "thatch_core/runtime.py",
      "if not (cfg.enabled and cfg.auto_register):",
      "if not cfg.enabled:",
      "chat.autoRegister: false is ignored by auto-registration", "R30"),
    M("rehost-never-expires", "thatch_core/rehost.py",
      "if h.rehost_until_ms is not None and now_ms >= h.rehost_until_ms]",
      "if False]",
      "re-hosted sessions never age out (closed tabs stay fresh forever)", "R15"),
    M("names-case-sensitive", "thatch_core/store.py",
      '"SELECT {ROW_COLS} FROM chat_sessions WHERE name = ? COLLATE NOCASE", (name,)',
      '"SELECT {ROW_COLS} FROM chat_sessions WHERE name = ?", (name,)',
      "send by name is case-sensitive", "R9",
      equivalent="the name column is declared COLLATE NOCASE, so `=` already ignores case"),
    M("body-cap-off-by-one", "thatch_core/store.py",
      "if len(trimmed) > MAX_BODY_LEN:", "if len(trimmed) >= MAX_BODY_LEN:",
      "a body of exactly 10,000 characters is refused", "R9"),
    M("send-to-self", "thatch_core/store.py",
      """            if recipient.session_id == from_session:
                return SendResult(ok=False, error=ERR_SELF)
""",
      "",
      "a session may message itself", "R9"),
    M("status-no-touch", "thatch_core/store.py",
      """            self.conn.execute("UPDATE chat_sessions SET last_seen = ? WHERE session_id = ?",
                              (clock.iso(), session_id))
            total, pending""",
      """            total, pending""",
      "chat_status does not touch last_seen", "R34"),
    M("stop-hook-loops", "thatch_core/mcp.py",
      "if stop_hook_active or not _enabled(config)",
      "if not _enabled(config)",
      "Claude Code's Stop hook ignores stop_hook_active (can block forever)", "R36"),
    M("cursor-followup-after-abort", "thatch_core/mcp.py",
      'status != "completed"', 'status == "error"',
      "Cursor's stop hook follows up after an aborted turn", "R36"),
    M("cli-stale-unbounded", "thatch_core/constants.py",
      "CLI_STALE_DAYS_DEFAULT = 1", "CLI_STALE_DAYS_DEFAULT = 7",
      "chat list bounds stale rows to 7 days instead of 1 by default", "R16"),
]


def _copy(dest: Path) -> Path:
    repo = dest / "repo"
    shutil.copytree(ROOT, repo, ignore=IGNORE, symlinks=True)
    return repo


def apply(repo: Path, m: Mutant) -> None:
    """Apply the one edit; fail loudly unless the snippet occurs exactly once."""
    path = repo / m.file
    text = path.read_text(encoding="utf-8")
    n = text.count(m.original)
    if n != 1:
        raise SystemExit(f"mutant {m.id}: snippet found {n} times in {m.file} (need exactly 1)")
    path.write_text(text.replace(m.original, m.replacement), encoding="utf-8")


def _env(repo: Path) -> dict:
    env = dict(os.environ)
    # cwd is first on sys.path under `python -m`; PYTHONPATH also covers any
    # interpreter that starts outside the copy.
    env["PYTHONPATH"] = str(repo) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _probe(repo: Path) -> None:
    """Prove the copy shadows the installed editable packages."""
    out = subprocess.run(
        [sys.executable, "-c", "import thatch_core, simulator; print(thatch_core.__file__); "
         "print(simulator.__file__)"],
        cwd=repo, env=_env(repo), capture_output=True, text=True, check=True).stdout.split()
    for f in out:
        if not Path(f).resolve().is_relative_to(repo.resolve()):
            raise SystemExit(f"the copy does not shadow the installed package: {f}")
    print(f"probe: packages load from the copy ({out[0]})", flush=True)


FAIL_RE = re.compile(r"^(?:FAILED|ERROR) (\S+)", re.M)


def run_suite(repo: Path, target: str, timeout: float,
              nodes: list[str] | None = None) -> tuple[str, list[str], float]:
    """('killed'|'survived'|'timeout', failing node ids, seconds). ``nodes``
    reruns only those node ids (the kill confirmation)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider"]
    if target == "scenarios":
        cmd += ["--sim-report", "never"]
    cmd += nodes or [target]
    t0 = time.monotonic()
    # Own session: on a timeout the whole group (pytest, xdist workers, forked
    # harness processes) is killed, not just pytest, so nothing is orphaned.
    proc = subprocess.Popen(cmd, cwd=repo, env=_env(repo), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.communicate()
        return "timeout", [], time.monotonic() - t0
    dt = time.monotonic() - t0
    failed = sorted(set(FAIL_RE.findall(stdout)))
    if proc.returncode == 0:
        return "survived", [], dt
    if proc.returncode not in (1, 2):  # usage error / internal error: not a kill
        tail = "\n".join((stdout + stderr).splitlines()[-15:])
        raise SystemExit(f"pytest exited {proc.returncode}:\n{tail}")
    return "killed", failed, dt


def summary_lines(rows: list, target: str, seconds: float) -> list[str]:
    """The table of every mutant's result and the kill rate, as markdown lines."""
    killed = sum(1 for _, v, _ in rows if v == "killed")
    equivalent = sum(1 for m, v, _ in rows if m.equivalent and v != "killed")
    lines = [f"| mutant | rule | bug | result | failed ({target}) |", "|---|---|---|---|---|"]
    for m, v, failed in rows:
        note = " (did not reproduce)" if v == "flaky" else ""
        if m.equivalent and v != "killed":
            v = "equivalent"
            note += f" ({m.equivalent})"
        lines.append(f"| {m.id} | {m.rule} | {m.bug} | {v} | {', '.join(failed) or '-'}{note} |")
    lines += ["", f"kill rate ({target}): {killed}/{len(rows)} = {100.0 * killed / max(len(rows), 1):.0f}%"
                  f"  ({seconds:.0f}s)"]
    if equivalent:
        real = len(rows) - equivalent
        lines.append(f"kill rate without the {equivalent} equivalent mutant(s): {killed}/{real} = "
                     f"{100.0 * killed / max(real, 1):.0f}%")
    survivors = [m.id for m, v, _ in rows if v != "killed" and not m.equivalent]
    if survivors:
        lines.append("survived: " + ", ".join(survivors))
    return lines


def write_report(path: Path, title: str, about: str, command: list[str], body: list[str]) -> None:
    """A generated report page: what it measures (the script's docstring), the command and machine that
    produced it, then what the run printed. Nothing else writes these pages: rerun the command."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    head = [f"# {title}", "", f"Generated by `{' '.join(command)}` on {when} ({os.cpu_count()} cores, load "
            f"average {load} at the end). Do not edit: rerun the command (every mutant: leave out `-k`).", "",
            "## What it measures", "", *about.strip().splitlines()[2:], "", "## Results", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(head + body).rstrip("\n") + "\n", encoding="utf-8")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tests", action="store_true", help="run tests/ instead of scenarios/")
    ap.add_argument("-k", dest="only", action="append", default=[], help="only this mutant id (repeatable)")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per mutant run (timeout = killed)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--baseline", action="store_true", help="also run the unmutated copy first")
    ap.add_argument("--report", metavar="FILE", help="also write the results as a generated page "
                                                     "(docs/mutation-report.md)")
    args = ap.parse_args(argv)
    mutants = [m for m in MUTANTS if not args.only or m.id in args.only]
    unknown = set(args.only) - {m.id for m in MUTANTS}
    if unknown:
        raise SystemExit(f"unknown mutant ids: {', '.join(sorted(unknown))}")
    if args.list:
        for m in mutants:
            print(f"{m.id:28} {m.rule:4} {m.file:28} {m.bug}")
        return 0
    target = "tests" if args.tests else "scenarios"
    # Every snippet is checked before anything runs: a stale list fails fast.
    with tempfile.TemporaryDirectory(prefix="mut-check-") as tmp:
        repo = _copy(Path(tmp))
        for m in mutants:
            text = (repo / m.file).read_text(encoding="utf-8")
            if text.count(m.original) != 1:
                raise SystemExit(f"mutant {m.id}: snippet found {text.count(m.original)} times in {m.file}")
        _probe(repo)
        if args.baseline:
            verdict, failed, dt = run_suite(repo, target, args.timeout)
            print(f"baseline (unmutated): {'PASS' if verdict == 'survived' else verdict.upper()} "
                  f"in {dt:.0f}s {' '.join(failed)}", flush=True)
            if verdict != "survived":
                raise SystemExit("the unmutated library fails: fix that first")
    rows = []
    t_all = time.monotonic()
    for m in mutants:
        with tempfile.TemporaryDirectory(prefix=f"mut-{m.id}-") as tmp:
            repo = _copy(Path(tmp))
            apply(repo, m)
            verdict, failed, dt = run_suite(repo, target, args.timeout)
            if verdict == "killed" and failed:
                # Confirm: the failing items must fail again on this mutant.
                # A kill that does not reproduce is a flaky library item, not
                # evidence against the mutant: it counts as survived.
                again, refailed, dt2 = run_suite(repo, target, args.timeout, nodes=failed)
                dt += dt2
                if again == "survived":
                    verdict = "flaky"
                else:
                    failed = refailed or failed
        if verdict == "timeout":
            verdict = "killed"  # a hang is a detected failure
            failed = ["(timeout)"]
        shown = [f.split("::")[-1] if target == "scenarios" else f for f in failed]
        rows.append((m, verdict, shown))
        print(f"{m.id:28} {m.rule:4} {verdict.upper():8} {dt:5.0f}s  {', '.join(shown)[:160]}", flush=True)
    lines = summary_lines(rows, target, time.monotonic() - t_all)
    print()
    print("\n".join(lines))
    if args.report:
        write_report(Path(args.report), "Mutation report: how well the scenario library finds real bugs",
                     __doc__, ["python scripts/mutation_check.py", *(argv if argv is not None else sys.argv[1:])],
                     lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
