"""What every fake harness shares: command dispatch, recording, turns, actions.

A harness lives in its own OS process (the engine's worker forks it and moves
its freezer to each command's virtual time before calling `handle`). It
answers every `Command` with one `Reply`; the `FollowUp`s in the reply are
agenda entries it asks for (a turn ending, a window boundary).

What is shared here and what the kinds fill in:
- dispatch through two explicit tables: by op (`op_handlers`) and, for
  OP_ACT, by action kind (`action_handlers`, holding exactly the actions
  simulator/scenario/kinds.py says the host kind accepts); an action's
  handler gets the acting session (the kind's declared actor) and the
  step's typed arguments model;
- the tool path: `tool(label, tool, args, step=)` records `tool-call` before
  and `tool-result` after the call (with the step index when a scripted step
  caused it); each kind implements `_call_tool` (the opencode runtime, an MCP
  server child, an in-process MCP server);
- turns: `want_turn` / `start_turn` / `finish_turn` over `agents.TurnState`,
  recording `status`, `turn-start` and `turn-end`; each kind adds what its
  host does at those moments (status events, hooks);
- the process-level actions every kind does the same way (`config`,
  `cli_list`, `cli_tail`) and faker bodies from the process's one seeded
  generator.
- the process's own connection and store for kinds that serve the chat
  in-process (`open_store`), closed last by `close` after the kind's
  `release`.

Reply expectations are not checked here: the history is the record.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any, Callable, Optional

from thatch_core.db import StoreError
from thatch_core.mcp import mcp_session_id

from simulator.design import CHAT_ID_PREFIXES, MAX_CONTINUATION_HOPS, TRANSCRIPT_SUFFIX, continued_in_target
from simulator.events import PRUNE, READY, STATUS, TOOL_CALL, TOOL_RESULT, TURN_END, TURN_START
from simulator.harness.agents import Agent, TurnState, make_agent
from simulator.harness.support import (
    cli_output, close_store, first_name, make_store, open_connection, write_config,
)
from simulator.scenario.fields import expand_body
from simulator.scenario.kinds import (
    HOSTS, STEPS, BroadcastArgs, CliListArgs, CliTailArgs, ConfigArgs, PromptArgs, ReadArgs, SendArgs, SessionArg,
    TitleArgs,
)
from simulator.scenario.labels import LABEL_PLACEHOLDER
from simulator.protocol import (
    OP_ACT, OP_FORK, OP_POLL, OP_RELOAD, OP_RETRY, OP_START, OP_STOP, OP_TURN_END, OP_WINDOW, Command, FollowUp,
    HarnessContext, Reply, SessionInfo, act_args,
)

# An action's handler: (the acting session's label, or None for a process-level action; its arguments model).
ActionHandler = Callable[[Optional[str], Any], Any]

TOOL_PREFIX = "thatch_chat_"


@dataclass(frozen=True)
class ClippedReply:
    """A tool result as a clipping host hands it to the model: its first `clip` characters."""

    ok: bool
    text: str


class Refused(Exception):
    """A command this harness cannot serve: answered with Reply(ok=False)."""


class Harness:
    """The shared half of a fake harness; see the module docstring."""

    kind = "?"

    def __init__(self, ctx: HarnessContext, recorder) -> None:
        self.ctx = ctx
        self.recorder = recorder
        seeds = random.Random(ctx.seed)
        # One derived seed per consumer, drawn in a fixed order: the store's
        # name draws, the faker bodies/titles, MCP identity mints.
        self.store_rng = random.Random(seeds.getrandbits(63))
        self._faker_seed = seeds.getrandbits(63)
        self.mint_rng = random.Random(seeds.getrandbits(63))
        self._faker = None
        self.t = 0
        self.dispatch = 0
        self.sessions: dict[str, SessionInfo] = dict(ctx.sessions)
        self.turns: dict[str, TurnState] = {label: TurnState() for label in self.sessions}
        self.agents: dict[str, Agent] = {
            label: make_agent(getattr(info.spec, "agent", None), body=self.fake_body)
            for label, info in self.sessions.items()
        }
        self.closed_sessions: set[str] = set()   # deleted / exited: no more events
        self.names: dict[str, str] = {}          # label -> assigned name as last seen
        self.conn = None                         # the process's own connection, if it has one
        self.store = None                        # the process's ChatStore, if it has one
        self._last_status: dict[str, tuple[str, bool]] = {}
        self._followups: list[FollowUp] = []
        self._step: Optional[int] = None
        # label -> its tool calls as the model made them, newest last: what a host's retry repeats
        self.last_calls: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        self.closed = False
        self._ops: dict[str, Callable[[Command], Any]] = self.op_handlers()
        self._actions: dict[str, ActionHandler] = self.action_handlers()

    def op_handlers(self) -> dict[str, Callable[[Command], Any]]:
        """The ops this harness answers (the worker answers OP_ARM_CRASH and the window ops itself)."""
        return {OP_START: self.op_start, OP_ACT: self.op_act, OP_WINDOW: self.op_window, OP_STOP: self.op_stop,
                OP_POLL: self.op_poll, OP_FORK: self.op_fork, OP_TURN_END: self.op_turn_end,
                OP_RETRY: self.op_retry, OP_RELOAD: self.op_reload}

    def action_handlers(self) -> dict[str, ActionHandler]:
        """The actions every host kind serves the same way; each kind adds its own (a layout test holds
        the table equal to the actions simulator/scenario/kinds.py says the kind accepts)."""
        return {"send": self.act_send, "broadcast": self.act_broadcast, "read": self.act_read,
                "register": self.act_register, "unregister": self.act_unregister, "list": self.act_list,
                "status": self.act_status, "config": self.act_config, "cli_list": self.act_cli_list,
                "cli_tail": self.act_cli_tail, "prompt": self.act_prompt, "appear": self.act_appear,
                "title": self.act_title}

    # -- identity helpers ------------------------------------------------------

    def label_of(self, session_id: str) -> Optional[str]:
        for label, info in self.sessions.items():
            if info.session_id == session_id:
                return label
        for label, sid in (self.ctx.names_by_label or {}).items():
            if sid == session_id:
                return label
        return None

    def sid(self, label: str) -> str:
        try:
            return self.sessions[label].session_id
        except KeyError:
            raise Refused(f"{self.ctx.label} does not host a session labelled {label!r}") from None

    # -- faker -----------------------------------------------------------------

    @property
    def faker(self):
        if self._faker is None:  # ~0.1 s to build: only when a step needs one
            # Imported here: importing faker costs ~0.1 s, and the engine imports
            # this module even for runs that never draw a body (it preloads
            # faker before forking when a run's harnesses may).
            from faker import Faker

            from simulator.child.preload import take_faker

            self._faker = take_faker() or Faker()
            self._faker.seed_instance(self._faker_seed)
        return self._faker

    def fake_body(self) -> str:
        return self.faker.sentence(nb_words=8)

    def fake_title(self) -> str:
        return self.faker.sentence(nb_words=5).rstrip(".")

    # -- dispatch --------------------------------------------------------------

    def handle(self, cmd: Command) -> Reply:
        self.t, self.dispatch = cmd.t, cmd.dispatch
        self._followups = []
        self._step = cmd.args.get("step") if isinstance(cmd.args, dict) else None
        handler = self._ops.get(cmd.op)
        try:
            if handler is None:
                raise Refused(f"a {self.kind} harness does not handle {cmd.op!r}")
            result = handler(cmd)
            self.after_command()
        except Refused as err:
            return Reply(cmd.dispatch, ok=False, error=str(err), followups=tuple(self._followups))
        return Reply(cmd.dispatch, ok=True, result=result, followups=tuple(self._followups))

    def after_command(self) -> None:
        """Work a kind defers to the end of a command (opencode: queued prompts)."""

    def later(self, at: int, op: str, session: Optional[str] = None, **args: Any) -> None:
        self._followups.append(FollowUp(at=at, op=op, session=session, args=args))

    def emit(self, kind: str, session: Optional[str] = None, **data: Any) -> None:
        self.recorder.emit(kind, session, **data)

    # -- ops every kind serves -------------------------------------------------

    def op_start(self, cmd: Command) -> Any:
        self.start()
        self.session_followups()
        self.window_followups()
        self.emit(READY)
        return None

    def existed_before(self, label: str) -> bool:
        """A session this process took over (a resume or a restart's open tab):
        it had its first message in an earlier process."""
        return label == getattr(self.ctx, "resumed", None) or label in (getattr(self.ctx, "rehosted", None) or ())

    def session_followups(self) -> None:
        """Ask for each new session's entrance at `Session.start`: its first user
        message (`joins: first-prompt`), or an idle tab with no message
        (`joins: idle`). `explicit` / `never` sessions stay silent until a
        step acts for them (D-harness-4)."""
        for label, info in self.sessions.items():
            if self.existed_before(label):
                continue
            spec = info.spec
            at = max(int(getattr(spec, "start", 0) or 0), self.t)
            joins = getattr(spec, "joins", "first-prompt")
            if joins == "first-prompt":
                self.later(at, OP_ACT, label, **act_args("prompt", PromptArgs(session=label)))
            elif joins == "idle":
                self.appear_later(at, label)

    def act_prompt(self, label: Optional[str], args: PromptArgs) -> Any:
        """A user message typed into the session (kind-specific: hooks, a chat.message event)."""
        raise NotImplementedError

    def act_appear(self, label: Optional[str], args: SessionArg) -> Any:
        """The session shows up without a user message (kind-specific)."""
        raise NotImplementedError

    def act_title(self, label: Optional[str], args: TitleArgs) -> Any:
        """The auto-titler sets the session's title (only opencode's chat reads it)."""
        return {"ok": True}

    def appear_later(self, at: int, label: str) -> None:
        """Ask for the session's entrance without a user message (`appear`, kind-specific) at `at`."""
        self.later(at, OP_ACT, label, **act_args("appear", SessionArg(session=label)))

    def start(self) -> None:
        raise NotImplementedError

    def op_act(self, cmd: Command) -> Any:
        action, args = cmd.args.get("action"), cmd.args.get("args")
        handler = self._actions.get(action)
        if handler is None:
            raise Refused(f"a {self.kind} harness has no action {action!r}")
        return handler(STEPS[action].actor(args) or cmd.session, args)

    def op_window(self, cmd: Command) -> Any:
        label = cmd.session
        if label not in self.turns or label in self.closed_sessions:
            return None
        state = self.turns[label]
        on = bool(cmd.args.get("on"))
        what = cmd.args.get("what")
        if what == "busy":
            state.busy_window = on
        elif what == "compacting":
            state.compacting = on
        else:
            raise Refused(f"unknown window {what!r}: expected busy or compacting")
        self.window_changed(label, what, on)
        if not state.busy and not state.compacting:
            self.maybe_next_turn(label)
        return None

    def window_changed(self, label: str, what: str, on: bool) -> None:
        self.emit_status(label)

    def op_stop(self, cmd: Command) -> Any:
        self.close()
        return None

    def op_poll(self, cmd: Command) -> Any:
        raise Refused(f"a {self.kind} harness has no poller")

    def op_fork(self, cmd: Command) -> Any:
        raise Refused(f"only a claude-code harness forks session ids, not {self.kind}")

    def op_reload(self, cmd: Command) -> Any:
        raise Refused(f"a {self.kind} harness has no plugin to reload")

    def op_retry(self, cmd: Command) -> Any:
        """The host timed out the session's last tool call (of `tool`) after its transaction committed and calls
        it again, `times` times, with identical arguments; each call is recorded with `retry: <step>`."""
        label, tool, step = cmd.session, cmd.args.get("tool"), cmd.args.get("step")
        calls = [c for c in self.last_calls.get(label or "", ()) if tool is None or c[0] == TOOL_PREFIX + tool]
        if label in self.closed_sessions or not calls:
            raise Refused(f"{label} made no {tool or 'tool'} call to retry")
        name, args = calls[-1]
        for _ in range(int(cmd.args.get("times") or 1)):
            self.tool(label, name, dict(args), step=step, retry=step)
        return {"tool": name}

    def window_followups(self) -> None:
        """Ask for every busy/compacting window boundary still ahead (R19)."""
        for label, info in self.sessions.items():
            agent = getattr(info.spec, "agent", None)
            for what in ("busy", "compacting"):
                for w in getattr(agent, what, None) or ():
                    if w.until <= self.t:
                        continue
                    self.later(max(w.start, self.t), OP_WINDOW, label, what=what, on=True)
                    self.later(w.until, OP_WINDOW, label, what=what, on=False)

    # -- the tool path -----------------------------------------------------------

    def tool(self, label: str, tool: str, args: dict[str, Any], *, step: Optional[int] = None,
             retry: Optional[int] = None):
        """Call a chat tool as `label`, recording the call and its result (`retry`: the fault step
        whose host repeats an earlier call). A clipping host shows the model only its first
        `clip` characters; the result records the full length it cut."""
        if not tool.startswith(TOOL_PREFIX):
            tool = TOOL_PREFIX + tool
        args = self.prepare_args(label, tool, dict(args))
        if retry is None:
            self.last_calls.setdefault(label, []).append((tool, dict(args)))
            self.emit(TOOL_CALL, label, tool=tool, args=dict(args))
        else:
            self.emit(TOOL_CALL, label, tool=tool, args=dict(args), retry=retry)
        reply = self._call_tool(label, tool, args)
        clip = self.ctx.clip
        data = {"tool": tool, "ok": bool(reply.ok), "text": reply.text}
        if clip is not None and len(reply.text or "") > clip:
            data["text"], data["clipped_from"] = reply.text[:clip], len(reply.text)
            reply = ClippedReply(bool(reply.ok), reply.text[:clip])
        if step is not None:
            data["step"] = step
        self.emit(TOOL_RESULT, label, **data)
        return reply

    def prepare_args(self, label: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments as the model passes them: on an MCP host, the name its hook printed as `as`."""
        if HOSTS[self.kind].mcp and "as" not in args and label in self.names:
            args["as"] = self.names[label]
        return args

    def _call_tool(self, label: str, tool: str, args: dict[str, Any]):
        raise NotImplementedError

    def agent_tools(self, label: str) -> Callable[[str, dict[str, Any]], Any]:
        """The tool path an agent acts through (no step: the agent, not a step, acts)."""
        return lambda tool, args: self.tool(label, tool, dict(args))

    def recipient(self, args: SendArgs) -> str:
        """`to` (a label: its assigned name now) or `to_raw` (literal)."""
        if args.to_raw is not None:
            return str(args.to_raw)
        label = args.to
        if label is None:
            raise Refused("a send needs `to` or `to_raw`")
        sid = (self.ctx.names_by_label or {}).get(label) or (
            self.sessions[label].session_id if label in self.sessions else None)
        if sid is None:
            raise Refused(f"unknown session label {label!r}")
        try:
            name = self.lookup_name(sid)
        except StoreError:  # a lock that outlived the retries: address by id
            name = None
        # Unregistered: the chat id itself, so the refusal names something real.
        return name if name is not None else self.chat_id_of(sid)

    def chat_id_of(self, session_id: str) -> str:
        """The chat session id behind a run session id (MCP hosts hash theirs)."""
        if session_id.startswith(CHAT_ID_PREFIXES):
            return session_id
        return mcp_session_id(session_id)

    def name_candidates(self, session_id: str) -> list[str]:
        """Chat ids the run session may be registered under now: itself, its
        mcp id, and the mcp ids of its continued-in successors (R33)."""
        out = [session_id]
        if not session_id.startswith(CHAT_ID_PREFIXES):
            out.append(mcp_session_id(session_id))
            successor = self._successors()
            cur, hops = session_id, 0
            while cur in successor and hops < MAX_CONTINUATION_HOPS:
                cur, hops = successor[cur], hops + 1
                out.append(mcp_session_id(cur))
        return out

    def _successors(self) -> dict[str, str]:
        """old host id -> the new id its transcript's last line hands the conversation to (R33)."""
        found = {}
        for path in sorted(self.ctx.transcripts_dir.glob(f"*{TRANSCRIPT_SUFFIX}")):
            target = continued_in_target(path)
            if target is not None:
                found[path.name[: -len(TRANSCRIPT_SUFFIX)]] = target
        return found

    def lookup_name(self, session_id: str) -> Optional[str]:
        """The assigned name a run session goes by now (None: unregistered)."""
        return first_name(self.store, self.name_candidates(session_id))

    def acting(self, label: Optional[str]) -> str:
        """The acting session of an action, refused when there is none or this process does not host it."""
        if label is None:
            raise Refused("this action needs the acting session")
        self.sid(label)
        return label

    # -- scripted tool actions ---------------------------------------------------

    def act_send(self, label: Optional[str], args: SendArgs):
        label = self.acting(label)
        body = expand_body(args.body)  # `{repeat, times}` -> the long string
        call = {"to": self.recipient(args), "body": body if body is not None else self.fake_body()}
        if args.claimed_as is not None:
            # A claimed `as` other than the hook's name (an MCP spoofing attempt, R32).
            call["as"] = self.expand_claim(str(args.claimed_as))
        return self._result(self.tool(label, "send", call, step=self._step))

    def expand_claim(self, text: str) -> str:
        """`{label}` -> that session's assigned name now (left as is when unknown)."""
        def name(m):
            label = m.group(1)
            sid = (self.ctx.names_by_label or {}).get(label) or (
                self.sessions[label].session_id if label in self.sessions else None)
            found = self.lookup_name(sid) if sid else None
            return found or m.group(0)

        return LABEL_PLACEHOLDER.sub(name, text)

    def act_broadcast(self, label: Optional[str], args: BroadcastArgs):
        label = self.acting(label)
        body = expand_body(args.body)  # `{repeat, times}` -> the long string
        call = {"body": body if body is not None else self.fake_body()}
        return self._result(self.tool(label, "broadcast", call, step=self._step))

    def _plain(self, tool: str, label: Optional[str]):
        """A tool call without arguments by the acting session."""
        return self._result(self.tool(self.acting(label), tool, {}, step=self._step))

    def act_read(self, label: Optional[str], args: ReadArgs):
        paging = {k: v for k, v in (("message", args.message), ("offset", args.offset)) if v is not None}
        if args.claimed_as is None and not paging:
            return self._plain("read", label)
        # A claimed `as` (R32): Cursor's server reads that session's inbox.
        call = {"as": self.expand_claim(str(args.claimed_as))} if args.claimed_as is not None else {}
        return self._result(self.tool(self.acting(label), "read", {**call, **paging}, step=self._step))

    def act_register(self, label: Optional[str], args: SessionArg):
        return self._plain("register", label)

    def act_unregister(self, label: Optional[str], args: SessionArg):
        return self._plain("unregister", label)

    def act_list(self, label: Optional[str], args: SessionArg):
        return self._plain("list", label)

    def act_status(self, label: Optional[str], args: SessionArg):
        return self._plain("status", label)

    @staticmethod
    def _result(reply) -> dict[str, Any]:
        return {"ok": bool(reply.ok), "text": reply.text}

    # -- process-level actions ---------------------------------------------------

    def act_config(self, label: Optional[str], args: ConfigArgs):
        data = write_config(self.ctx.config_path, enabled=args.enabled, auto_register=args.auto_register)
        return {"ok": True, "text": json.dumps(data, sort_keys=True)}

    def act_cli_list(self, label: Optional[str], args: CliListArgs):
        return self._cli("cli_list", label, args)

    def act_cli_tail(self, label: Optional[str], args: CliTailArgs):
        return self._cli("cli_tail", label, args)

    def _cli(self, action: str, label: Optional[str], args: CliListArgs | CliTailArgs):
        clean = args.model_dump(mode="json", exclude_none=True, by_alias=True)
        for key in ("from", "to"):  # `{label}` -> that session's name now, like `as`
            if isinstance(clean.get(key), str):
                clean[key] = self.expand_claim(clean[key])
        self.emit(TOOL_CALL, label, tool=action, args=clean)
        ok, text = self.cli_text(action, clean)
        data = {"tool": action, "ok": ok, "text": text}
        if self._step is not None:
            data["step"] = self._step
        self.emit(TOOL_RESULT, label, **data)
        return {"ok": ok, "text": text}

    def cli_text(self, action: str, args: dict[str, Any]) -> tuple[bool, str]:
        """(exit status 0, output) of the real `thatch chat` entry point on the run's db."""
        return cli_output(self.ctx.db_path, action, args, t_ms=self.t)

    # -- turns -------------------------------------------------------------------

    def emit_status(self, label: str) -> None:
        """Record the session's status when it changed since the last record."""
        state = self.turns[label]
        now = (state.status, state.compacting)
        if self._last_status.get(label) == now:
            return
        self._last_status[label] = now
        self.emit(STATUS, label, status=now[0], compacting=now[1])

    def want_turn(self, label: str, cause: str) -> None:
        """A turn is triggered: start it now, or queue it until the session is idle."""
        if label in self.closed_sessions or label not in self.turns:
            return
        if self.turns[label].request(cause):
            self.start_turn(label, cause)

    def start_turn(self, label: str, cause: str, **end_args: Any) -> None:
        """Begin a turn now: status, `turn-start`, the agent acts at once, and
        the turn's end is asked for at now + the agent's turn length."""
        state = self.turns[label]
        was_busy = state.busy
        state.begin(cause)
        if not was_busy:
            self.emit_status(label)
            self.turn_started(label)
        self.emit(TURN_START, label, cause=cause)
        self.agents[label].on_turn(cause, self.agent_tools(label))
        end = self.t + self.agents[label].turn_ms
        spec_agent = getattr(self.sessions[label].spec, "agent", None)
        if any(w.start <= end < w.until for w in getattr(spec_agent, "aborted", None) or ()):
            end_args = {**end_args, "status": "aborted"}  # the user stops the turn (R36)
        self.later(end, OP_TURN_END, label, cause=cause, **end_args)

    def turn_started(self, label: str) -> None:
        """The session went busy for a turn (opencode reports the status)."""

    def finish_turn(self, label: str) -> None:
        """End the running turn; start a queued one, or go idle."""
        state = self.turns[label]
        state.end()
        self.emit(TURN_END, label)
        self.maybe_next_turn(label, from_turn=True)

    def maybe_next_turn(self, label: str, *, from_turn: bool = False) -> None:
        state = self.turns[label]
        nxt = state.next_queued()
        if nxt is not None:
            self.start_turn(label, nxt)
            return
        if from_turn and not state.busy:
            self.emit_status(label)
            self.went_idle(label)

    def went_idle(self, label: str) -> None:
        """The session is idle now (opencode: the idle event flushes mail)."""

    def op_turn_end(self, cmd: Command) -> Any:
        label = cmd.session
        if label in self.closed_sessions or label not in self.turns or not self.turns[label].in_turn:
            return None  # a turn of a deleted session, or a stale entry
        self.turn_ending(label, dict(cmd.args or {}))
        return None

    def turn_ending(self, label: str, args: dict[str, Any]) -> None:
        self.finish_turn(label)

    # -- lifecycle ---------------------------------------------------------------

    def open_store(self) -> None:
        """Open this process's own connection and store (a host that serves the chat in-process)."""
        self.conn = open_connection(self.ctx)
        self.store = make_store(self.ctx, self.conn, self.store_rng)
        self._record_prunes()

    def _record_prunes(self) -> None:
        """Each prune pass that removed something becomes a `prune` event with what it removed (R26):
        the poller calls `store.prune` inside thatch_core, where no other event shows it."""
        prune = getattr(self.store, "prune", None)
        if prune is None:
            return

        def recorded():
            result = prune()
            pruned, expired = getattr(result, "pruned", ()), getattr(result, "expired_tombstones", ())
            swept = getattr(result, "swept_messages", 0)
            if pruned or expired or swept:
                self.emit(PRUNE, None, pruned=list(pruned), expired_tombstones=list(expired), swept=int(swept))
            return result

        self.store.prune = recorded

    def close(self) -> None:
        """The end of the process (idempotent): what the kind holds, then its own connection."""
        if self.closed:
            return
        self.closed = True
        self.release()
        if self.store is not None:
            close_store(self.store)
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def release(self) -> None:
        """What a kind holds besides its connection (opencode: the runtime; Claude Code: MCP children)."""


__all__ = ["Harness", "Refused"]
