"""The real QA use cases UC-116, UC-117 and UC-119, through thatch_core's tools under the later design.

Each real case drives the chat tools against a temp-dir database with no
host process; here the tools run against the conftest's store, with
``LATER`` (D-later-*) as the policy. UC-116 and UC-119 are read at commit
2ed97f2ad288a4da8ac8bc2509ea21195a2656f0, UC-117 at
8d276eb2a550f51d32b126edfa76470b0dfa008e.
"""

from __future__ import annotations

import pytest

from thatch_core import clock
from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.mcp import McpChatServer
from thatch_core.policy import LATER
from thatch_core.tools import ChatTools

CONFIG = StaticConfig(ChatConfig(policy=LATER))


def opencode_tools(store, project: str) -> ChatTools:
    return ChatTools(store, CONFIG, project=project)


def registered_name(text: str) -> str:
    return text.split("[registered] ", 1)[1].splitlines()[0]


@pytest.mark.rules("R9", "R10")
def test_uc_116_send_dedupe(store):
    """UC-116-chat-send-dedupe: a retried chat_send succeeds with the DUPLICATE
    SUPPRESSED note and stores nothing; once the recipient read the first copy
    the same body delivers again, so its mailbox holds two rows (R9, R10)."""
    tools = opencode_tools(store, "test-owner/test-repo")
    tools.call("chat_register", {}, identity="ses_uc116")
    other = registered_name(tools.call("chat_register", {}, identity="ses_uc116_other").text)
    first = tools.call("chat_send", {"to": other, "body": "uc116 ping"}, identity="ses_uc116").text
    assert "[sent]" in first and "DUPLICATE SUPPRESSED" not in first
    retry = tools.call("chat_send", {"to": other, "body": "uc116 ping"}, identity="ses_uc116").text
    assert "[sent]" in retry and "DUPLICATE SUPPRESSED" in retry
    assert "uc116 ping" in tools.call("chat_read", {}, identity="ses_uc116_other").text
    after_read = tools.call("chat_send", {"to": other, "body": "uc116 ping"}, identity="ses_uc116").text
    assert "[sent]" in after_read and "DUPLICATE SUPPRESSED" not in after_read
    assert store.status("ses_uc116_other").total == 2


@pytest.mark.rules("R6", "R32")
def test_uc_117_identity_directory_binding(store):
    """UC-117-chat-identity-directory-binding: an alpha identity claimed with
    `as` from a beta MCP server is refused naming both projects; the same claim
    from alpha resolves; chat_register with the cross-project `as` registers a
    fresh identity instead of confirming the claimed row (R6, R32)."""
    alpha_name = registered_name(opencode_tools(store, "acme/alpha").call("chat_register", {},
                                                                           identity="ses_uc117").text)
    alpha = McpChatServer(store, CONFIG, host="cursor", project="acme/alpha", env={})
    beta = McpChatServer(store, CONFIG, host="cursor", project="acme/beta", env={})
    refused = beta.call("chat_status", {"as": alpha_name}).text
    assert "registered to another project" in refused and "acme/alpha" in refused and "acme/beta" in refused
    ok = alpha.call("chat_status", {"as": alpha_name}).text
    assert "[chat] registered as" in ok and "another project" not in ok
    fresh = beta.call("chat_register", {"as": alpha_name}).text
    assert "belongs to another project" in fresh and "[registered]" in fresh
    assert "You were already registered" not in fresh


@pytest.mark.rules("R9", "R20")
def test_uc_119_split_long_messages(store):
    """UC-119-chat-split-long-messages: a two-part body is sent as 2 parts, the
    recipient's mailbox holds exactly those two rows, both pending for one
    recipient (one grouped wake), the first with both markers and the second
    the plain remainder (R9, R20)."""
    tools = opencode_tools(store, "test-owner/test-repo")
    tools.call("chat_register", {}, identity="ses_uc119")
    other = registered_name(tools.call("chat_register", {}, identity="ses_uc119_other").text)
    body = f"{'A' * 1_900}\n\n{'B' * 1_900}"
    sent = tools.call("chat_send", {"to": other, "body": body}, identity="ses_uc119").text
    assert "[sent]" in sent and "SENT AS 2 PARTS" in sent
    assert store.status("ses_uc119_other").total == 2
    pending = store.pending_notifications(["ses_uc119_other"], clock.iso(clock.now_ms() + 60_000))
    assert len(pending) == 2 and {p.to_session for p in pending} == {"ses_uc119_other"}
    first, second = (item.body for item in store.read("ses_uc119_other"))
    assert first.startswith("(message 1 of 2)\n\n") and first.endswith("\n\n(continued in next message)")
    assert second == "B" * 1_900
