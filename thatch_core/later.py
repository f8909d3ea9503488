"""The real thatch's later design: retry de-duplication, split bodies, paged reads, machinery.

Each behaviour is an option of :class:`thatch_core.policy.Policy` (off under
seed 000's design); this module is their pure logic and their texts, the
store and the tools call it (docs/decisions/later.md, D-later-*).

Lengths here are UTF-16 code units, as the real thatch (TypeScript) counts
a string: a character outside the Basic Multilingual Plane counts two. A
cut is always between two characters, so a surrogate pair never splits.
"""

from __future__ import annotations

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
    return f"Message too long: attempted {count} characters (max {limit}). Split the content across several messages."


def empty_text(count: int) -> str:
    """The later design's empty-body refusal names the attempted (untrimmed) length."""
    return f"Message body cannot be empty (attempted {count} characters)."


# -- split bodies ----------------------------------------------------------------


def _split_point(text: str, budget: int) -> int:
    """Where the first chunk of ``text`` (longer than ``budget``) ends: at the
    last blank line inside the budget, else at the budget, backed off so a
    surrogate pair stays whole on the right."""
    window = index_at_units(text, budget)
    blank = text.rfind(PART_SEPARATOR, 0, window)
    if blank > 0:
        return blank
    return max(window, 1)


def split_body(body: str, limit: int | None) -> list[str]:
    """The stored parts of ``body``: the trimmed body alone when it fits
    ``limit`` units (or splitting is off), none when it is blank, else chunks
    of at most ``limit`` units each (the markers outside the budget), the
    first prefixed ``(message 1 of N)``, all but the last suffixed
    ``(continued in next message)``. Each cut drops its own blank line and the
    whitespace around it, as the real splitChatBody does."""
    if limit is None:
        return [body]
    rest = body.strip()
    if units(rest) <= limit:
        return [rest] if rest else []
    chunks: list[str] = []
    while units(rest) > limit:
        cut = _split_point(rest, limit)
        part, rest = rest[:cut].strip(), rest[cut:].strip()
        if part:
            chunks.append(part)
    if rest:
        chunks.append(rest)
    if len(chunks) <= 1:
        return chunks
    count = len(chunks)
    parts = [first_part_prefix(count) + PART_SEPARATOR + chunks[0]] + chunks[1:]
    return [p + PART_SEPARATOR + PART_CONTINUED if i < count - 1 else p for i, p in enumerate(parts)]


# -- paged reads ------------------------------------------------------------------


def page_of(body: str, offset: int, length: int = READ_PAGE_LEN) -> tuple[str, int, int]:
    """(text, start, end) of the page of ``body`` at ``offset`` (UTF-16 units,
    an offset inside a surrogate pair backing off to the pair's start)."""
    start_i = index_at_units(body, max(offset, 0))
    start = units(body[:start_i])
    end_i = index_at_units(body, length, start_i)
    return body[start_i:end_i], start, start + units(body[start_i:end_i])


def clip_marker(shown: int, total: int, message_id: int) -> str:
    return (f"[clipped: showing {shown} of {total} characters - continue with chat_read, "
            f"message {message_id}, offset {shown}]")


def clipped(body: str, message_id: int, length: int = READ_PAGE_LEN) -> str:
    """A drain line's body: whole when it fits one page, else its first page and the marker."""
    total = units(body)
    if total <= length:
        return body
    text, _, end = page_of(body, 0, length)
    return f"{text}\n{clip_marker(end, total, message_id)}"


def page_text(body: str, message_id: int, offset: int, length: int = READ_PAGE_LEN) -> tuple[bool, str]:
    """(ok, text) of one page of a message: the window's position line and its
    characters, or the refusal of an offset outside the body."""
    total = units(body)
    if offset < 0 or offset >= total:
        return False, (f"Offset {offset} is outside message {message_id} ({total} characters) - use an offset "
                       f"from 0 to {max(0, total - 1)}.")
    text, start, end = page_of(body, offset, length)
    where = (f"next page: chat_read, message {message_id}, offset {end}" if end < total else "final page")
    return True, f"[showing characters {start}-{end} of {total} - {where}]\n{text}"


def page_line(message_id: int, sender: str, stamp: str) -> str:
    """The line naming the paged message, where a drain line names its sender."""
    return f"[message {message_id} from {sender}, {stamp}]"


PAGE_DONE = "(1 message, paged - nothing marked read)"
PAGING_NOTE = ("Each line ends its header with the message id (id N). A message longer than one page (2000 "
               "characters) is clipped; page through the rest with chat_read message=N offset=<characters already "
               "shown> (paging marks nothing read).")
NO_SUCH_MESSAGE = "No message {id} in your mailbox - ids appear in chat_read's drain output and clip markers."
OFFSET_WITHOUT_MESSAGE = ("The offset argument requires a message id - drain with no arguments, or page with both "
                          "message and offset.")
BAD_PAGE_ARGS = ('chat_read pages one message: "message" must be a message id (a positive whole number) and '
                 '"offset" a character offset (0 or more).')
PAGING_OFF = 'chat_read takes no "message" or "offset" here: call it with no arguments to drain your inbox.'


# -- retry de-duplication -------------------------------------------------------------

DEDUP_NOTE = ("DUPLICATE SUPPRESSED: an identical message sent moments ago is still UNREAD in the recipient's "
              "inbox, so no second copy was created - the original delivery stands. The same body delivers again "
              "once they have read it (or a few seconds past the dedupe window).")


def parts_note(count: int, limit: int) -> str:
    return (f"SENT AS {count} PARTS: the body exceeded {limit} characters and was auto-split. The recipient sees "
            f'"{first_part_prefix(count)}" on the first part and "{PART_CONTINUED}" markers, so they can read all '
            "parts before acting.")


def broadcast_notes(text: str, suppressed: int, parts: int, limit: int) -> str:
    """A broadcast reply with the later design's facts added after its recipients:
    the split, and how many recipients already had the identical copy unread."""
    extra = []
    if parts > 1:
        extra.append(f"sent as {parts} parts per recipient (the body exceeded {limit} characters and was auto-split)")
    if suppressed:
        extra.append(f"duplicate suppressed: an identical broadcast sent moments ago is still UNREAD at "
                     f"{suppressed} recipient{'' if suppressed == 1 else 's'} - the original delivery stands; the "
                     "same body delivers again to a recipient once they have read it")
    if not extra:
        return text
    lines = text.split("\n")
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("recipients: ")), 1)
    return "\n".join(lines[:at] + extra + lines[at:])


# -- project-bound claims and the MCP server's project ---------------------------------

PROJECT_ENV_LATER = ("THATCH_PROJECT_DIR", "CURSOR_PROJECT_DIR", "CLAUDE_PROJECT_DIR")
PROJECT_ENV_SEED = ("CURSOR_PROJECT_DIR", "CLAUDE_PROJECT_DIR")


def claim_refused(name: str, theirs: str | None, ours: str | None) -> str:
    """A claimed `as` outside the caller's project, and the way out: one fresh identity for this project."""
    return (f'The identity "{name}" is registered to another project ({theirs or "none"}; this session\'s is '
            f"{ours or 'none'}). Call chat_register WITHOUT `as` to get a fresh identity for this project - once - "
            "then reuse the name it returns.")


def claim_replaced(name: str, theirs: str | None) -> str:
    """chat_register's `as` naming another project's identity: a fresh identity is registered instead."""
    return (f'The `as` name "{name}" belongs to another project ({theirs or "none"}); registered a fresh identity '
            "for this project instead - use the name below from now on.")
