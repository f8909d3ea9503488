"""Store abuse: what a hostile or careless caller can hand the store and every surface above it.

Each case is called on a live store holding two sessions and one unread message. It must end in a
refusal or an answer (never in an exception other than the documented ones: StoreError and its kinds,
and ValueError from `tail_backlog`), its reply text must be safe to print and store (no lone
surrogate), and a refusal changes no row of any table (D-store-16, D-store-20).
"""

from __future__ import annotations

import contextlib
import io
import json
import random
from typing import Any, Callable

import pytest

from thatch_core import cli as chat_cli
from thatch_core.config import StaticConfig
from thatch_core.db import StoreError, open_db
from thatch_core.mcp import McpChatServer, chat_hook_line, claude_stop_hook, resolve_chat_identity
from thatch_core.store import ChatStore
from thatch_core.tools import ChatTools

SURROGATE = json.loads('"\\udc80"')  # what an MCP request's `\udc80` escape becomes
BIG = 2**63  # one past SQLite's largest INTEGER
TABLES = ("chat_sessions", "chat_messages", "chat_name_counters", "chat_leave_tombstones", "chat_host_pids",
          "chat_pruned")


class World:
    def __init__(self, path) -> None:
        self.conn = open_db(path)
        self.store = ChatStore(self.conn, rng=random.Random(0))
        self.alice = self.store.register("ses_alice").name
        self.bob = self.store.register("ses_bob").name
        self.store.send("ses_alice", "ses_bob", "hello")
        self.tools = ChatTools(self.store, StaticConfig())
        self.mcp = McpChatServer(self.store, StaticConfig(), host="cursor")

    def counts(self) -> dict[str, int]:
        return {t: self.conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}

    def rows(self) -> list:
        return [self.conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in TABLES]


@pytest.fixture
def world(tmp_path):
    w = World(tmp_path / "thatch.db")
    yield w
    w.conn.close()


def tool(name: str, args: Any, identity: Any = "ses_alice") -> Callable[[World], Any]:
    return lambda w: w.tools.call(f"thatch_chat_{name}", args, identity=identity)


def mcp(name: str, args: Any) -> Callable[[World], Any]:
    return lambda w: w.mcp.call(name, args)


