"""The later design's split bodies (D-later-3).

A body over the part budget (2000 UTF-16 units by default,
THATCH_CHAT_SPLIT_PART_LEN clamped to 500..9000) is stored as parts in one
transaction: the first prefixed "(message 1 of N)", all but the last
suffixed "(continued in next message)", cuts preferring blank lines and never
inside a surrogate pair; the whole body is capped at 20,000
(THATCH_CHAT_MAX_BODY_CHARS) with a refusal naming the count. Seed 000's
design refuses a body over 10,000 characters (R9).
"""

from __future__ import annotations

import pytest

from thatch_core import later
from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.db import StoreError, open_db
from thatch_core.policy import DEFAULT, LATER, Policy
from thatch_core.store import ERR_TOO_LONG, ChatStore
from thatch_core.tools import ChatTools

PREFIX = "(message 1 of {n})\n\n"
SUFFIX = "\n\n(continued in next message)"


@pytest.fixture
def store(db_path, frozen):
    conn = open_db(db_path)
    s = ChatStore(conn)
    for sid in ("ses_a", "ses_b", "ses_c"):
        s.register(sid, project="p")
    yield s
    conn.close()


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    monkeypatch.delenv(later.SPLIT_PART_ENV, raising=False)
    monkeypatch.delenv(later.MAX_BODY_ENV, raising=False)


def chunks(parts: list[str]) -> list[str]:
    """The chunks of a split body: the markers off (and checked where they belong)."""
    n = len(parts)
    out = []
    for i, p in enumerate(parts):
        if i == 0 and n > 1:
            assert p.startswith(PREFIX.format(n=n))
            p = p[len(PREFIX.format(n=n)):]
        if i < n - 1:
            assert p.endswith(SUFFIX)
            p = p[:-len(SUFFIX)]
        out.append(p)
    return out


def joined(parts: list[str]) -> str:
    """The body back from hard-cut parts: the chunks joined as they are."""
    return "".join(chunks(parts))


def test_a_body_of_exactly_the_budget_is_one_message_and_one_more_unit_splits():
    """The budget counts body characters; the markers ride outside it."""
    assert later.split_body("x" * 2000, 2000) == ["x" * 2000]
    parts = later.split_body("x" * 2001, 2000)
    assert len(parts) == 2 and parts[0].startswith("(message 1 of 2)\n\n")
    assert parts[0].endswith("(continued in next message)") and not parts[1].endswith("(continued in next message)")
    assert joined(parts) == "x" * 2001 and [later.units(c) for c in chunks(parts)] == [2000, 1]


def test_a_cut_at_a_blank_line_drops_it():
    paragraphs = ["p%d " % i + "w" * 880 for i in range(5)]
    body = "\n\n".join(paragraphs)
    parts = later.split_body(body, 2000)
    assert "\n\n".join(chunks(parts)) == body  # the blank lines the cuts took are the only loss
    assert all(not c.endswith("\n") and not c.startswith("\n") for c in chunks(parts))
    assert all(later.units(c) <= 2000 for c in chunks(parts))


def test_a_whitespace_only_body_gives_no_parts():
    assert later.split_body(" \n\t ", 2000) == []


def test_a_surrogate_pair_never_splits():
    body = "a" + "\U0001F600" * 1500  # 3001 UTF-16 units
    parts = later.split_body(body, 2000)
    assert joined(parts) == body and all(later.units(c) <= 2000 for c in chunks(parts))
    for p in parts:
        p.encode("utf-8")  # a lone surrogate would not encode


def test_the_count_of_parts_is_in_the_first_prefix():
    """Parts derive from the body alone: ceil(total / budget)."""
    parts = later.split_body("y" * 20_000, 2000)
    assert len(parts) == 10 and parts[0].startswith("(message 1 of 10)") and joined(parts) == "y" * 20_000


@pytest.mark.parametrize(("raw", "want"), [("499", 500), ("500", 500), ("9000", 9000), ("9001", 9000),
                                           ("3000", 3000), ("abc", 2000), ("", 2000), ("-5", 2000), ("0", 2000)])
def test_the_env_part_budget_is_clamped_and_a_bad_value_is_the_default(raw, want):
    assert later.part_len(2000, {later.SPLIT_PART_ENV: raw}) == want


def test_no_split_without_the_option_whatever_the_env():
    assert later.part_len(None, {later.SPLIT_PART_ENV: "900"}) is None


