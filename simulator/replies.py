"""Every text the chat answers with, decoded once into a typed outcome.

A tool's reply, a hook line, a wake prompt, a notice stored for a sender and
the part marker of a split body are texts; the judges, the report and the
agents want facts: was the call refused and why, whom it reached, how many
parts, whether a copy was suppressed, what a read showed and where a page or
a clip cut it. This module states those formats (the real thatch's shapes,
which agents and the transcript echo parse too) and turns each text into a
frozen record, once; nothing else reads the texts field by field.

Like `simulator.design`, whose constants and shown texts it reads, it never
imports thatch_core: a drift of thatch_core's wording must fail a decoder
test (tests/sim/test_replies.py), not move the decoder with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Optional

from simulator.design import (
    DEDUP_REPLY_MARK, DISABLED_PREFIX, EMPTY_BODY_REPLY, INBOX_BEGIN, INBOX_EMPTY, INBOX_END, LEAVE_LINE_PREFIX,
    NOT_REGISTERED_REPLY, NOT_SENT, ORIGIN_DRAWN, ORIGIN_KEPT, ORIGIN_REJOINED, ORIGIN_REPLACED, PART_CONTINUED,
    PART_SEPARATOR,
    SELF_REPLY, SEND_NOTE_ACTIVE, SEND_NOTE_STALE, STATUS_NOT_REGISTERED_PREFIX, TOO_LONG_REPLY,
    UNREGISTER_NOT_REGISTERED, UNREGISTERED_REPLY, HOUR_MS, MINUTE_MS, SECOND_MS,
)

# -- the formats ---------------------------------------------------------------------------------------

# chat_register: `[registered] NAME`, then `session_id: ID` on a line of its own (R2, R6).
REGISTERED_RE = re.compile(r"^\[registered\] (?P<name>\S+)$", re.M)
REGISTERED_ID_RE = re.compile(r"^session_id: (?P<id>\S+)$", re.M)
# chat_send: `[sent] to NAME (<id[:12]>)`, a blank line, the recipient's liveness (R9).
SENT_RE = re.compile(r"^\[sent\] to (?P<to>\S+) \((?P<id>[^)\s]+)\)")
NO_RECIPIENT_RE = re.compile(r'^Not sent: No registered session named "(?P<to>.*)"\. Use chat_list', re.S)
# chat_broadcast: `[broadcast] to N sessions`, then one `LABEL: A, B` line per group before the first blank line
# (R12, R35): `recipients:` (`(none)` for none), `skipped stale:`, a policy's `held for their user's approval:`
# and `refused by:`; the later design adds its split and duplicate lines among them.
BROADCAST_HEAD_RE = re.compile(r"^\[broadcast\] to (?P<count>\d+) sessions?$")
BROADCAST_GROUPS = {"recipients": "recipients", "skipped stale": "skipped",
                    "held for their user's approval": "held", "refused by": "refused_by"}
# The later design (split bodies, retry de-duplication): a send's and a broadcast's notes.
SENT_PARTS_RE = re.compile(r"SENT AS (?P<count>\d+) PARTS")
BROADCAST_PARTS_RE = re.compile(r"^sent as (?P<count>\d+) parts per recipient", re.M)
BROADCAST_SUPPRESSED_RE = re.compile(r"^duplicate suppressed: .*? still UNREAD at (?P<count>\d+) recipients?", re.M)
# Messaging policies (docs/authoring-scenarios.md, "Messaging policies"): a held send is accepted but stored
# only once its recipient's user approves it; one behind an approval prompt says when the prompt lapses, one
# parked for a later review (a prompt already open, the user's own standing hold) says nothing of a deadline.
HELD_REPLY_RE = re.compile(r"^Message to (?P<to>\S+) is held for its user's approval")
HELD_DEADLINE_RE = re.compile(r"if nobody answers within (?P<wait>\S+) it expires")
HELD_WAIT_RE = re.compile(r"(?P<n>\d+)(?P<unit>ms|s|m|h)")
CAP_REFUSAL_RE = re.compile(r"^Not sent: you have sent (?P<to>\S+) (?P<cap>\d+) messages? since your user last wrote")
EXITED_REFUSAL_RE = re.compile(r"^Not sent: (?P<to>.+?) has exited \(")
INBOUND_REFUSAL_RE = re.compile(r"^Not delivered: (?P<to>\S+) (?:refuses messages|runs with nobody to review)")
REVIEW_REPLY_RE = re.compile(r"^(?P<decision>Approved|Declined) held message #(?P<held>\d+) from ")
# The notice a held message's sender gets when it is declined or expires (stored as a message).
NOTICE_RE = re.compile(r'^\[chat notice\] your held message #(?P<held>\d+) to (?P<to>\S+) \("(?P<excerpt>.*)"\) '
                       r"(?P<outcome>expired|was refused)")
# chat_status: `[chat] registered as NAME: P unread of T total...` (R34).
STATUS_RE = re.compile(r"^\[chat\] registered as (?P<name>\S+): (?P<pending>\d+) unread of (?P<total>\d+) total")
# chat_list's `Active (N):` / `Stale (N):` sections of `- NAME | ...` lines; the CLI's `# Active Sessions` /
# `# Stale Sessions`, each a table under a `NAME ...` header row (R14, R16).
LIST_SECTION_RE = re.compile(r"^(?P<section>Active|Stale) \(\d+\):$")
CLI_SECTION_RE = re.compile(r"^# (?P<section>Active|Stale) Sessions$")
# chat_read (R10): one line per message, `[from NAME, Sep 11 14:32Z] body`; under the later design's paged reads
# `[from NAME, Sep 11 14:32Z, id 12] body`, a long body cut at one page and followed by the clip marker.
INBOX_LINE_RE = re.compile(
    r"^\[from (?P<name>.+?), (?P<stamp>[A-Z][a-z]{2} \d{1,2} \d\d:\d\dZ)(?:, id (?P<id>\d+))?\] ", re.M)
# R10: a sender no longer in the directory is shown as `unknown (<id[:12]>, departed)`; nobody can answer it.
DEPARTED_SENDER_RE = re.compile(r"^unknown \(.*, departed\)$")
CLIP_MARKER_RE = re.compile(r"\[clipped: showing (?P<shown>\d+) of (?P<total>\d+) characters")
# A drain's first line: `[thatch] chat inbox: N message(s), now marked read.`
INBOX_HEAD_RE = re.compile(r"^\[thatch\] chat inbox: (?P<count>\d+) message")
# A page of one message (chat_read message=ID offset=K): `[message ID from NAME, STAMP]`, then its range
# `[showing characters A-B of N - ...]` (body offsets in UTF-16 units, end exclusive) and the characters.
PAGE_LINE_RE = re.compile(r"^\[message (?P<id>\d+) from (?P<name>.+?), (?P<stamp>[A-Z][a-z]{2} \d{1,2} \d\d:\d\dZ)\]$",
                          re.M)
PAGE_RANGE_RE = re.compile(r"^\[showing characters (?P<start>\d+)-(?P<end>\d+) of (?P<total>\d+)", re.M)
# The first stored part of a body split into N parts opens with `(message 1 of N)` (the later design).
FIRST_PART_RE = re.compile(r"^\(message 1 of (?P<count>\d+)\)")
# R31/R36: the hook line, `[thatch] chat: you are NAME (no unread mail for you).` or `(N unread message(s) for
# you).`, perhaps followed by the project's other sessions with mail.
HOOK_LINE_RE = re.compile(r"^\[thatch\] chat: you are (?P<name>\S+) "
                          r"\((?:no unread mail|(?P<unread>\d+) unread message\(s\)) for you\)\.")
# R20: the opencode wake prompt names the senders (", "-joined; a departed sender's `unknown (<id>, departed)`
# holds a comma of its own) and the count, never a body; `another session` names nobody.
WAKE_NUDGE_RE = re.compile(r"Chat: (?P<count>\d+) unread messages? from (?P<names>.*?)\.\n"
                           r"Call thatch_chat_read")
WAKE_NAME_TOKEN_RE = re.compile(r"\s*(?:unknown \([^)]*\)|[^,]+)")
WAKE_NOBODY = "another session"
# R24: the runtime's log line for a store failure a poll cycle caught: `[thatch] chat WHERE failed: ERROR`, the
# error a store or SQLite exception's repr.
STORE_FAILURE_LOG_RE = re.compile(r"^\[thatch\] chat (?P<where>.+?) failed: "
                                  r"(?P<error>(?:Store|OperationalError|DatabaseError|SQLiteError).*)$", re.S)
# P15: SQLite's own words for a lock it could not get ("database is locked", SQLITE_BUSY and
# SQLITE_BUSY_SNAPSHOT, bun's error codes), whatever a reply, hook line or poller log wraps them in.
CONTENTION_ERROR_RE = re.compile(r"database is locked|database table is locked|SQLITE_BUSY|database is busy", re.I)

# -- the kinds of outcome ------------------------------------------------------------------------------

# Every tool: refused because chat is off (R29), because the caller is not registered, or a reply no format
# here explains (a store failure, a crashed server, an argument the design does not state).
DISABLED, UNREGISTERED, OTHER = "disabled", "unregistered", "other"
# chat_send / chat_broadcast (R9, R12): stored, or which refusal; the policies' four answers.
SENT, BROADCAST, EMPTY_BODY, TOO_LONG, SELF, UNKNOWN_TO = "sent", "broadcast", "empty", "too_long", "self", "unknown_to"
HELD, CAPPED, EXITED, INBOUND_REFUSED = "held", "cap", "exited", "inbound"
POLICY_KINDS = (HELD, CAPPED, EXITED, INBOUND_REFUSED)
# chat_read (R10): a framed output (a drain with mail, or one page), or an empty inbox.
FRAMED, EMPTY_INBOX = "framed", "empty"
# chat_register, chat_status, chat_unregister, chat_list, a review.
REGISTERED, NOT_REGISTERED, LEFT, ROSTER = "registered", "not_registered", "left", "roster"
APPROVED, DECLINED = "approved", "declined"
# A hook line: an identity, or the line of a conversation that left (R31, R7).
IDENTITY = "identity"


@dataclass(frozen=True)
class Outcome:
    """A tool reply the decoder has no family for, or one it could not place: only whether it was ok."""

    tool: str
    ok: bool
    kind: str
    # The reply opens as a refusal does (`Not sent: ...`, `[disabled] ...`), whatever its kind.
    refused: bool = False

    @property
    def policy(self) -> bool:
        """A messaging policy answered (held, capped, exited, refused inbound)."""
        return self.kind in POLICY_KINDS


@dataclass(frozen=True)
class SendOutcome(Outcome):
    """chat_send: `to` is the recipient's name as the reply gives it (the sent, held, capped, exited, refused or
    unknown name); `to_id12` the first 12 characters of its session id; `recipient_stale` True / False where the
    reply says stale / active (None: between turns, or no note); `parts` how many rows the body became;
    `suppressed` a retry the later design stored nothing for (its unread copy stands); `held_wait_ms` the deadline
    of a held message's prompt (None: parked for a review, no deadline)."""

    to: Optional[str] = None
    to_id12: Optional[str] = None
    recipient_stale: Optional[bool] = None
    parts: int = 1
    suppressed: bool = False
    held_wait_ms: Optional[int] = None


