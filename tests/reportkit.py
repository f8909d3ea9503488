"""A hand-built failing run, in the documented history format, for the report.

Used by tests/sim/report/ and scripts/screenshot_report.py so the report
can be developed and checked without the engine. The story (about 9 virtual
minutes): h1 hosts alice, h2 hosts bob, c1 (Claude Code) hosts carol. alice
writes to bob; h2's poller wakes bob, then a crash point between the wake and
the `delivered_at` stamp kills h2. h2 is resumed with `-s bob`, the machine
sleeps for two minutes, carol's host session id forks and carol broadcasts.
The resumed h2 never wakes bob again, so P3 (at-least-once) fails with the
send, the lost-stamp wake and the crash as witnesses.
`long_example` stretches the same shape over 24 virtual hours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from simulator.result import RunResult, Verdict

ALICE, BOB, CAROL = "ba-sil-00001", "ko-ri-00001", "mi-ta-00001"


class _Hist:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.dispatch = 0

    def ev(self, t: int, proc: str, kind: str, session: Optional[str] = None, /, **data: Any) -> dict[str, Any]:
        e = {"i": len(self.events), "t": t, "dispatch": self.dispatch, "proc": proc, "session": session,
             "kind": kind, "data": data}
        self.events.append(e)
        self.dispatch += 1
        return e

    def sample(self, t: int, stale: dict[str, bool], registered=("alice", "bob", "carol")) -> None:
        names = {"alice": ALICE, "bob": BOB, "carol": CAROL}
        kinds = {"alice": "opencode", "bob": "opencode", "carol": "mcp"}
        ids = {"alice": "ses_a1", "bob": "ses_b1", "carol": "mcp_3f2a9c1b0d4e"}
        self.ev(t, "orchestrator", "sample", sessions={
            s: {"registered": s in registered, "name": names[s], "last_seen": t - 1000, "stale": stale.get(s, False),
                "host_kind": kinds[s], "session_id": ids[s]} for s in ("alice", "bob", "carol")})


def _story(h: _Hist, base: int, first: bool, crash: bool) -> tuple[list[dict], int]:
    """One round of the story starting at `base`; returns (witnesses, end time)."""
    o = "orchestrator"
    if first:
        h.ev(base, o, "run-start", scenario="renudge-after-crash", seed=7, dispatch_mode="serial")
        h.ev(base, o, "phase", phase="script")
        h.ev(base, o, "process-start", target="h1", proc_kind="opencode", incarnation=0, sessions={"alice": "ses_a1"})
        h.ev(base, o, "process-start", target="h2", proc_kind="opencode", incarnation=0, sessions={"bob": "ses_b1"})
        h.ev(base, o, "process-start", target="c1", proc_kind="claude-code", incarnation=0,
             sessions={"carol": "0b4c6f1e-7d2a-4c1b-9a55-1d2e3f4a5b6c"})
        h.ev(base + 10, "h1", "user-prompt", "alice", text="please coordinate with bob on the schema")
        h.ev(base + 10, "h1", "registered", "alice", session_id="ses_a1", name=ALICE, how="auto")
        h.ev(base + 20, "h2", "registered", "bob", session_id="ses_b1", name=BOB, how="auto")
        h.ev(base + 30, "c1", "registered", "carol", session_id="mcp_3f2a9c1b0d4e", name=CAROL, how="hook")
    h.sample(base + 1000, {})
    if crash:
        h.ev(base + 2000, o, "fault", fault="crash", step=2, args={"process": "h2", "before": "before-delivered-stamp"})
    h.ev(base + 5000, "h2", "status", "bob", status="busy", compacting=False)
    h.ev(base + 12000, "h1", "tool-call", "alice", tool="thatch_chat_send",
         args={"to": BOB, "body": "schema v2 is ready"})
    send = h.ev(base + 12000, "h1", "tool-result", "alice", tool="thatch_chat_send", ok=True,
                text=f"Sent to {BOB} (active).")
    h.ev(base + 25000, "h2", "status", "bob", status="idle", compacting=False)
    h.ev(base + 30000, "h2", "poll", hosted=["bob"])
    h.sample(base + 30000, {})
    wake = h.ev(base + 30000, "h2", "wake", "bob", senders=[ALICE], count=1, hosted=True,
                text=f"[thatch] Chat: 1 unread message from {ALICE}.\nCall thatch_chat_read to read your inbox.")
    wit = [send, wake]
    t = base + 30000
    if crash:
        h.ev(t, o, "fault-fired", fault="crash", step=2,
             detail={"point": "before-delivered-stamp", "sql": "UPDATE chat_messages SET delivered_at"})
        wit.append(h.ev(t, "h2", "crash", None, point="before-delivered-stamp",
                        sql="UPDATE chat_messages SET delivered_at"))
        h.ev(t, o, "process-exit", target="h2", reason="crashed")
        for k in range(1, 4):
            h.sample(t + k * 30000, {"bob": k >= 3})
        t += 100000
        h.ev(t, o, "fault", fault="resume", step=3, args={"process": "h2", "how": "-s", "session": "bob"})
        h.ev(t, o, "process-start", target="h2", proc_kind="opencode", incarnation=1, sessions={"bob": "ses_b1"},
             resumed="bob", how="-s")
        h.ev(t + 200, "h2", "registered", "bob", session_id="ses_b1", name=BOB, how="-s")
    h.sample(t + 30000, {})
    h.ev(t + 40000, o, "sleep-start", until=t + 160000)
    h.ev(t + 40000, o, "fault-fired", fault="sleep", step=4, detail="all processes stop")
    h.sample(t + 160000, {"alice": True, "bob": True})
    h.ev(t + 160000, o, "sleep-end")
    h.sample(t + 165000, {})
    h.ev(t + 170000, "c1", "fork", "carol", old_host_id="0b4c6f1e", new_host_id="5e9d0c3a-1f2b-4e6d-8a7b-0c1d2e3f4a5b")
    h.ev(t + 180000, "c1", "tool-call", "carol", tool="thatch_chat_broadcast", args={"body": "deploy at 5"})
    h.ev(t + 180000, "c1", "tool-result", "carol", tool="thatch_chat_broadcast", ok=True,
         text="Broadcast to 2 sessions.")
    h.ev(t + 185000, "h1", "poll", hosted=["alice"])
    h.ev(t + 185000, "h1", "wake", "alice", senders=[CAROL], count=1, hosted=True, text="...")
    h.ev(t + 190000, "h1", "tool-result", "alice", tool="thatch_chat_read", ok=True, text="1 message")
    h.ev(t + 200000, "h1", "tool-call", "alice", tool="thatch_chat_send", args={"to": CAROL, "body": "ack"})
    h.ev(t + 200000, "h1", "tool-result", "alice", tool="thatch_chat_send", ok=True, text=f"Sent to {CAROL}.")
    h.sample(t + 210000, {})
    return wit, t + 210000


def _result(h: _Hist, wit: list[dict], end: int, run_dir: Path, scenario: str) -> RunResult:
    o = "orchestrator"
    h.ev(end, o, "phase", phase="drain")
    for k in range(1, 7):
        h.sample(end + k * 30000, {})
    end += 6 * 30000
    h.ev(end, o, "expectation", "bob", index=0, kind="wakes", ok=None, detail={"wakes": 1})
    h.ev(end, o, "process-exit", target="h1", reason="end")
    h.ev(end, o, "process-exit", target="h2", reason="end")
    h.ev(end, o, "process-exit", target="c1", reason="end")
    h.ev(end, o, "phase", phase="end")
    h.ev(end, o, "run-end")
    verdicts = [
        Verdict("P1", "single-deliverer", "pass", rules=("R25",)),
        Verdict("P3", "at-least-once", "fail",
                f"the batch from {ALICE} to bob lost its delivered_at stamp to a crash at "
                "before-delivered-stamp but was never woken again (last wake at 0:30).",
                rules=("R18", "R21", "R23"), witness=wit),
        Verdict("P4", "liveness", "pass", rules=("R14", "R15")),
        Verdict("reach:re-nudge", "re-nudge after the crash", "not-reached",
                "no second wake for bob was seen", witness=[]),
        Verdict("expect#0", "wakes", "fail", "bob: expected 2 wakes, saw 1"),
        Verdict("fault#2", "crash before-delivered-stamp", "pass"),
    ]
    run_dir = Path(run_dir)
    return RunResult(scenario=scenario, seed=7, run_dir=run_dir, db_path=run_dir / "thatch.db",
                     history_path=run_dir / "history.jsonl", history=h.events, verdicts=verdicts,
                     wall_s=1.23, virtual_ms=end, dispatches=h.dispatch)


def example_result(run_dir: Path) -> RunResult:
    h = _Hist()
    wit, end = _story(h, 0, True, True)
    return _result(h, wit, end, run_dir, "renudge-after-crash")


def long_example(run_dir: Path, hours: int = 24) -> RunResult:
    """The story once, then repeated quiet rounds (samples every 30 s) for `hours`."""
    h = _Hist()
    wit, end = _story(h, 0, True, True)
    t = end
    while t < hours * 3_600_000:
        t = _story(h, t + 15 * 60_000, False, False)[1]
        for k in range(1, 20):
            h.sample(t + k * 30000, {})
        t += 20 * 30000
    return _result(h, wit, t, run_dir, "long-quiet-day")


REVIEWER, WORKER = "dew-drop-00001", "gra-nite-00001"
_NOTICE_TABLE = ("CREATE TABLE chat_messages (id INTEGER PRIMARY KEY, from_session TEXT, to_session TEXT, body TEXT, "
                 "created_at TEXT, delivered_at TEXT, read_at TEXT)")


def _notice_row(conn, by: str, to: str, held: int, body: str, outcome: str, stamp: str) -> None:
    conn.execute("INSERT INTO chat_messages (from_session, to_session, body, created_at) VALUES (?, ?, ?, ?)",
                 (by, to, f'[chat notice] your held message #{held} to {REVIEWER} ("{body}") {outcome}', stamp))


def policy_example(run_dir: Path) -> RunResult:
    """A qoder-style run: worker's four sends to reviewer are held (a prompt), parked, refused and
    delivered; the user declines the parked one at 4m and the held one expires at 6m. The two
    notices are rows of the run's database, as thatch_core stores them."""
    import sqlite3

    h, o = _Hist(), "orchestrator"
    h.ev(0, o, "run-start", scenario="held-and-expired", seed=7, dispatch_mode="serial", epoch_ms=1767603600000)
    h.ev(0, o, "process-start", target="h1", proc_kind="opencode", incarnation=0, sessions={"reviewer": "ses_r1"})
    h.ev(0, o, "process-start", target="h2", proc_kind="opencode", incarnation=0, sessions={"worker": "ses_w1"})
    h.ev(10, "h1", "registered", "reviewer", session_id="ses_r1", name=REVIEWER, how="first-prompt")
    h.ev(20, "h2", "registered", "worker", session_id="ses_w1", name=WORKER, how="first-prompt")
    replies = [(True, f"Message to {REVIEWER} is held for its user's approval: its agent sees it only once approved; "
                      "if nobody answers within 5m it expires and you are told."),
               (True, f"Message to {REVIEWER} is held for its user's approval: its agent sees it only once approved; "
                      "it waits until its user reviews it."),
               (False, f"Not sent: you have sent {REVIEWER} 3 messages since your user last wrote; wait."),
               (True, f"Sent to {REVIEWER} (active).")]
    for k, (ok, text) in enumerate(replies):
        t = 60_000 + k * 10_000
        h.ev(t, "h2", "tool-call", "worker", tool="thatch_chat_send", args={"to": REVIEWER, "body": f"note {k}"})
        h.ev(t, "h2", "tool-result", "worker", tool="thatch_chat_send", ok=ok, text=text, step=k)
    h.ev(240_000, "h1", "tool-call", "reviewer", tool="decline", args={})
    h.ev(240_000, "h1", "tool-result", "reviewer", tool="decline", ok=True, step=4,
         text=f"Declined held message #2 from {WORKER}: it was dropped and the sender told it was refused.")
    h.ev(360_000, "h2", "wake", "worker", senders=[REVIEWER], count=2, hosted=True, text="...")
    h.ev(600_000, o, "run-end")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(run_dir / "thatch.db")
    conn.execute(_NOTICE_TABLE)
    _notice_row(conn, "ses_r1", "ses_w1", 2, "note 1", "was refused by its user and dropped.", "2026-01-05T09:04:00Z")
    _notice_row(conn, "ses_r1", "ses_w1", 1, "note 0", "expired: nobody reviewed it within 5m, so it was dropped "
                "(not refused).", "2026-01-05T09:06:00Z")
    conn.commit()
    conn.close()
    return RunResult(scenario="held-and-expired", seed=7, run_dir=run_dir, db_path=run_dir / "thatch.db",
                     history_path=run_dir / "history.jsonl", history=h.events,
                     verdicts=[Verdict("Q3", "dropped-reported", "pass")], virtual_ms=600_000, dispatches=h.dispatch)


def long_label_example(run_dir: Path) -> RunResult:
    """example_result with long session labels and chat names: the digits that tell names apart come last."""
    import json

    result = example_result(run_dir)
    text = json.dumps(result.history)
    for short, longer in {"alice": "integration-reviewer-alice", "bob": "release-captain-bob"}.items():
        text = text.replace(f'"{short}"', f'"{longer}"')
    for name in (ALICE, BOB, CAROL):
        text = text.replace(name, "sorrel-meadow-" + name.replace("-", ""))
    result.history = json.loads(text)
    return result
