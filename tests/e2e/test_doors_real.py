"""The doors as a real host uses them: `python -m thatch_core mcp` driven by
the official MCP SDK's own stdio client, and `python -m thatch_core hook
EVENT` run as a subprocess on recorded host payloads (tests/fixtures/hooks)
and on malformed ones (R6, R29, R31, R32, R36).

Every wait here is for a process to answer or exit; the timeouts are a
safety net for a loaded machine, never what a test measures.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from repo import ROOT, TESTS
from thatch_core.db import open_db
from thatch_core.doors import MAX_PAYLOAD_BYTES, TOOL_DEFS
from thatch_core.mcp import HOOK_LINE_RE, mcp_session_id
from thatch_core.store import ChatStore

FIXTURES = TESTS / "fixtures" / "hooks"
SAFETY_NET_S = 120
CLAUDE_SID = json.loads((FIXTURES / "claude-session-start.json").read_text())["session_id"]
CURSOR_SID = json.loads((FIXTURES / "cursor-stop.json").read_text())["conversation_id"]


def child_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THATCH_", "CLAUDE_", "CURSOR_"))}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


def fixture(name: str) -> bytes:
    return (FIXTURES / f"{name}.json").read_bytes()


def hook(tmp_path, event: str, payload: bytes, *flags: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "thatch_core", "hook", event, "--db", str(tmp_path / "thatch.db"),
                           *flags], input=payload, capture_output=True, cwd=tmp_path, env=env or child_env(),
                          timeout=SAFETY_NET_S, check=False)


def with_store(tmp_path, fn):
    conn = open_db(tmp_path / "thatch.db")
    try:
        return fn(ChatStore(conn, rng=random.Random(1)))
    finally:
        conn.close()


def mail_to(tmp_path, host_sid: str, body: str = "the payments branch moved") -> None:
    def send(store):
        store.register("ses_sender00001", kind="opencode")
        assert store.send("ses_sender00001", mcp_session_id(host_sid), body).ok
    with_store(tmp_path, send)


# ---------------------------------------------------------------------------
# hooks
# ---------------------------------------------------------------------------

@pytest.mark.rules("R31", "R32")
@pytest.mark.parametrize("name", ["claude-session-start", "claude-user-prompt-submit"])
def test_claude_prompt_hooks_print_the_identity_line(tmp_path, name):
    """R31: SessionStart and UserPromptSubmit print the identity line as
    plain text (Claude Code adds it to the context); R32: the run records its
    parent (here the test process, as Claude Code would be) as the anchor."""
    event = json.loads(fixture(name))["hook_event_name"]
    done = hook(tmp_path, event, fixture(name))
    assert done.returncode == 0 and done.stderr == b""
    line = done.stdout.decode()
    assert line.endswith("\n") and HOOK_LINE_RE.match(line), line
    row = with_store(tmp_path, lambda s: s.get(mcp_session_id(CLAUDE_SID)))
    assert row is not None and row.host_kind == "mcp" and row.name in line
    assert with_store(tmp_path, lambda s: s.resolve_host_pid(os.getpid())) == row.session_id


@pytest.mark.rules("R31")
@pytest.mark.parametrize("name", ["cursor-session-start", "cursor-before-submit-prompt"])
def test_cursor_prompt_hooks_answer_additional_context(tmp_path, name):
    """R31: with --json (Cursor's hooks) the same line comes as
    additional_context, keyed by conversation_id; no pid anchor (Cursor)."""
    done = hook(tmp_path, "UserPromptSubmit", fixture(name), "--json")
    assert done.returncode == 0 and done.stderr == b""
    answer = json.loads(done.stdout)
    assert set(answer) == {"additional_context"} and HOOK_LINE_RE.match(answer["additional_context"])
    assert with_store(tmp_path, lambda s: s.get(mcp_session_id(CURSOR_SID))) is not None
    assert with_store(tmp_path, lambda s: s.resolve_host_pid(os.getpid())) is None


@pytest.mark.rules("R36")
def test_claude_stop_blocks_when_mail_waits_and_not_when_active(tmp_path):
    """R36: Stop prints {"decision":"block","reason":...} for waiting mail when
    stop_hook_active is false, and nothing when it is true or nothing is due."""
    assert hook(tmp_path, "SessionStart", fixture("claude-session-start")).returncode == 0
    assert hook(tmp_path, "Stop", fixture("claude-stop")).stdout == b""
    mail_to(tmp_path, CLAUDE_SID)
    active = hook(tmp_path, "Stop", fixture("claude-stop-active"))
    assert (active.returncode, active.stdout, active.stderr) == (0, b"", b"")
    done = hook(tmp_path, "Stop", fixture("claude-stop"))
    answer = json.loads(done.stdout)
    assert done.returncode == 0 and answer["decision"] == "block" and "1 unread message" in answer["reason"]
    assert "the payments branch moved" not in answer["reason"]  # a pointer, never the body (R20)


@pytest.mark.rules("R36")
def test_cursor_stop_answers_followup_message_or_empty_object(tmp_path):
    """R36: Cursor's stop hook answers {} after an aborted turn or with no
    mail, and {"followup_message": ...} after a completed turn with mail."""
    assert hook(tmp_path, "SessionStart", fixture("cursor-session-start"), "--json").returncode == 0
    assert json.loads(hook(tmp_path, "cursor-stop", fixture("cursor-stop")).stdout) == {}
    mail_to(tmp_path, CURSOR_SID)
    assert json.loads(hook(tmp_path, "cursor-stop", fixture("cursor-stop-aborted")).stdout) == {}
    done = hook(tmp_path, "chat-notify", fixture("cursor-stop"))
    answer = json.loads(done.stdout)
    assert done.returncode == 0 and set(answer) == {"followup_message"} and "chat_read" in answer["followup_message"]


MALFORMED = {
    "empty": b"",
    "not-json": b"session_id=5b0c2a4e",
    "json-array": b'[{"session_id": "5b0c2a4e-1f7d-4c8e-9a6b-3d2e1f0a9b8c"}]',
    "oversized": b'{"session_id": "x", "prompt": "' + b"y" * MAX_PAYLOAD_BYTES + b'"}',
    "no-session-id": json.dumps({"cwd": "/home/dev/shop-api", "hook_event_name": "Stop",
                                 "stop_hook_active": False}).encode(),
}


@pytest.mark.rules("R31")
@pytest.mark.parametrize("kind", list(MALFORMED))
@pytest.mark.parametrize("event", ["SessionStart", "UserPromptSubmit", "Stop", "cursor-stop"])
def test_malformed_payload_prints_nothing_one_stderr_line_exit_0(tmp_path, event, kind):
    """R31: a malformed payload, as a real subprocess, prints nothing (Cursor's turn-end check its
    `{}`, D-real-qa-3), one stderr line, exit 0."""
    done = hook(tmp_path, event, MALFORMED[kind])
    assert done.returncode == 0 and done.stdout == (b"{}\n" if event == "cursor-stop" else b"")
    assert done.stderr.count(b"\n") == 1 and done.stderr.startswith(f"[thatch hook {event}]".encode())
    assert with_store(tmp_path, lambda s: s.list_sessions()) == []


@pytest.mark.rules("R29")
@pytest.mark.parametrize("event, name", [("SessionStart", "claude-session-start"), ("Stop", "claude-stop"),
                                         ("UserPromptSubmit", "claude-user-prompt-submit"),
                                         ("cursor-stop", "cursor-stop")])
def test_disabled_feature_prints_nothing(tmp_path, event, name):
    """R29: chat.enabled false in the config beside the database: no output at all."""
    (tmp_path / "config.json").write_text(json.dumps({"chat": {"enabled": False}}))
    done = hook(tmp_path, event, fixture(name))
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


@pytest.mark.rules("R31")
def test_a_broken_database_is_one_stderr_line(tmp_path):
    """R31: a broken database file is one stderr line and exit 0, never a traceback."""
    (tmp_path / "thatch.db").write_bytes(b"this is not a database, just bytes" * 200)
    done = hook(tmp_path, "UserPromptSubmit", fixture("claude-user-prompt-submit"))
    assert done.returncode == 0 and done.stdout == b"" and done.stderr.count(b"\n") == 1


# ---------------------------------------------------------------------------
# MCP over stdio, through the SDK's own client
# ---------------------------------------------------------------------------

def server_params(tmp_path, *args: str, **env) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "thatch_core", "mcp", *args],
                                 env=child_env(THATCH_DB=str(tmp_path / "thatch.db"), **env), cwd=str(tmp_path))


async def _session_calls(params, calls, errlog):
    """Start the server, initialize, list the tools, then make each call."""
    with anyio.fail_after(SAFETY_NET_S):
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                listed = await session.list_tools()
                results = [await session.call_tool(name, args) for name, args in calls]
    return init, listed, results


def run_session(tmp_path, calls, *args, **env):
    with open(tmp_path / "server-stderr.txt", "w") as errlog:
        return anyio.run(_session_calls, server_params(tmp_path, *args, **env), calls, errlog)


def text_of(result) -> str:
    assert len(result.content) == 1 and result.content[0].type == "text"
    return result.content[0].text


def first_name(result) -> str:
    return text_of(result).split("\n")[0].removeprefix("[registered] ")


@pytest.mark.rules("R6")
def test_sdk_client_lists_the_tools_with_their_schemas(tmp_path):
    """The SDK client starts the server as a subprocess and sees the real tool
    names and input schemas; R6: a hookless register mints its own identity."""
    init, listed, (reg, status) = run_session(tmp_path, [("chat_register", {}), ("chat_status", {})])
    assert init.server_info.name == "thatch"
    assert init.capabilities.tools is not None
    assert [t.name for t in listed.tools] == [t["name"] for t in TOOL_DEFS]
    for tool, want in zip(listed.tools, TOOL_DEFS):
        assert tool.input_schema == want["inputSchema"] and tool.description == want["description"]
    send = next(t for t in listed.tools if t.name == "chat_send").input_schema
    assert send["required"] == ["to", "body"] and set(send["properties"]) == {"to", "body", "as"}
    assert reg.is_error is False and text_of(reg).startswith("[registered] ")
    assert status.is_error is False and text_of(status).startswith("Not registered")  # no anchor: as is needed


@pytest.mark.rules("R32")
def test_sdk_client_registers_sends_reads_and_gets_refusals(tmp_path):
    """R32: the hook's pid anchor (recorded by a hook run from this process)
    is what the server, also this process's child, resolves, above any
    claimed `as`. Refusals arrive as isError with their text."""
    line = hook(tmp_path, "UserPromptSubmit", fixture("claude-user-prompt-submit")).stdout.decode()
    me = HOOK_LINE_RE.match(line)["name"]

    def peer_writes(store):
        peer = store.register("ses_peer0000001", kind="opencode").name
        assert store.send("ses_peer0000001", mcp_session_id(CLAUDE_SID), "rebase on main, please").ok
        return peer
    peer = with_store(tmp_path, peer_writes)
    calls = [("chat_register", {}), ("chat_list", {}),
             ("chat_send", {"to": peer, "body": "done, rebased"}),
             ("chat_read", {}),
             ("chat_send", {"to": "nobody-00042", "body": "hello?"}),
             ("chat_send", {"to": 42, "body": ["not", "text"]}),
             ("chat_send", {"as": "ghost-00001", "to": peer, "body": "spoof"}),
             ("no_such_tool", {})]
    _, _, (reg, roster, sent, read, nobody, badargs, ghost, unknown) = run_session(tmp_path, calls)
    assert first_name(reg) == me and reg.is_error is False
    assert f"{me} (you, 1 unread)" in text_of(roster)
    assert sent.is_error is False and text_of(sent).startswith(f"[sent] to {peer} ")
    assert read.is_error is False and "rebase on main, please" in text_of(read)
    # The anchor outranks a claimed `as` (R32): the "ghost" send goes out as this conversation.
    assert ghost.is_error is False and text_of(ghost).startswith(f"[sent] to {peer} ")
    assert with_store(tmp_path, lambda s: s.unread_count("ses_peer0000001")) == 2
    for refusal in (nobody, badargs, unknown):
        assert refusal.is_error is True and "Traceback" not in text_of(refusal)
    assert text_of(nobody).startswith("Not sent: ")
    assert "Unknown chat tool" in text_of(unknown)


@pytest.mark.rules("R32")
def test_sdk_client_identity_from_claude_code_session_id(tmp_path):
    """R32: with no anchor, CLAUDE_CODE_SESSION_ID in the server's environment
    names the conversation the hook registered."""
    def register(store):
        return store.register(mcp_session_id(CLAUDE_SID), kind="mcp", auto=True).name
    name = with_store(tmp_path, register)
    _, _, (status,) = run_session(tmp_path, [("chat_status", {})], CLAUDE_CODE_SESSION_ID=CLAUDE_SID)
    assert status.is_error is False and f"registered as {name}" in text_of(status)


def test_sdk_client_broken_database_is_a_tool_error_not_a_crash(tmp_path):
    (tmp_path / "thatch.db").write_bytes(b"this is not a database, just bytes" * 200)
    _, listed, (first, second) = run_session(tmp_path, [("chat_status", {}), ("chat_register", {})])
    assert len(listed.tools) == len(TOOL_DEFS)
    for result in (first, second):
        assert result.is_error is True and "Chat is unavailable" in text_of(result)
    assert "Traceback" not in (tmp_path / "server-stderr.txt").read_text()


@pytest.mark.rules("R32")
def test_sdk_client_unknown_claimed_as_is_a_tool_error(tmp_path):
    """R32: where nothing better resolves (Cursor: no anchor, no environment
    id), the claimed `as` is the identity, and one naming nobody is refused."""
    _, _, (reg, ghost) = run_session(tmp_path, [("chat_register", {}),
                                                ("chat_read", {"as": "ghost-00001"})], "--host", "cursor")
    assert reg.is_error is False
    assert ghost.is_error is True and "ghost-00001" in text_of(ghost)
