"""The texts chat shows models and people are the real thatch's, one way (R9, R16, R31, R34).

The real tools are `thatch_chat_*` in the opencode plugin and `chat_*` on the
MCP server; their shared replies and the store's refusals name them `chat_*`
(`call chat_register first`), the opencode-only texts (the wake nudge, the
system prompt section) `thatch_chat_*` (docs/decisions/real.md). A counted
noun agrees with its count. The two rosters share their section headers, stale
explainer and unknown-checkout mark. The identity hook line is the real one.
"""

from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import pytest
from freezegun import freeze_time

import thatch_core
from thatch_core.cli import EMPTY_ROSTER
from thatch_core.config import StaticConfig
from thatch_core.db import open_db
from thatch_core.prompts import (
    UNKNOWN_CHECKOUT, chat_notification_nudge, hidden_stale_note, hook_line, leave_line, plural, system_prompt_section,
)
from thatch_core.store import ERR_NOT_REGISTERED, ERR_TOMBSTONED, ChatStore, err_no_recipient
from thatch_core.tools import ChatTools

TOOL_NAMES = ("register", "list", "send", "read", "unregister", "broadcast", "status")
# A tool named without the `thatch_` prefix (`chat_register`), anywhere in a text.
BARE_TOOL = re.compile(r"(?<![A-Za-z0-9_])chat_(?:" + "|".join(TOOL_NAMES) + r")\b")
# The real `thatch chat list` prints this for an empty directory, bare tool name and all: a terminal
# text for a person, matched word for word (docs/decisions/real.md, D-real-cli-3).
REAL_CLI_TEXTS = (EMPTY_ROSTER,)


def _texts(tree: ast.AST):
    """(line, text) of every string constant in a module that is not a docstring."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.lineno, node.value


PREFIXED_TOOL = re.compile(r"thatch_chat_(?:" + "|".join(TOOL_NAMES) + r")\b")
# The texts of both hosts: the shared tool replies and the store's refusals.
SHARED_TEXT_MODULES = ("tools.py", "store.py", "store_guard.py", "mcp.py")


@pytest.mark.rules("R9")
def test_shared_replies_name_the_tools_as_the_shared_tool_definitions_do():
    """R9: the real tool definitions serve both hosts, so their replies and the
    store's refusals say `chat_register`, `chat_list`: no text of the shared
    modules names the opencode plugin's `thatch_chat_*` spelling."""
    prefixed = []
    for name in SHARED_TEXT_MODULES:
        path = Path(thatch_core.__file__).parent / name
        for line, text in _texts(ast.parse(path.read_text(encoding="utf-8"))):
            if PREFIXED_TOOL.search(text) and not PREFIXED_TOOL.fullmatch(text):  # a bare identifier is no text
                prefixed.append(f"{name}:{line}: {text!r}")
    assert not prefixed, "shared texts naming the opencode spelling:\n" + "\n".join(prefixed)


@pytest.mark.rules("R9", "R20")
def test_opencode_only_texts_name_the_plugin_tools():
    """R9, R20: the wake nudge and the system prompt section reach opencode
    sessions only, whose tools are `thatch_chat_*`; neither names a tool bare."""
    for text in (chat_notification_nudge(["ba-sil-00001"], 1), system_prompt_section(True)):
        assert "thatch_chat_read" in text
        assert not BARE_TOOL.search(text), text


@pytest.mark.rules("R9")
def test_refusals_name_the_tool_to_call():
    """R9: the store's refusals, word for word the real store's (seed 002 agrees)."""
    assert ERR_NOT_REGISTERED == "You are not registered - call chat_register first."
    assert ERR_TOMBSTONED == "leave tombstone active"
    assert err_no_recipient("ghost") == ('No registered session named "ghost". '
                                         "Use chat_list to see who is available.")


@pytest.mark.rules("R16", "R34")
def test_counted_nouns_agree_with_their_count():
    """R16, R34: `1 older stale session hidden`, `1 total message`."""
    assert plural(1, "message") == "1 message" and plural(0, "message") == "0 messages"
    assert hidden_stale_note(1) == "(1 older stale session hidden - --stale all to show)"
    assert hidden_stale_note(6) == "(6 older stale sessions hidden - --stale all to show)"


@pytest.mark.rules("R34")
def test_status_counts_one_message_in_the_singular(tmp_path):
    """R34: chat_status of a session with one message, in the real reply's words."""
    with freeze_time("2026-01-05T09:00:00Z"):
        conn = open_db(tmp_path / "t.db")
        store = ChatStore(conn, rng=random.Random(0))
        tools = ChatTools(store, StaticConfig())
        for sid in ("ses_a", "ses_b"):
            tools.call("register", {}, identity=sid)
        tools.call("send", {"to": store.get("ses_b").name, "body": "hi"}, identity="ses_a")
        reply = tools.call("status", {}, identity="ses_b")
        name = store.get("ses_b").name
        conn.close()
    assert reply.text == (f"[chat] registered as {name}: 1 unread of 1 total - call chat_read to read them."
                          " You are woken automatically when a message arrives - no need to poll.")


@pytest.mark.rules("R16", "R4", "R14")
def test_the_tool_roster_marks_an_undetected_checkout(tmp_path):
    """R16, R4, R14: one live row with no detected checkout and one stale row;
    the chat_list tool shows both sections and `?` for the undetected checkout."""
    with freeze_time("2026-01-05T09:00:00Z") as frozen:
        conn = open_db(tmp_path / "t.db")
        store = ChatStore(conn, rng=random.Random(0))
        (tmp_path / "root" / ".git").mkdir(parents=True)
        (tmp_path / "plain").mkdir()
        store.register("ses_old", project="p", directory=str(tmp_path / "root"))
        frozen.tick(120)
        store.register("ses_new", project="p", directory=str(tmp_path / "plain"))  # no .git: undetected
        tools_text = ChatTools(store, StaticConfig()).call("list", {}, identity="ses_new").text
        conn.close()
    assert "Active" in tools_text and "Stale" in tools_text
    assert f"loc: {UNKNOWN_CHECKOUT}" in tools_text


@pytest.mark.rules("R31")
def test_the_hook_line_prints_what_the_real_hook_prints():
    """R31: seed 001 -- the hook "prints you are NAME (unread count)"; the real
    line is `[thatch] chat: you are NAME (...)` plus the project's other
    sessions with mail, and the leave line says how to rejoin."""
    assert hook_line("ba-sil-00001", 0) == "[thatch] chat: you are ba-sil-00001 (no unread mail for you)."
    assert hook_line("ba-sil-00001", 2) == "[thatch] chat: you are ba-sil-00001 (2 unread message(s) for you)."
    assert hook_line("ba-sil-00001", 1, [("ky-rie-00002", 3), ("lo-ra-00003", 1)]) == (
        "[thatch] chat: you are ba-sil-00001 (1 unread message(s) for you). "
        "Others in this project with unread mail: ky-rie-00002 (3), lo-ra-00003 (1).")
    assert leave_line("mcp_0123456789ab") == (
        "[thatch] chat: this conversation left the chat directory (chat_unregister) and will not receive mail. "
        "If the user asks to rejoin, call thatch_chat_register with no arguments - that mints a fresh identity; "
        'the old one stays closed. To rejoin as this conversation, pass as: "mcp_0123456789ab".')
