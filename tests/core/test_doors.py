"""The doors' logic in-process: hook payloads in, host answers out; JSON-RPC
lines in, reply lines out (R29, R31, R32, R36).

Real temp-dir SQLite; the subprocess runs of the same doors are in
tests/e2e/test_doors_real.py.
"""
from __future__ import annotations

import json
import random

import pytest

from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.doors import (
    HOOK_EVENTS, MAX_PAYLOAD_BYTES, TOOL_DEFS, HookResult, JsonRpcHandler, handle_line, run_hook,
)
from thatch_core.mcp import HOOK_LINE_RE, McpChatServer, mcp_session_id

ON = StaticConfig(ChatConfig())
OFF = StaticConfig(ChatConfig(enabled=False))
CLAUDE_SID = "5b0c2a4e-1f7d-4c8e-9a6b-3d2e1f0a9b8c"
CURSOR_SID = "c7e9a1b2-3d4f-4a5b-8c6d-7e8f9a0b1c2d"


def claude_payload(event="UserPromptSubmit", **extra):
    base = {"session_id": CLAUDE_SID, "transcript_path": f"/nonexistent/{CLAUDE_SID}.jsonl",
            "cwd": "/home/dev/proj", "hook_event_name": event}
    base.update(extra)
    return json.dumps(base)


def cursor_stop_payload(status="completed", loop_count=0):
    return json.dumps({"conversation_id": CURSOR_SID, "generation_id": "g-1", "hook_event_name": "stop",
                       "workspace_roots": ["/home/dev/proj"], "status": status, "loop_count": loop_count})


def handler(store, **kw):
    return JsonRpcHandler(McpChatServer(store, ON, host="claude-code", ppid=-1, env={}, rng=random.Random(3), **kw))


def rpc(h, method, params=None, msg_id=1):
    msg = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        msg["params"] = params
    return json.loads(handle_line(h, json.dumps(msg)))


@pytest.mark.rules("R31", "R36")
def test_hook_events_name_the_claude_code_events_and_the_cursor_check():
    """R31, R36: the hook commands are Claude Code's three events and Cursor's turn-end check."""
    assert set(HOOK_EVENTS) >= {"SessionStart", "UserPromptSubmit", "Stop", "cursor-stop"}


@pytest.mark.rules("R31", "R32")
def test_prompt_hook_prints_the_identity_line_and_records_the_anchor(store):
    """R31: the prompt hook ensure-registers the host id's mcp row and prints
    the line; R32: the Claude Code hook records parent pid -> session."""
    out = run_hook("UserPromptSubmit", claude_payload(prompt="hi"), store=store, config=ON, ppid=4242)
    assert isinstance(out, HookResult) and out.exit_code == 0 and out.stderr == ""
    m = HOOK_LINE_RE.match(out.stdout)
    assert m and "no unread mail" in out.stdout
    assert store.get(mcp_session_id(CLAUDE_SID)).name == m["name"]
    assert store.resolve_host_pid(4242) == mcp_session_id(CLAUDE_SID)


@pytest.mark.rules("R31")
def test_session_start_json_form_is_cursors_additional_context(store):
    """R31: the Cursor form wraps the same line as additional_context, and a
    Cursor conversation_id records no pid anchor."""
    payload = json.dumps({"conversation_id": CURSOR_SID, "hook_event_name": "sessionStart"})
    out = run_hook("SessionStart", payload, store=store, config=ON, ppid=77, json_output=True)
    ctx = json.loads(out.stdout)["additional_context"]
    assert HOOK_LINE_RE.match(ctx)
    assert store.resolve_host_pid(77) is None


@pytest.mark.rules("R36")
def test_stop_blocks_once_when_mail_waits(store):
    """R36: Stop blocks with a reason when mail is due and stop_hook_active is
    false; nothing when the flag is set or nothing is due."""
    run_hook("SessionStart", claude_payload("SessionStart"), store=store, config=ON)
    store.register("ses_sender", kind="opencode")
    assert store.send("ses_sender", mcp_session_id(CLAUDE_SID), "hello").ok
    active = run_hook("Stop", claude_payload("Stop", stop_hook_active=True), store=store, config=ON)
    assert active == HookResult("", "", 0)
    out = run_hook("Stop", claude_payload("Stop", stop_hook_active=False), store=store, config=ON)
    decision = json.loads(out.stdout)
    assert decision["decision"] == "block" and "chat_read" in decision["reason"]
    again = run_hook("Stop", claude_payload("Stop", stop_hook_active=False), store=store, config=ON)
    assert again.stdout == ""  # pointed to already: the delivered stamp bounds repeats


