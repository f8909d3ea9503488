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
from simulator import replies
from simulator.events import Event

# The marks a send can get, in the legend's order (delivered is the plain arrow). A suppressed send (the later
# design's retry de-duplication) stored nothing: its unread copy stands for it.
DELIVERED, PARKED, REFUSED, SUPPRESSED = "delivered", "parked", "refused", "suppressed"
HELD, APPROVED, DECLINED, EXPIRED = replies.HELD, replies.APPROVED, replies.DECLINED, "expired"
# The report's own row kind for a notice read from the database (never a history event).
NOTICE = "notice"


@dataclass(frozen=True, slots=True, kw_only=True)
class NoticeRow(Event):
    """A stored notice drawn as a row of the diagram, on the lane of the held message's recipient."""

    i: Any = "db"                 # no position in the history: read from the database
    held: str = ""                # the held message's id
    outcome: str = ""             # EXPIRED or DECLINED
    to: Optional[str] = None      # the label of the held message's sender


NoticeRow.KIND = NOTICE


def message_mark(reply: replies.Outcome) -> str:
    """How a send's or a broadcast's reply (decoded once) marks its arrow: delivered, held (a prompt with a
    deadline), parked (waits for a review), suppressed (a send that duplicated an unread copy) or refused."""
    if not reply.ok:
        return REFUSED
    if isinstance(reply, replies.SendOutcome):
        if reply.suppressed:
            return SUPPRESSED
        if reply.kind == replies.HELD:
            return HELD if reply.held_wait_ms is not None else PARKED
    return DELIVERED


_REFUSAL_REASONS = {replies.CAPPED: "sender cap", replies.EXITED: "recipient exited",
                    replies.INBOUND_REFUSED: "recipient refuses"}


def refusal_reason(reply: replies.Outcome) -> str:
    """Why a send was refused, in two or three words."""
    return _REFUSAL_REASONS.get(reply.kind, "refused")


def review_outcome(text: str) -> Optional[tuple[str, str]]:
    """(approved or declined, held id) of a review's reply, or None when it reviewed nothing."""
    review = replies.decode_reply("approve", True, text)
    if review.kind not in (replies.APPROVED, replies.DECLINED):
        return None
    return review.kind, str(review.held)


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
        notice = replies.decode_notice(body)
        ms = parse_iso_ms(created)
        if notice is None or ms is None:
            continue
        out.append(Notice(ms - epoch_ms, str(by), str(to), str(notice.held),
                          EXPIRED if notice.outcome == "expired" else DECLINED))
    return sorted(out, key=lambda n: n.t)
