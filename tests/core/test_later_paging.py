"""The later design's paged reads (D-later-4).

chat_read shows each message up to one 2000-character page, a longer one
clipped with a marker naming what was shown; every drain line carries its
message id; `message` and `offset` page through one message without
draining or marking anything read. Seed 000's design shows whole bodies and
refuses the paging arguments (R10).
"""

from __future__ import annotations

import pytest

from thatch_core import later
from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.db import open_db
from thatch_core.policy import DEFAULT, LATER
from thatch_core.prompts import FRAME_BEGIN, FRAME_END
from thatch_core.store import ChatStore
from thatch_core.tools import ChatTools


@pytest.fixture
def store(db_path, frozen):
    conn = open_db(db_path)
    s = ChatStore(conn)
    for sid in ("ses_a", "ses_b"):
        s.register(sid, project="p")
    yield s
    conn.close()


def tools(store, policy=LATER):
    return ChatTools(store, StaticConfig(ChatConfig(policy=policy)), project="p")


def framed_lines(text):
    inside = text.split(FRAME_BEGIN + "\n", 1)[1].split("\n" + FRAME_END, 1)[0]
    return inside.split("\n")


def unread(store):
    return store.unread_count("ses_b")


@pytest.mark.rules("R10")
def test_2000_is_shown_whole_and_2001_is_clipped_with_the_marker(store):
    """R10 under the later design: one page per message, the marker names the count."""
    store.send("ses_a", "ses_b", "a" * 2000)
    mid = store.send("ses_a", "ses_b", "b" * 2001).message_id
    reply = tools(store).call("chat_read", {}, identity="ses_b")
    lines = framed_lines(reply.text)
    name = store.get("ses_a").name
    assert lines[0].startswith(f"[from {name}, ") and lines[0].endswith(f", id {mid - 1}] " + "a" * 2000)
    assert lines[1].startswith(f"[from {name}, ") and lines[1].endswith(f", id {mid}] " + "b" * 2000)
    assert lines[2] == (f"[clipped: showing 2000 of 2001 characters - continue with chat_read, message {mid}, "
                        "offset 2000]")
    assert later.PAGING_NOTE in reply.text and unread(store) == 0


def test_paging_walks_one_message_and_marks_nothing_read(store):
    body = "".join(chr(ord("a") + i % 26) for i in range(4500))
    mid = store.send("ses_a", "ses_b", body).message_id
    t = tools(store)
    pages, offset = [], 0
    while True:
        reply = t.call("chat_read", {"message": mid, "offset": offset}, identity="ses_b")
        assert reply.ok and reply.echo is None and unread(store) == 1  # nothing drained, nothing read
        named, where, text = framed_lines(reply.text)
        assert named.startswith(f"[message {mid} from {store.get('ses_a').name}, ")
        assert reply.text.endswith("(1 message, paged - nothing marked read)")
        pages.append(text)
        end = offset + len(text)
        if end == 4500:
            assert where == f"[showing characters {offset}-4500 of 4500 - final page]"
            break
        assert where == (f"[showing characters {offset}-{end} of 4500 - next page: chat_read, message {mid}, "
                         f"offset {end}]")
        offset = end
    assert "".join(pages) == body and [len(p) for p in pages] == [2000, 2000, 500]


def test_an_offset_inside_a_surrogate_pair_backs_off_to_its_start(store):
    """Safer than the real, which slices UTF-16 units and can show half a pair."""
    mid = store.send("ses_a", "ses_b", "x" + "\U0001F600" * 3).message_id
    reply = tools(store).call("chat_read", {"message": mid, "offset": 2}, identity="ses_b")
    assert framed_lines(reply.text)[1:] == ["[showing characters 1-7 of 7 - final page]", "\U0001F600" * 3]


@pytest.mark.parametrize("offset", [5, 99])
def test_an_offset_at_or_past_the_end_is_refused(store, offset):
    mid = store.send("ses_a", "ses_b", "short").message_id
    reply = tools(store).call("chat_read", {"message": mid, "offset": offset}, identity="ses_b")
    assert not reply.ok and reply.text == (f"Offset {offset} is outside message {mid} (5 characters) - use an "
                                           "offset from 0 to 4.")


def test_a_read_message_still_pages_and_anothers_never_does(store):
    mid = store.send("ses_a", "ses_b", "mine").message_id
    store.read("ses_b")
    t = tools(store)
    assert t.call("chat_read", {"message": mid}, identity="ses_b").ok
    other = t.call("chat_read", {"message": mid}, identity="ses_a")
    assert not other.ok
    assert other.text == (f"No message {mid} in your mailbox - ids appear in chat_read's drain output and clip "
                          "markers.")


@pytest.mark.parametrize("args", [{"message": 0}, {"message": "3"}, {"message": 1, "offset": -1},
                                  {"message": True}])
def test_bad_paging_arguments_are_refused(store, args):
    reply = tools(store).call("chat_read", args, identity="ses_b")
    assert not reply.ok and reply.text == later.BAD_PAGE_ARGS


def test_an_offset_without_a_message_is_refused(store):
    reply = tools(store).call("chat_read", {"offset": 5}, identity="ses_b")
    assert not reply.ok and reply.text == later.OFFSET_WITHOUT_MESSAGE and "requires a message id" in reply.text


@pytest.mark.rules("R10")
def test_seed_000s_design_shows_whole_bodies_and_refuses_paging(store):
    """R10: seed 000's drain is unchanged; paging arguments are refused with the way to drain."""
    store.send("ses_a", "ses_b", "c" * 5000)
    t = tools(store, DEFAULT)
    refused = t.call("chat_read", {"message": 1}, identity="ses_b")
    assert not refused.ok and refused.text == later.PAGING_OFF and unread(store) == 1
    lines = framed_lines(t.call("chat_read", {}, identity="ses_b").text)
    assert lines[0].startswith("[from ") and lines[0].endswith("c" * 5000) and len(lines) == 1


def test_the_mcp_schema_declares_the_paging_arguments():
    from thatch_core.doors import TOOL_DEFS
    read = next(t for t in TOOL_DEFS if t["name"] == "chat_read")["inputSchema"]["properties"]
    assert read["message"]["type"] == "integer" and read["offset"]["type"] == "integer" and "as" in read