@pytest.mark.rules("R36")
def test_cursor_stop_answers_followup_or_empty_object(store):
    """R36: a completed turn with mail gets followup_message; an aborted one {}."""
    run_hook("SessionStart", json.dumps({"conversation_id": CURSOR_SID}), store=store, config=ON, json_output=True)
    store.register("ses_sender", kind="opencode")
    assert store.send("ses_sender", mcp_session_id(CURSOR_SID), "hello").ok
    assert run_hook("cursor-stop", cursor_stop_payload("aborted"), store=store, config=ON).stdout == "{}"
    out = json.loads(run_hook("cursor-stop", cursor_stop_payload(), store=store, config=ON).stdout)
    assert set(out) == {"followup_message"}
    assert run_hook("chat-notify", cursor_stop_payload(loop_count=1), store=store, config=ON).stdout == "{}"


@pytest.mark.rules("R29")
@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit", "Stop", "cursor-stop"])
def test_disabled_feature_prints_nothing(store, event):
    """R29: chat.enabled false: every hook prints nothing, even for a bad payload."""
    assert run_hook(event, claude_payload(event), store=store, config=OFF) == HookResult("", "", 0)
    assert run_hook(event, b"", store=store, config=OFF) == HookResult("", "", 0)
    assert store.list_sessions() == []


@pytest.mark.parametrize("payload", [b"", b"   \n", b"not json", b"[1, 2]", b'"text"', b"\xff\xfe",
                                     json.dumps({"cwd": "/x"}).encode(), json.dumps({"session_id": ""}).encode(),
                                     json.dumps({"session_id": 7}).encode(),
                                     b'{"session_id": "' + b"a" * MAX_PAYLOAD_BYTES + b'"}'])
@pytest.mark.rules("R31")
@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit", "Stop", "cursor-stop"])
def test_unusable_payload_prints_nothing_and_one_stderr_line(store, event, payload):
    """R31: an unusable payload prints nothing (Cursor's turn-end check its `{}`, D-real-qa-3), one
    stderr line, exit 0: a hook never breaks the host's turn."""
    out = run_hook(event, payload, store=store, config=ON)
    assert out.stdout == ("{}" if event == "cursor-stop" else "") and out.exit_code == 0
    assert out.stderr.startswith(f"[thatch hook {event}]") and "\n" not in out.stderr
    assert store.list_sessions() == []


@pytest.mark.rules("R31")
def test_a_store_that_fails_is_one_stderr_line(store):
    """R31: a store that fails to open is one stderr line, never a traceback or a failed turn."""
    def broken():
        raise RuntimeError("disk on fire\nsecond line")
    out = run_hook("UserPromptSubmit", claude_payload(), store=broken, config=ON)
    assert out.stdout == "" and out.exit_code == 0 and "\n" not in out.stderr and "disk on fire" in out.stderr


@pytest.mark.rules("R31")
def test_unknown_event_is_one_stderr_line(store):
    """R31: an event the hook does not serve prints nothing and one stderr line."""
    out = run_hook("PreToolUse", claude_payload(), store=store, config=ON)
    assert out.stdout == "" and out.exit_code == 0 and out.stderr.count("\n") == 0


# ---------------------------------------------------------------------------
# JSON-RPC
# ---------------------------------------------------------------------------

def test_tool_defs_are_the_real_names_with_object_schemas():
    names = [t["name"] for t in TOOL_DEFS]
    assert names == ["chat_register", "chat_list", "chat_send", "chat_read", "chat_unregister",
                     "chat_broadcast", "chat_status"]
    for t in TOOL_DEFS:
        assert t["inputSchema"]["type"] == "object" and "as" in t["inputSchema"]["properties"]
        assert t["description"]
    send = next(t for t in TOOL_DEFS if t["name"] == "chat_send")["inputSchema"]
    assert send["required"] == ["to", "body"]