@dataclass(frozen=True)
class BroadcastOutcome(Outcome):
    """chat_broadcast: the names it reached, skipped as stale, held, or that refused it (`refused_by`, a policy's
    answer; `refused` says the broadcast itself was refused); `parts` per recipient;
    `suppressed` how many recipients already had the identical copy unread (the later design)."""

    count: int = 0
    recipients: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    held: tuple[str, ...] = ()
    refused_by: tuple[str, ...] = ()
    parts: int = 1
    suppressed: int = 0


@dataclass(frozen=True)
class InboxMessage:
    """One message of a drain: the sender as shown, the line's stamp, its id (paged reads only), the body as the
    output shows it (a page-cut body keeps its clip marker), the clip marker's (shown, total), the part count a
    `(message 1 of N)` opening announces, and whether its line ended inside the output (`whole_line`: the next
    line or the closing fence follows; False when the output ends in it)."""

    sender: str
    stamp: str
    id: Optional[int]
    body: str
    clip: Optional[tuple[int, int]] = None
    parts: Optional[int] = None
    whole_line: bool = True

    @property
    def departed(self) -> bool:
        """The sender has left the directory: shown by its id, nobody to answer."""
        return bool(DEPARTED_SENDER_RE.match(self.sender))

    @property
    def chars(self) -> str:
        """The characters of the stored body the line shows: its body without a page cut's clip marker."""
        if self.clip is None:
            return self.body
        return self.body[:CLIP_MARKER_RE.search(self.body).start()].removesuffix("\n")


