"""The real suite's file-level case and its "ChatStore via ThatchDB" block.

The real helper registers with a chosen base ("alice"); here the pool pick
is steered to a pool base instead (conftest.reg), so ``a-corn`` plays alice,
``ba-sil`` bob, ``ca-ra-mel`` carol, ``dai-sy`` dave, ``gin-ger`` the ghost
and ``fal-con`` the real "fix-auth".
"""

from __future__ import annotations

import re

import pytest

from thatch_core import clock
from thatch_core.names import NAME_POOL, render_participant
from thatch_core.policy import LATER

ISO_SECOND = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
COUNTED = re.compile(r"^(.+)-(\d{5})$")
# The real shared charset: letters, digits, space, apostrophe, period, hyphen.
NAME_CHARSET = re.compile(r"^(?:[^\W_]|[ '.\-])+$")
OLD = "2020-01-01T00:00:00Z"


@pytest.mark.rules("R10")
def test_departed_participant_rendering():
    """
    "departed participants render with the shared unknown convention": a
    missing name renders as ``unknown (<first 12 of the id>, departed)``, a
    present name as itself, and no id at all as ``unknown (, departed)`` (R10).
    """
    assert render_participant(None, "ses_abcdefgh1234") == "unknown (ses_abcdefgh, departed)"
    assert render_participant("alice", "ses_x") == "alice"
    assert render_participant(None, None) == "unknown (, departed)"


@pytest.mark.rules("R2")
def test_register_assigns_counter_name(store, reg, raw):
    """
    "register assigns a slug-counter name and creates the directory row": the
    first draw of a base on a fresh database is ``<base>-00001``; the one row
    carries the session id, the project and second-resolution ISO stamps, and
    is an auto row (R2).
    """
    res = reg("ses_a", "a-corn", project="acme/widgets")
    assert res.name == "a-corn-00001"
    rows = store.list_sessions()
    assert [(r.name, r.session_id, r.project) for r in rows] == [("a-corn-00001", "ses_a", "acme/widgets")]
    assert ISO_SECOND.match(rows[0].registered_at) and ISO_SECOND.match(rows[0].last_seen)
    assert ISO_SECOND.match(clock.iso())
    assert raw.execute("SELECT auto FROM chat_sessions WHERE session_id = 'ses_a'").fetchone()[0] == 1


@pytest.mark.rules("R2")
def test_titleless_registration_draws_pool_base(reg):
    """
    "a title-less registration draws a pool slug as the base": with no title
    the name is a pool base plus a five-digit counter (R2).
    """
    name = reg("ses_a").name
    m = COUNTED.match(name)
    assert m and re.match(r"^[^\W_](?:[^\W_]|-)*$", m.group(1))
    assert m.group(1) in NAME_POOL


@pytest.mark.rules("R2")
def test_same_base_distinct_counters(reg):
    """
    "the same base handed to two sessions yields distinct counters": two
    sessions drawing one base get counters 1 and 2 (R2).
    """
    assert reg("ses_a", "fal-con").name == "fal-con-00001"
    assert reg("ses_b", "fal-con").name == "fal-con-00002"


@pytest.mark.rules("R2")
def test_legacy_row_bumps_next_draw(store, reg, raw):
    """
    "a legacy row holding a drawn name makes the next draw bump the counter":
    a legacy row (auto 0) inserted with only the columns the real test gives
    (the real schema's defaults stamp the times) already owns
    ``fal-con-00001``; the next draw skips to 00002 and the legacy row is
    untouched (R2).
    """
    raw.execute("INSERT INTO chat_sessions (session_id, name, project, host_kind, auto)"
                " VALUES ('ses_legacy', 'fal-con-00001', 'p', 'opencode', 0)")
    assert reg("ses_a", "fal-con").name == "fal-con-00002"
    assert store.find("ses_legacy").name == "fal-con-00001"