def test_initialize_then_list_tools(store):
    h = handler(store)
    init = rpc(h, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "t", "version": "0"}})
    assert init["result"]["protocolVersion"] == "2025-06-18"
    assert init["result"]["capabilities"]["tools"] == {"listChanged": False}
    assert handle_line(h, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})) is None
    assert rpc(h, "ping", msg_id=2) == {"jsonrpc": "2.0", "id": 2, "result": {}}
    tools = rpc(h, "tools/list", msg_id=3)["result"]["tools"]
    assert [t["name"] for t in tools] == [t["name"] for t in TOOL_DEFS]


@pytest.mark.rules("R6", "R32")
def test_register_send_read_and_refusals_over_json_rpc(store):
    """R6: a hookless conversation's register mints its own identity; R32: the
    claimed `as` is the identity where nothing better resolves; a refusal is
    a tool result with isError true carrying the refusal text."""
    a, b = handler(store), JsonRpcHandler(McpChatServer(store, ON, host="cursor", rng=random.Random(5)))
    reg_a = rpc(a, "tools/call", {"name": "chat_register", "arguments": {}})["result"]
    reg_b = rpc(b, "tools/call", {"name": "chat_register", "arguments": {}})["result"]
    assert reg_a["isError"] is False and reg_a["content"][0]["text"].startswith("[registered] ")
    name_a = reg_a["content"][0]["text"].split("\n")[0].removeprefix("[registered] ")
    name_b = reg_b["content"][0]["text"].split("\n")[0].removeprefix("[registered] ")
    sent = rpc(b, "tools/call", {"name": "chat_send", "arguments": {"as": name_b, "to": name_a, "body": "hi"}})
    assert sent["result"]["isError"] is False and sent["result"]["content"][0]["text"].startswith("[sent] to ")
    got = rpc(a, "tools/call", {"name": "chat_read", "arguments": {"as": name_a}})["result"]
    assert got["isError"] is False and "hi" in got["content"][0]["text"]
    refused = rpc(b, "tools/call", {"name": "chat_send", "arguments": {"as": name_b, "to": "nobody-9", "body": "x"}})
    assert refused["result"]["isError"] is True
    assert refused["result"]["content"][0]["text"].startswith("Not sent: ")
    bad = rpc(b, "tools/call", {"name": "chat_send", "arguments": {"as": name_b, "to": 5, "body": "x"}})
    assert bad["result"]["isError"] is True and "Traceback" not in bad["result"]["content"][0]["text"]
    unknown = rpc(b, "tools/call", {"name": "rm_rf", "arguments": {}})["result"]
    assert unknown["isError"] is True and "Unknown chat tool" in unknown["content"][0]["text"]


@pytest.mark.parametrize("line, code", [
    ("{not json", -32700), ("[]", -32600), ('{"jsonrpc":"2.0","id":1}', -32600),
    ('{"jsonrpc":"1.0","id":1,"method":"ping"}', -32600), ('{"jsonrpc":"2.0","id":1,"method":"nope"}', -32601),
    ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[]}', -32602),
    ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}', -32602),
    ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chat_list","arguments":"x"}}', -32602),
])
def test_bad_messages_get_json_rpc_errors(store, line, code):
    reply = json.loads(handle_line(handler(store), line))
    assert reply["jsonrpc"] == "2.0" and reply["error"]["code"] == code


def test_blank_lines_notifications_and_responses_get_no_reply(store):
    h = handler(store)
    assert handle_line(h, "") is None and handle_line(h, "  ") is None
    assert handle_line(h, '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}') is None
    assert handle_line(h, '{"jsonrpc":"2.0","id":9,"result":{}}') is None


def test_reply_lines_carry_no_newline(store):
    h = handler(store)
    rpc(h, "tools/call", {"name": "chat_register", "arguments": {}})
    line = handle_line(h, json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                                      "params": {"name": "chat_list", "arguments": {}}}))
    assert "\n" not in line and "\\n" in line
