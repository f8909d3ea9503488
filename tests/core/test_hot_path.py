"""The poll path's shortcuts answer exactly what the long way answers.

The clock's formatted-second cache, the store's memo of the hosted-id check,
the hosted set's cached answer and the class-based transaction: each is
checked against the computation it stands in for, including the cases where
the shortcut must not apply (another process's write, a grace that ends, a
garbled list, an error inside a transaction).
"""

from __future__ import annotations

import random
import time

import pytest
from freezegun import freeze_time

from thatch_core import clock
from thatch_core.db import StoreError, immediate, open_db
from thatch_core.rehost import HostedSet
from thatch_core.store import ChatStore
from thatch_core.store_guard import IdMemo, id_list


def test_iso_cache_gives_what_strftime_gives():
    """Every second formats as strftime would, cached or not, past the cache's size bound."""
    rng = random.Random(7)
    samples = [rng.randrange(0, 4_102_444_800_000) for _ in range(600)]
    for ms in samples + samples[:50]:  # the second pass reads from the cache
        assert clock.iso(ms) == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))
    assert len(clock._ISO_CACHE) <= clock._ISO_CACHE_MAX


def test_iso_of_now_follows_the_frozen_clock():
    with freeze_time("2026-01-05 09:00:00") as frozen:
        first = clock.iso()
        frozen.tick(1.0)
        assert (first, clock.iso()) == ("2026-01-05T09:00:00Z", "2026-01-05T09:00:01Z")
        assert clock.iso_minutes_ago(15) == "2026-01-05T08:45:01Z"


@pytest.mark.parametrize("values", [
    ["ses_a", "ses_b", "ses_a"], ["ses_a", "", "  ", None, 7, "ses_\udc80", "ses_ü"],
    ("ses_a", "ses_b"), "ses_a", None, 42, [],
])
def test_id_memo_answers_like_id_list(values):
    """The memo gives id_list's answer for any input, first call and repeated call."""
    memo = IdMemo()
    expected = tuple(id_list(values))
    assert (memo(values), memo(values)) == (expected, expected)


def test_id_memo_reads_an_iterator_each_time():
    memo = IdMemo()
    assert memo(iter(["ses_x", "ses_x"])) == ("ses_x",)
    assert memo(iter([])) == ()


def test_id_memo_follows_a_changed_list():
    memo = IdMemo()
    assert memo(["ses_a", "ses_b"]) == ("ses_a", "ses_b")
    assert memo(["ses_a", "ses_c"]) == ("ses_a", "ses_c")
    assert memo(["ses_a"]) == ("ses_a",)
    assert memo([]) == ()


def test_hosted_set_cache_ends_with_the_earliest_grace(tmp_path):
    """A cached answer never outlives a grace: the re-hosted id drops at its deadline."""
    prev = HostedSet(tmp_path, 1_000, lambda m: None)
    prev.touch("ses_old", 0)
    hs = HostedSet(tmp_path, 1_000, lambda m: None)
    assert hs.load_previous(10) == ["ses_old"]
    hs.touch("ses_new", 10)
    assert hs.expire(500) == (["ses_new", "ses_old"], [])
    assert hs.expire(1_009) == (["ses_new", "ses_old"], [])
    assert hs.expire(1_010) == (["ses_new"], ["ses_old"])
    assert hs.expire(5_000) == (["ses_new"], [])


def test_hosted_set_cache_follows_touch_and_drop(tmp_path):
    hs = HostedSet(tmp_path, 1_000, lambda m: None)
    hs.touch("ses_b", 0)
    assert hs.expire(1)[0] == ["ses_b"]
    hs.touch("ses_a", 2)
    assert hs.expire(3)[0] == ["ses_a", "ses_b"]
    hs.drop("ses_b")
    got = hs.expire(4)[0]
    got.append("ses_z")  # a caller's copy, never the set's own list
    assert hs.expire(5)[0] == ["ses_a"]


def test_heartbeat_sees_another_connections_rows(tmp_path):
    """Nothing of the database is cached: a row another process registers after
    the first beat is stamped, and its mail is found, at the next poll."""
    path = tmp_path / "chat.db"
    mine, theirs = ChatStore(open_db(path)), ChatStore(open_db(path))
    hosted = ["ses_mine", "ses_late"]
    with freeze_time("2026-01-05 09:00:00") as frozen:
        mine.register("ses_mine")
        mine.heartbeat(hosted)
        assert mine.pending_notifications(hosted, clock.iso()) == []
        theirs.register("ses_late")
        theirs.register("ses_sender")
        sent = theirs.send("ses_sender", "ses_late", "hello")
        frozen.tick(30)
        mine.heartbeat(hosted)
        assert theirs.get("ses_late").last_seen == "2026-01-05T09:00:30Z"
        assert [r.id for r in mine.pending_notifications(hosted, clock.iso())] == [sent.message_id]


def test_immediate_commits_rolls_back_and_joins(tmp_path):
    conn = open_db(tmp_path / "chat.db")
    with immediate(conn) as c:
        c.execute("INSERT INTO chat_pruned (session_id, pruned_at) VALUES ('a', 'x')")
        with immediate(conn):  # joins: no second BEGIN
            c.execute("INSERT INTO chat_pruned (session_id, pruned_at) VALUES ('b', 'x')")
        assert conn.in_transaction
    assert not conn.in_transaction
    with pytest.raises(StoreError):
        with immediate(conn):
            conn.execute("INSERT INTO chat_pruned (session_id, pruned_at) VALUES ('c', 'x')")
            conn.execute("INSERT INTO chat_pruned (session_id, pruned_at) VALUES ('c', 'x')")
    with pytest.raises(KeyError):
        with immediate(conn):
            conn.execute("INSERT INTO chat_pruned (session_id, pruned_at) VALUES ('d', 'x')")
            raise KeyError("not sqlite")
    assert not conn.in_transaction
    assert [r[0] for r in conn.execute("SELECT session_id FROM chat_pruned ORDER BY 1")] == ["a", "b"]
