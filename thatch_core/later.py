"""The real thatch's later design: retry de-duplication, split bodies, paged reads, machinery.

Each behaviour is an option of :class:`thatch_core.policy.Policy` (off under
seed 000's design); this module is their pure logic and their texts, the
store and the tools call it (docs/decisions/later.md, D-later-*).

Lengths here are UTF-16 code units, as the real thatch (TypeScript) counts
a string: a character outside the Basic Multilingual Plane counts two. A
cut is always between two characters, so a surrogate pair never splits.
"""

from __future__ import annotations

import math
import os
from typing import Mapping

from thatch_core.constants import MAX_BODY_LEN

# Part budget of a split body and its bounds (THATCH_CHAT_SPLIT_PART_LEN).
SPLIT_PART_LEN = 2000
SPLIT_PART_MIN, SPLIT_PART_MAX = 500, 9000
SPLIT_PART_ENV = "THATCH_CHAT_SPLIT_PART_LEN"
# Whole-body cap of the later design (THATCH_CHAT_MAX_BODY_CHARS).
MAX_BODY_CHARS = 20_000
MAX_BODY_ENV = "THATCH_CHAT_MAX_BODY_CHARS"
# One page of chat_read (the drain clips each message to it; paging reads one page).
READ_PAGE_LEN = 2000
DEDUP_WINDOW_MS = 10_000

# The title of the child session the plugin creates for fact extraction.
EXTRACTION_CHILD_TITLE = "thatch-extraction"
MACHINERY_REASON = "extraction"

PART_CONTINUED = "(continued in next message)"
PART_SEPARATOR = "\n\n"


def first_part_prefix(count: int) -> str:
    return f"(message 1 of {count})"


def is_machinery_title(title: str | None) -> bool:
    """The machinery title: the one signal that survives a lost marker."""
    return title == EXTRACTION_CHILD_TITLE


# -- lengths -------------------------------------------------------------------


def units(text: str) -> int:
    """Length in UTF-16 code units."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def index_at_units(text: str, budget: int, start: int = 0) -> int:
    """The largest index ``i >= start`` with ``units(text[start:i]) <= budget``:
    a cut that would fall inside a surrogate pair backs off one character."""
    used, i = 0, start
    while i < len(text):
        step = 2 if ord(text[i]) > 0xFFFF else 1
        if used + step > budget:
            break
        used += step
        i += 1
    return i


def _env_int(environ: Mapping[str, str] | None, key: str) -> int | None:
    env = os.environ if environ is None else environ
    raw = (env.get(key) or "").strip()
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if value >= 1 else None


def part_len(configured: int | None, environ: Mapping[str, str] | None = None) -> int | None:
    """The effective part budget: None when splitting is off; else the
    environment override or the configured value, clamped to 500..9000."""
    if configured is None:
        return None
    value = _env_int(environ, SPLIT_PART_ENV) or configured
    return min(max(value, SPLIT_PART_MIN), SPLIT_PART_MAX)


def max_body(configured: int, environ: Mapping[str, str] | None = None) -> int:
    """The effective whole-body cap: seed 000's unless the option moved it,
    then the environment override (a positive integer) or the configured value."""
    if configured == MAX_BODY_LEN:
        return configured
    return _env_int(environ, MAX_BODY_ENV) or configured


def too_long_text(count: int, limit: int) -> str:
    """The later design's refusal names the attempted count, so a caller can split deterministically."""
    return f"Message too long ({count} characters; max {limit} characters)."


# -- split bodies ----------------------------------------------------------------


def _cut(body: str, start: int, budget: int) -> int:
    """Where the part starting at ``start`` ends: the whole rest if it fits,
    else after the last blank line in the budget (when that keeps at least
    half of it), else the hard cut."""
    hard = index_at_units(body, budget, start)
    if hard >= len(body):
        return len(body)
    blank = body.rfind(PART_SEPARATOR, start, hard)
    if blank != -1:
        end = blank + len(PART_SEPARATOR)
        while end < hard and body[end] == "\n":
            end += 1
        if units(body[start:end]) * 2 >= budget:
            return end
    return max(hard, start + 1)


def _chunks(body: str, limit: int, count: int) -> list[str]:
    prefix = units(first_part_prefix(count) + PART_SEPARATOR)
    suffix = units(PART_SEPARATOR + PART_CONTINUED)
    out: list[str] = []
    start = 0
    while start < len(body):
        room = limit - (prefix if not out else 0)
        if units(body[start:]) <= room:  # the last part carries no suffix
            out.append(body[start:])
            break
        end = _cut(body, start, room - suffix)
        out.append(body[start:end])
        start = end
    return out


