"""The fake Claude Code host: real hook children and a real MCP server child.

The harness process IS the Claude Code host and never opens the database.
It reaches thatch only through thatch_core's doors, as Claude Code does
(D-harness-19; the payloads and replies it reads are in hostio.py):
- at OP_START it forks one long-lived MCP server child per session
  (`procs.ServerChild`): the child opens its own connection and serves
  `thatch_core.mcp.McpChatServer(host="claude-code", ppid=os.getppid(),
  env={"CLAUDE_CODE_SESSION_ID": host_id})` behind `doors.JsonRpcHandler`,
  answering each JSON-RPC request line the host sends (`doors.handle_line`);
  its parent pid is the host's, so the anti-spoofing anchor resolves for
  real (R32). The host opens the session (initialize, tools/list) at once
  and again whenever the child was replaced;
- every hook run is a real short-lived child forked from the host
  (`procs.run_in_child`) running `thatch-core hook EVENT`
  (`doors.run_hook`) on the host's JSON payload: SessionStart at the
  session's first prompt (and its first after a fork), UserPromptSubmit on
  every prompt (R31) and Stop at every turn end (R36). The host reads the
  printed context or Stop decision and records a `hook` event per run;
- the host writes a JSONL transcript per host session id under
  `ctx.transcripts_dir`; OP_FORK ends the old transcript with Claude Code's
  continued-in record (its last line, in the format simulator/design.py
  states) and switches the session to the new host id, so the next hook
  sees an unknown id and adopts (R33); with `older_as` the old id keeps
  running in this host as a session of its own.

Tools go to the session's MCP child with `as` = the name the hook printed.
A Stop "block" continues the turn (cause `reminder`): the agent acts (a
reader reads), then Stop runs again with `stop_hook_active=True`.
"""

from __future__ import annotations

import json
import os
import random
from typing import Any, Optional

from thatch_core import clock
from thatch_core.config import ConfigSource
from thatch_core.doors import JsonRpcHandler, handle_line, run_hook
from thatch_core.mcp import McpChatServer, mcp_session_id

from simulator.design import TRANSCRIPT_SUFFIX, continued_in_record
from simulator.events import FORK, HOOK, MCP_SERVER, REGISTERED, TURN_END, USER_PROMPT
from simulator.harness.agents import TurnState, make_agent
from simulator.harness.base import Harness
from simulator.harness.hostio import (
    CLAUDE_PROJECT_DIR_ENV, CLAUDE_PROMPT, CLAUDE_SESSION_START, CLAUDE_STOP, claude_payload, prompt_context,
    stop_block_reason,
)
from simulator.harness.mcp_client import McpClient
from simulator.harness.procs import ChildCrashed, ServerChild, run_in_child
from simulator.protocol import SessionInfo
from simulator.replies import IDENTITY, decode_hook_line
from simulator.harness.support import (
    cli_output, close_store, first_name, make_store, open_connection, registered_name,
)
from simulator.scenario.kinds import CLAUDE_CODE, PromptArgs, SessionArg

CRASHED_TEXT = "MCP server error: the thatch MCP server process exited unexpectedly."


class _Reply:
    """A tool reply as the host sees it (from the MCP child)."""

    def __init__(self, ok: bool, text: str) -> None:
        self.ok, self.text = ok, text


# The hooks config (settings.json): the command each Claude Code event runs, `thatch-core hook EVENT`.
HOOK_COMMANDS = {CLAUDE_SESSION_START: "SessionStart", CLAUDE_PROMPT: "UserPromptSubmit", CLAUDE_STOP: "Stop"}


def server_env(host_id: str) -> dict[str, str]:
    """The environment Claude Code gives a session's MCP server: the conversation's id at its start."""
    return {"CLAUDE_CODE_SESSION_ID": host_id}


def _mcp_server_setup(ctx, host_id: str, store_seed: int, mint_seed: int):
    """Runs in the MCP child after the fork: open the db, build the server and its JSON-RPC handler.
    The child answers each request line through the stdio framing (D-harness-19)."""

    def setup():
        conn = open_connection(ctx)
        store = make_store(ctx, conn, random.Random(store_seed))
        server = McpChatServer(
            store, ConfigSource(ctx.config_path), host="claude-code", ppid=os.getppid(),
            env=server_env(host_id), rng=random.Random(mint_seed),
            project=ctx.project, directory=str(ctx.directory),
        )
        handler = JsonRpcHandler(server)

        def serve(request):
            op = request[0]
            if op == "line":
                return handle_line(handler, request[1])
            if op == "lookup":
                return first_name(store, request[1])
            raise ValueError(f"unknown MCP child request {op!r}")

        return serve

    return setup


