"""The fake opencode server: sessions, a model per session, and the thatch runtime.

The server hosts `ctx.sessions` and runs `thatch_core.runtime.OpencodeRuntime`
exactly as the plugin would run inside opencode: it feeds it the host events
(`chat.message` before a turn, `session.status` busy/idle, compaction,
`session.deleted`, a greenlit exit); as in the real runtime only the
`session.status` events host a session there and serves the runtime's client protocol
with `FakeOpencodeClient`:

- a synthetic `prompt_async` is a wake: the receiver records `wake`
  {senders, count, text, hosted} (senders and count parsed back from the
  text it received) and a model turn starts for the session's agent;
- a non-synthetic `no_reply` part is a transcript bubble: recorded as `echo`,
  no turn starts;
- like the real server, every prompt part also fires `chat.message`.

A prompt is queued work, as in opencode (`promptAsync` returns before the
turn runs): it is processed at the end of the current command, never inside
the runtime call that sent it. That keeps "wake sent, then stamp" ordered
like the real thing, so a crash at the delivered stamp finds the batch
unread (R23).

Receiving a wake prompt is the host step `wake-prompt` of the crash points
(simulator/child/crash_points.py): a crash `before` it leaves the prompt
unsent, `after` it leaves the prompt received and unstamped. With
`events: synchronous` a prompt call first hands over the host events due
at its instant (simulator/harness/events.py).
"""

from __future__ import annotations

from typing import Any, Optional

from thatch_core import clock
from thatch_core.config import ConfigSource
from thatch_core.runtime import OpencodeRuntime

from simulator.child.crash_points import crash_points
from simulator.events import ECHO, POLL, REGISTERED, STORE_ERROR, TOOL_CALL, TOOL_RESULT, USER_PROMPT, WAKE
from simulator.design import MACHINERY_TITLE
from simulator.harness.base import ActionHandler, Harness, Refused
from simulator.harness.events import HostEventStream
from simulator.harness.sidecar import SidecarPoller
from simulator.replies import decode_log_line, decode_wake
from simulator.protocol import OP_TURN_END, OP_WINDOW, Command
from simulator.scenario.kinds import OPENCODE, PromptArgs, ReviewArgs, SessionArg, TitleArgs

def parse_nudge(text: str) -> tuple[list[str], int]:
    """(senders, count) of a wake prompt's text; none and 0 for a text that is no wake prompt."""
    nudge = decode_wake(text)
    return ([], 0) if nudge is None else (list(nudge.senders), nudge.count)


def _parts_text(parts) -> str:
    return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


class FakeOpencodeClient:
    """The runtime's view of the opencode SDK client (thatch_core.runtime.OpencodeClient)."""

    def __init__(self, harness: "OpencodeHarness") -> None:
        self.h = harness

    def prompt_async(self, session_id: str, parts: list[dict], *, no_reply: bool = False) -> None:
        h = self.h
        label = h.hosted_label(session_id)
        if label is None:
            # The real server answers 404 for a session it does not have.
            raise RuntimeError(f"session {session_id} not found")
        if not no_reply:
            crash_points().reached("wake-prompt", "before", session=label)
        h.deliver_stream_events(inside="echo" if no_reply else "wake", prompted=label)
        text = _parts_text(parts)
        synthetic = any(p.get("synthetic") for p in parts)
        if no_reply:
            if not synthetic:
                h.emit(ECHO, label, text=text)
            h.inbox.append((label, list(parts), None))
            return
        senders, count = parse_nudge(text)
        hosted = h.runtime is not None and session_id in h.runtime.hosted_sessions()
        h.emit(WAKE, label, senders=senders, count=count, text=text, hosted=hosted)
        h.inbox.append((label, list(parts), "wake"))
        crash_points().reached("wake-prompt", "after", session=label)

    def session_title(self, session_id: str) -> Optional[str]:
        label = self.h.hosted_label(session_id)
        return None if label is None else self.h.title(label)

    def session_parent(self, session_id: str) -> Optional[str]:
        label = self.h.hosted_label(session_id)
        return None if label is None else self.h.host_parent(label)

    def list_sessions(self, directory: str) -> list[dict[str, Any]]:
        # A resume's listing is the directory as the step describes it, even
        # empty (`-c` then continues nothing); other processes list their own.
        if self.h.ctx.directory_sessions or self.h.ctx.resumed is not None:
            return [dict(s) for s in self.h.ctx.directory_sessions]
        return [{"id": i.session_id, "parent_id": self.h.host_parent(label), "updated_ms": 0}
                for label, i in self.h.sessions.items()]


