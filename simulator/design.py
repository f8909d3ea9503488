"""The design's numbers and formats, stated by the simulator itself.

The checkers and the engine's samplers judge thatch_core against these, so
they are written here from the design (docs/rules.md), never imported from
thatch_core: a wrong threshold, id derivation or line format there must
not move its own yardstick.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from datetime import datetime, timezone

SECOND_MS = 1_000
MINUTE_MS = 60_000
HOUR_MS = 3_600_000

# R14: stale = no beat for two intervals; exactly 60 s is still fresh.
STALE_MS = 60_000
# R14: one beat every 30 s (two missed beats make a session stale), unless a scenario says otherwise.
DEFAULT_POLL_MS = 30_000
# R22: at most 6 wakes per recipient per rolling hour, per process lifetime.
MAX_WAKES_PER_HOUR = 6
# R18: unread mail delivered more than 15 minutes ago needs a wake again.
RENUDGE_MS = 15 * MINUTE_MS
# R15: a restarted daemon re-hosts the dead one's sessions for up to 24 h (overridable).
DEFAULT_REHOST_GRACE_MS = 86_400_000
# Messaging policies (the peer product's design, seed 003): its sender cap ("after three
# messages to the same session with no message from you in between") and how long an
# approval prompt waits by default ("general.dialogExpiry, which defaults to five minutes").
QODER_SENDER_CAP = 3
DIALOG_EXPIRY_MS = 5 * MINUTE_MS
# A message body's cap (seed 000: 10,000 characters).
MAX_BODY_LEN = 10_000
# The later design (docs/dev/features/cross-session-chat.md of the real thatch, newer than seed 000):
# a retried send matching an unread row on sender, recipient, body and delivery kind within 10 s is
# suppressed; bodies over the part budget (2000 UTF-16 units) go as parts, the first prefixed
# "(message 1 of N)", all but the last suffixed "(continued in next message)"; a whole body is capped
# at 20,000 characters; the plugin's own extraction child is titled thatch-extraction.
LATER_RETRY_DEDUP_MS = 10_000
LATER_SPLIT_PART_LEN = 2_000
LATER_MAX_BODY_CHARS = 20_000
MACHINERY_TITLE = "thatch-extraction"
SPLIT_FIRST_RE = re.compile(r"^\(message 1 of (?P<parts>\d+)\)\s*")
SPLIT_CONTINUED_SUFFIX = "(continued in next message)"
# R33: a continuation chain is walked at most 10 hops to a registered ancestor.
MAX_CONTINUATION_HOPS = 10
# R33 (docs/transcripts.md): Claude Code keeps `<host session id>.jsonl` per session; a conversation
# that moves to a new id ends its OLD transcript with {"type":"continued-in","continuedInSessionId":...}.
# A hook reads only the last non-empty line in the final 4096 bytes of at most 200 sibling
# transcripts, newest modification first.
TRANSCRIPT_SUFFIX = ".jsonl"
CONTINUED_IN_TYPE = "continued-in"
CONTINUED_IN_KEY = "continuedInSessionId"
CONTINUATION_TAIL_BYTES = 4096
MAX_SCANNED_TRANSCRIPTS = 200
# R7/R26: the hourly prune removes leave tombstones older than 7 days.
TOMBSTONE_TTL_MS = 7 * 86_400_000
# R26: the hourly prune deletes auto rows silent for 7 days.
AUTO_ROW_TTL_MS = 7 * 86_400_000
# R26: in the same pass it deletes unread mail older than 7 days to any session not in
# the directory (pruned, or gone by a leave); younger mail waits for a later pass.
MAIL_SWEEP_AGE_MS = 7 * 86_400_000
# R2: the per-base counters as the real thatch keeps them (`next` is the base's next
# unassigned number), read as how many names each base has minted.
COUNTERS_QUERY = "SELECT base, next - 1 FROM chat_name_counters ORDER BY base"
# Stored stamps (created_at, delivered_at, read_at, last_seen) have second resolution.
STAMP_RESOLUTION_MS = SECOND_MS

# R2: an assigned name is a lowercase pool base of one or more words and a
# per-base counter of five or more digits (counters never wrap).
NAME_RE = re.compile(r"^[a-z]+(-[a-z]+)*-\d{5,}$")

# Messaging policies: the replies and notices that say what a policy did (docs/authoring-scenarios.md,
# "Messaging policies"). A held send is accepted but not stored until its recipient's user approves it.
HELD_REPLY_RE = re.compile(r"^Message to (?P<to>\S+) is held for its user's approval")
# A held message behind an approval prompt says when the prompt lapses; one parked for a later
# review (a prompt already open, or the user's own standing hold) says it waits instead.
HELD_DEADLINE_RE = re.compile(r"if nobody answers within (?P<wait>\S+) it expires")
CAP_REFUSAL_RE = re.compile(r"^Not sent: you have sent (?P<to>\S+) (?P<cap>\d+) messages? since your user last wrote")
EXITED_REFUSAL_RE = re.compile(r"^Not sent: (?P<to>.+?) has exited \(")
INBOUND_REFUSAL_RE = re.compile(r"^Not delivered: (?P<to>\S+) (?:refuses messages|runs with nobody to review)")
# The message a sender receives when its held message is declined or expires.
NOTICE_RE = re.compile(r'^\[chat notice\] your held message #(?P<held>\d+) to (?P<to>\S+) \("(?P<excerpt>.*)"\) '
                       r"(?P<outcome>expired|was refused)")
REVIEW_REPLY_RE = re.compile(r"^(?P<decision>Approved|Declined) held message #(?P<held>\d+) from ")

# R31: an MCP-host conversation's chat id.
MCP_ID_PREFIX = "mcp_"
# opencode's own session ids (docs/history.md), which the chat keeps as they are.
OPENCODE_ID_PREFIX = "ses_"
# A run session id with one of these is a chat id already; any other is a host session id the chat hashes (R31).
CHAT_ID_PREFIXES = (OPENCODE_ID_PREFIX, MCP_ID_PREFIX)

# R31/R36: the hook line printed at session start and on every prompt, the real thatch's
# `[thatch] chat: you are NAME (no unread mail for you).` or `(N unread message(s) for you).`
HOOK_LINE_RE = re.compile(r"^\[thatch\] chat: you are (?P<name>\S+) "
                          r"\((?:no unread mail|(?P<unread>\d+) unread message\(s\)) for you\)\.")
# R7/R31: the line a conversation that left gets instead of an identity.
LEAVE_LINE_PREFIX = "[thatch] chat: this conversation left the chat directory"

# The tools' success replies (the real thatch's shapes, which agents and the echo parse):
# `[registered] NAME`, `[sent] to NAME (<id[:12]>)`, `[broadcast] to N sessions` + `recipients: A, B`.
REGISTERED_RE = re.compile(r"^\[registered\] (?P<name>\S+)$", re.M)
SENT_RE = re.compile(r"^\[sent\] to (?P<to>\S+) \(")
BROADCAST_RE = re.compile(r"^\[broadcast\] to (?P<count>\d+) sessions?\nrecipients: (?P<recipients>[^\n]*)"
                          r"(?:\nskipped stale: (?P<skipped>[^\n]*))?")
# R10: chat_read's framed output: a warning, then the message lines between these fences.
INBOX_EMPTY = "Inbox empty."
INBOX_WARNING = "UNTRUSTED CONTENT:"
INBOX_BEGIN = "===[ begin chat inbox ]==="
INBOX_END = "===[ end chat inbox ]==="
# One message line: `[from NAME, Sep 11 14:32Z] body`; a departed sender is `unknown (<id[:12]>, departed)`.
INBOX_LINE_RE = re.compile(r"^\[from (?P<name>.+?), (?P<stamp>[A-Z][a-z]{2} \d{1,2} \d\d:\d\dZ)\] ", re.M)
# R20: the opencode wake prompt names the senders and the count, never a body.
WAKE_NUDGE_RE = re.compile(r"You have (?P<count>\d+) unread chat messages? from (?P<names>.*?)\. "
                           r"Call thatch_chat_read")


def mcp_session_id(host_session_id: str) -> str:
    """`mcp_` + the first 12 hex digits of sha256 of the lower-cased host session id (R31), the real
    thatch's derivation: "ABC" and "abc" are one conversation, mcp_ba7816bf8f01."""
    return MCP_ID_PREFIX + hashlib.sha256(host_session_id.lower().encode("utf-8")).hexdigest()[:12]


