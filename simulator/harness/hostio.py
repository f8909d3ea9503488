"""What the fake hosts send through thatch's doors and how they read the answers.

Claude Code and Cursor reach thatch two ways: they run a hook command with one
JSON object on its stdin and read what it prints, and they start the MCP
server as a stdio child and speak JSON-RPC 2.0 to it, one message per line.
The fakes build those payloads and request lines here and parse the outputs
here, the way the hosts do. The key names are the hosts' own interface
(their hook documentation and the MCP specification), stated here rather
than taken from thatch_core, so a door that reads or writes the wrong key
fails against the host's shape instead of agreeing with itself.
"""

from __future__ import annotations

import json
from typing import Any, Optional

# -- Claude Code hooks -----------------------------------------------------------------------------
# Every event's payload carries session_id, transcript_path, cwd and hook_event_name; SessionStart
# adds its `source`, UserPromptSubmit the `prompt`, Stop `stop_hook_active` (true while the turn
# already continues because a Stop hook blocked it).
CLAUDE_SESSION_START = "SessionStart"
CLAUDE_PROMPT = "UserPromptSubmit"
CLAUDE_STOP = "Stop"
CLAUDE_EVENTS = (CLAUDE_SESSION_START, CLAUDE_PROMPT, CLAUDE_STOP)
# The permission mode a default session runs in (UserPromptSubmit and Stop carry it).
CLAUDE_PERMISSION_MODE = "default"
# The environment Claude Code gives a hook command: the project's root directory.
CLAUDE_PROJECT_DIR_ENV = "CLAUDE_PROJECT_DIR"

# -- Cursor hooks ----------------------------------------------------------------------------------
# Every event's payload carries conversation_id, generation_id, model, hook_event_name, cursor_version,
# workspace_roots and user_email (no transcript here, D-harness-8); sessionStart adds
# is_background_agent and composer_mode, beforeSubmitPrompt the `prompt` and its attachments, stop its
# `status` ("completed", "aborted", "error") and `loop_count` (the follow-ups already auto-submitted in
# a row).
CURSOR_MODEL = "auto"
CURSOR_VERSION = "2.0.77"
# The environment Cursor gives a hook command: the workspace's root directory.
CURSOR_PROJECT_DIR_ENV = "CURSOR_PROJECT_DIR"
CURSOR_SESSION_START = "sessionStart"
CURSOR_PROMPT = "beforeSubmitPrompt"
CURSOR_STOP = "stop"
CURSOR_EVENTS = (CURSOR_SESSION_START, CURSOR_PROMPT, CURSOR_STOP)

# -- what the hosts read back --------------------------------------------------------------------------
# A prompt hook's context: plain stdout, or a JSON object's hookSpecificOutput.additionalContext
# (Claude Code) / additional_context (Cursor). Stop: {"decision": "block", "reason": ...} keeps the
# turn going with the reason as its input. Cursor's stop: {"followup_message": ...} is submitted as
# the next user message; {} (or nothing) ends the turn.
HOOK_SPECIFIC_KEY = "hookSpecificOutput"
CLAUDE_CONTEXT_KEY = "additionalContext"
CURSOR_CONTEXT_KEY = "additional_context"
DECISION_KEY = "decision"
BLOCK = "block"
REASON_KEY = "reason"
FOLLOWUP_KEY = "followup_message"

# -- MCP over stdio (JSON-RPC 2.0, newline-delimited) ----------------------------------------------------
JSONRPC = "2.0"
MCP_PROTOCOL_VERSION = "2025-06-18"
INITIALIZE = "initialize"
INITIALIZED = "notifications/initialized"
TOOLS_LIST = "tools/list"
TOOLS_CALL = "tools/call"


def claude_payload(event: str, session_id: str, *, transcript_path: Optional[str], cwd: str,
                   prompt: Optional[str] = None, stop_hook_active: Optional[bool] = None,
                   source: Optional[str] = None) -> dict[str, Any]:
    """The JSON object Claude Code writes to a hook command's stdin for `event`."""
    if event not in CLAUDE_EVENTS:
        raise ValueError(f"not a Claude Code hook event: {event!r}")
    payload: dict[str, Any] = {"session_id": session_id, "transcript_path": transcript_path, "cwd": cwd,
                               "hook_event_name": event}
    if event == CLAUDE_SESSION_START:
        payload["source"] = source or "startup"
    else:
        payload["permission_mode"] = CLAUDE_PERMISSION_MODE
    if event == CLAUDE_PROMPT:
        payload["prompt"] = prompt or ""
    if event == CLAUDE_STOP:
        payload["stop_hook_active"] = bool(stop_hook_active)
    return payload


def cursor_payload(event: str, conversation_id: str, *, generation_id: str, workspace_root: str,
                   prompt: Optional[str] = None, status: Optional[str] = None,
                   loop_count: Optional[int] = None) -> dict[str, Any]:
    """The JSON object Cursor writes to a hook command's stdin for `event`."""
    if event not in CURSOR_EVENTS:
        raise ValueError(f"not a Cursor hook event: {event!r}")
    payload: dict[str, Any] = {"conversation_id": conversation_id, "generation_id": generation_id,
                               "model": CURSOR_MODEL, "hook_event_name": event, "cursor_version": CURSOR_VERSION,
                               "workspace_roots": [workspace_root], "user_email": None}
    if event == CURSOR_SESSION_START:
        payload.update(is_background_agent=False, composer_mode="agent")
    elif event == CURSOR_PROMPT:
        payload.update(prompt=prompt or "", attachments=[])
    else:
        payload.update(status=status or "completed", loop_count=int(loop_count or 0))
    return payload