@dataclass(frozen=True)
class Page:
    """One page of one message (the later design's chat_read message=ID offset=K): its message, the range of
    body offsets [start, end) of `total` (UTF-16 units), the characters after the range line as far as the
    output goes, and whether the output reached the closing fence (False: the host cut the page)."""

    message_id: Optional[int]
    sender: Optional[str]
    start: int
    end: int
    total: int
    chars: str
    fenced: bool


@dataclass(frozen=True)
class ReadOutcome(Outcome):
    """chat_read: `framed` when both fences stand (a drain with mail, or a page); the messages of the lines
    found (also in an output a host cut before its closing fence); the page; `host_clipped_from` the length of
    the full output when the host showed the model only its first characters; `drained` the count a drain's
    header says it marked read (None: no drain header)."""

    messages: tuple[InboxMessage, ...] = ()
    page: Optional[Page] = None
    host_clipped_from: Optional[int] = None
    drained: Optional[int] = None

    @property
    def bodies(self) -> list[str]:
        return [m.body for m in self.messages]


@dataclass(frozen=True)
class RegisterOutcome(Outcome):
    """chat_register: the name and session id; where the name came from (kept, rejoined, drawn, replaced: a
    fresh identity instead of a claimed `as` of another project; None for any other origin the reply states)."""

    name: Optional[str] = None
    session_id: Optional[str] = None
    origin: Optional[str] = None


