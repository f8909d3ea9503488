"""The fake hosts' side of thatch's doors: hook payloads and outputs, the MCP JSON-RPC exchange.

The fakes build the payloads Claude Code and Cursor write to a hook's stdin,
read a hook's stdout the way those hosts read it, and speak newline-delimited
JSON-RPC to the MCP server (simulator/harness/hostio.py, mcp_client.py).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from freezegun import freeze_time

from harnesskit import make_ctx
from simulator import clock
from simulator.harness.claude_code import _mcp_server_setup
from simulator.harness.hostio import (
    CLAUDE_EVENTS, CURSOR_EVENTS, JsonRpcClient, RpcError, claude_payload, cursor_payload, followup_message,
    prompt_context, stop_block_reason, tool_reply,
)
from simulator.harness.mcp_client import McpClient
from simulator.harness.procs import ServerChild
from simulator.harness.support import create_database
from thatch_core.config import ConfigSource
from thatch_core.db import open_db
from thatch_core.doors import JsonRpcHandler, handle_line, parse_hook_payload
from thatch_core.mcp import McpChatServer
from thatch_core.store import ChatStore

CC = "5f0c8a1e-0000-4aaa-8aaa-0000000000c1"
CONV = "0b7c2f4e-1111-4aaa-8aaa-0000000000c2"
BASE = {"session_id", "transcript_path", "cwd", "hook_event_name"}


def test_claude_code_payloads_carry_the_hosts_keys():
    """Every Claude Code event carries session_id, transcript_path, cwd and hook_event_name; SessionStart
    its source, UserPromptSubmit the prompt, Stop stop_hook_active; thatch's payload parser reads them."""
    shapes = {}
    for event in CLAUDE_EVENTS:
        payload = claude_payload(event, CC, transcript_path="/t/x.jsonl", cwd="/w", prompt="hi",
                                 stop_hook_active=True, source="resume")
        shapes[event] = set(payload)
        assert payload["hook_event_name"] == event
        parsed = parse_hook_payload(json.dumps(payload))
        assert (parsed.host_session_id, parsed.cursor, parsed.directory) == (CC, False, "/w")
        assert parsed.transcript_path == "/t/x.jsonl"
    assert shapes == {"SessionStart": BASE | {"source"},
                      "UserPromptSubmit": BASE | {"permission_mode", "prompt"},
                      "Stop": BASE | {"permission_mode", "stop_hook_active"}}
    stop = claude_payload("Stop", CC, transcript_path=None, cwd="/w", stop_hook_active=False)
    assert stop["stop_hook_active"] is False and not parse_hook_payload(json.dumps(stop)).stop_hook_active
    with pytest.raises(ValueError):
        claude_payload("Nope", CC, transcript_path=None, cwd="/w")


def test_cursor_payloads_carry_the_hosts_keys():
    """Cursor names the conversation conversation_id and its workspace in workspace_roots; its stop
    carries the turn's status and loop_count; thatch's payload parser reads them."""
    base = {"conversation_id", "generation_id", "model", "hook_event_name", "cursor_version", "workspace_roots",
            "user_email"}
    shapes = {}
    for event in CURSOR_EVENTS:
        payload = cursor_payload(event, CONV, generation_id="g-1", workspace_root="/w", prompt="hi",
                                 status="aborted", loop_count=2)
        shapes[event] = set(payload)
        parsed = parse_hook_payload(json.dumps(payload))
        assert (parsed.host_session_id, parsed.directory, parsed.transcript_path) == (CONV, "/w", None)
    assert shapes == {"sessionStart": base | {"is_background_agent", "composer_mode"},
                      "beforeSubmitPrompt": base | {"prompt", "attachments"},
                      "stop": base | {"status", "loop_count"}}
    stop = parse_hook_payload(json.dumps(cursor_payload("stop", CONV, generation_id="g", workspace_root="/w",
                                                        status="aborted", loop_count=2)))
    assert (stop.cursor, stop.status, stop.loop_count) == (True, "aborted", 2)


def test_hook_outputs_are_read_as_the_hosts_read_them():
    """Plain stdout or a JSON context field is context; {} and nothing add nothing; Stop blocks only on
    decision block with a reason; Cursor follows up only on a followup_message."""
    line = "[thatch] chat: you are ada-00001 (no unread mail for you)."
    assert prompt_context(line + "\n") == line
    assert prompt_context(json.dumps({"additional_context": line})) == line
    assert prompt_context(json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                                             "additionalContext": line}})) == line
    for nothing in ("", "\n", "{}", '{"additional_context": ""}', "{broken"):
        assert prompt_context(nothing) is None, nothing
    assert stop_block_reason(json.dumps({"decision": "block", "reason": "read your mail"})) == "read your mail"
    for nothing in ("", "{}", '{"decision": "approve"}', '{"decision": "block"}', "block"):
        assert stop_block_reason(nothing) is None, nothing
    assert followup_message(json.dumps({"followup_message": "You have 1 unread"})) == "You have 1 unread"
    for nothing in ("", "{}", '{"followup_message": ""}', '{"followup_message": 3}', "[]"):
        assert followup_message(nothing) is None, nothing


