"""The real suite's "chat body auto-split" block, under the later design.

The real splitter runs on every send; thatch_core's is an option of the
later design (``LATER``, D-later-3), so the store cases pass that policy and
the pure cases call ``later.split_body`` with the budget the real default
gives (2,000). Seed 000's design refuses a body over 10,000 characters (R9),
which test_store.py's "send validates endpoints" keeps.
"""

from __future__ import annotations

import pytest

from thatch_core import later
from thatch_core.constants import MAX_BODY_LEN
from thatch_core.db import StoreError
from thatch_core.policy import LATER

SUFFIX = "\n\n(continued in next message)"
TWO = f"{'A' * 1_900}\n\n{'B' * 1_900}"
BOB = "ba-sil-00001"


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    monkeypatch.delenv(later.SPLIT_PART_ENV, raising=False)
    monkeypatch.delenv(later.MAX_BODY_ENV, raising=False)


@pytest.fixture
def pair(reg):
    reg("ses_b", "ba-sil")
    reg("ses_a", "a-corn")


def undecorated(part: str, i: int, n: int) -> str:
    """One part without its markers, checking they sit where they belong."""
    prefix = f"(message 1 of {n})\n\n"
    if i == 0:
        assert part.startswith(prefix)
        part = part[len(prefix):]
    if i < n - 1:
        assert part.endswith(SUFFIX)
        part = part[:-len(SUFFIX)]
    return part


def chunks(parts: list[str]) -> list[str]:
    return [undecorated(p, i, len(parts)) for i, p in enumerate(parts)]


def count(store) -> int:
    return store.conn.execute("SELECT COUNT(*) FROM chat_messages").fetchone()[0]


def split(body: str, part_len: int = later.SPLIT_PART_LEN) -> list[str]:
    return later.split_body(body, part_len)


def test_within_budget_one_part():
    """
    "a body within the part budget passes through as one undecorated part": a
    short body and one of exactly 2,000 characters are one part, a blank body
    none, and a larger budget (9,000) keeps 3,000 characters whole.
    """
    assert split("hello world") == ["hello world"]
    assert split("x" * 2_000) == ["x" * 2_000]
    assert split("   ") == []
    assert split("x" * 3_000, 9_000) == ["x" * 3_000]


def test_paragraph_cut_and_markers():
    """
    "splits at a paragraph boundary and decorates first and non-final parts":
    two 8,900-character paragraphs at a 9,000 budget are two parts, the cut
    taking the blank line between them; every part stays within seed 000's
    10,000 per row; the same shape at the default budget.
    """
    body = f"{'A' * 8_900}\n\n{'B' * 8_900}"
    parts = split(body, 9_000)
    assert len(parts) == 2 and parts[1] == "B" * 8_900
    assert "\n\n".join(chunks(parts)) == body
    assert all(len(p) <= MAX_BODY_LEN for p in parts)
    small = split(TWO)
    assert len(small) == 2 and small[0].startswith("(message 1 of 2)\n\n") and small[1] == "B" * 1_900


def test_three_parts_markers():
    """
    "three-plus parts: only the first carries the prefix, only the last lacks
    the suffix": three 1,900-character paragraphs are three parts, decorated so.
    """
    body = "\n\n".join(c * 1_900 for c in "ABC")
    parts = split(body)
    assert len(parts) == 3 and not parts[1].startswith("(message 1 of")
    assert parts[1].endswith(SUFFIX) and not parts[2].endswith(SUFFIX)
    assert "\n\n".join(chunks(parts)) == body


def test_hard_cut_keeps_surrogate_pairs():
    """
    "a hard cut never splits a surrogate pair": with no blank line the cut at
    2,000 units would fall inside the first emoji; no part ends with a high
    surrogate half or starts with a low one, and the chunks join back whole.
    """
    body = "x" * 1_999 + "\U0001F600" * 50 + "y" * 5_000
    parts = split(body)
    assert len(parts) > 2
    for part in parts:
        part.encode("utf-8")  # a lone surrogate would not encode
    assert "".join(chunks(parts)) == body
    assert all(later.units(c) <= later.SPLIT_PART_LEN for c in chunks(parts))


def test_bmp_multibyte_units():
    """
    "BMP multibyte text splits on UTF-16 units without corruption": 25,000 CJK
    characters (one unit each) are thirteen parts that join back whole.
    """
    body = "\u6F22" * 25_000
    parts = split(body)
    assert len(parts) == 13 and "".join(chunks(parts)) == body


@pytest.mark.rules("R9")
def test_oversized_send_every_part_in_order(store, pair):
    """
    "an oversized send lands every part in order, reported in the result": the
    send reports two parts and no suppression; the inbox holds the decorated
    first part and the plain second, in order (R9).
    """
    res = store.send("ses_a", BOB, TWO, policy=LATER)
    assert res.ok and res.parts == 2 and not res.suppressed
    assert store.unread_count("ses_b") == 2
    inbox = store.read("ses_b")
    assert inbox[0].body.startswith("(message 1 of 2)\n\n") and inbox[0].body.endswith(SUFFIX)
    assert inbox[1].body == "B" * 1_900


