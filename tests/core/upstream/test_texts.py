"""The real suite's "chat transcript echo text" block, through the tool surface.

The real cases feed tool outputs to the echo builder; here every echo comes
from a real tool call against a real store (``ToolReply.echo``), so the
echo is checked against the output the same call produced.
"""

from __future__ import annotations

import re

import pytest

from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.policy import LATER
from thatch_core.tools import ChatTools


@pytest.fixture
def tools(store):
    return ChatTools(store, StaticConfig(ChatConfig()))


@pytest.fixture
def named(tools):
    """Register sessions through the tool; returns their assigned names."""

    def register(*sids):
        names = []
        for sid in sids:
            reply = tools.call("thatch_chat_register", {}, identity=sid)
            assert reply.ok, reply.text
            names.append(reply.text.splitlines()[0].removeprefix("[registered] "))
        return names

    return register


@pytest.mark.rules("R27")
def test_register_echo_and_silent_failure(tools, named):
    """
    "register echoes the claimed name; failures stay silent": a successful
    register echoes ``[chat] NAME registered in the session directory``; a
    refused one echoes nothing (R27).
    """
    reply = tools.call("thatch_chat_register", {}, identity="ses_x")
    name = reply.text.splitlines()[0].removeprefix("[registered] ")
    assert reply.echo == f"[chat] {name} registered in the session directory"
    failed = tools.call("thatch_chat_register", {}, identity=None)
    assert not failed.ok and failed.echo is None


@pytest.mark.rules("R27")
def test_send_echo_names_recipient_clips_body(tools, named):
    """
    "send echoes the resolved recipient name with a clipped body": a send
    addressed in another casing echoes ``[chat] to <stored name>: <body>``; a
    300-character body is clipped to 200 plus ``...``; a refused send echoes
    nothing (R27). The real builder also falls back to the addressed name when
    the output does not parse; thatch_core hands the echo the resolved name
    directly, so that branch has no counterpart.
    """
    _, landru = named("ses_a", "ses_b")
    reply = tools.call("thatch_chat_send", {"to": landru.upper(), "body": "hello"}, identity="ses_a")
    assert reply.echo == f"[chat] to {landru}: hello"
    long = tools.call("thatch_chat_send", {"to": landru, "body": "x" * 300}, identity="ses_a")
    assert long.echo == f"[chat] to {landru}: " + "x" * 200 + "..."
    ghost = tools.call("thatch_chat_send", {"to": "ghost", "body": "hi"}, identity="ses_a")
    assert not ghost.ok and ghost.echo is None


@pytest.mark.rules("R27", "R10")
def test_read_echo_and_silent_empty(tools, named):
    """
    "read echoes the inbox; empty inbox stays silent": an empty drain echoes
    nothing; a drain echoes ``[chat] inbox``, a newline and the framed output
    itself, clipped at 1500 characters plus ``...`` when longer (R27, R10).
    """
    alice, _ = named("ses_a", "ses_b")
    assert tools.call("thatch_chat_read", {}, identity="ses_a").echo is None
    tools.call("thatch_chat_send", {"to": alice, "body": "hi"}, identity="ses_b")
    short = tools.call("thatch_chat_read", {}, identity="ses_a")
    assert short.echo == "[chat] inbox\n" + short.text
    tools.call("thatch_chat_send", {"to": alice, "body": "y" * 2000}, identity="ses_b")
    long = tools.call("thatch_chat_read", {}, identity="ses_a")
    assert len(long.text) > 1500
    assert long.echo == "[chat] inbox\n" + long.text[:1500] + "..."


@pytest.mark.rules("R27")
def test_broadcast_echo_counts_fanout(tools, named):
    """
    "broadcast echoes the fan-out count with a clipped body": the echo is
    ``[chat] broadcast to N sessions: <body>`` with ``1 session`` singular and
    ``0 sessions`` when nobody was reached; a refused broadcast echoes nothing
    (R27).
    """
    named("ses_a", "ses_b", "ses_c", "ses_d")
    three = tools.call("thatch_chat_broadcast", {"body": "rise up"}, identity="ses_a")
    assert three.echo == "[chat] broadcast to 3 sessions: rise up"
    tools.call("thatch_chat_unregister", {}, identity="ses_c")
    tools.call("thatch_chat_unregister", {}, identity="ses_d")
    one = tools.call("thatch_chat_broadcast", {"body": "hi"}, identity="ses_a")
    assert one.echo == "[chat] broadcast to 1 session: hi"
    tools.call("thatch_chat_unregister", {}, identity="ses_b")
    none = tools.call("thatch_chat_broadcast", {"body": "hi"}, identity="ses_a")
    assert none.echo == "[chat] broadcast to 0 sessions: hi"
    refused = tools.call("thatch_chat_broadcast", {"body": "hi"}, identity="ses_unregistered")
    assert not refused.ok and refused.echo is None