def _json_object(stdout: str) -> Optional[dict]:
    """stdout as a JSON object, or None when it is not one (plain text, empty)."""
    text = (stdout or "").strip()
    if not text.startswith("{"):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def prompt_context(stdout: str) -> Optional[str]:
    """The text a prompt hook (session start or prompt submit) adds to the model's context: plain
    stdout as printed, or the JSON object's context field; None when it adds nothing."""
    obj = _json_object(stdout)
    if obj is None:
        if (stdout or "").lstrip().startswith("{"):
            return None  # broken JSON: the host shows the model nothing
        text = (stdout or "").strip()
        return text or None
    specific = obj.get(HOOK_SPECIFIC_KEY)
    context = specific.get(CLAUDE_CONTEXT_KEY) if isinstance(specific, dict) else None
    if context is None:
        context = obj.get(CURSOR_CONTEXT_KEY)
    if not isinstance(context, str):
        return None
    return context.strip() or None


def stop_block_reason(stdout: str) -> Optional[str]:
    """Claude Code's Stop: the reason the turn continues with, when the hook blocked the stop."""
    obj = _json_object(stdout)
    if obj is None or obj.get(DECISION_KEY) != BLOCK:
        return None
    reason = obj.get(REASON_KEY)
    return reason if isinstance(reason, str) and reason.strip() else None


def followup_message(stdout: str) -> Optional[str]:
    """Cursor's stop: the follow-up it submits as the next user message, if the hook asked for one."""
    obj = _json_object(stdout)
    message = obj.get(FOLLOWUP_KEY) if obj is not None else None
    return message if isinstance(message, str) and message.strip() else None


class JsonRpcClient:
    """The host's end of one MCP stdio session: request lines out, reply lines in.

    Ids count up from 1 per session (a restarted server is a new session: `reset`), so a history
    that records them stays deterministic."""

    def __init__(self, client_name: str, client_version: str = "1.0.0") -> None:
        self.client_name, self.client_version = client_name, client_version
        self.next_id = 1

    def reset(self) -> None:
        self.next_id = 1

    def request(self, method: str, params: Optional[dict] = None) -> tuple[int, str]:
        """(id, line) of a request; the line has no newline of its own (the framing adds it)."""
        rid, self.next_id = self.next_id, self.next_id + 1
        message: dict[str, Any] = {"jsonrpc": JSONRPC, "id": rid, "method": method}
        if params is not None:
            message["params"] = params
        return rid, json.dumps(message, separators=(",", ":"))

    def initialize(self) -> tuple[int, str]:
        return self.request(INITIALIZE, {"protocolVersion": MCP_PROTOCOL_VERSION, "capabilities": {},
                                         "clientInfo": {"name": self.client_name, "version": self.client_version}})

    @staticmethod
    def initialized() -> str:
        return json.dumps({"jsonrpc": JSONRPC, "method": INITIALIZED}, separators=(",", ":"))

    def list_tools(self) -> tuple[int, str]:
        return self.request(TOOLS_LIST, {})

    def call_tool(self, name: str, arguments: dict[str, Any]) -> tuple[int, str]:
        return self.request(TOOLS_CALL, {"name": name, "arguments": arguments})


class RpcError(RuntimeError):
    """A reply line that is no JSON-RPC answer to the request sent (a broken server)."""


def rpc_result(line: Optional[str], rid: int) -> dict[str, Any]:
    """The `result` of the reply to request `rid`; a JSON-RPC error comes back as
    {"error": {...}} so the caller decides how its host shows it."""
    try:
        reply = json.loads(line) if isinstance(line, str) else None
    except ValueError:
        reply = None
    if not isinstance(reply, dict) or reply.get("jsonrpc") != JSONRPC or reply.get("id") != rid:
        raise RpcError(f"no JSON-RPC reply to request {rid}: {line!r}")
    if isinstance(reply.get("error"), dict):
        return {"error": reply["error"]}
    result = reply.get("result")
    if not isinstance(result, dict):
        raise RpcError(f"a JSON-RPC reply without a result object: {line!r}")
    return result


def tool_reply(line: Optional[str], rid: int) -> tuple[bool, str]:
    """(ok, text) of a tools/call reply as the host hands it to the model: the text blocks of its
    content joined, ok unless `isError`; a JSON-RPC error is a failed call carrying its message."""
    result = rpc_result(line, rid)
    if "error" in result:
        return False, str(result["error"].get("message", ""))
    texts = [block.get("text", "") for block in result.get("content") or ()
             if isinstance(block, dict) and block.get("type") == "text"]
    return not bool(result.get("isError")), "\n".join(texts)


def listed_tools(line: Optional[str], rid: int) -> list[str]:
    """The tool names of a tools/list reply."""
    result = rpc_result(line, rid)
    if "error" in result:
        raise RpcError(f"tools/list failed: {result['error']}")
    return [t["name"] for t in result.get("tools") or () if isinstance(t, dict) and isinstance(t.get("name"), str)]
