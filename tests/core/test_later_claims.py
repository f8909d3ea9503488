"""The later design's name claims, project-bound `as` and the MCP project env (D-later-5..7).

A pruned auto row's own session gets its old name back (seed 001, R26: a
fresh name); a claimed `as` must belong to the caller's project; the MCP
server resolves its project as THATCH_PROJECT_DIR, else CURSOR_PROJECT_DIR,
else CLAUDE_PROJECT_DIR, else its working directory.
"""

from __future__ import annotations

import os

import pytest

from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.db import open_db
from thatch_core.mcp import McpChatServer, mcp_project_dir
from thatch_core.policy import DEFAULT, LATER, Policy
from thatch_core.store import ChatStore

CLAIMS = Policy(name_claims=True)


@pytest.fixture
def store(db_path, frozen):
    conn = open_db(db_path)
    yield ChatStore(conn)
    conn.close()


def prune_after_a_week(store, frozen):
    frozen.tick(7 * 86_400 + 1)
    return store.prune()


# -- name claims -------------------------------------------------------------------


@pytest.mark.rules("R26")
def test_a_pruned_session_gets_its_old_name_back(store, frozen):
    """R26 under the later design: the prune keeps the name bound to the session."""
    name = store.register("ses_a", project="p", policy=CLAIMS).name
    assert prune_after_a_week(store, frozen).pruned == ("ses_a",)
    back = store.register("ses_a", project="p", policy=CLAIMS)
    assert back.ok and back.name == name and back.claimed and not back.drawn


@pytest.mark.rules("R26")
def test_seed_000s_design_gives_a_fresh_name(store, frozen):
    """R26 (seed 001): a pruned session that returns is drawn a new name."""
    name = store.register("ses_a", project="p").name
    prune_after_a_week(store, frozen)
    back = store.register("ses_a", project="p")
    assert back.name != name and back.drawn and not back.claimed
    assert store.conn.execute("SELECT COUNT(*) FROM chat_name_claims").fetchone() == (0,)


def test_a_leave_and_rejoin_still_mints_a_fresh_name(store):
    name = store.register("ses_a", project="p", policy=CLAIMS).name
    store.unregister("ses_a")
    back = store.register("ses_a", project="p", explicit=True, policy=CLAIMS)
    assert back.rejoined and back.name != name and not back.claimed


def test_a_claim_is_only_for_its_own_session(store, frozen):
    name = store.register("ses_a", project="p", policy=CLAIMS).name
    prune_after_a_week(store, frozen)
    other = store.register("ses_b", project="p", policy=CLAIMS)
    assert other.name != name and not other.claimed


def test_the_claim_holds_across_two_prunes(store, frozen):
    name = store.register("ses_a", project="p", policy=CLAIMS).name
    prune_after_a_week(store, frozen)
    store.register("ses_a", project="p", policy=CLAIMS)
    prune_after_a_week(store, frozen)
    assert store.register("ses_a", project="p", policy=CLAIMS).name == name


def test_the_tools_say_the_old_name_was_given_back(store, frozen):
    server = McpChatServer(store, StaticConfig(ChatConfig(policy=LATER)), host="cursor", project="p")
    store.register("mcp_aaaaaaaaaaaa", kind="mcp", project="p", policy=CLAIMS)
    prune_after_a_week(store, frozen)
    reply = server.tools.call("chat_register", {}, identity="mcp_aaaaaaaaaaaa")
    assert reply.ok and "Your old name was given back" in reply.text


# -- project-bound `as` ----------------------------------------------------------------


def cursor(store, project, policy=LATER):
    return McpChatServer(store, StaticConfig(ChatConfig(policy=policy)), host="cursor", project=project)


@pytest.mark.rules("R32")
def test_a_claim_of_this_projects_identity_is_honoured(store):
    """R32 under the later design: the claimed `as` is bound to the caller's project."""
    name = store.register("mcp_aaaaaaaaaaaa", kind="mcp", project="shop").name
    assert cursor(store, "shop").call("chat_status", {"as": name}).text.startswith(f"[chat] registered as {name}")