def is_stale(last_seen_ms: int | None, now_ms: int) -> bool:
    """More than 60 s since the last beat; no readable beat at all counts as stale (R14)."""
    return last_seen_ms is None or now_ms - last_seen_ms > STALE_MS


def continued_in_record(old_host_session_id: str, new_host_session_id: str) -> dict:
    """The last line Claude Code writes to a conversation's old transcript when it moves to a new
    id (R33): the record type, the old id as `sessionId`, the new id under `continuedInSessionId`."""
    return {"type": CONTINUED_IN_TYPE, "sessionId": old_host_session_id, CONTINUED_IN_KEY: new_host_session_id}


def continued_in_target(path: str | os.PathLike) -> str | None:
    """The new host id a transcript's last non-empty line (within the final 4096 bytes) hands the
    conversation to; None for any other last line, an unreadable or an empty file (R33)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - CONTINUATION_TAIL_BYTES))
            lines = [x for x in fh.read().decode("utf-8", "replace").split("\n") if x.strip()]
        rec = json.loads(lines[-1]) if lines else None
    except (OSError, ValueError, RecursionError):
        return None
    target = rec.get(CONTINUED_IN_KEY) if isinstance(rec, dict) and rec.get("type") == CONTINUED_IN_TYPE else None
    return target if isinstance(target, str) and target else None


# R16, R35: the chat_sessions.host_kind of a Claude Code / Cursor row. Such a row beats only while a
# turn runs, so its age only means between turns: both rosters list it Active whatever its age.
MCP_ROW_KIND = "mcp"


def roster_section(stale: bool | None, host_kind: str | None) -> str:
    """The roster section a registered row is listed in: "stale" only for a stale row of a kind
    whose age is its liveness (every kind but mcp), else "active" (R16, R35)."""
    return "stale" if stale and host_kind != MCP_ROW_KIND else "active"
def hook_unread(match: re.Match) -> int:
    """The unread count of a HOOK_LINE_RE match (`no unread mail` is 0)."""
    return int(match.group("unread") or 0)


def reply_names(field: str | None) -> list[str]:
    """The names of a reply's `recipients:` / `skipped stale:` field (`(none)` is none)."""
    return [n.strip() for n in (field or "").split(",") if n.strip() and n.strip() != "(none)"]


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def inbox_stamp(created_at: str) -> str:
    """How an inbox line shows a stored `created_at`: `Sep 11 14:32Z` (UTC, unpadded day)."""
    try:
        t = datetime.fromisoformat(created_at.replace("Z", "+00:00")).astimezone(timezone.utc)
    except (AttributeError, ValueError):
        return str(created_at)
    g = time.gmtime(t.timestamp())
    return f"{_MONTHS[g.tm_mon - 1]} {g.tm_mday} {g.tm_hour:02d}:{g.tm_min:02d}Z"


def inbox_needle(created_at: str, body: str) -> str:
    """The tail of a stored message's inbox line: `, Sep 11 14:32Z] body` (the stamp has minute
    resolution, so rows of one recipient with one body in one minute read alike)."""
    return f", {inbox_stamp(created_at)}] {body}"


def is_framed_read(text: str) -> bool:
    """A chat_read reply that delivered mail: the warning and both fences (R10)."""
    return INBOX_WARNING in text and INBOX_BEGIN in text and INBOX_END in text