@dataclass(frozen=True)
class StatusOutcome(Outcome):
    """chat_status: the name and the unread and total counts of a registered caller (R34)."""

    name: Optional[str] = None
    pending: int = 0
    total: int = 0


@dataclass(frozen=True)
class ListOutcome(Outcome):
    """chat_list or the CLI's list: (name, listed stale) per row, in the order shown (R14, R16)."""

    rows: tuple[tuple[str, bool], ...] = ()


@dataclass(frozen=True)
class ReviewOutcome(Outcome):
    """A user's review of a held message: approved or declined (the kind), and the held message's id."""

    held: Optional[int] = None


@dataclass(frozen=True)
class HookLine:
    """A hook line: the identity it names and its unread count, the leave line, or another line (R31, R7)."""

    kind: str
    name: Optional[str] = None
    unread: int = 0


@dataclass(frozen=True)
class WakeNudge:
    """A wake prompt: the senders it names (none for `another session`) and the unread count (R20)."""

    senders: tuple[str, ...]
    count: int


@dataclass(frozen=True)
class StoreFailure:
    """A store failure a poll cycle caught and logged (R24): where in the cycle, and the error."""

    where: str
    error: str


@dataclass(frozen=True)
class HeldNotice:
    """A notice a held message's sender got: the held message's id, its recipient, and `expired` or `refused`."""

    held: int
    to: str
    outcome: str


# -- decoding ------------------------------------------------------------------------------------------


def _names_of(field: Optional[str]) -> tuple[str, ...]:
    """The names of a `recipients:`-style field (`(none)` is none)."""
    return tuple(n.strip() for n in (field or "").split(",") if n.strip() and n.strip() != "(none)")


def _refusal_kind(text: str) -> Optional[str]:
    """The refusals every send and broadcast may meet, by their exact texts and prefixes (R29, R9)."""
    exact = {EMPTY_BODY_REPLY: EMPTY_BODY, TOO_LONG_REPLY: TOO_LONG, SELF_REPLY: SELF,
             NOT_SENT + NOT_REGISTERED_REPLY: UNREGISTERED}
    if text in exact:
        return exact[text]
    if text.startswith(DISABLED_PREFIX):
        return DISABLED
    if NO_RECIPIENT_RE.match(text):
        return UNKNOWN_TO
    return None


_POLICY_RES = ((HELD, HELD_REPLY_RE), (CAPPED, CAP_REFUSAL_RE), (EXITED, EXITED_REFUSAL_RE),
               (INBOUND_REFUSED, INBOUND_REFUSAL_RE))


