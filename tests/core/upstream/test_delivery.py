"""The real suite's "chat delivery selection" block."""

from __future__ import annotations

import pytest

from thatch_core import clock

OLD = "2020-01-01T00:00:00Z"


@pytest.fixture
def pair(reg):
    """alice (``a-corn-00001``) and bob (``ba-sil-00001``), as the block's setup registers them."""
    reg("ses_a", "a-corn")
    reg("ses_b", "ba-sil")


def renudge_cutoff():
    return clock.iso_minutes_ago(15)


@pytest.mark.rules("R18", "R21")
def test_undelivered_pending_delivered_not(store, pair):
    """
    "undelivered unread messages are pending; delivered ones are not": a new
    message is pending, named by its sender; once stamped delivered it is not,
    inside the re-nudge window (R18, R21).
    """
    store.send("ses_a", "ba-sil-00001", "hello")
    pending = store.pending_notifications(["ses_b"], renudge_cutoff())
    assert [p.from_name for p in pending] == ["a-corn-00001"]
    store.mark_delivered([p.id for p in pending])
    assert store.pending_notifications(["ses_b"], renudge_cutoff()) == []


@pytest.mark.rules("R18")
def test_read_never_pending(store, pair):
    """
    "read messages are never pending": a message drained by a read is not
    selected for a wake (R18).
    """
    store.send("ses_a", "ba-sil-00001", "hello")
    store.read("ses_b")
    assert store.pending_notifications(["ses_b"], renudge_cutoff()) == []


@pytest.mark.rules("R18", "R21")
def test_delivered_unread_requeues(store, pair, raw):
    """
    "delivered-but-unread messages re-queue once the re-nudge window passes":
    a delivery stamp older than the window makes the same message pending
    again (R18, R21).
    """
    store.send("ses_a", "ba-sil-00001", "hello")
    pending = store.pending_notifications(["ses_b"], renudge_cutoff())
    store.mark_delivered([p.id for p in pending])
    raw.execute("UPDATE chat_messages SET delivered_at = ?", (OLD,))
    requeued = store.pending_notifications(["ses_b"], renudge_cutoff())
    assert [p.id for p in requeued] == [pending[0].id]


@pytest.mark.rules("R18", "R25")
def test_pending_only_given_sessions(store, pair, reg):
    """
    "pending selection only covers the given sessions": mail for a session not
    in the list is not selected (R18, R25).
    """
    reg("ses_c", "ca-ra-mel")
    store.send("ses_a", "ba-sil-00001", "for bob")
    store.send("ses_a", "ca-ra-mel-00001", "for carol")
    pending = store.pending_notifications(["ses_b"], clock.iso())
    assert [p.to_session for p in pending] == ["ses_b"]


@pytest.mark.rules("R18", "R8")
def test_unregistering_stops_wake_selection(store, pair):
    """
    "unregistering stops wake selection for kept-but-unread mail": after the
    recipient leaves, its unread mail is kept but never selected for a wake
    (R18, R8).
    """
    store.send("ses_a", "ba-sil-00001", "unread after exit")
    assert len(store.pending_notifications(["ses_b"], clock.iso())) == 1
    store.unregister("ses_b")
    assert store.unread_count("ses_b") == 1
    assert store.pending_notifications(["ses_b"], clock.iso()) == []
