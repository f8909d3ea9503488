"""The real suite's "staleness" block."""

from __future__ import annotations

import pytest

from thatch_core.staleness import is_stale

OLD = "2020-01-01T00:00:00Z"


@pytest.mark.rules("R14")
def test_is_stale_flips_on_age(store, reg, raw):
    """
    "isStale flips on heartbeat age": a just-registered row is fresh; the same
    row with an old ``last_seen`` is stale (R14).
    """
    reg("ses_a", "a-corn")
    assert not is_stale(store.list_sessions()[0])
    raw.execute("UPDATE chat_sessions SET last_seen = ?", (OLD,))
    assert is_stale(store.list_sessions()[0])


@pytest.mark.rules("R13", "R14")
def test_heartbeat_hosted_only(store, reg, raw):
    """
    "heartbeat refreshes last_seen for hosted sessions only": after every row
    is aged, a beat for one session makes it fresh and leaves the other stale
    (R13, R14).
    """
    reg("ses_hosted", "a-corn")
    reg("ses_other", "ba-sil")
    raw.execute("UPDATE chat_sessions SET last_seen = ?", (OLD,))
    store.heartbeat(["ses_hosted"])
    rows = {r.session_id: r for r in store.list_sessions()}
    assert not is_stale(rows["ses_hosted"])
    assert is_stale(rows["ses_other"])