class OpencodeHarness(Harness):
    """One fake opencode process: see the module docstring."""

    kind = OPENCODE

    def __init__(self, ctx, recorder) -> None:
        super().__init__(ctx, recorder)
        self.runtime = None
        self.client = FakeOpencodeClient(self)
        self.inbox: list[tuple[str, list[dict], Optional[str]]] = []
        self.titles: dict[str, str] = dict(getattr(ctx, "titles", None) or {})
        self.placeholders: dict[str, str] = {}
        # Sessions that existed before this process (a resume or a restart):
        # their auto-titler already landed in the previous process.
        self.pre_titled: set[str] = set()
        self.stream = HostEventStream(self._host_event, self.emit) if ctx.events == "synchronous" else None

    # -- start -----------------------------------------------------------------

    def start(self) -> None:
        ctx = self.ctx
        self.open_store()
        for label in self.sessions:
            self.placeholders[label] = f"New session - {clock.iso()}"
        self.pre_titled = {label for label in self.sessions if self.existed_before(label)}
        self.runtime = self._new_runtime()
        self.runtime.start()
        self._mark_machinery()
        how = "startup" if ctx.startup or ctx.argv is not None else "rehost"
        for sid in self.runtime.hosted_sessions():
            label = self.hosted_label(sid)
            if label is not None:
                self.observe(label, how)

    def _new_runtime(self):
        ctx = self.ctx
        overrides = ctx.overrides or {}
        runtime_cls = overrides.get("runtime") or OpencodeRuntime
        extra = {"poller_factory": overrides["poller"]} if overrides.get("poller") else {}
        if ctx.checkout is not None:
            extra = {"poller_factory": SidecarPoller}  # the checkout's own poller, beside its store
        return runtime_cls(
            self.store, self.client,
            directory=str(ctx.directory), project=ctx.project,
            config_source=ConfigSource(ctx.config_path, log=self._log),
            cmdline_reader=self._cmdline, state_dir=ctx.state_dir,
            rehost_grace_ms=ctx.rehost_grace_ms, log=self._log, **extra,
        )

    def _mark_machinery(self) -> None:
        """The plugin creates its machinery children (the extraction child): a runtime that keeps a durable
        marker for them is told at their creation; one that does not (seed 000's) has nothing to be told."""
        mark = getattr(self.runtime, "on_machinery_child", None)
        if mark is None:
            return
        for label, info in self.sessions.items():
            if getattr(info.spec, "machinery", False) and not self.existed_before(label):
                mark(info.session_id, self.machinery_parent(label))

    def machinery_parent(self, label: str) -> Optional[str]:
        parent = getattr(self.sessions[label].spec, "parent", None)
        return (self.ctx.names_by_label or {}).get(parent) if parent else None

    def op_reload(self, cmd) -> Any:
        """A plugin reload in the same process (same pid): a fresh runtime that knows nothing the old one kept in
        memory (the hosted set, child maps, nudge counts); the sessions and the store live on."""
        if self.runtime is not None:
            self.runtime.dispose()
        self.runtime = self._new_runtime()
        self.runtime.start()
        return None

    def _cmdline(self, pid: int) -> list[str]:
        """The command line the OS would report for this process (R5): a
        resume's own `argv`, else `opencode -s <id>` / `opencode -c`."""
        if self.ctx.argv is not None:
            return list(self.ctx.argv)
        startup = self.ctx.startup
        if startup is None:
            return ["opencode"]
        flag, sid = startup
        return ["opencode", "-s", sid] if flag == "-s" and sid else ["opencode", "-c"]

    def _log(self, message: str) -> None:
        """The runtime's log: a caught store failure is a `store-error` event
        (R24); other notes (a failed prompt, an unknown status) are not."""
        failure = decode_log_line(message)
        if failure is not None:
            self.emit(STORE_ERROR, None, where=failure.where, error=failure.error)

    # -- session helpers ---------------------------------------------------------

    def hosted_label(self, session_id: str) -> Optional[str]:
        """The label of a session this server has (and has not closed)."""
        for label, info in self.sessions.items():
            if info.session_id == session_id and label not in self.closed_sessions:
                return label
        return None

    def host_parent(self, label: str) -> Optional[str]:
        """The parent the host reports: none for a machinery child, whose parent only the plugin knows."""
        info = self.sessions[label]
        return None if getattr(info.spec, "machinery", False) else info.parent_id

    def title(self, label: str) -> str:
        if label in self.titles:
            return self.titles[label]
        spec = self.sessions[label].spec
        if getattr(spec, "machinery", False):
            return getattr(spec, "title", None) or MACHINERY_TITLE  # the plugin titles its child at creation
        if self.turns[label].turns >= 1 or label in self.pre_titled:
            spec_title = getattr(self.sessions[label].spec, "title", None)
            self.titles[label] = spec_title or self.fake_title()
            return self.titles[label]
        return self.placeholders.get(label) or f"New session - {clock.iso()}"

    def observe(self, label: str, how: str) -> None:
        """Record `registered` when the session's directory name is new to us."""
        try:
            row = self.store.get(self.sid(label))
        except Exception:  # noqa: BLE001 - observation must never change the run
            return
        if row is None:
            self.names.pop(label, None)
            return
        if self.names.get(label) != row.name:
            self.names[label] = row.name
            self.emit(REGISTERED, label, session_id=row.session_id, name=row.name, how=how)

    # -- the event stream (events: synchronous) -------------------------------------

    def later(self, at: int, op: str, session: Optional[str] = None, **args: Any) -> None:
        super().later(at, op, session, **args)
        if self.stream is not None:
            self.stream.scheduled(self._followups[-1])

    def deliver_stream_events(self, *, inside: str, prompted: str) -> None:
        """Inside a prompt call: the host events due now, before the prompt (synchronous mode)."""
        if self.stream is not None:
            self.stream.deliver_due(self.t, self.dispatch, inside=inside, prompted=prompted)

    def _host_event(self, cmd: Command) -> Any:
        """One host event delivered by the stream, as its own command would run it."""
        return {OP_TURN_END: Harness.op_turn_end, OP_WINDOW: Harness.op_window}[cmd.op](self, cmd)

    def op_turn_end(self, cmd) -> Any:
        if self.stream is not None and self.stream.already_delivered(cmd):
            return None
        return super().op_turn_end(cmd)

    def op_window(self, cmd) -> Any:
        if self.stream is not None and self.stream.already_delivered(cmd):
            return None
        return super().op_window(cmd)

    # -- ops ---------------------------------------------------------------------

    def op_poll(self, cmd) -> Any:
        if self.runtime is None or self.runtime.poller is None:
            return {"poller": False}  # chat disabled at init: the poller never started (R29)
        hosted = sorted(self.label_of(s) or s for s in self.runtime.hosted_sessions())
        self.emit(POLL, None, hosted=hosted)
        self.runtime.poller.poll()
        return None

    def after_command(self) -> None:
        """Process the prompts the server queued during this command."""
        while self.inbox:
            label, parts, cause = self.inbox.pop(0)
            if label in self.closed_sessions:
                continue
            self.runtime.on_chat_message(self.sid(label), parts)
            if cause is not None:
                self.want_turn(label, cause)

    # -- turns and status -----------------------------------------------------

    def turn_started(self, label: str) -> None:
        self.runtime.on_session_status(self.sid(label), "busy")

    def went_idle(self, label: str) -> None:
        self.runtime.on_session_status(self.sid(label), "idle")  # idle flush (R19), topic (R3)
        self.observe(label, "idle")

    def window_changed(self, label: str, what: str, on: bool) -> None:
        state = self.turns[label]
        sid = self.sid(label)
        if what == "compacting":
            self.runtime.on_compacting(sid, on)
            self.emit_status(label)
            if not state.busy:
                # D-harness-5, D-real-host-5: compaction is a session run; its start
                # reports busy (that status event is what hosts the session), its end idle.
                self.runtime.on_session_status(sid, "busy" if on else "idle")
            return
        if state.in_turn:
            return  # the turn owns the status; the window only extends it
        self.emit_status(label)
        self.runtime.on_session_status(sid, "busy" if on else "idle")

    def _call_tool(self, label: str, tool: str, args: dict[str, Any]):
        reply = self.runtime.call_tool(self.sid(label), tool, args)
        if tool.endswith("register") and reply.ok:
            self.observe(label, "explicit")
        return reply

    # -- actions -----------------------------------------------------------------

    def action_handlers(self) -> dict[str, ActionHandler]:
        return {**super().action_handlers(), "delete": self.act_delete, "exit": self.act_exit,
                "approve": self.act_approve, "decline": self.act_decline}

    def act_prompt(self, label: Optional[str], args: PromptArgs):
        label = self.acting(label)
        if label in self.closed_sessions:
            raise Refused(f"session {label} was closed")
        text = args.text or self.faker.sentence(nb_words=6)
        self.emit(USER_PROMPT, label, text=text)
        # chat.message fires before the model runs: the session is
        # addressable within its very first turn (R1).
        self.runtime.on_chat_message(self.sid(label), [{"type": "text", "text": text}])
        self.observe(label, "first-prompt")
        self.want_turn(label, "user")
        return {"ok": True}

    def act_appear(self, label: Optional[str], args: SessionArg):
        """An open tab with no message yet: its first event is an idle status."""
        label = self.acting(label)
        if label not in self.closed_sessions and not self.turns[label].busy:
            self.emit_status(label)
            self.went_idle(label)
        return {"ok": True}

    def act_title(self, label: Optional[str], args: TitleArgs):
        label = self.acting(label)
        self.titles[label] = str(args.title)
        return {"ok": True}

    def act_delete(self, label: Optional[str], args: SessionArg):
        return self._close_session(label, self.runtime.on_session_deleted)  # R17

    def act_exit(self, label: Optional[str], args: SessionArg):
        """A greenlit /thatch/exit. D-harness-7: the session is closed; the fake
        server keeps serving its other sessions (the orchestrator owns process exits)."""
        return self._close_session(label, self.runtime.on_exit)  # R7

    def _close_session(self, label: Optional[str], leave) -> dict:
        label = self.acting(label)
        leave(self.sid(label))
        self.closed_sessions.add(label)
        self.names.pop(label, None)
        return {"ok": True}

    def act_approve(self, label: Optional[str], args: ReviewArgs):
        return self._review(label, args, "approved")

    def act_decline(self, label: Optional[str], args: ReviewArgs):
        return self._review(label, args, "declined")

    def _review(self, label: Optional[str], args: ReviewArgs, decision: str):
        """The session's user approves or declines a held message (messaging policies);
        recorded like a tool call so a step `expect:` can judge the reply."""
        label = self.acting(label)
        sender = args.sender
        run_id = (self.ctx.names_by_label or {}).get(sender) if sender else None
        sender_id = self.chat_id_of(run_id) if run_id else None  # an MCP host's sender is its mcp_ id
        action = "approve" if decision == "approved" else "decline"
        self.emit(TOOL_CALL, label, tool=action, args={"from": sender} if sender else {})
        res = self.runtime.review_held(self.sid(label), decision, from_session=sender_id)
        data = {"tool": action, "ok": bool(res.ok), "text": res.text}
        if self._step is not None:
            data["step"] = self._step
        self.emit(TOOL_RESULT, label, **data)
        return {"ok": bool(res.ok), "text": res.text}

    # -- lifecycle ---------------------------------------------------------------

    def release(self) -> None:
        if self.runtime is not None:
            self.runtime.dispose()
