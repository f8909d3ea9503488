"""The real suite's "chat read clip and paging" block, under the later design (D-later-4)."""

from __future__ import annotations

import re

import pytest

from thatch_core import later
from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.policy import LATER
from thatch_core.tools import ChatTools

PAGE = later.READ_PAGE_LEN


def test_drain_clip_marker():
    """
    "the drain clips long bodies with a marker that names characters": a
    3,000-character body shows its first page and a marker naming 2,000 of
    3,000 characters and the way on (message 42, offset 2000); a short body is
    untouched.
    """
    body = "y" * 3_000
    clipped = later.clipped(body, 42)
    assert clipped.startswith(body[:PAGE])
    assert f"[clipped: showing {PAGE} of 3000 characters" in clipped
    assert f"message 42, offset {PAGE}" in clipped
    assert later.clipped("short", 1) == "short"


def test_paging_windows():
    """
    "paging windows are deterministic and name the unit": offset 0 shows
    characters 0-2000 of 3000, offset 2000 the final page, and an offset past
    the end is refused naming the message and its length.
    """
    body = "y" * 3_000
    ok, first = later.page_text(body, 7, 0)
    assert ok and first.startswith(f"[showing characters 0-{PAGE} of 3000")
    ok, last = later.page_text(body, 7, PAGE)
    assert ok and last.startswith(f"[showing characters {PAGE}-3000 of 3000 - final page]")
    ok, past = later.page_text(body, 7, 5_000)
    assert not ok and "outside message 7 (3000 characters)" in past


@pytest.mark.rules("R10")
def test_chat_read_pages_by_id(store):
    """
    "chat_read pages one message by id without marking anything read": a
    3,000-character send goes as two parts, the first 2,047 characters with
    its markers; the drain line carries the id and clips at 2,000 of 2,047;
    paging from 2,000 shows the final page and leaves nothing unread; an
    offset without a message and an unknown id are refused by name (R10).
    """
    tools = ChatTools(store, StaticConfig(ChatConfig(policy=LATER)), project="echo/rt")
    assert tools.call("chat_register", {}, identity="ses_rt").ok
    other = tools.call("chat_register", {}, identity="ses_other").text.splitlines()[0].removeprefix("[registered] ")
    assert tools.call("chat_send", {"to": other, "body": "y" * 3_000}, identity="ses_rt").ok
    drained = tools.call("chat_read", {}, identity="ses_other").text
    assert ", id " in drained and f"[clipped: showing {PAGE} of 2047 characters" in drained
    message_id = int(re.search(r", id (\d+)", drained).group(1))
    page = tools.call("chat_read", {"message": message_id, "offset": PAGE}, identity="ses_other")
    assert page.ok and f"[showing characters {PAGE}-2047 of 2047 - final page]" in page.text
    assert store.status("ses_other").pending == 0
    assert "requires a message id" in tools.call("chat_read", {"offset": 5}, identity="ses_other").text
    assert "No message 9999" in tools.call("chat_read", {"message": 9999}, identity="ses_other").text
