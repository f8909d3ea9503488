"""The texts reference (`simulator.design.SHOWN_TEXTS`, `thatch-sim texts`) says what thatch_core prints.

Each entry of the catalogue has one probe here that makes thatch_core show
that text, through its tools, hooks and poller prompts over a real store;
the entry's text (its placeholders standing for any text) must occur in the
output. An author who copies a line of `thatch-sim texts` into `contains:`
therefore copies what a run shows (R9, R10, R20, R27, R31, R34).
"""

from __future__ import annotations

from typing import Callable

import pytest

from chatkit import OFF, ON, World
from simulator import design
from simulator.replies import decode_hook_line
from thatch_core.db import StoreBusy
from thatch_core.mcp import chat_hook_line, claude_stop_hook, cursor_stop_hook
from thatch_core.prompts import chat_notification_nudge
from thatch_core.tools import ChatTools

pytestmark = pytest.mark.rules("R9", "R10", "R20", "R27", "R31", "R34")


def _register_mcp(w: World) -> str:
    return w.mcp().call("chat_register", {}).text


def _left(w: World) -> str:
    w.call("unregister", "ses_a")
    return w.call("register", "ses_a").text


def _to_stale(w: World, name: str) -> str:
    """A send to `name` after every other row went silent (ses_a beats again as it sends)."""
    w.store.conn.execute("UPDATE chat_sessions SET last_seen = '2020-01-01T00:00:00.000Z' WHERE session_id != 'ses_a'")
    return w.call("send", "ses_a", to=name, body="hi").text


def _busy(w: World) -> str:
    def busy(*_args, **_kwargs):
        raise StoreBusy("database is locked")
    w.store.status = busy
    return w.call("status", "ses_a").text


def _frame(w: World) -> str:
    w.call("send", "ses_a", to=w.name("ses_b"), body="build is green")
    return w.call("read", "ses_b").text


def _hook_with_mail(w: World) -> str:
    line = chat_hook_line(w.store, ON, "host-1")
    w.call("send", "ses_a", to=decode_hook_line(line).name, body="hi")
    return chat_hook_line(w.store, ON, "host-1")


def _hook_after_leave(w: World) -> str:
    chat_hook_line(w.store, ON, "host-1")
    w.store.unregister(design.mcp_session_id("host-1"))
    return chat_hook_line(w.store, ON, "host-1")


def _stop(w: World, hook: Callable) -> dict:
    line = chat_hook_line(w.store, ON, "host-1")
    w.call("send", "ses_a", to=decode_hook_line(line).name, body="hi")
    return hook(w.store, ON, "host-1")


def _split(w: World) -> tuple[str, str]:
    reply = w.call("send", "ses_a", w.later, to=w.name("ses_b"), body="word " * 600).text
    first = w.store.conn.execute("SELECT body FROM chat_messages ORDER BY id LIMIT 1").fetchone()[0]
    return reply, first


def _long_read(w: World, paged: bool) -> str:
    w.call("send", "ses_a", to=w.name("ses_b"), body="y" * 2500)  # seed 000's send: one row
    if not paged:
        return w.call("read", "ses_b", w.later).text
    message = w.store.conn.execute("SELECT id FROM chat_messages").fetchone()[0]
    return w.call("read", "ses_b", w.later, message=message, offset=0).text


def _retried(w: World) -> str:
    for _ in range(2):
        reply = w.call("send", "ses_a", w.later, to=w.name("ses_b"), body="same words").text
    return reply


PROBES: dict[str, Callable[[World], str]] = {
    "register": lambda w: w.call("register", "ses_c").text,
    "register.mcp": _register_mcp,
    "register.kept": lambda w: w.call("register", "ses_a").text,
    "register.rejoined": _left,
    "send": lambda w: w.call("send", "ses_a", to=w.name("ses_b"), body="hi").text,
    "send.between-turns": lambda w: _to_stale(w, _register_mcp(w).split()[1]),
    "send.stale": lambda w: _to_stale(w, w.name("ses_b")),
    "broadcast": lambda w: (w.call("register", "ses_c"), w.call("broadcast", "ses_a", body="hi all").text)[1],
    "list": lambda w: w.call("list", "ses_a").text,
    "list.empty": lambda w: (w.store.unregister("ses_a"), w.store.unregister("ses_b"), w.call("list", "ses_a").text)[2],
    "status": lambda w: (w.call("send", "ses_b", to=w.name("ses_a"), body="hi"), w.call("status", "ses_a").text)[1],
    "status.not-registered": lambda w: w.call("status", "ses_z").text,
    "unregister": lambda w: w.call("unregister", "ses_a").text,
    "unregister.not-registered": lambda w: w.call("unregister", "ses_z").text,
    "read.empty": lambda w: w.call("read", "ses_a").text,
    "refuse.not-registered": lambda w: w.call("send", "ses_z", to="anyone", body="hi").text,
    "refuse.empty": lambda w: w.call("send", "ses_a", to=w.name("ses_b"), body="  ").text,
    "refuse.too-long": lambda w: w.call("send", "ses_a", to=w.name("ses_b"), body="x" * 10_001).text,
    "refuse.self": lambda w: w.call("send", "ses_a", to=w.name("ses_a"), body="hi").text,
    "refuse.no-recipient": lambda w: w.call("send", "ses_a", to="nobody-00001", body="hi").text,
    "refuse.disabled": lambda w: ChatTools(w.store, OFF).call("status", {}, identity="ses_a").text,
    "refuse.busy": _busy,
    "frame": _frame,
    "echo.register": lambda w: w.call("register", "ses_c").echo,
    "echo.send": lambda w: w.call("send", "ses_a", to=w.name("ses_b"), body="hi").echo,
    "hook.identity": lambda w: chat_hook_line(w.store, ON, "host-1"),
    "hook.identity.unread": _hook_with_mail,
    "hook.leave": _hook_after_leave,
    "wake": lambda w: chat_notification_nudge([w.name("ses_a")], 1),
    "stop.claude-code": lambda w: _stop(w, claude_stop_hook)["reason"],
    "stop.cursor": lambda w: _stop(w, lambda s, c, h: cursor_stop_hook(s, c, h, status="completed"))[
        "followup_message"],
    "later.sent-parts": lambda w: _split(w)[0],
    "later.part": lambda w: _split(w)[1],
    "later.dedup": _retried,
    "later.clipped": lambda w: _long_read(w, paged=False),
    "later.page": lambda w: _long_read(w, paged=True),
}


def test_every_text_has_a_probe_and_every_probe_a_text():
    assert sorted(PROBES) == sorted(t.key for t in design.SHOWN_TEXTS)
    assert {t.surface for t in design.SHOWN_TEXTS} == set(design.SURFACES)


@pytest.mark.parametrize("text", design.SHOWN_TEXTS, ids=lambda text: text.key)
def test_the_reference_says_what_thatch_core_prints(world, text):
    shown = PROBES[text.key](world)
    assert isinstance(shown, str) and text.pattern().search(shown), (
        f"simulator/design.py states {text.key} as\n{text.shows}\nbut thatch_core printed\n{shown}")


def test_a_placeholder_stands_for_text_on_its_line_only():
    text = design.ShownText("k", "echo", "when", "[chat] to <NAME>: <BODY>")
    assert text.pattern().fullmatch("[chat] to ba-sil-00001: hi there")
    assert not text.pattern().search("[chat] to \n: hi")
    assert not text.pattern().search("[chat] from ba-sil-00001: hi")