def test_retried_split_send_suppressed(store, pair):
    """
    "a retried split send suppresses the whole batch": the retry reports the
    suppression and the two parts it would have stored, and stores none.
    """
    assert store.send("ses_a", BOB, TWO, policy=LATER).parts == 2
    retry = store.send("ses_a", BOB, TWO, policy=LATER)
    assert retry.ok and retry.suppressed and retry.parts == 2 and count(store) == 2


def test_resend_after_read_delivers(store, pair):
    """
    "an identical resend within the window delivers again once the first was
    read": a repeat of an unread copy is suppressed; after the recipient reads,
    the same body is stored again.
    """
    assert store.send("ses_a", BOB, "ok", policy=LATER).ok
    assert store.send("ses_a", BOB, "ok", policy=LATER).suppressed and count(store) == 1
    store.read("ses_b")
    again = store.send("ses_a", BOB, "ok", policy=LATER)
    assert again.ok and not again.suppressed and count(store) == 2


def test_partial_read_still_suppresses(store, pair, raw):
    """
    "a split batch retry stays suppressed until EVERY part was read
    (partial-read edge)": with part one read a retry is suppressed; with both
    read the same body goes out whole again.
    """
    assert store.send("ses_a", BOB, TWO, policy=LATER).ok
    raw.execute("UPDATE chat_messages SET read_at = '2026-01-01T00:00:00Z'"
                " WHERE id = (SELECT MIN(id) FROM chat_messages)")
    assert store.send("ses_a", BOB, TWO, policy=LATER).suppressed and count(store) == 2
    raw.execute("UPDATE chat_messages SET read_at = '2026-01-01T00:00:00Z'")
    full = store.send("ses_a", BOB, TWO, policy=LATER)
    assert full.ok and not full.suppressed and count(store) == 4


def test_identical_chunks_all_stored(store, pair):
    """
    "identical chunks inside one body never suppress each other": four equal
    paragraphs give four rows, the middle two bodies equal.
    """
    body = "\n\n".join(["x" * 1_900] * 4)
    assert store.send("ses_a", BOB, body, policy=LATER).parts == 4
    inbox = store.read("ses_b")
    assert len(inbox) == 4 and inbox[1].body == inbox[2].body


def test_failing_part_leaves_nothing(store, pair, raw):
    """
    "a split send that fails partway leaves no rows (one-transaction batch)": a
    trigger aborting the third part's insert fails the send and no part stays.
    """
    raw.execute("CREATE TRIGGER abort_third_part BEFORE INSERT ON chat_messages"
                " WHEN NEW.body LIKE '%PART3MARKER%' BEGIN SELECT RAISE(ABORT, 'boom'); END")
    body = "\n\n".join(["A" * 1_900, "B" * 1_900, "PART3MARKER".ljust(1_900, "C")])
    with pytest.raises(StoreError):
        store.send("ses_a", BOB, body, policy=LATER)
    assert count(store) == 0


@pytest.mark.rules("R9")
def test_empty_refusal_names_length(store, pair):
    """
    "empty-after-trim refusal reports the attempted length": a blank send and a
    blank broadcast are refused naming the three characters attempted (R9).
    """
    assert "(attempted 3 characters)" in store.send("ses_a", BOB, "   ", policy=LATER).error
    assert "(attempted 3 characters)" in store.broadcast("ses_a", "   ", policy=LATER).error


@pytest.mark.rules("R9")
def test_whole_body_ceiling(store, pair):
    """
    "the whole-body ceiling refuses with the attempted count; parts derive at
    the ceiling": 20,001 characters are refused naming the count and the max,
    for a send and a broadcast; exactly 20,000 go as ceil(20,000 / 2,000) = 10
    parts (R9).
    """
    refused = store.send("ses_a", BOB, "x" * 20_001, policy=LATER)
    assert not refused.ok and "attempted 20001 characters" in refused.error and "max 20000" in refused.error
    assert not store.broadcast("ses_a", "x" * 20_001, policy=LATER).ok
    assert store.send("ses_a", BOB, "x" * 20_000, policy=LATER).parts == 10


@pytest.mark.rules("R12")
def test_oversized_broadcast_every_part(store, reg):
    """
    "an oversized broadcast delivers every part to every live recipient": each
    of two recipients gets both parts; a retry suppresses both recipients'
    batches and stores nothing (R12).
    """
    for sid, base in (("ses_a", "a-corn"), ("ses_b", "ba-sil"), ("ses_c", "ca-ra-mel")):
        reg(sid, base)
    assert store.broadcast("ses_a", TWO, policy=LATER).parts == 2
    assert (store.unread_count("ses_b"), store.unread_count("ses_c")) == (2, 2)
    retry = store.broadcast("ses_a", TWO, policy=LATER)
    assert retry.ok and len(retry.suppressed) == 2 and retry.parts == 2
    assert store.unread_count("ses_b") == 2
