"""What a messaging policy did to each message, for the run report to draw.

A send's reply says whether the message was delivered, held behind an
approval prompt (with a deadline), parked for a later review (no prompt, no
deadline) or refused; a review's reply says approved or declined. Those are
in the history. An expiry has no event of its own: the poller drops the held
message and stores a notice for its sender, so the notices are read from the
run's final database (`chat_messages`, the notice format of
`simulator/design.py`) and placed on the time axis by their stored stamp.
Without a database the notices are simply not drawn.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from simulator.clock import parse_iso_ms
from simulator.design import (
    CAP_REFUSAL_RE, DEDUP_REPLY_MARK, EXITED_REFUSAL_RE, HELD_DEADLINE_RE, HELD_REPLY_RE, INBOUND_REFUSAL_RE, NOTICE_RE,
    REVIEW_REPLY_RE, SENT_PARTS_RE,
)

# The marks a send can get, in the legend's order (delivered is the plain arrow). A suppressed send (the later
# design's retry de-duplication) stored nothing: its unread copy stands for it.
DELIVERED, HELD, PARKED, REFUSED, SUPPRESSED = "delivered", "held", "parked", "refused", "suppressed"
APPROVED, DECLINED, EXPIRED = "approved", "declined", "expired"
# The report's own row kind for a notice read from the database (never a history event).
NOTICE = "notice"


def send_outcome(ok: Any, text: str) -> str:
    """delivered, held (a prompt with a deadline), parked (waits for a review), suppressed (a duplicate of an
    unread copy) or refused."""
    if not ok:
        return REFUSED
    if DEDUP_REPLY_MARK in text:
        return SUPPRESSED
    if HELD_REPLY_RE.match(text):
        return HELD if HELD_DEADLINE_RE.search(text) else PARKED
    return DELIVERED


def sent_parts(text: str) -> int:
    """How many parts a send's reply says its body was stored as (1: not split)."""
    m = SENT_PARTS_RE.search(text)
    return int(m["count"]) if m else 1


def refusal_reason(text: str) -> str:
    """Why a send was refused, in two or three words."""
    if CAP_REFUSAL_RE.match(text):
        return "sender cap"
    if EXITED_REFUSAL_RE.match(text):
        return "recipient exited"
    if INBOUND_REFUSAL_RE.match(text):
        return "recipient refuses"
    return "refused"


def review_outcome(text: str) -> Optional[tuple[str, str]]:
    """(approved or declined, held id) of a review's reply, or None when it reviewed nothing."""
    m = REVIEW_REPLY_RE.match(text)
    if m is None:
        return None
    return (APPROVED if m["decision"] == "Approved" else DECLINED), m["held"]


@dataclass
class Notice:
    """A notice stored for the sender of a held message that expired or was declined."""

    t: int                 # virtual time it was stored
    by: str                # session id of the held message's recipient (the notice's sender)
    to: str                # session id of the held message's sender
    held: str              # the held message's id
    outcome: str           # EXPIRED or DECLINED


def read_notices(db_path: Optional[Path], epoch_ms: Optional[int]) -> list[Notice]:
    """Every notice in the database, oldest first (none without the database or its epoch)."""
    if db_path is None or epoch_ms is None or not Path(db_path).is_file():
        return []
    try:
        conn = sqlite3.connect(f"file:{Path(db_path).resolve()}?mode=ro", uri=True)
        try:
            rows = conn.execute("SELECT from_session, to_session, body, created_at FROM chat_messages "
                                "ORDER BY id").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return []
    out = []
    for by, to, body, created in rows:
        m = NOTICE_RE.match(str(body or ""))
        ms = parse_iso_ms(created)
        if m is None or ms is None:
            continue
        out.append(Notice(ms - epoch_ms, str(by), str(to), m["held"],
                          EXPIRED if m["outcome"] == "expired" else DECLINED))
    return sorted(out, key=lambda n: n.t)