def test_the_env_body_cap_applies_only_under_the_later_cap():
    assert later.max_body(20_000, {later.MAX_BODY_ENV: "30000"}) == 30_000
    assert later.max_body(20_000, {later.MAX_BODY_ENV: "nope"}) == 20_000
    assert later.max_body(10_000, {later.MAX_BODY_ENV: "30000"}) == 10_000  # seed 000's design


@pytest.mark.rules("R9")
def test_all_parts_are_stored_in_order_in_one_send(store):
    """R9 under the later design: one send, N rows, nothing refused."""
    res = store.send("ses_a", "ses_b", "z" * 4500, policy=LATER)
    assert res.ok and len(res.message_ids) == 3 and res.message_id == res.message_ids[0]
    bodies = [b for (b,) in store.conn.execute("SELECT body FROM chat_messages ORDER BY id")]
    assert joined(bodies) == "z" * 4500


def test_a_broadcast_splits_per_recipient(store):
    res = store.broadcast("ses_a", "q" * 2500, policy=LATER)
    assert res.ok and res.parts == 2 and len(res.message_ids) == 4
    per = store.conn.execute("SELECT to_session, COUNT(*) FROM chat_messages GROUP BY to_session").fetchall()
    assert sorted(per) == [("ses_b", 2), ("ses_c", 2)]


def test_a_failing_part_leaves_no_partial_batch(store):
    store.conn.execute("CREATE TRIGGER no_second BEFORE INSERT ON chat_messages"
                       " WHEN NEW.body LIKE '%continued%' = 0 AND (SELECT COUNT(*) FROM chat_messages) >= 1"
                       " BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(StoreError):
        store.send("ses_a", "ses_b", "k" * 2500, policy=LATER)
    assert store.conn.execute("SELECT COUNT(*) FROM chat_messages").fetchone() == (0,)


@pytest.mark.rules("R9")
def test_the_whole_body_cap_names_the_count(store):
    """R9: 20,000 accepted, 20,001 refused with the attempted count (the later design)."""
    assert store.send("ses_a", "ses_b", "m" * 20_000, policy=LATER).ok
    res = store.send("ses_a", "ses_b", "m" * 20_001, policy=LATER)
    assert not res.ok and res.error == (
        "Message too long: attempted 20001 characters (max 20000). Split the content across several messages.")
    assert store.send("ses_a", "ses_b", "\U0001F600" * 10_001, policy=LATER).error == (
        "Message too long: attempted 20002 characters (max 20000). Split the content across several messages.")


@pytest.mark.rules("R9")
def test_seed_000s_design_refuses_over_ten_thousand(store):
    """R9: seed 000's cap and text are unchanged by the options' existence."""
    assert store.send("ses_a", "ses_b", "m" * 10_000, policy=DEFAULT).ok
    assert store.send("ses_a", "ses_b", "m" * 10_001).error == ERR_TOO_LONG
    assert store.send("ses_a", "ses_b", "m" * 10_001, policy=Policy(max_body_chars=20_000)).ok


def test_the_env_moves_the_part_budget_of_a_send(store, monkeypatch):
    monkeypatch.setenv(later.SPLIT_PART_ENV, "499")
    assert len(store.send("ses_a", "ses_b", "e" * 1001, policy=LATER).message_ids) == 3  # chunks of at most 500


def test_the_reply_says_sent_as_n_parts(store):
    t = ChatTools(store, StaticConfig(ChatConfig(policy=LATER)), project="p")
    reply = t.call("chat_send", {"to": "ses_b", "body": "r" * 4500}, identity="ses_a")
    head, _note, split = reply.text.split("\n\n")
    assert reply.ok and head.startswith("[sent] to ") and split.startswith("SENT AS 3 PARTS: ")
    assert '"(message 1 of 3)"' in reply.text and '"(continued in next message)"' in reply.text
    refused = t.call("chat_send", {"to": "ses_b", "body": "r" * 20_001}, identity="ses_a")
    assert refused.text == ("Not sent: Message too long: attempted 20001 characters (max 20000). "
                            "Split the content across several messages.")
    broadcast = t.call("chat_broadcast", {"body": "r" * 2500}, identity="ses_a")
    assert broadcast.text.split("\n")[2] == ("sent as 2 parts per recipient (the body exceeded 2000 characters "
                                             "and was auto-split)")


def test_the_empty_refusal_names_the_attempted_length(store):
    """The later design's empty-body refusal counts the untrimmed body; seed 000's stays bare (R9)."""
    assert store.send("ses_a", "ses_b", "   ", policy=LATER).error == (
        "Message body cannot be empty (attempted 3 characters).")
    assert store.send("ses_a", "ses_b", "   ").error == "Message body cannot be empty."