def split_body(body: str, limit: int | None) -> list[str]:
    """The stored parts of ``body``: the body alone when it fits ``limit``
    units (or splitting is off), else parts of at most ``limit`` units each,
    the first prefixed ``(message 1 of N)``, all but the last suffixed
    ``(continued in next message)``. The chunks between the markers join
    back to ``body`` exactly."""
    if limit is None or units(body) <= limit:
        return [body]
    count = max(2, math.ceil(units(body) / limit))
    for _ in range(8):  # the count's digits change the first part's room: settle it
        chunks = _chunks(body, limit, count)
        if len(chunks) == count:
            break
        count = len(chunks)
    parts = [first_part_prefix(count) + PART_SEPARATOR + chunks[0]] + chunks[1:]
    return [p + PART_SEPARATOR + PART_CONTINUED if i < len(parts) - 1 else p for i, p in enumerate(parts)]


# -- paged reads ------------------------------------------------------------------


def page_of(body: str, offset: int, length: int = READ_PAGE_LEN) -> tuple[str, int, int]:
    """(text, start, end) of the page of ``body`` at ``offset`` (UTF-16 units,
    an offset inside a surrogate pair backing off to the pair's start)."""
    start_i = index_at_units(body, max(offset, 0))
    start = units(body[:start_i])
    end_i = index_at_units(body, length, start_i)
    return body[start_i:end_i], start, start + units(body[start_i:end_i])


def clip_marker(shown: int, total: int, message_id: int) -> str:
    return (f"[clipped: showing {shown} of {total} characters; read the rest with chat_read "
            f"message={message_id} offset={shown} - paging marks nothing read]")


def clipped(body: str, message_id: int, length: int = READ_PAGE_LEN) -> str:
    """A drain line's body: whole when it fits one page, else its first page and the marker."""
    total = units(body)
    if total <= length:
        return body
    text, _, end = page_of(body, 0, length)
    return f"{text}\n{clip_marker(end, total, message_id)}"


PAGING_NOTE = ("Each line starts with its message id (#N). A message longer than one page (2000 characters) is "
               "clipped; read the rest with chat_read message=N offset=<characters already shown> (paging marks "
               "nothing read).")
NO_SUCH_MESSAGE = "No message #{id} in your inbox (chat_read pages only messages addressed to you)."
BAD_PAGE_ARGS = ('chat_read pages one message: "message" must be a message id (a positive whole number) and '
                 '"offset" a character offset (0 or more).')
PAGING_OFF = 'chat_read takes no "message" or "offset" here: call it with no arguments to drain your inbox.'


def page_head(message_id: int, sender: str, start: int, end: int, total: int) -> str:
    return (f"[thatch] chat message #{message_id} from {sender}: characters {start}-{end} of {total} "
            "(a page; nothing marked read).")


def page_tail(message_id: int, end: int, total: int) -> str:
    return f"(next page: chat_read message={message_id} offset={end})" if end < total else "(end of message)"


# -- retry de-duplication -------------------------------------------------------------

DEDUP_NOTE = ("Not stored again: an identical message from you is still UNREAD in the recipient's inbox "
              "(sent within the last {span}), so this looks like a retried call and added nothing. Once it has "
              "been read, the same text delivers again.")


def dedup_note(window_ms: int) -> str:
    seconds = window_ms / 1000
    span = f"{seconds:g}s"
    return DEDUP_NOTE.format(span=span)


def parts_note(count: int, limit: int) -> str:
    return (f"SENT AS {count} PARTS: the body was over {limit} characters, so it was split into {count} messages, "
            f'stored together; the first starts "{first_part_prefix(count)}" and every part but the last ends '
            f'"{PART_CONTINUED}". The reader assembles them before acting.')


def broadcast_notes(text: str, suppressed, parts: int, limit: int) -> str:
    """A broadcast reply with the later design's facts added: who already had
    the identical copy unread (nothing stored again) and the split."""
    extra = []
    if parts > 1:
        extra.append(f"SENT AS {parts} PARTS to each recipient (the body was over {limit} characters).")
    if suppressed:
        extra.append("not stored again (an identical broadcast is still UNREAD in the recipient's inbox): "
                     + ", ".join(suppressed))
    if not extra:
        return text
    head, sep, rest = text.partition("\n\n")
    return "\n".join([head, *extra]) + sep + rest


# -- project-bound claims and the MCP server's project ---------------------------------

PROJECT_ENV_LATER = ("THATCH_PROJECT_DIR", "CURSOR_PROJECT_DIR", "CLAUDE_PROJECT_DIR")
PROJECT_ENV_SEED = ("CURSOR_PROJECT_DIR", "CLAUDE_PROJECT_DIR")


def claim_refused(name: str, theirs: str | None, ours: str | None) -> str:
    """A claimed `as` outside the caller's project, and the way out: one fresh identity for this project."""
    if theirs is None:
        where = "has no project on record"
    elif ours is None:
        where = f"belongs to project {theirs}, and this server has no project"
    else:
        where = f"belongs to project {theirs}, not to this one ({ours})"
    return (f'"{name}" {where}, so it cannot be claimed with "as" here. Register a fresh identity for this '
            'project once (chat_register without "as"), then pass that name as "as" on every call - '
            "do not re-register every turn.")