@pytest.mark.rules("R2", "R26")
def test_prune_never_reissues_name(store, reg, raw):
    """
    "pruning an auto row never reissues its name; counters only grow": an auto
    row silent past the TTL is pruned (one row), and the next session drawing
    that base gets the next number, never 1 again (R2, R26).
    """
    assert reg("ses_a", "fal-con").name == "fal-con-00001"
    raw.execute("UPDATE chat_sessions SET last_seen = ?", (OLD,))
    assert store.prune().pruned == ("ses_a",)
    assert store.find("ses_a") is None
    assert reg("ses_b", "fal-con").name == "fal-con-00002"


@pytest.mark.rules("R26", "R11")
def test_prune_removes_dead_mail_keeps_history(store, reg, raw):
    """
    "prune removes dead mail addressed to pruned sessions, keeps history":
    old unread mail to the session the pass prunes is deleted in that same
    pass; read history and unread mail to a registered recipient stay (R26,
    R11). The real prune deletes, in one pass, unread mail older than the
    cutoff addressed to any recipient no longer registered.
    """
    reg("ses_a", "a-corn")
    bob = reg("ses_b", "ba-sil").name
    ghost = reg("ses_ghost", "gin-ger").name
    store.send("ses_a", bob, "read already")
    store.read("ses_b")
    store.send("ses_a", ghost, "nobody will read this")
    store.send("ses_a", bob, "still unread")
    raw.execute("UPDATE chat_messages SET created_at = ?", (OLD,))
    raw.execute("UPDATE chat_sessions SET last_seen = ? WHERE session_id = 'ses_ghost'", (OLD,))
    store.prune()
    assert store.find("ses_ghost") is None
    assert store.find("ses_a") is not None
    assert raw.execute("SELECT COUNT(*) FROM chat_messages WHERE body = 'nobody will read this'").fetchone()[0] == 0
    assert store.unread_count("ses_b") == 1
    assert [m.body for m in store.read("ses_b")] == ["still unread"]


@pytest.mark.rules("R3")
def test_topics_optional_sanitized_set_at_registration(store, reg):
    """
    "topics are optional, sanitized to one roster line, and set at
    registration": no title gives no topic; a title becomes the topic with
    whitespace runs collapsed, ends trimmed and a cap of 80 characters; a
    later registration without a title keeps the topic it has (R3).
    """
    assert reg("ses_a", "a-corn").topic is None
    assert reg("ses_b", "ba-sil", title="QAing the release").topic == "QAing the release"
    assert store.find("ba-sil-00001").topic == "QAing the release"
    dirty = reg("ses_c", "ca-ra-mel",
                title="  multi\nline   topic  that runs far past the eighty character limit for topics ")
    assert dirty.topic == "multi line topic that runs far past the eighty character limit for topics"
    assert len(reg("ses_d", "dai-sy", title="x" * 200).topic) == 80
    assert reg("ses_b", "ba-sil").topic == "QAing the release"
    assert store.find("ba-sil-00001").topic == "QAing the release"


@pytest.mark.rules("R3")
def test_refresh_topic_auto_rows_only(store, reg, raw):
    """
    "refreshAutoTopic updates auto rows only": a title refresh rewrites an
    auto row's topic, leaves a legacy row's (auto 0, inserted with the real
    test's columns only) alone, and a blank title never blanks a topic (R3).
    """
    reg("ses_a", "a-corn", title="old title")
    raw.execute("INSERT INTO chat_sessions (session_id, name, project, host_kind, auto, topic)"
                " VALUES ('ses_legacy', 'landru', 'p', 'opencode', 0, 'user topic')")
    store.refresh_topic("ses_a", "new title from autotitler")
    store.refresh_topic("ses_legacy", "sneaky title")
    assert store.find("a-corn-00001").topic == "new title from autotitler"
    assert store.find("ses_legacy").topic == "user topic"
    store.refresh_topic("ses_a", "   ")
    assert store.find("a-corn-00001").topic == "new title from autotitler"