def _messaging_kind(text: str) -> tuple[str, Optional[re.Match]]:
    """The kind of a send or a broadcast reply, and the match that placed it (either tool's shapes are
    recognised in either's reply, so a reply of the other tool's shape is named for what it says)."""
    kind = _refusal_kind(text)
    if kind is not None:
        return kind, NO_RECIPIENT_RE.match(text) if kind == UNKNOWN_TO else None
    for kind, rx in ((SENT, SENT_RE), (BROADCAST, BROADCAST_HEAD_RE), *_POLICY_RES):
        hit = rx.match(text.split("\n", 1)[0] if kind == BROADCAST else text)
        if hit:
            return kind, hit
    return OTHER, None


def _wait_ms(span: str) -> Optional[int]:
    """`90s`, `5m`, `1h`, `250ms` in milliseconds (its leading number and unit)."""
    hit = HELD_WAIT_RE.match(span)
    if hit is None:
        return None
    return int(hit["n"]) * {"ms": 1, "s": SECOND_MS, "m": MINUTE_MS, "h": HOUR_MS}[hit["unit"]]


def _send(tool: str, ok: bool, text: str) -> Outcome:
    kind, hit = _messaging_kind(text)
    if tool == "broadcast":
        return _broadcast(ok, text, kind, hit)
    to = hit["to"] if hit is not None and "to" in hit.re.groupindex else None
    stale = (SEND_NOTE_STALE in text) if SEND_NOTE_STALE in text or SEND_NOTE_ACTIVE in text else None
    parts = SENT_PARTS_RE.search(text)
    deadline = HELD_DEADLINE_RE.search(text) if kind == HELD else None
    return SendOutcome(
        tool, ok, kind, to=to, to_id12=hit["id"] if kind == SENT else None,
        recipient_stale=stale if kind == SENT else None, parts=int(parts["count"]) if parts else 1,
        suppressed=DEDUP_REPLY_MARK in text, held_wait_ms=_wait_ms(deadline["wait"]) if deadline else None)


def _broadcast(ok: bool, text: str, kind: str, hit: Optional[re.Match]) -> Outcome:
    if kind != BROADCAST:
        return BroadcastOutcome("broadcast", ok, kind)
    head = text.split("\n\n", 1)[0].split("\n")
    groups: dict[str, tuple[str, ...]] = {}
    for line in head[1:]:
        label, sep, names = line.partition(": ")
        if sep and label in BROADCAST_GROUPS:
            groups[BROADCAST_GROUPS[label]] = _names_of(names)
    if "recipients" not in groups:
        return BroadcastOutcome("broadcast", ok, OTHER)
    parts, suppressed = BROADCAST_PARTS_RE.search(text), BROADCAST_SUPPRESSED_RE.search(text)
    return BroadcastOutcome("broadcast", ok, BROADCAST, count=int(hit["count"]), **groups,
                            parts=int(parts["count"]) if parts else 1,
                            suppressed=int(suppressed["count"]) if suppressed else 0)


def _inbox_messages(text: str) -> tuple[InboxMessage, ...]:
    """The message lines after the opening fence, each body running to the next line's head (less the line
    break before it), to the closing fence, or to the end of an output cut before it."""
    inner = text.split(INBOX_BEGIN + "\n", 1)[-1]
    fenced = ("\n" + INBOX_END) in inner
    inner = inner.rsplit("\n" + INBOX_END, 1)[0]
    heads = list(INBOX_LINE_RE.finditer(inner))
    out = []
    for k, h in enumerate(heads):
        last = k + 1 == len(heads)
        body = inner[h.end():len(inner) if last else heads[k + 1].start() - 1]
        clip, first = CLIP_MARKER_RE.search(body), FIRST_PART_RE.match(body)
        out.append(InboxMessage(
            h["name"], h["stamp"], int(h["id"]) if h["id"] else None, body,
            clip=(int(clip["shown"]), int(clip["total"])) if clip else None,
            parts=int(first["count"]) if first else None, whole_line=fenced or not last))
    return tuple(out)


