"""thatch_core.names: the pool, name format, topics and placeholder titles."""

from __future__ import annotations

import pytest

from thatch_core.names import (
    NAME_BASE_RE, NAME_POOL, clean_topic, format_name, is_placeholder_title, render_participant,
    topic_from_title,
)


@pytest.mark.rules("R2")
def test_pool_is_short_unique_hyphenated_bases():
    """R2: ~60 short syllable bases, unique case-insensitively, lowercase
    letters and hyphens only (no underscore, so no name can shadow an id)."""
    assert 50 <= len(NAME_POOL) <= 80
    assert len({b.casefold() for b in NAME_POOL}) == len(NAME_POOL)
    assert all(NAME_BASE_RE.match(b) and len(b) <= 12 for b in NAME_POOL)
    assert "al-go-rithm" in NAME_POOL and "ba-sil" in NAME_POOL


@pytest.mark.rules("R2")
def test_format_name():
    """R2: base plus a five-digit counter, wider (never wrapped) past 99999."""
    assert format_name("al-go-rithm", 1) == "al-go-rithm-00001"
    assert format_name("ba-sil", 123456) == "ba-sil-123456"


@pytest.mark.rules("R3")
@pytest.mark.parametrize("title", [
    None, "", "   ", "New session - 2026-11-29T13:45:07.123Z", "New session",
    "new  session", "Child session - 2026-11-29T13:45:07.123Z", "Untitled", "(untitled)",
    "New chat", "New conversation: 2026-11-29", "(no title)",
])
def test_placeholder_titles_never_become_topics(title):
    """R3: empty and default titles are placeholders."""
    assert is_placeholder_title(title)
    assert topic_from_title(title) is None


@pytest.mark.rules("R3")
@pytest.mark.parametrize("title", [
    "Fix the login bug", "New session handling refactor", "Untitled documents feature",
    "session - cleanup",
])
def test_real_titles_are_not_placeholders(title):
    """R3: a real title that merely starts like a default one is kept."""
    assert not is_placeholder_title(title)
    assert topic_from_title(title) == title


@pytest.mark.rules("R3")
def test_clean_topic_collapses_strips_and_caps():
    """R3: whitespace runs collapse, ends are stripped, 80-char cap."""
    assert clean_topic("  a \t\n b   c ") == "a b c"
    assert clean_topic("z" * 100) == "z" * 80
    assert clean_topic(None) is None


@pytest.mark.rules("R10")
def test_render_participant():
    """R10: a departed participant renders as unknown (<id[:12]>, departed)."""
    assert render_participant("ba-sil-00001", "ses_1") == "ba-sil-00001"
    assert render_participant(None, "ses_0123456789abcdef") == "unknown (ses_01234567, departed)"
    assert render_participant(None, None) == "unknown (, departed)"