@pytest.mark.rules("R2")
def test_generated_names_charset_never_shadow_ids(reg):
    """
    "generated names satisfy the charset and never shadow session IDs": a
    minted name passes the shared name charset and holds no underscore, so it
    can never look like a session id (``ses_...``, ``mcp_...``) to a lookup (R2).
    """
    name = reg("ses_a", "fal-con").name
    assert NAME_CHARSET.match(name)
    assert "_" not in name


@pytest.mark.rules("R6")
def test_reregistering_idempotent(store, reg):
    """
    "re-registering is idempotent and keeps the assigned name": a second
    registration of one session returns the same name and adds no row (R6).
    """
    first = reg("ses_a", "a-corn")
    again = reg("ses_a", "a-corn")
    assert again.name == first.name
    assert len(store.list_sessions()) == 1


@pytest.mark.rules("R9")
def test_find_by_name_or_id(store, reg):
    """
    "find resolves by name or session id; misses return null": the name and
    the session id both resolve the row; an unknown text resolves nothing (R9).
    """
    reg("ses_a", "a-corn")
    assert store.find("a-corn-00001").session_id == "ses_a"
    assert store.find("ses_a").name == "a-corn-00001"
    assert store.find("nobody") is None


@pytest.mark.rules("R7", "R11")
def test_unregister_keeps_history(store, reg):
    """
    "unregister removes the row but keeps message history": the first
    unregister reports a removed row, the second none; the row is gone but
    the message stays, its sender now rendered as departed (thatch_core's
    inbox renders the real null name) (R7, R11).
    """
    alice = reg("ses_a", "a-corn").name
    bob = reg("ses_b", "ba-sil").name
    store.send("ses_a", bob, "hello")
    assert store.unregister("ses_a") is True
    assert store.unregister("ses_a") is False
    assert store.find(alice) is None
    inbox = store.read("ses_b")
    assert [(m.from_name, m.body) for m in inbox] == [(render_participant(None, "ses_a"), "hello")]


@pytest.mark.rules("R9", "R8")
def test_send_validates_endpoints(store, reg):
    """
    "send validates endpoints": unknown recipient, unregistered sender, self
    address, blank body and a body over 10,000 characters are refused; a good
    send carries the resolved recipient row; a session id addresses too (R9, R8).
    Seed 000's cap wins by default; under the later design the 10,001
    characters go as six parts (five of 2,000 and one of 1), as the real does.
    """
    bob = reg("ses_b", "ba-sil").name
    reg("ses_a", "a-corn")
    assert not store.send("ses_a", "ghost", "hi").ok
    assert not store.send("ses_unregistered", bob, "hi").ok
    assert not store.send("ses_a", "ses_a", "note to self").ok
    assert not store.send("ses_a", bob, "   ").ok
    assert not store.send("ses_a", bob, "x" * 10_001).ok
    assert store.send("ses_a", bob, "x" * 10_001, policy=LATER).parts == 6
    ok = store.send("ses_a", bob, "hello bob")
    assert ok.ok
    assert (ok.recipient.name, ok.recipient.session_id) == ("ba-sil-00001", "ses_b")
    assert store.send("ses_b", "ses_a", "hello alice").ok


def _count(raw) -> int:
    return raw.execute("SELECT COUNT(*) FROM chat_messages").fetchone()[0]


@pytest.mark.rules("R9")
def test_resend_within_dedupe_window(store, reg, raw):
    """
    "an identical resend within the dedupe window lands one row, outside it
    lands two": under the later design a retry of an unread copy succeeds and
    stores nothing; another recipient or body is never a retry; once the first
    copy is older than the window the same body is a new message (R9).
    """
    bob = reg("ses_b", "ba-sil").name
    reg("ses_a", "a-corn")
    assert store.send("ses_a", bob, "status: green", policy=LATER).ok
    retry = store.send("ses_a", bob, "status: green", policy=LATER)
    assert retry.ok and retry.suppressed and _count(raw) == 1
    carol = reg("ses_c", "ca-ra-mel").name
    assert not store.send("ses_a", carol, "status: green", policy=LATER).suppressed
    assert not store.send("ses_a", bob, "status: red", policy=LATER).suppressed
    assert _count(raw) == 3
    raw.execute("UPDATE chat_messages SET created_at = ? WHERE body = 'status: green' AND to_session = 'ses_b'",
                (clock.iso_minutes_ago(1),))
    later_send = store.send("ses_a", bob, "status: green", policy=LATER)
    assert later_send.ok and not later_send.suppressed and _count(raw) == 4