class ClaudeCodeHarness(Harness):
    """One fake Claude Code process: see the module docstring."""

    kind = CLAUDE_CODE

    def __init__(self, ctx, recorder) -> None:
        super().__init__(ctx, recorder)
        self.host_ids: dict[str, str] = {label: info.session_id for label, info in self.sessions.items()}
        self.session_started: dict[str, bool] = {label: False for label in self.sessions}
        self.forked: set[str] = set()          # labels whose next hook line is an adoption
        self.servers: dict[str, ServerChild] = {}
        self.clients: dict[str, McpClient] = {}

    # -- start -----------------------------------------------------------------

    def start(self) -> None:
        self.ctx.transcripts_dir.mkdir(parents=True, exist_ok=True)
        for label in self.sessions:
            # Seeds drawn in label order: deterministic for the process seed.
            store_seed, mint_seed = self.store_rng.getrandbits(63), self.mint_rng.getrandbits(63)
            self.serve(label, self.host_ids[label], store_seed, mint_seed)
            if label == getattr(self.ctx, "resumed", None):
                # A resumed conversation announces itself at once: SessionStart
                # (source resume) prints the name and the mail that waited.
                self.appear_later(self.t, label)

    # -- transcripts -------------------------------------------------------------

    def transcript_path(self, label: str):
        return self.ctx.transcripts_dir / f"{self.host_ids[label]}{TRANSCRIPT_SUFFIX}"

    def _append_transcript(self, label: str, record: dict[str, Any]) -> None:
        path = self.transcript_path(label)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, separators=(",", ":")) + "\n")

    # -- hooks (each a real child of this host) ------------------------------------

    def _in_child(self, fn, label: Optional[str] = None):
        """Run `fn(store)` in a forked hook child with its own connection."""
        ctx, seed = self.ctx, self.store_rng.getrandbits(63)

        def body():
            conn = open_connection(ctx)
            store = None
            try:
                store = make_store(ctx, conn, random.Random(seed))
                return fn(store)
            finally:
                if store is not None:
                    close_store(store)
                conn.close()

        return run_in_child(body, recorder=self.recorder, session=label)

    def serve(self, label: str, host_id: str, store_seed: int, mint_seed: int) -> None:
        """Start the session's MCP server child (recorded with its environment) and open the host's
        JSON-RPC session with it."""
        self.emit(MCP_SERVER, label, env=server_env(host_id))
        server = ServerChild(_mcp_server_setup(self.ctx, host_id, store_seed, mint_seed), recorder=self.recorder,
                             t=self.t, session=label)
        self.servers[label] = server
        client = McpClient("claude-code", lambda line: server.request(self.t, ("line", line)),
                           session_key=lambda: server.starts if server.alive else None)
        self.clients[label] = client
        try:
            client.open()
        except ChildCrashed:
            pass  # opened again before the next call, with the fresh child

    def hook_stdout(self, label: str, event: str, payload: dict[str, Any]) -> Optional[str]:
        """Run `thatch-core hook EVENT` in a child with the host's payload on its stdin: what it
        printed on stdout (ChildCrashed when the child died)."""
        ctx, command, raw = self.ctx, HOOK_COMMANDS[event], json.dumps(payload)

        def run(store):
            return run_hook(command, raw, store=store, config=ConfigSource(ctx.config_path), ppid=os.getppid(),
                            env={CLAUDE_PROJECT_DIR_ENV: str(ctx.directory)}, project=ctx.project).stdout

        return self._in_child(run, label)

    def hook_line(self, label: str, hook: str, prompt: Optional[str] = None) -> Optional[str]:
        source = "resume" if label in self.forked or label == getattr(self.ctx, "resumed", None) else "startup"
        payload = claude_payload(hook, self.host_ids[label], transcript_path=str(self.transcript_path(label)),
                                 cwd=str(self.ctx.directory), prompt=prompt, source=source)
        try:
            line = prompt_context(self.hook_stdout(label, hook, payload))
        except ChildCrashed:
            self.emit(HOOK, label, hook=hook, line=None, decision="crashed")
            return None
        self.emit(HOOK, label, hook=hook, line=line, decision=None)
        shown = decode_hook_line(line)
        if shown.kind == IDENTITY:
            name = shown.name
            adopted = label in self.forked
            if adopted or self.names.get(label) != name:
                self.emit(REGISTERED, label, session_id=mcp_session_id(self.host_ids[label]), name=name,
                          how="adopt" if adopted else "hook")
            self.forked.discard(label)
            self.names[label] = name
        return line

    def stop_hook(self, label: str, active: bool) -> Optional[str]:
        """Stop at a turn end: the reason the turn continues with when the hook blocked the stop."""
        payload = claude_payload(CLAUDE_STOP, self.host_ids[label], transcript_path=str(self.transcript_path(label)),
                                 cwd=str(self.ctx.directory), stop_hook_active=active)
        try:
            reason = stop_block_reason(self.hook_stdout(label, CLAUDE_STOP, payload))
        except ChildCrashed:
            self.emit(HOOK, label, hook=CLAUDE_STOP, line=None, decision="crashed", stop_hook_active=active)
            return None
        self.emit(HOOK, label, hook=CLAUDE_STOP, line=reason, decision="block" if reason else None,
                  stop_hook_active=active)
        return reason

    # -- tools ---------------------------------------------------------------------

    def _call_tool(self, label: str, tool: str, args: dict[str, Any]):
        try:
            ok, text = self.clients[label].call(tool, args)
        except ChildCrashed:
            return _Reply(False, CRASHED_TEXT)
        if ok and tool.endswith("_register"):
            name = registered_name(text)
            if name and self.names.get(label) != name:
                self.names[label] = name
                self.emit(REGISTERED, label, session_id=None, name=name, how="explicit")
        return _Reply(ok, text)

    def lookup_name(self, session_id: str) -> Optional[str]:
        server = next(iter(self.servers.values()), None)
        if server is None:
            return None
        try:
            return server.request(self.t, ("lookup", self.name_candidates(session_id)))
        except ChildCrashed:
            return None

    def cli_text(self, action: str, args: dict[str, Any]) -> tuple[bool, str]:
        # `thatch chat ...` in a terminal: its own process, its own connection.
        ctx, t = self.ctx, self.t
        return run_in_child(lambda: cli_output(ctx.db_path, action, args, t_ms=t), recorder=self.recorder)

    # -- actions and turns -----------------------------------------------------------

    def act_prompt(self, label: Optional[str], args: PromptArgs):
        label = self.acting(label)
        text = args.text or self.faker.sentence(nb_words=6)
        self._append_transcript(label, {
            "type": "user", "sessionId": self.host_ids[label], "timestamp": clock.iso(),
            "message": {"role": "user", "content": text},
        })
        self.emit(USER_PROMPT, label, text=text)
        if not self.session_started[label]:
            self.session_started[label] = True
            self.hook_line(label, CLAUDE_SESSION_START)
        self.hook_line(label, CLAUDE_PROMPT, prompt=text)
        self.want_turn(label, "user")
        return {"ok": True}

    def act_appear(self, label: Optional[str], args: SessionArg):
        """A session opened without a prompt: only SessionStart runs."""
        label = self.acting(label)
        if not self.session_started[label]:
            self.session_started[label] = True
            self.hook_line(label, CLAUDE_SESSION_START)
        return {"ok": True}

    def turn_ending(self, label: str, args: dict[str, Any]) -> None:
        if self.stop_hook(label, bool(args.get("stop_hook_active"))):
            # The turn continues with the reminder as its input (R36).
            self.turns[label].end()
            self.emit(TURN_END, label)
            self.start_turn(label, "reminder", stop_hook_active=True)
            return
        self.finish_turn(label)

    def op_fork(self, cmd) -> Any:
        label = cmd.session or cmd.args.get("session")
        self.sid(label)
        new_id = str(cmd.args["new_host_id"])
        old_id = self.host_ids[label]
        # The record is the old transcript's last line: nothing is written
        # under the old id once the session goes by the new one.
        self._append_transcript(label, continued_in_record(old_id, new_id))
        self.host_ids[label] = new_id
        self.session_started[label] = False   # the continued session starts again (SessionStart)
        self.forked.add(label)
        older = cmd.args.get("older_as")
        if older:
            self.keep_older(label, str(older), old_id)
            self.emit(FORK, label, old_host_id=old_id, new_host_id=new_id, older_as=older)
        else:
            self.emit(FORK, label, old_host_id=old_id, new_host_id=new_id)
        return {"old_host_id": old_id, "new_host_id": new_id}

    def keep_older(self, label: str, older: str, old_id: str) -> None:
        """The conversation under the old id keeps running in this host as the session `older`: it has
        started already (no SessionStart), keeps the name it had, and gets an MCP child of its own."""
        info = self.sessions[label]
        spec = info.spec.model_copy(update={"id": older}) if hasattr(info.spec, "model_copy") else info.spec
        self.sessions[older] = SessionInfo(label=older, session_id=old_id, spec=spec, parent_id=info.parent_id)
        self.host_ids[older] = old_id
        self.session_started[older] = True
        self.turns[older] = TurnState()
        self.agents[older] = make_agent(getattr(spec, "agent", None), body=self.fake_body)
        if label in self.names:
            self.names[older] = self.names[label]
        store_seed, mint_seed = self.store_rng.getrandbits(63), self.mint_rng.getrandbits(63)
        self.serve(older, old_id, store_seed, mint_seed)

    # -- lifecycle -------------------------------------------------------------------

    def release(self) -> None:
        for server in self.servers.values():
            server.close()

