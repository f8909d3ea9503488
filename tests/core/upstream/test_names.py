"""The real suite's "assigned names" and "name pool invariants" blocks."""

from __future__ import annotations

import re

import pytest

from thatch_core.names import NAME_POOL, is_placeholder_title

COUNTED = re.compile(r"^(?:[^\W_]|-)+-\d{5}$")
NAME_CHARSET = re.compile(r"^(?:[^\W_]|[ '.\-])+$")


@pytest.mark.rules("R3")
def test_default_titles_are_placeholders():
    """
    "isDefaultSessionTitle flags opencode placeholders": opencode's
    ``New session - <time>`` and ``Child session - <time>`` titles are
    placeholders; a real title is not (R3).
    """
    assert is_placeholder_title("New session - 2026-09-13T10:00:00Z")
    assert is_placeholder_title("Child session - 2026-09-13T10:00:00Z")
    assert not is_placeholder_title("Fix auth bug")


@pytest.mark.rules("R2")
def test_counters_per_base(reg):
    """
    "counters are per base and never shared across bases": a second base
    starts at 1 of its own, and the first base continues at 2 (R2).
    """
    assert reg("ses_a", "ap-ri-cot").name == "ap-ri-cot-00001"
    assert reg("ses_b", "bis-cuit").name == "bis-cuit-00001"
    assert reg("ses_c", "ap-ri-cot").name == "ap-ri-cot-00002"


@pytest.mark.rules("R2")
def test_unsteered_draw_counter_suffixed(reg):
    """
    "a null base draws a pool slug, still counter-suffixed": an unsteered
    registration still ends in a five-digit counter (R2).
    """
    assert COUNTED.match(reg("ses_a").name)


@pytest.mark.rules("R2", "R26")
def test_prune_keeps_counters(store, reg, raw):
    """
    "prune deletes auto rows but keeps counters (name never reissued)": after
    the only row of a base is pruned, the base's counter row survives and its
    ``next`` column holds 2, the next unassigned number (the real schema's
    ``chat_name_counters.next``) (R2, R26).
    """
    reg("ses_a", "ket-tle")
    raw.execute("UPDATE chat_sessions SET last_seen = '2020-01-01T00:00:00Z'")
    store.prune()
    assert store.find("ses_a") is None
    assert raw.execute("SELECT next FROM chat_name_counters WHERE base = 'ket-tle'").fetchone()[0] == 2


@pytest.mark.rules("R2")
def test_pool_names_satisfy_charset():
    """
    "every pool name satisfies the shared charset": each pool base passes the
    shared name charset and is at most 40 characters (R2).
    """
    for name in NAME_POOL:
        assert NAME_CHARSET.match(name), f"pool name {name!r} fails the charset"
        assert len(name) <= 40


@pytest.mark.rules("R2")
def test_pool_names_unique_case_insensitively():
    """
    "no two pool names collide case-insensitively": lower-casing the pool
    leaves every base distinct (R2).
    """
    seen = set()
    for name in NAME_POOL:
        assert name.lower() not in seen, f"pool name {name!r} collides case-insensitively"
        seen.add(name.lower())