@pytest.mark.rules("R27")
def test_list_and_unregister_never_echo(tools, named):
    """
    "list and unregister never echo": a roster listing and a leave, both
    successful, carry no echo (R27).
    """
    named("ses_a", "ses_b")
    listing = tools.call("thatch_chat_list", {}, identity="ses_a")
    assert listing.ok and listing.echo is None
    leave = tools.call("thatch_chat_unregister", {}, identity="ses_a")
    assert leave.ok and leave.echo is None


@pytest.mark.rules("R27", "R10")
def test_every_success_output_is_echo_parse_target(tools):
    """
    "every chat tool's real success output is a chatEchoText parse target":
    the real outputs keep the shapes an echo is built from: ``[registered]
    NAME`` (a counter name), ``[sent] to NAME (...)``, a framed read with the
    ``UNTRUSTED CONTENT`` warning and the ``===[ begin chat inbox ]===`` /
    ``===[ end chat inbox ]===`` fences, ``[broadcast] to N session(s)``; and
    each echo names what its output says (R27, R10).
    """
    registered = tools.call("thatch_chat_register", {}, identity="ses_rt")
    assert "registered in the session directory" in registered.echo
    self_name = re.match(r"\[registered\] (.+)", registered.text).group(1)
    other = tools.call("thatch_chat_register", {}, identity="ses_other")
    assert re.fullmatch(r"\S+-\d{5}", re.match(r"\[registered\] (.+)", other.text).group(1))

    sent = tools.call("thatch_chat_send", {"to": self_name, "body": "hello"}, identity="ses_other")
    assert re.match(r"\[sent\] to (\S+) \(", sent.text).group(1) == self_name
    assert self_name in sent.echo

    read = tools.call("thatch_chat_read", {}, identity="ses_rt")
    assert read.echo is not None
    for mark in ("UNTRUSTED CONTENT", "===[ begin chat inbox ]===", "===[ end chat inbox ]==="):
        assert mark in read.text

    broadcast = tools.call("thatch_chat_broadcast", {"body": "to everyone"}, identity="ses_other")
    assert re.match(r"\[broadcast\] to \d+ sessions?\b", broadcast.text)
    assert "broadcast" in broadcast.echo


@pytest.fixture
def later_tools(store):
    return ChatTools(store, StaticConfig(ChatConfig(policy=LATER)), project="echo/rt")


def _join(tools, sid: str) -> str:
    return tools.call("chat_register", {}, identity=sid).text.splitlines()[0].removeprefix("[registered] ")


@pytest.mark.rules("R9", "R27")
def test_send_reports_duplicate_suppression(later_tools):
    """
    "chat_send surfaces the duplicate-suppression note on a retried send":
    under the later design the first send is a plain ``[sent]``; the retry
    still succeeds, says ``DUPLICATE SUPPRESSED`` and echoes nothing new (R9,
    R27).
    """
    _join(later_tools, "ses_rt")
    other = _join(later_tools, "ses_other")
    first = later_tools.call("chat_send", {"to": other, "body": "once"}, identity="ses_rt")
    assert first.text.startswith("[sent]") and "DUPLICATE SUPPRESSED" not in first.text
    retry = later_tools.call("chat_send", {"to": other, "body": "once"}, identity="ses_rt")
    assert retry.ok and retry.text.startswith("[sent]") and "DUPLICATE SUPPRESSED" in retry.text
    assert retry.echo is None


@pytest.mark.rules("R9", "R12")
def test_send_and_broadcast_report_split(later_tools, store):
    """
    "chat_send reports a split delivery so a caller cannot mistake it for one
    message": a two-part send says ``SENT AS 2 PARTS`` and the recipient holds
    both rows; a two-part broadcast says ``sent as 2 parts per recipient`` (R9,
    R12).
    """
    _join(later_tools, "ses_rt")
    other = _join(later_tools, "ses_other")
    body = f"{'A' * 1_900}\n\n{'B' * 1_900}"
    sent = later_tools.call("chat_send", {"to": other, "body": body}, identity="ses_rt")
    assert sent.text.startswith("[sent]") and "SENT AS 2 PARTS" in sent.text
    assert store.status("ses_other").total == 2
    broadcast = later_tools.call("chat_broadcast", {"body": body}, identity="ses_other")
    assert broadcast.text.startswith("[broadcast]") and "sent as 2 parts per recipient" in broadcast.text
