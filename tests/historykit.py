"""Hand-built run histories and databases for the checker tests.

`H` appends events in the docs/history.md shape; `make_db` writes a real
SQLite file with thatch_core.db.open_db and inserts rows directly (the
checkers read the final database, so a test states exactly what is in it).
"""

from __future__ import annotations

import time
from typing import Any, Optional

from simulator.design import INBOX_BEGIN, INBOX_EMPTY, INBOX_END, INBOX_WARNING, inbox_needle
from simulator.scenario.model import Scenario
from thatch_core.db import open_db

EPOCH_MS = 1_795_910_400_000  # 2026-11-29T00:00:00Z: virtual time 0 in every test
RUN_INFO = {"poll_interval_ms": {}, "duration_ms": 0, "drain_ms": 0, "stale_ms": 60_000, "epoch_ms": EPOCH_MS}

ALICE, BOB, CAROL = "ses_alice", "ses_bob", "ses_carol"
N_ALICE, N_BOB, N_CAROL = "ba-sil-00001", "e-cho-00001", "o-pal-00001"


def iso(t: int) -> str:
    """The stored ISO stamp of virtual time t."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime((EPOCH_MS + t) // 1000))


class H:
    """A history under construction: every helper returns the event(s) it appended."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def ev(self, t: int, kind: str, proc: str = "orchestrator", session: Optional[str] = None, **data: Any) -> dict:
        e = {"i": len(self.events), "t": t, "dispatch": len(self.events), "proc": proc, "session": session,
             "kind": kind, "data": data}
        self.events.append(e)
        return e

    def done(self) -> list[dict[str, Any]]:
        """The events in dispatch (time) order, renumbered in place so held references stay valid."""
        self.events.sort(key=lambda e: (e["t"], e["i"]))
        for n, e in enumerate(self.events):
            e["i"] = e["dispatch"] = n
        return self.events

    def start(self, t: int, proc: str, sessions: dict[str, str], *, incarnation: int = 0, kind: str = "opencode",
              **extra: Any) -> dict:
        return self.ev(t, "process-start", target=proc, proc_kind=kind, incarnation=incarnation, sessions=sessions,
                       **extra)

    def exit(self, t: int, proc: str, reason: str = "end") -> dict:
        return self.ev(t, "process-exit", target=proc, reason=reason)

    def poll(self, t: int, proc: str, hosted: list[str]) -> dict:
        return self.ev(t, "poll", proc, hosted=hosted)

    def status(self, t: int, proc: str, session: str, status: str = "idle", compacting: bool = False) -> dict:
        """The host saw the session go idle / busy / compacting (only changes are recorded)."""
        return self.ev(t, "status", proc, session, status=status, compacting=compacting)

    def wake(self, t: int, proc: str, session: str, *, hosted: bool = True, senders: tuple = (N_ALICE,),
             count: int = 1) -> dict:
        return self.ev(t, "wake", proc, session, senders=list(senders), count=count, text="[thatch] Chat: ...",
                       hosted=hosted)

    def call(self, t: int, proc: str, session: str, tool: str, args: dict, ok: bool, text: str,
             step: Optional[int] = None) -> tuple[dict, dict]:
        c = self.ev(t, "tool-call", proc, session, tool=f"thatch_chat_{tool}", args=args)
        extra = {"step": step} if step is not None else {}
        r = self.ev(t, "tool-result", proc, session, tool=f"thatch_chat_{tool}", ok=ok, text=text, **extra)
        return c, r

    def send(self, t: int, proc: str, session: str, to_name: str, body: str,
             step: Optional[int] = None) -> tuple[dict, dict]:
        return self.call(t, proc, session, "send", {"to": to_name, "body": body}, True,
                         f"[sent] to {to_name} (ses_x)\n\nThe recipient is active.", step)

    def read(self, t: int, proc: str, session: str, lines: list[tuple[str, int, str]],
             args: Optional[dict] = None) -> tuple[dict, dict]:
        """lines: (sender name, created virtual t, body); args: the call's arguments (an MCP host's `as`)."""
        body = "\n".join(f"[from {n}{inbox_needle(iso(ct), b)}" for n, ct, b in lines)
        text = (f"[thatch] chat inbox: {len(lines)} message(s), now marked read.\n{INBOX_WARNING} warning\n"
                f"{INBOX_BEGIN}\n{body}\n{INBOX_END}"
                if lines else INBOX_EMPTY)
        return self.call(t, proc, session, "read", dict(args or {}), True, text)

    def sample(self, t: int, rows: dict[str, tuple]) -> dict:
        """rows: label -> (name or None, stale, last_seen t, host_kind='opencode')."""
        sessions = {}
        for label, row in rows.items():
            name, stale, seen = row[0], row[1], row[2]
            kind = row[3] if len(row) > 3 else "opencode"
            sessions[label] = {"registered": name is not None, "name": name, "last_seen": iso(seen) if name else None,
                               "stale": bool(stale) if name else False, "host_kind": kind}
        return self.ev(t, "sample", sessions=sessions)

    def registered(self, t: int, proc: str, session: str, session_id: str, name: str, how: str = "auto") -> dict:
        return self.ev(t, "registered", proc, session, session_id=session_id, name=name, how=how)

    def crash(self, t: int, proc: str, session: Optional[str], point: str) -> dict:
        return self.ev(t, "crash", proc, session, point=point, sql="UPDATE ...")

    def phase(self, t: int, phase: str) -> dict:
        return self.ev(t, "phase", phase=phase)


def make_spec(*, processes: Optional[list] = None, steps: Optional[list] = None, **kw: Any) -> Scenario:
    """A minimal valid Scenario: h1 (opencode) hosting alice and bob unless told otherwise."""
    if processes is None:
        processes = [{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"}]}]
    return Scenario(name=kw.pop("name", "t"), duration=kw.pop("duration", "1h"), processes=processes,
                    steps=steps or [], **kw)


def make_db(path, *, sessions: tuple = (), messages: tuple = (), pruned: tuple = ()) -> str:
    """sessions: (id, name, host_kind, last_seen t);
    messages: (from, to, body, created t, read t|None, via_broadcast)."""
    conn = open_db(path)
    try:
        for sid, name, kind, seen in sessions:
            conn.execute("INSERT INTO chat_sessions (session_id, name, host_kind, auto, registered_at, last_seen) "
                         "VALUES (?, ?, ?, 1, ?, ?)",
                         (sid, name, kind, iso(0), iso(seen)))
        for frm, to, body, created, read, via in messages:
            conn.execute("INSERT INTO chat_messages (from_session, to_session, body, created_at, read_at, "
                         "via_broadcast) VALUES (?, ?, ?, ?, ?, ?)",
                         (frm, to, body, iso(created), iso(read) if read is not None else None, int(via)))
        for sid in pruned:
            conn.execute("INSERT INTO chat_pruned (session_id, pruned_at) VALUES (?, ?)", (sid, iso(0)))
    finally:
        conn.close()
    return str(path)


def base_world(h: H, *, end: int = 600_000) -> None:
    """h1 hosts alice and bob from t=0; both registered."""
    h.ev(0, "run-start", scenario="t", seed=0, dispatch_mode="serial")
    h.start(0, "h1", {"alice": ALICE, "bob": BOB})
    h.registered(1_000, "h1", "alice", ALICE, N_ALICE)
    h.registered(1_000, "h1", "bob", BOB, N_BOB)
