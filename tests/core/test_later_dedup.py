"""The later design's retry de-duplication (D-later-1).

A send, or a broadcast's per-recipient batch, identical to a row the sender
stored within 10 s on the same delivery kind is not stored again while that
row is unread; once read, the same body delivers again. Seed 000's design
stores every send (R9).
"""

from __future__ import annotations

import pytest

from thatch_core import later
from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.db import open_db
from thatch_core.policy import DEFAULT, LATER, Policy
from thatch_core.store import ChatStore
from thatch_core.tools import ChatTools

DEDUP = Policy(retry_dedup_ms=10_000)


@pytest.fixture
def store(db_path, frozen):
    conn = open_db(db_path)
    s = ChatStore(conn)
    for sid in ("ses_a", "ses_b", "ses_c"):
        s.register(sid, project="p")
    yield s
    conn.close()


def rows(store):
    return store.conn.execute("SELECT from_session, to_session, body, via_broadcast FROM chat_messages"
                              " ORDER BY id").fetchall()


def tools(store, policy):
    return ChatTools(store, StaticConfig(ChatConfig(policy=policy)), project="p")


@pytest.mark.rules("R9")
def test_a_retry_within_the_window_stores_nothing_while_the_copy_is_unread(store, frozen):
    """R9 under the later design: the retried send succeeds, no second row."""
    first = store.send("ses_a", "ses_b", "ship it", policy=DEDUP)
    frozen.tick(10)  # the window's edge: still the same call
    again = store.send("ses_a", "ses_b", "  ship it\n", policy=DEDUP)
    assert first.ok and not first.suppressed and again.ok and again.suppressed and again.message_id is None
    assert rows(store) == [("ses_a", "ses_b", "ship it", 0)]


def test_outside_the_window_the_same_body_is_a_new_message(store, frozen):
    store.send("ses_a", "ses_b", "ship it", policy=DEDUP)
    frozen.tick(11)
    assert not store.send("ses_a", "ses_b", "ship it", policy=DEDUP).suppressed
    assert len(rows(store)) == 2


def test_once_read_the_same_body_delivers_again(store, frozen):
    store.send("ses_a", "ses_b", "ok", policy=DEDUP)
    assert [i.body for i in store.read("ses_b")] == ["ok"]
    frozen.tick(1)
    assert not store.send("ses_a", "ses_b", "ok", policy=DEDUP).suppressed
    assert [i.body for i in store.read("ses_b")] == ["ok"]


def test_another_recipient_sender_or_body_is_not_a_retry(store):
    store.send("ses_a", "ses_b", "ok", policy=DEDUP)
    assert not store.send("ses_a", "ses_c", "ok", policy=DEDUP).suppressed
    assert not store.send("ses_c", "ses_b", "ok", policy=DEDUP).suppressed
    assert not store.send("ses_a", "ses_b", "ok!", policy=DEDUP).suppressed
    assert len(rows(store)) == 4


def test_the_delivery_kind_counts_a_broadcast_copy_is_not_a_send(store):
    store.broadcast("ses_a", "all hands", policy=DEDUP)
    assert not store.send("ses_a", "ses_b", "all hands", policy=DEDUP).suppressed
    assert [r[3] for r in rows(store)] == [1, 1, 0]


def test_a_retried_broadcast_stores_nothing_for_recipients_whose_copy_is_unread(store, frozen):
    store.broadcast("ses_a", "all hands", policy=DEDUP)
    store.read("ses_c")
    frozen.tick(3)
    again = store.broadcast("ses_a", "all hands", policy=DEDUP)
    assert sorted(again.recipients) == sorted([store.get("ses_b").name, store.get("ses_c").name])
    assert again.suppressed == (store.get("ses_b").name,) and len(again.message_ids) == 1
    assert len(rows(store)) == 3


def test_seed_000s_design_stores_every_retry(store):
    store.send("ses_a", "ses_b", "ship it", policy=DEFAULT)
    store.send("ses_a", "ses_b", "ship it")
    assert len(rows(store)) == 2


def test_a_split_retry_is_suppressed_while_any_part_is_unread(store, frozen):
    policy = Policy(retry_dedup_ms=10_000, split_part_len=500, max_body_chars=20_000)
    body = "x" * 1200
    first = store.send("ses_a", "ses_b", body, policy=policy)
    assert len(first.message_ids) == 3
    store.conn.execute("UPDATE chat_messages SET read_at = '2026-11-29T12:00:00Z' WHERE id IN (?, ?)",
                       first.message_ids[:2])
    frozen.tick(2)
    assert store.send("ses_a", "ses_b", body, policy=policy).suppressed  # the last part is still unread
    store.read("ses_b")
    assert not store.send("ses_a", "ses_b", body, policy=policy).suppressed  # a fully read batch: a repeat


@pytest.mark.rules("R9")
def test_a_split_body_that_only_shares_a_part_with_an_unread_batch_is_stored(store):
    """R9 under the later design: two different long bodies whose first pages are alike (one sender, one
    instant) are two messages; only a copy of the whole batch is a retry (D-later-9)."""
    policy = Policy(retry_dedup_ms=10_000, split_part_len=500, max_body_chars=20_000)
    first = store.send("ses_a", "ses_b", "handoff part " * 100, policy=policy)
    other = store.send("ses_a", "ses_b", "handoff part " * 90, policy=policy)
    assert first.parts == other.parts == 3 and not other.suppressed and len(other.message_ids) == 3
    assert store.send("ses_a", "ses_b", "handoff part " * 90, policy=policy).suppressed  # its own retry is


def test_the_reply_says_why_it_suppressed_and_echoes_nothing_new(store):
    t = tools(store, LATER)
    first = t.call("chat_send", {"to": "ses_b", "body": "ship it"}, identity="ses_a")
    again = t.call("chat_send", {"to": "ses_b", "body": "ship it"}, identity="ses_a")
    assert first.ok and first.echo and "UNREAD" not in first.text
    assert again.ok and again.echo is None
    assert again.text.startswith(f"[sent] to {store.get('ses_b').name} (ses_b)")
    assert again.text.split("\n\n")[-1] == later.DEDUP_NOTE and "still UNREAD in the recipient's inbox" in again.text


def test_the_broadcast_reply_counts_the_recipients_not_stored_again(store):
    t = tools(store, LATER)
    t.call("chat_broadcast", {"body": "all hands"}, identity="ses_a")
    again = t.call("chat_broadcast", {"body": "all hands"}, identity="ses_a")
    b, c = sorted([store.get("ses_b").name, store.get("ses_c").name])
    assert again.text.splitlines()[:3] == [
        "[broadcast] to 2 sessions", f"recipients: {b}, {c}",
        "duplicate suppressed: an identical broadcast sent moments ago is still UNREAD at 2 recipients - the "
        "original delivery stands; the same body delivers again to a recipient once they have read it"]