# (id, the call, what the answer must say: a refusal text, or None for an answer that changes nothing)
REFUSED = [
    ("store-send-surrogate-body", lambda w: w.store.send("ses_alice", "ses_bob", "caf" + SURROGATE).error,
     "Message body must be valid text (unpaired surrogate \\udc80 at character 4)."),
    ("store-send-surrogate-to", lambda w: w.store.send("ses_alice", SURROGATE, "hi").error,
     'No registered session named "\\udc80". Use thatch_chat_list to see who is available.'),
    ("store-send-surrogate-sender", lambda w: w.store.send(SURROGATE, "ses_bob", "hi").error,
     "You are not registered - call thatch_chat_register first."),
    ("store-broadcast-surrogate-body", lambda w: w.store.broadcast("ses_alice", SURROGATE).error,
     "Message body must be valid text (unpaired surrogate \\udc80 at character 1)."),
    ("store-register-surrogate-id", lambda w: w.store.register("ses_" + SURROGATE).error,
     "A session id must be valid text (unpaired surrogate \\udc80 at character 5)."),
    ("store-send-bytes-body", lambda w: w.store.send("ses_alice", "ses_bob", b"hi").error,
     "Message body must be text."),
    ("tool-send-surrogate-body", tool("send", {"to": "ses_bob", "body": SURROGATE}),
     "Message body must be valid text (unpaired surrogate \\udc80 at character 1)."),
    ("tool-send-surrogate-to", tool("send", {"to": SURROGATE, "body": "hi"}),
     'No registered session named "\\udc80". Use thatch_chat_list to see who is available.'),
    ("tool-send-bytes-body", tool("send", {"to": "ses_bob", "body": b"hi"}), "Message body must be text."),
    ("tool-send-int-body", tool("send", {"to": "ses_bob", "body": 42}), "Message body must be text."),
    ("tool-send-dict-body", tool("send", {"to": "ses_bob", "body": {"text": "hi"}}), "Message body must be text."),
    ("tool-send-list-body", tool("send", {"to": "ses_bob", "body": ["hi"]}), "Message body must be text."),
    ("tool-send-true-body", tool("send", {"to": "ses_bob", "body": True}), "Message body must be text."),
    ("tool-send-int-to", tool("send", {"to": 7, "body": "hi"}),
     'The recipient ("to") must be text: a name from thatch_chat_list or a session id.'),
    ("tool-broadcast-dict-body", tool("broadcast", {"body": {"x": 1}}), "Message body must be text."),
    ("tool-broadcast-surrogate", tool("broadcast", {"message": SURROGATE}),
     "Message body must be valid text (unpaired surrogate \\udc80 at character 1)."),
    ("tool-surrogate-identity-register", tool("register", {}, identity="ses_" + SURROGATE),
     "A session id must be valid text (unpaired surrogate \\udc80 at character 5)."),
    ("tool-surrogate-identity-read", tool("read", {}, identity=SURROGATE),
     "You are not registered - call thatch_chat_register first."),
    ("tool-args-not-a-mapping", tool("send", ["ses_bob", "hi"]), "Tool arguments must be an object."),
    ("tool-name-surrogate", lambda w: w.tools.call(SURROGATE, {}, identity="ses_alice"),
     "Unknown chat tool '\\udc80'."),
    ("mcp-as-surrogate", mcp("thatch_chat_send", {"as": SURROGATE, "to": "ses_bob", "body": "hi"}),
     'The "as" name must be valid text (unpaired surrogate \\udc80 at character 1).'),
    ("mcp-register-as-surrogate", mcp("chat_register", {"as": "x" + SURROGATE}),
     'The "as" name must be valid text (unpaired surrogate \\udc80 at character 2).'),
    ("mcp-body-surrogate", mcp("thatch_chat_send", {"as": "ses_alice", "to": "ses_bob", "body": SURROGATE}),
     "Message body must be valid text (unpaired surrogate \\udc80 at character 1)."),
    ("mcp-body-bytes", mcp("thatch_chat_send", {"as": "ses_alice", "to": "ses_bob", "body": b"\xff"}),
     "Message body must be text."),
    ("mcp-tool-int", mcp(12, {}), "Unknown chat tool 12."),
]

# (id, the call, the answer it must give); nothing may change.
ANSWERED = [
    ("mark-delivered-2^63", lambda w: w.store.mark_delivered([BIG]), None),
    ("mark-delivered-2^64-and-negative", lambda w: w.store.mark_delivered([2**64, -1, 0, True, 1.5, "1"]), None),
    ("record-host-pid-2^63", lambda w: w.store.record_host_pid(BIG, "ses_alice"), False),
    ("record-host-pid-surrogate-id", lambda w: w.store.record_host_pid(4242, SURROGATE), False),
    ("resolve-host-pid-2^63", lambda w: w.store.resolve_host_pid(BIG), None),
    ("resolve-host-pid-huge", lambda w: w.store.resolve_host_pid(10**100), None),
    ("get-surrogate", lambda w: w.store.get(SURROGATE), None),
    ("find-surrogate", lambda w: w.store.find("x" + SURROGATE), None),
    ("has-tombstone-surrogate", lambda w: w.store.has_tombstone(SURROGATE), False),
    ("read-surrogate", lambda w: w.store.read(SURROGATE), []),
    ("unread-count-surrogate", lambda w: w.store.unread_count(SURROGATE), 0),
    ("unregister-surrogate", lambda w: w.store.unregister(SURROGATE), False),
    ("continue-surrogate", lambda w: w.store.continue_session("ses_alice", SURROGATE), False),
    ("heartbeat-surrogate", lambda w: w.store.heartbeat([SURROGATE]), None),
    ("pending-by-project-surrogate", lambda w: w.store.pending_by_project(SURROGATE), []),
    ("pending-notifications-surrogate-cutoff",
     lambda w: [r.id for r in w.store.pending_notifications(["ses_bob"], SURROGATE)], [1]),
    ("refresh-topic-surrogate", lambda w: w.store.refresh_topic("ses_alice", SURROGATE), None),
    ("hook-line-surrogate-host-id", lambda w: chat_hook_line(w.store, StaticConfig(), "h" + SURROGATE), None),
    ("stop-hook-surrogate-host-id", lambda w: claude_stop_hook(w.store, StaticConfig(), SURROGATE), None),
    ("identity-from-surrogate-env", lambda w: resolve_chat_identity(w.store, env_session_id=SURROGATE), None),
]


