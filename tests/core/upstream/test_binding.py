"""The real suite's "chat identity directory binding" block, under the later design (D-later-6).

The real block shares one database and two tool contexts of different
projects through the whole describe, its first case registering the
identity the others claim; here a fixture registers that identity for each
case, and the contexts are MCP servers of the two projects. Identity comes
from the claimed `as` (no host anchor), as on the real MCP path.
"""

from __future__ import annotations

import re

import pytest

from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.mcp import McpChatServer
from thatch_core.policy import LATER

ALPHA, BETA = "acme/alpha", "acme/beta"


def server(store, project, **kw):
    kw.setdefault("host", "cursor")
    return McpChatServer(store, StaticConfig(ChatConfig(policy=LATER)), project=project, env={}, **kw)


@pytest.fixture
def alpha(store):
    """(name, session id) of an identity registered by an alpha-project conversation."""
    reply = server(store, ALPHA).call("chat_register", {})
    assert reply.ok, reply.text
    name = reply.text.splitlines()[0].removeprefix("[registered] ")
    return name, store.find(name).session_id


@pytest.mark.rules("R6")
def test_setup_registers_alpha(alpha):
    """
    "setup: register an alpha-project identity": a register without `as` on an
    MCP host mints a fresh identity with an assigned name (R6).
    """
    assert re.fullmatch(r"\S+-\d{5}", alpha[0])


@pytest.mark.rules("R32")
def test_same_project_resolves_cross_refused(store, alpha):
    """
    "same-project as claim resolves; cross-project is refused": a peer of the
    same project gets the status; a beta-project caller is refused with the
    way to re-register (R32).
    """
    ok = server(store, ALPHA).call("chat_status", {"as": alpha[0]}).text
    assert "[chat] registered as" in ok and "another project" not in ok
    refused = server(store, BETA).call("chat_status", {"as": alpha[0]}).text
    assert "registered to another project" in refused and "chat_register" in refused


@pytest.mark.rules("R32")
def test_session_id_claim_bound(store, alpha):
    """
    "a session-ID-based as claim is bound by the same rule": claiming the alpha
    row by its session id from beta is refused the same way (R32).
    """
    assert "registered to another project" in server(store, BETA).call("chat_status", {"as": alpha[1]}).text


@pytest.mark.rules("R32")
def test_null_project_claim_refused(store, alpha, raw):
    """
    "a claimed row with a null project is refused (fail safe)": even its own
    project cannot claim a row with no project; the refusal says ``(none`` (R32).
    """
    raw.execute("UPDATE chat_sessions SET project = NULL WHERE session_id = ?", (alpha[1],))
    refused = server(store, ALPHA).call("chat_status", {"as": alpha[0]}).text
    assert "registered to another project" in refused and "(none" in refused


@pytest.mark.rules("R32")
def test_anchor_miss_falls_through_and_is_bound(store, alpha):
    """
    "an anchor miss falls through to `as` and is bound": a Claude Code server
    whose parent-pid anchor points at a session no longer in the directory
    resolves through the claim, which is bound to its project (R32).
    """
    assert store.record_host_pid(4242, "ses_gone")
    beta = server(store, BETA, host="claude-code", ppid=4242)
    assert "registered to another project" in beta.call("chat_status", {"as": alpha[0]}).text


@pytest.mark.rules("R6", "R32")
def test_register_reclaim_bound(store, alpha):
    """
    "chat_register reclaim: same project confirms, cross project registers
    fresh": alpha's reclaim says it was already registered; beta's gets a fresh
    identity of its own, saying the name belongs to another project; a name
    nobody holds is refused (R6, R32).
    """
    assert "You were already registered" in server(store, ALPHA).call("chat_register", {"as": alpha[0]}).text
    fresh = server(store, BETA).call("chat_register", {"as": alpha[0]})
    assert fresh.ok and "belongs to another project" in fresh.text and "[registered]" in fresh.text
    assert "You were already registered" not in fresh.text
    fresh_name = fresh.text.split("[registered] ", 1)[1].splitlines()[0]
    assert fresh_name != alpha[0] and store.find(fresh_name).project == BETA
    assert "No registered session named" in server(store, ALPHA).call("chat_register", {"as": "ghost-00001"}).text