def decode_page(text: str) -> Optional[Page]:
    """The page a chat_read of one message shows (its range line and characters); None for any other output."""
    rng = PAGE_RANGE_RE.search(text)
    if rng is None:
        return None
    line = PAGE_LINE_RE.search(text, 0, rng.start())
    rest = text[rng.end():].partition("\n")[2]
    chars, fence, _ = rest.partition("\n" + INBOX_END)
    return Page(int(line["id"]) if line else None, line["name"] if line else None,
                int(rng["start"]), int(rng["end"]), int(rng["total"]), chars if fence else rest, bool(fence))


def _read(ok: bool, text: str, clipped_from: Optional[int]) -> ReadOutcome:
    if text.startswith(DISABLED_PREFIX):
        kind = DISABLED
    elif text == NOT_REGISTERED_REPLY:
        kind = UNREGISTERED
    elif text == INBOX_EMPTY:
        kind = EMPTY_INBOX
    else:
        kind = FRAMED if INBOX_BEGIN in text and INBOX_END in text else OTHER
    head = INBOX_HEAD_RE.match(text)
    return ReadOutcome("read", ok, kind, messages=_inbox_messages(text) if INBOX_BEGIN in text else (),
                       page=decode_page(text), host_clipped_from=clipped_from,
                       drained=int(head["count"]) if head else None)


def _register(ok: bool, text: str) -> RegisterOutcome:
    if text.startswith(DISABLED_PREFIX):
        return RegisterOutcome("register", ok, DISABLED)
    hit = REGISTERED_RE.search(text)  # a replaced claim says why before the line (D-later-6)
    if hit is None:
        return RegisterOutcome("register", ok, OTHER)
    sid = REGISTERED_ID_RE.search(text)
    origin = next((word for word, mark in (("replaced", ORIGIN_REPLACED), ("kept", ORIGIN_KEPT),
                                           ("rejoined", ORIGIN_REJOINED), ("drawn", ORIGIN_DRAWN)) if mark in text),
                  None)
    return RegisterOutcome("register", ok, REGISTERED, name=hit["name"], session_id=sid["id"] if sid else None,
                           origin=origin)


def _status(ok: bool, text: str) -> StatusOutcome:
    hit = STATUS_RE.match(text)
    if hit is not None and not text.startswith(DISABLED_PREFIX):
        return StatusOutcome("status", ok, REGISTERED, name=hit["name"], pending=int(hit["pending"]),
                             total=int(hit["total"]))
    kind = (DISABLED if text.startswith(DISABLED_PREFIX) else NOT_REGISTERED
            if text.startswith(STATUS_NOT_REGISTERED_PREFIX) else OTHER)
    return StatusOutcome("status", ok, kind)


def _unregister(ok: bool, text: str) -> Outcome:
    kind = (DISABLED if text.startswith(DISABLED_PREFIX) else
            {UNREGISTERED_REPLY: LEFT, UNREGISTER_NOT_REGISTERED: NOT_REGISTERED,
             NOT_REGISTERED_REPLY: UNREGISTERED}.get(text, OTHER))
    return Outcome("unregister", ok, kind)


def _roster_rows(tool: str, text: str) -> Optional[list[tuple[str, bool]]]:
    """(name, stale) per row of chat_list (`- NAME ...` lines) or of the CLI's tables; None: no section."""
    section, in_table, out = None, False, []
    for line in text.splitlines():
        head = (LIST_SECTION_RE if tool == "list" else CLI_SECTION_RE).match(line.strip())
        if head:
            section, in_table = head["section"], False
        elif section and tool == "list" and line.startswith("- "):
            out.append((line[2:].split(" ", 1)[0], section == "Stale"))
        elif section and tool == "cli_list":
            if line.startswith("NAME "):
                in_table = True
            elif not line.strip():
                in_table = False
            elif in_table and not line.startswith("("):
                out.append((line.split()[0], section == "Stale"))
    return out if section else None


def _list(tool: str, ok: bool, text: str) -> ListOutcome:
    if text.startswith(DISABLED_PREFIX):
        return ListOutcome(tool, ok, DISABLED)
    rows = _roster_rows(tool, text)
    return ListOutcome(tool, ok, OTHER if rows is None else ROSTER, rows=tuple(rows or ()))


