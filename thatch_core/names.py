"""Assigned display names, topics and participant rendering (R2, R3, R10).

Names are assigned, never claimed: a base drawn from :data:`NAME_POOL` plus
that base's counter, which only ever increments (``chat_name_counters``), so a
name is minted once per machine and never reissued. Bases are short on
purpose: they appear in every wake prompt and roster line, while the
session's descriptive identity lives in the topic (the live session title).
"""

from __future__ import annotations

import re

from thatch_core.constants import MAX_TOPIC_LEN

# Nomenclater style: everyday words split into syllables. Lowercase letters
# and hyphens only, so a name can never contain an underscore and shadow a
# session id (ses_..., mcp_...), and never parentheses (the echo parse).
NAME_POOL: tuple[str, ...] = (
    "al-go-rithm", "a-corn", "ap-ri-cot", "ba-sil", "bis-cuit", "bram-ble",
    "ca-ra-mel", "cin-der", "cob-ble", "dai-sy", "dew-drop", "dra-gon",
    "e-cho", "el-der", "em-ber", "fa-ble", "fal-con", "fid-dle",
    "gar-net", "gin-ger", "gra-nite", "har-bor", "ha-zel", "hem-lock",
    "in-di-go", "i-ris", "i-vo-ry", "jas-mine", "jas-per", "ju-ni-per",
    "kes-trel", "ket-tle", "ki-wi", "lan-tern", "la-ven-der", "li-chen",
    "man-go", "mar-ble", "mea-dow", "nee-dle", "nim-bus", "nut-meg",
    "o-pal", "or-chid", "ot-ter", "pe-bble", "pep-per", "pop-py",
    "qui-ver", "ra-ven", "ri-ver", "rus-set", "saf-fron", "sor-rel",
    "tim-ber", "to-paz", "tu-lip", "um-ber", "vel-vet", "wal-nut",
    "wil-low", "yar-row", "ze-phyr", "zin-ni-a",
)

NAME_BASE_RE = re.compile(r"^[a-z]+(-[a-z]+)+$")


def format_name(base: str, counter: int) -> str:
    """``al-go-rithm`` + 1 -> ``al-go-rithm-00001`` (wider past 99999, never wrapped)."""
    return f"{base}-{counter:05d}"


# Titles opencode (and hosts like it) give a session before its auto-titler
# lands. opencode's default is "New session - <ISO timestamp>" and a
# sub-agent's "Child session - <ISO timestamp>"; the bare forms and the
# generic "untitled" words cover other hosts and older builds. Matched after
# whitespace collapsing, case-insensitively (see D-store-3).
_PLACEHOLDER_RE = re.compile(
    r"^(?:"
    r"(?:new|child)\s+(?:session|chat|conversation)(?:\s*[-:–—]\s*.*)?"
    r"|untitled(?:\s+(?:session|chat|conversation))?"
    r"|\(?(?:no|empty)\s+title\)?"
    r"|\(?untitled\)?"
    r")$",
    re.IGNORECASE,
)
_WS_RE = re.compile(r"\s+")


def clean_topic(text: str | None) -> str | None:
    """One roster line: whitespace runs collapse, ends stripped, capped at 80.

    ``None`` stays ``None`` (no topic). Oversized text is cut, never refused:
    a topic is advisory.
    """
    if text is None:
        return None
    return _WS_RE.sub(" ", text).strip()[:MAX_TOPIC_LEN]


def is_placeholder_title(title: str | None) -> bool:
    """True for titles that must never become topics (empty or a default title)."""
    if title is None:
        return True
    cleaned = _WS_RE.sub(" ", title).strip()
    return cleaned == "" or _PLACEHOLDER_RE.match(cleaned) is not None


def topic_from_title(title: str | None) -> str | None:
    """The topic a session title yields: cleaned, or None for a placeholder."""
    if is_placeholder_title(title):
        return None
    return clean_topic(title)


def render_participant(name: str | None, session_id: str | None) -> str:
    """A chat participant for user-visible surfaces (read, wake prompt, tail).

    The display name while the directory row exists; otherwise the one
    cross-surface convention ``unknown (<id[:12]>, departed)``.
    """
    if name:
        return name
    return f"unknown ({(session_id or '')[:12]}, departed)"
