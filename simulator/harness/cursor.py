"""The fake Cursor workspace: hooks and the MCP server in one process.

Cursor's hooks and MCP servers share one workspace process, so the parent
pid says nothing about which conversation calls (R32): the harness opens
ONE connection and serves `McpChatServer(host="cursor")`, whose identity is
the claimed `as`. Like the fake Claude Code it reaches thatch only through
thatch_core's doors (D-harness-19): its MCP session is JSON-RPC lines
through `doors.JsonRpcHandler` (initialize and tools/list at start, then a
`tools/call` per tool), and each hook run is `thatch-core hook EVENT`
(`doors.run_hook`) on Cursor's JSON payload (hostio.py), its printed JSON
read as Cursor reads it. Per session:
- every user prompt runs the prompt hook (beforeSubmitPrompt, recorded as
  `UserPromptSubmit`), which ensure-registers `mcp_<sha256(id)[:12]>` and
  prints the name the agent then passes as `as` (R31, R36);
- every turn end runs the stop hook (thatch's `chat-notify`) with the
  turn's status and the count of consecutive follow-ups so far
  (`loop_count`): a `followup_message` is auto-submitted as a new turn
  (cause `followup`) in which the agent reads; a real user prompt resets
  the count; an aborted or errored turn (turn-end arg `status`) is never
  continued (R36). Like Cursor, the workspace itself caps the chain at the
  hooks config's `loop_limit` (`CURSOR_FOLLOWUP_CAP`): once that many
  follow-ups ran in a row, the turn just ends and the hook is not asked.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Optional

from thatch_core.config import ConfigSource
from thatch_core.constants import CURSOR_FOLLOWUP_CAP
from thatch_core.doors import JsonRpcHandler, handle_line, run_hook
from thatch_core.mcp import McpChatServer, mcp_session_id

from simulator.events import HOOK, REGISTERED, TURN_END, USER_PROMPT
from simulator.harness.base import Harness
from simulator.harness.hostio import (
    CURSOR_PROJECT_DIR_ENV, CURSOR_PROMPT, CURSOR_SESSION_START, CURSOR_STOP, cursor_payload, followup_message,
    prompt_context,
)
from simulator.harness.mcp_client import McpClient
from simulator.scenario.kinds import CURSOR, PromptArgs, SessionArg
from simulator.harness.support import registered_name
from simulator.replies import IDENTITY, decode_hook_line

# The hooks config (.cursor/hooks.json): the command each Cursor event runs, `thatch-core hook EVENT`.
HOOK_COMMANDS = {CURSOR_SESSION_START: "SessionStart", CURSOR_PROMPT: "UserPromptSubmit", CURSOR_STOP: "chat-notify"}
# How the history names each event's hook run (docs/history.md: the Claude Code names, and `stop`).
HOOK_RECORDED = {CURSOR_SESSION_START: "SessionStart", CURSOR_PROMPT: "UserPromptSubmit", CURSOR_STOP: "stop"}


class _Reply:
    """A tool reply as the workspace hands it to the model."""

    def __init__(self, ok: bool, text: str) -> None:
        self.ok, self.text = ok, text


class CursorHarness(Harness):
    """One fake Cursor workspace process: see the module docstring."""

    kind = CURSOR

    def __init__(self, ctx, recorder) -> None:
        super().__init__(ctx, recorder)
        self.server = None
        self.client = None
        self.config = None
        self.generations: dict[str, int] = {}
        self.loop_count: dict[str, int] = {label: 0 for label in self.sessions}

    def start(self) -> None:
        ctx = self.ctx
        self.open_store()
        self.config = ConfigSource(ctx.config_path)
        self.server = McpChatServer(self.store, self.config, host="cursor", rng=self.mint_rng,
                                    project=ctx.project, directory=str(ctx.directory))
        # The workspace's MCP session: JSON-RPC lines through the server's own handler (D-harness-19).
        handler = JsonRpcHandler(self.server)
        self.client = McpClient("cursor", lambda line: handle_line(handler, line))
        self.client.open()

    # -- hooks -----------------------------------------------------------------

    def generation_id(self, label: str) -> str:
        """Cursor's id of the conversation's current generation (one per submitted prompt or follow-up)."""
        self.generations[label] = self.generations.get(label, 0) + 1
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"cursor:{self.sid(label)}:{self.generations[label]}"))

    def hook_stdout(self, label: str, event: str, **fields: Any) -> str:
        """Run `thatch-core hook EVENT` with Cursor's payload: what it printed on stdout. No transcript
        and no pid anchor on Cursor (D-harness-8)."""
        payload = cursor_payload(event, self.sid(label), generation_id=self.generation_id(label),
                                 workspace_root=str(self.ctx.directory), **fields)
        return run_hook(HOOK_COMMANDS[event], json.dumps(payload), store=self.store, config=self.config,
                        ppid=None, env={CURSOR_PROJECT_DIR_ENV: str(self.ctx.directory)}, project=self.ctx.project,
                        json_output=True).stdout

    def prompt_hook(self, label: str, event: str = CURSOR_PROMPT, prompt: Optional[str] = None) -> Optional[str]:
        fields = {"prompt": prompt} if event == CURSOR_PROMPT else {}
        line = prompt_context(self.hook_stdout(label, event, **fields))
        self.emit(HOOK, label, hook=HOOK_RECORDED[event], line=line, decision=None)
        shown = decode_hook_line(line)
        if shown.kind == IDENTITY and self.names.get(label) != shown.name:
            self.names[label] = shown.name
            self.emit(REGISTERED, label, session_id=mcp_session_id(self.sid(label)), name=shown.name,
                      how="hook")
        return line

    def stop_hook(self, label: str, status: str) -> Optional[str]:
        out = self.hook_stdout(label, CURSOR_STOP, status=status, loop_count=self.loop_count[label])
        message = followup_message(out)
        self.emit(HOOK, label, hook=HOOK_RECORDED[CURSOR_STOP], line=message,
                  decision="followup" if message else None, status=status)
        return message

    # -- tools -------------------------------------------------------------------

    def _call_tool(self, label: str, tool: str, args: dict[str, Any]):
        ok, text = self.client.call(tool, args)
        if ok and tool.endswith("_register"):
            name = registered_name(text)
            if name and self.names.get(label) != name:
                self.names[label] = name
                self.emit(REGISTERED, label, session_id=None, name=name, how="explicit")
        return _Reply(ok, text)

    # -- actions and turns -------------------------------------------------------

    def act_prompt(self, label: Optional[str], args: PromptArgs):
        label = self.acting(label)
        text = args.text or self.faker.sentence(nb_words=6)
        self.emit(USER_PROMPT, label, text=text)
        self.loop_count[label] = 0  # a real prompt ends a follow-up chain
        self.prompt_hook(label, prompt=text)
        self.want_turn(label, "user")
        return {"ok": True}

    def act_appear(self, label: Optional[str], args: SessionArg):
        """A conversation opened without a prompt: Cursor's sessionStart hook."""
        label = self.acting(label)
        self.prompt_hook(label, CURSOR_SESSION_START)
        return {"ok": True}

    def turn_ending(self, label: str, args: dict[str, Any]) -> None:
        message = None
        if self.loop_count[label] < CURSOR_FOLLOWUP_CAP:  # Cursor's own loop_limit
            message = self.stop_hook(label, str(args.get("status") or "completed"))
        if message:
            # The follow-up is auto-submitted: a new turn the agent reads in.
            self.turns[label].end()
            self.emit(TURN_END, label)
            self.loop_count[label] += 1
            self.start_turn(label, "followup")
            return
        self.loop_count[label] = 0
        self.finish_turn(label)