@pytest.mark.rules("R32")
def test_a_cross_project_claim_is_refused_with_the_re_register_hint(store):
    """R32: a claim of another project's identity is refused and teaches the fix."""
    name = store.register("mcp_aaaaaaaaaaaa", kind="mcp", project="shop").name
    store.register("mcp_bbbbbbbbbbbb", kind="mcp", project="blog")
    reply = cursor(store, "blog").call("chat_send", {"as": name, "to": "mcp_bbbbbbbbbbbb", "body": "hi"})
    assert not reply.ok and reply.text == (
        f'The identity "{name}" is registered to another project (shop; this session\'s is blog). Call '
        "chat_register WITHOUT `as` to get a fresh identity for this project - once - then reuse the name it "
        "returns.")
    assert store.conn.execute("SELECT COUNT(*) FROM chat_messages").fetchone() == (0,)


def test_a_project_less_claim_is_refused(store):
    name = store.register("mcp_aaaaaaaaaaaa", kind="mcp", project=None).name
    reply = cursor(store, "shop").call("chat_status", {"as": name})
    assert not reply.ok and reply.text.startswith(f'The identity "{name}" is registered to another project (none;')
    theirs = store.register("mcp_cccccccccccc", kind="mcp", project="shop").name
    nowhere = cursor(store, None).call("chat_status", {"as": theirs})
    assert nowhere.text.startswith(f'The identity "{theirs}" is registered to another project (shop; this '
                                   "session's is none)")


def test_seed_000s_design_honours_any_claim(store):
    name = store.register("mcp_aaaaaaaaaaaa", kind="mcp", project="shop").name
    assert cursor(store, "blog", DEFAULT).call("chat_status", {"as": name}).text.startswith("[chat] registered as")


def test_a_left_id_can_still_rejoin_by_its_id(store):
    store.register("mcp_aaaaaaaaaaaa", kind="mcp", project="shop")
    store.unregister("mcp_aaaaaaaaaaaa")
    reply = cursor(store, "blog").call("chat_register", {"as": "mcp_aaaaaaaaaaaa"})
    assert reply.ok


def test_a_host_anchored_identity_is_not_a_claim(store):
    store.register("mcp_aaaaaaaaaaaa", kind="mcp", project="shop")
    store.record_host_pid(4242, "mcp_aaaaaaaaaaaa")
    other = store.register("mcp_bbbbbbbbbbbb", kind="mcp", project="shop").name
    server = McpChatServer(store, StaticConfig(ChatConfig(policy=LATER)), host="claude-code", ppid=4242, env={},
                           project="blog")
    assert server.call("chat_status", {"as": other}).ok  # the anchor decides; the claim is ignored


# -- the MCP server's project ------------------------------------------------------------


@pytest.mark.parametrize(("env", "want_later", "want_seed"), [
    ({"THATCH_PROJECT_DIR": "/t", "CURSOR_PROJECT_DIR": "/c", "CLAUDE_PROJECT_DIR": "/k"}, "/t", "/c"),
    ({"CURSOR_PROJECT_DIR": "/c", "CLAUDE_PROJECT_DIR": "/k"}, "/c", "/c"),
    ({"CLAUDE_PROJECT_DIR": "/k", "THATCH_PROJECT_DIR": ""}, "/k", "/k"),
    ({"THATCH_PROJECT_DIR": "/t"}, "/t", None),
    ({}, None, None),
])
def test_the_mcp_project_env_precedence(env, want_later, want_seed):
    assert mcp_project_dir(env, thatch_first=True) == (want_later or os.getcwd())
    assert mcp_project_dir(env) == (want_seed or os.getcwd())


def test_the_hook_line_gives_a_pruned_conversation_its_old_name_back(store, frozen):
    from thatch_core.mcp import chat_hook_line
    config = StaticConfig(ChatConfig(policy=CLAIMS))
    first = chat_hook_line(store, config, "HOST-1", project="p")
    prune_after_a_week(store, frozen)
    assert chat_hook_line(store, config, "HOST-1", project="p") == first
