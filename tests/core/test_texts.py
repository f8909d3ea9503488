"""The texts chat shows models and people say what the design says, one way (R9, R16, R31, R34).

Seed 000 names the tools `thatch_chat_register / thatch_chat_list / ...`;
every reply names them that way (the CLI's empty-roster text is the real
thatch's own, D-real-real-cli-3). A counted noun agrees with its count. The
two rosters (the chat_list tool and `thatch chat list`) split the directory
and word ages alike (tests/core/test_staleness.py). The identity hook line
says what seeds 000 and 001 say it prints (docs/decisions/mcp.md, D-mcp-13).
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
from thatch_core.mcp import hook_line_text, leave_line_text
from thatch_core.prompts import UNKNOWN_CHECKOUT, hidden_stale_note, plural
from thatch_core.store import ERR_NOT_REGISTERED, ERR_TOMBSTONED, ChatStore, err_no_recipient
from thatch_core.tools import ChatTools

TOOL_NAMES = ("register", "list", "send", "read", "unregister", "broadcast", "status")
# A tool named without the `thatch_` prefix (`chat_register`), anywhere in a text.
BARE_TOOL = re.compile(r"(?<![A-Za-z0-9_])chat_(?:" + "|".join(TOOL_NAMES) + r")\b")
# The real `thatch chat list` prints this for an empty directory, bare tool name and all: a terminal
# text for a person, matched word for word (docs/decisions/fidelity.md, D-real-real-cli-3).
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


@pytest.mark.rules("R9")
def test_every_reply_names_the_tools_with_their_thatch_prefix():
    """R9: a refusal that says `call chat_register` names a tool no host offers;
    seed 000's tool names are `thatch_chat_*` and every text says so."""
    bare = []
    for path in sorted(Path(thatch_core.__file__).parent.glob("*.py")):
        for line, text in _texts(ast.parse(path.read_text(encoding="utf-8"))):
            if BARE_TOOL.search(text) and not any(text in real for real in REAL_CLI_TEXTS):
                bare.append(f"{path.name}:{line}: {text!r}")
    assert not bare, "texts naming a tool without its thatch_ prefix:\n" + "\n".join(bare)


@pytest.mark.rules("R9")
def test_refusals_name_the_tool_to_call():
    """R9: the store's refusals, word for word."""
    assert ERR_NOT_REGISTERED == "You are not registered - call thatch_chat_register first."
    assert ERR_TOMBSTONED == "This session left the chat directory - call thatch_chat_register to rejoin."
    assert err_no_recipient("ghost") == ('No registered session named "ghost". '
                                         "Use thatch_chat_list to see who is available.")


@pytest.mark.rules("R16", "R34")
def test_counted_nouns_agree_with_their_count():
    """R16, R34: `1 older stale session hidden`, `1 total message`."""
    assert plural(1, "message") == "1 message" and plural(0, "message") == "0 messages"
    assert hidden_stale_note(1) == "(1 older stale session hidden - --stale all to show)"
    assert hidden_stale_note(6) == "(6 older stale sessions hidden - --stale all to show)"


@pytest.mark.rules("R34")
def test_status_counts_one_message_in_the_singular(tmp_path):
    """R34: chat_status of a session with one message says `1 total message`."""
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
    assert reply.text == f"Registered as {name}: 1 unread, 1 total message."


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
def test_the_hook_line_prints_what_the_seeds_say():
    """R31: seed 001 -- the hook "prints you are NAME (unread count)" and the
    model "passes that name as the as argument"; seed 000 -- tools take the
    name the hook printed as `as`. The line names the tools like the replies."""
    line = hook_line_text("ba-sil-00001", 2)
    assert line.startswith("thatch chat: you are ba-sil-00001 (2 unread)")
    assert 'pass as: "ba-sil-00001" on the thatch_chat_* tools' in line
    assert line.endswith("; call thatch_chat_read to read your mail")
    assert hook_line_text("ba-sil-00001", 0) == \
        'thatch chat: you are ba-sil-00001 (0 unread) - pass as: "ba-sil-00001" on the thatch_chat_* tools'
    assert leave_line_text("mcp_0123456789ab").startswith(
        "thatch chat: you left the directory - call thatch_chat_register")