def _review(tool: str, ok: bool, text: str) -> ReviewOutcome:
    hit = REVIEW_REPLY_RE.match(text)
    if hit is None:
        return ReviewOutcome(tool, ok, DISABLED if text.startswith(DISABLED_PREFIX) else OTHER)
    return ReviewOutcome(tool, ok, APPROVED if hit["decision"] == "Approved" else DECLINED, held=int(hit["held"]))


def decode_reply(tool: str, ok: bool, text: str, *, clipped_from: Optional[int] = None) -> Outcome:
    """The outcome of one tool reply. `tool` is the short name (`send`, `read`, `cli_list`, ...); `text` what the
    host showed the model, `clipped_from` the full reply's length when the host clipped it."""
    text = text or ""
    outcome = _decode(tool, ok, text, clipped_from)
    return replace(outcome, refused=True) if text.startswith((NOT_SENT, DISABLED_PREFIX)) else outcome


def _decode(tool: str, ok: bool, text: str, clipped_from: Optional[int]) -> Outcome:
    if tool in ("send", "broadcast"):
        return _send(tool, ok, text)
    if tool == "read":
        return _read(ok, text, clipped_from)
    if tool in ("list", "cli_list"):
        return _list(tool, ok, text)
    if tool in ("approve", "decline"):
        return _review(tool, ok, text)
    decoder = {"register": _register, "status": _status, "unregister": _unregister}.get(tool)
    if decoder is not None:
        return decoder(ok, text)
    return Outcome(tool, ok, DISABLED if text.startswith(DISABLED_PREFIX) else OTHER)


@lru_cache(maxsize=4096)  # the judges ask of one hook event many times: each line is parsed once
def decode_hook_line(line: Optional[str]) -> HookLine:
    """A hook line's identity and unread count, the leave line, or another line."""
    line = line or ""
    hit = HOOK_LINE_RE.match(line)
    if hit is not None:
        return HookLine(IDENTITY, hit["name"], int(hit["unread"] or 0))
    return HookLine(LEFT if line.startswith(LEAVE_LINE_PREFIX) else OTHER)


def decode_wake(text: Optional[str]) -> Optional[WakeNudge]:
    """The senders and the count a wake prompt names; None for a text that is no wake prompt."""
    hit = WAKE_NUDGE_RE.search(text or "")
    if hit is None:
        return None
    names = hit["names"]
    senders = () if names == WAKE_NOBODY else tuple(t.strip() for t in WAKE_NAME_TOKEN_RE.findall(names) if t.strip())
    return WakeNudge(senders, int(hit["count"]))


def decode_notice(body: Optional[str]) -> Optional[HeldNotice]:
    """The notice stored for a held message's sender; None for any other stored body."""
    hit = NOTICE_RE.match(str(body or ""))
    if hit is None:
        return None
    return HeldNotice(int(hit["held"]), hit["to"], "expired" if hit["outcome"] == "expired" else "refused")


def decode_log_line(message: Optional[str]) -> Optional[StoreFailure]:
    """The store failure a runtime log line reports; None for any other line (a failed prompt, a note)."""
    hit = STORE_FAILURE_LOG_RE.match(message or "")
    return StoreFailure(hit["where"], hit["error"]) if hit else None


def part_count(body: Optional[str]) -> Optional[int]:
    """N for the first stored part of a body split into N parts (`(message 1 of N)`), else None."""
    hit = FIRST_PART_RE.match(str(body or ""))
    return int(hit["count"]) if hit else None


def joined_parts(bodies: list[str]) -> str:
    """The chunks of one split send, joined: the first part's `(message 1 of N)` and every part's
    `(continued in next message)` taken off with their blank lines. A cut drops its own blank line and
    the whitespace around it, so the chunks give the body back up to whitespace (`design.split_key`)."""
    out = []
    for n, body in enumerate(bodies):
        if n == 0:
            m = FIRST_PART_RE.match(body)
            body = body[m.end():].removeprefix(PART_SEPARATOR) if m else body
        if n < len(bodies) - 1:
            body = body.removesuffix(PART_SEPARATOR + PART_CONTINUED)
        out.append(body)
    return "".join(out)


def contention_error(text: Optional[str]) -> bool:
    """A reply, hook line or poller log that carries SQLite's words for a lock it could not get (P15)."""
    return isinstance(text, str) and bool(CONTENTION_ERROR_RE.search(text))