@pytest.mark.rules("R12")
def test_retried_broadcast_per_recipient(store, reg, raw):
    """
    "a retried broadcast suppresses per-recipient duplicates and keeps the
    recipient list": under the later design the retry stores nothing for the
    two recipients whose copy is unread and still lists both; another body
    goes out fresh (R12).
    """
    for sid, base in (("ses_a", "a-corn"), ("ses_b", "ba-sil"), ("ses_c", "ca-ra-mel")):
        reg(sid, base)
    assert store.broadcast("ses_a", "rebase if you are based on main", policy=LATER).ok
    retry = store.broadcast("ses_a", "rebase if you are based on main", policy=LATER)
    assert retry.ok and len(retry.suppressed) == 2
    assert sorted(retry.recipients) == ["ba-sil-00001", "ca-ra-mel-00001"] and _count(raw) == 2
    assert store.broadcast("ses_a", "different body", policy=LATER).suppressed == ()


@pytest.mark.rules("R12", "R35")
def test_broadcast_skips_stale(store, reg, raw):
    """
    "broadcast reaches every other fresh session, skipping stale ones": the
    fresh others each get one inbox row, the stale opencode row is skipped and
    reported, the sender gets nothing; validation mirrors send; a broadcast
    with nobody left succeeds with no recipients (R12, R35). Seed 000's cap
    refuses 10,001 characters; the later design sends them as six parts.
    """
    for sid, base in (("ses_a", "a-corn"), ("ses_b", "ba-sil"), ("ses_c", "ca-ra-mel"), ("ses_ghost", "gin-ger")):
        reg(sid, base)
    raw.execute("UPDATE chat_sessions SET last_seen = ? WHERE session_id = 'ses_ghost'", (OLD,))
    res = store.broadcast("ses_a", "the time of the biologicals has come to an end")
    assert res.ok
    assert sorted(res.recipients) == ["ba-sil-00001", "ca-ra-mel-00001"]
    assert list(res.skipped) == ["gin-ger-00001"]
    assert (store.unread_count("ses_b"), store.unread_count("ses_c"), store.unread_count("ses_a")) == (1, 1, 0)
    assert not store.broadcast("ses_a", "   ").ok
    assert not store.broadcast("ses_unregistered", "hi").ok
    assert not store.broadcast("ses_a", "x" * 10_001).ok
    assert store.broadcast("ses_a", "x" * 10_001, policy=LATER).parts == 6
    store.unregister("ses_b")
    store.unregister("ses_c")
    empty = store.broadcast("ses_a", "anyone there?")
    assert empty.ok and list(empty.recipients) == []


@pytest.mark.rules("R10")
def test_read_drains_oldest_first(store, reg):
    """
    "read drains the inbox oldest-first and stamps messages read": two unread
    messages come back oldest first with the sender's name; afterwards nothing
    is unread and a second read (or the sender's) returns nothing (R10).
    """
    alice = reg("ses_a", "a-corn").name
    bob = reg("ses_b", "ba-sil").name
    store.send("ses_a", bob, "first")
    store.send("ses_a", bob, "second")
    assert store.unread_count("ses_b") == 2
    inbox = store.read("ses_b")
    assert [m.body for m in inbox] == ["first", "second"]
    assert all(m.from_name == alice for m in inbox)
    assert store.unread_count("ses_b") == 0
    assert store.read("ses_b") == []
    assert store.read("ses_a") == []