@pytest.mark.rules("R33")
def test_a_transcript_record_with_a_surrogate_id_is_skipped_not_raised(world, tmp_path):
    """A continued-in record whose id came from a `\\udc80` escape, or a sibling whose file name is
    not UTF-8, names no usable ancestor (R33): the hook still prints and registers fresh."""
    old = tmp_path / "old-host.jsonl"
    old.write_text(json.dumps({"type": "continued-in", "continuedInSessionId": "new" + SURROGATE}) + "\n")
    (tmp_path / ("odd" + SURROGATE + ".jsonl")).write_text(
        json.dumps({"type": "continued-in", "continuedInSessionId": "new-host"}) + "\n")
    before = world.counts()
    line = chat_hook_line(world.store, StaticConfig(), "new-host", transcript_path=str(tmp_path / "new-host.jsonl"))
    assert line.startswith("thatch chat: you are ")
    assert world.counts()["chat_sessions"] == before["chat_sessions"] + 1  # registered fresh, nothing adopted


def _safe(value: Any) -> None:
    """An answer must print and store: every string in it has a UTF-8 form."""
    text = value.text if hasattr(value, "text") else value
    if isinstance(text, str):
        text.encode("utf-8")


@pytest.mark.rules("R9", "R12", "R32")
@pytest.mark.parametrize("case,call,text", REFUSED, ids=[c[0] for c in REFUSED])
def test_a_refusal_says_why_and_changes_nothing(world, case, call, text):
    before = world.rows()
    answer = call(world)
    shown = answer.text if hasattr(answer, "text") else answer
    assert shown == text
    assert getattr(answer, "ok", False) is False
    _safe(answer)
    assert world.rows() == before


@pytest.mark.parametrize("case,call,expected", ANSWERED, ids=[c[0] for c in ANSWERED])
def test_an_unusable_argument_is_answered_and_changes_nothing(world, case, call, expected):
    before = world.rows()
    assert call(world) == expected
    assert world.rows() == before


@pytest.mark.parametrize("limit", [2.5, -1, "3", True, float("nan")])
def test_tail_backlog_refuses_a_limit_that_is_no_count(world, limit):
    with pytest.raises(ValueError, match=r"^limit must be a whole number of messages, 0 or more, or None; not "):
        chat_cli.tail_backlog(world.store.message_feed(), limit)


@pytest.mark.rules("R16", "R28")
@pytest.mark.parametrize("argv,message", [
    (["list", "--stale", "nan"], '--stale takes a finite number of days or "all", not \'nan\''),
    (["list", "--stale", "inf"], '--stale takes a finite number of days or "all", not \'inf\''),
    (["list", "--stale", "-1"], "--stale takes a non-negative number of days"),
    (["tail", "--once", "--limit", "-3"], "--limit takes 0 or more messages"),
    (["tail", "--once", "--limit", "2.5"], "--limit takes a whole number of messages, not '2.5'"),
    (["tail", "--once", "--interval", "0"], "--interval takes a number of seconds above 0"),
    (["tail", "--once", "--interval", "nan"], "--interval takes a number of seconds above 0"),
])
def test_a_cli_option_out_of_range_is_a_usage_error_naming_it(world, tmp_path, argv, message):
    before = world.counts()
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as info:
        chat_cli.main([argv[0], "--db", str(tmp_path / "thatch.db"), *argv[1:]], out=io.StringIO())
    assert info.value.code == 2
    assert message in err.getvalue() and "Traceback" not in err.getvalue()
    assert world.counts() == before


def test_every_documented_exception_is_a_store_error():
    """The refusals above raise nothing; what a store call may raise is StoreError (and its kinds) only."""
    from thatch_core import db
    assert all(issubclass(e, StoreError) for e in (db.StoreBusy, db.StoreFault))