def test_tool_replies_are_read_from_the_json_rpc_result():
    """A tools/call reply's text blocks are the reply, isError a refusal; a JSON-RPC error is a failed
    call with its message; a reply to another id or no JSON-RPC at all is a broken server."""
    ok = json.dumps({"jsonrpc": "2.0", "id": 4, "result": {"content": [{"type": "text", "text": "[sent] x"}],
                                                           "isError": False}})
    assert tool_reply(ok, 4) == (True, "[sent] x")
    refused = json.dumps({"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "text", "text": "No."}],
                                                                "isError": True}})
    assert tool_reply(refused, 5) == (False, "No.")
    error = json.dumps({"jsonrpc": "2.0", "id": 6, "error": {"code": -32602, "message": "Invalid params"}})
    assert tool_reply(error, 6) == (False, "Invalid params")
    for broken in (ok.replace('"id":4', '"id":9').replace('"id": 4', '"id": 9'), "not json", None):
        with pytest.raises(RpcError):
            tool_reply(broken, 4)


def _recording(send):
    lines = []

    def wrapped(line):
        lines.append(json.loads(line))
        return send(line)

    return wrapped, lines


@pytest.mark.rules("R32")
def test_the_cursor_session_is_json_rpc_lines_through_the_handler(tmp_path, frozen_sim):
    """R32: the workspace opens its MCP session with initialize, initialized and tools/list, then each
    tool call is a tools/call line with its own id; a refusal arrives as isError with its text."""
    create_database(tmp_path / "thatch.db")
    conn = open_db(tmp_path / "thatch.db")
    try:
        server = McpChatServer(ChatStore(conn, rng=random.Random(1)), ConfigSource(tmp_path / "config.json"),
                               host="cursor", rng=random.Random(2), project="demo")
        handler = JsonRpcHandler(server)
        send, lines = _recording(lambda line: handle_line(handler, line))
        client = McpClient("cursor", send)
        ok, text = client.call("thatch_chat_register", {})
        assert ok and text.startswith("[registered] ")
        ok, refusal = client.call("thatch_chat_send", {"to": "nobody-00001", "body": "hi",
                                                       "as": text.split()[1]})
    finally:
        conn.close()
    assert [m.get("method") for m in lines] == ["initialize", "notifications/initialized", "tools/list",
                                                "tools/call", "tools/call"]
    assert [m.get("id") for m in lines] == [1, None, 2, 3, 4]
    assert lines[0]["params"]["clientInfo"]["name"] == "cursor" and "protocolVersion" in lines[0]["params"]
    assert lines[3]["params"] == {"name": "chat_register", "arguments": {}}
    assert not ok and refusal and "chat_register" in client.tools


def test_the_claude_code_server_child_answers_json_rpc_lines(tmp_path):
    """The Claude Code MCP child serves each request line through the stdio framing: a fresh child (the
    old one crashed or was closed) is a new session, opened again with ids from 1."""
    ctx = make_ctx(tmp_path, "cc", "claude-code", [])
    create_database(ctx.db_path)
    with freeze_time(clock.instant(0), tick=False):
        server = ServerChild(_mcp_server_setup(ctx, CC, 1, 2), t=0)
        try:
            send, lines = _recording(lambda line: server.request(1_000, ("line", line)))
            client = McpClient("claude-code", send, session_key=lambda: server.starts if server.alive else None)
            ok, text = client.call("thatch_chat_status", {})
            assert ok and text, text
            server.close()
            ok, _ = client.call("thatch_chat_status", {})
        finally:
            server.close()
    assert ok and [(m.get("method"), m.get("id")) for m in lines] == [
        ("initialize", 1), ("notifications/initialized", None), ("tools/list", 2), ("tools/call", 3),
        ("initialize", 1), ("notifications/initialized", None), ("tools/list", 2), ("tools/call", 3)]


def test_the_request_ids_count_per_session():
    rpc = JsonRpcClient("x")
    assert [rpc.list_tools()[0], rpc.call_tool("chat_read", {})[0]] == [1, 2]
    rpc.reset()
    rid, line = rpc.initialize()
    assert rid == 1 and "\n" not in line and json.loads(line)["method"] == "initialize"


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "hooks"
_FIXTURE_EVENTS = {
    "claude-session-start": "SessionStart", "claude-user-prompt-submit": "UserPromptSubmit",
    "claude-stop": "Stop", "claude-stop-active": "Stop", "cursor-session-start": "sessionStart",
    "cursor-before-submit-prompt": "beforeSubmitPrompt", "cursor-stop": "stop", "cursor-stop-aborted": "stop",
}


@pytest.mark.parametrize("fixture", sorted(_FIXTURE_EVENTS))
def test_the_fakes_payloads_have_the_keys_of_the_recorded_ones(fixture):
    """The payload a fake host writes for an event has exactly the keys of the recorded payload
    (tests/fixtures/hooks), each value of the same JSON type."""
    recorded = json.loads((FIXTURES / f"{fixture}.json").read_text(encoding="utf-8"))
    event = _FIXTURE_EVENTS[fixture]
    if fixture.startswith("claude"):
        ours = claude_payload(event, CC, transcript_path="/t/x.jsonl", cwd="/w", prompt="p",
                              stop_hook_active=recorded.get("stop_hook_active"), source="startup")
    else:
        ours = cursor_payload(event, CONV, generation_id="g", workspace_root="/w", prompt="p",
                              status=recorded.get("status"), loop_count=0)
    assert ours["hook_event_name"] == recorded["hook_event_name"] == event
    assert set(ours) == set(recorded)
    assert {k: type(v).__name__ for k, v in ours.items()} == {k: type(v).__name__ for k, v in recorded.items()}
