"""The opencode plugin's chat logic: hosting, auto-registration, delivery wiring.

One `OpencodeRuntime` per opencode process. It turns host events into store
calls and owns the hosted set the poller beats and delivers for. As in the
real thatch (src/runtime.ts, D-real-host-2) that set is the sessions this
process saw `session.status` events for, plus the `-s`/`-c` startup session,
plus the re-hosted set, minus child sessions; nothing else hosts a session:
- `start()`: config read once for the poller (R29); the harness's own OS
  command line names a `-s`/`-c` session, registered (reclaimed) at once and
  hosted, unless auto-registration is off or the session left (then it is
  neither); a delivery pass then flushes mail that queued while it was down (R5);
- `on_chat_message`: auto-registration before the model runs (R1), skipping
  `[chat]` echo bubbles (R27); it does not host the session;
- `on_session_status`: hosting, the idle backstop, the title-topic refresh
  (R3) and the idle flush (R19);
- `on_session_deleted` / `on_exit`: leave with a tombstone (R7, R17);
- `call_tool`: the shared tool surface with the host session as identity,
  plus the fire-and-forget transcript echo (R27); a call acts (it may
  register the session) but does not host it;
- rehost grace (R15): the hosted set (`thatch_core.rehost.HostedSet`) is
  persisted, and a restarted runtime re-hosts it for a bounded window so
  silent-but-open tabs stay fresh; a status event graduates a session;
- `system_prompt_section()`: the prompt's chat section, gated at init (R29).

State shared with the poller's timer thread sits behind one lock, which is
never held while calling the client or the store (a client may call back in).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable, Mapping, Protocol, Sequence

from thatch_core import clock
from thatch_core.later import EXTRACTION_CHILD_TITLE, MACHINERY_REASON, is_machinery_title
from thatch_core.constants import rehost_grace_ms as _env_rehost_grace_ms
from thatch_core.osargs import parse_startup_target, read_cmdline
# Looked up as a module global at start(): the simulator swaps it for a
# deliberately broken poller in some tests (D-harness-3).
from thatch_core.poller import ChatPoller
from thatch_core.policy import DEFAULT as DEFAULT_POLICY
from thatch_core.policy import is_user_message
from thatch_core.prompts import chat_notification_nudge, is_chat_echo_parts, system_prompt_section
from thatch_core.rehost import HOSTED_STATE_FILE, HostedSet
from thatch_core.tools import ChatTools, ToolReply

__all__ = ["HOSTED_STATE_FILE", "OpencodeClient", "OpencodeRuntime", "STATUSES"]

STATUSES = ("idle", "busy", "retry")


class OpencodeClient(Protocol):
    """The slice of the opencode SDK client the chat runtime uses."""

    def prompt_async(self, session_id: str, parts: list[dict], *, no_reply: bool = False) -> None:
        """Queue a prompt on a session; raises on failure."""

    def session_title(self, session_id: str) -> str | None:
        """The session's current title (None when unknown)."""

    def session_parent(self, session_id: str) -> str | None:
        """The parent session id of a child (sub-agent) session, None at top level."""

    def list_sessions(self, directory: str) -> Sequence[Any]:
        """Sessions of `directory`: objects or dicts with id, parent_id, updated_ms."""


def _field(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _usable_id(session_id: Any) -> bool:
    return isinstance(session_id, str) and bool(session_id.strip())


def _stderr_log(message: str) -> None:
    print(message, file=sys.stderr)


class OpencodeRuntime:
    """Chat inside one opencode process; see the module docstring."""

    def __init__(
        self,
        store,
        client: OpencodeClient,
        *,
        directory: str,
        project: str | None,
        config_source,
        pid: int | None = None,
        cmdline_reader: Callable[[int], Sequence[str]] = read_cmdline,
        state_dir: str | os.PathLike | None = None,
        rehost_grace_ms: int | None = None,
        log: Callable[[str], None] | None = None,
        real_timer: bool = False,
        poller_factory: Callable[..., ChatPoller] = ChatPoller,
    ):
        self.store = store
        self.client = client
        self.directory = directory
        self.project = project
        self.config_source = config_source
        self.pid = os.getpid() if pid is None else pid
        self.cmdline_reader = cmdline_reader or read_cmdline
        self.rehost_grace_ms = _env_rehost_grace_ms() if rehost_grace_ms is None else rehost_grace_ms
        self._log = log or _stderr_log
        self._hostset = HostedSet(state_dir, self.rehost_grace_ms, self._log)
        self.state_path = self._hostset.path
        self.real_timer = real_timer
        # Injected (tests build broken variants); the real one by default.
        self.poller_factory = poller_factory
        self.tools = ChatTools(
            store, config_source, host_kind="opencode",
            project=project, directory=directory, title_for=self._title,
        )
        self.poller: ChatPoller | None = None
        self.enabled = False      # the init-time gate (R29); set by start()
        self.started = False
        self.startup_session: str | None = None
        self._lock = threading.RLock()
        self._status: dict[str, str] = {}
        self._compacting: set[str] = set()
        self._parents: dict[str, str | None] = {}
        # Sessions deleted or exited here: opencode never reuses a session id
        # and an exit ends the process, so events racing either must not
        # re-host (or re-register) a session that is gone.
        self._gone: set[str] = set()
        # The messaging policy (thatch_core.policy), read once at start like the
        # poller; the sessions whose standing this process has published.
        self.policy = DEFAULT_POLICY
        self._published: set[str] = set()

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        """Init: config gate, rehost, `-s`/`-c` registration, asleep-mail flush."""
        if self.started:
            return
        self.started = True
        cfg = self.config_source.load()
        self.enabled = cfg.enabled
        if not self.enabled:
            return  # no poller, no startup registration, nothing hosted
        self.policy = getattr(cfg, "policy", DEFAULT_POLICY)
        self.poller = self.poller_factory(
            self.store,
            hosted_sessions=self.hosted_sessions,
            deliver=self._deliver,
            can_deliver=self.can_deliver,
            log=self._log,
            **self._policy_poller_args(),
        )
        rehosted = self._hostset.load_previous(clock.now_ms())
        with self._lock:
            for rid in rehosted:
                # An open tab that reconnects emits nothing: count it idle.
                self._status[rid] = "idle"
        sid = self._startup_session(cfg)
        if sid is not None:
            self.startup_session = sid
            self._hostset.touch(sid, clock.now_ms())
            with self._lock:
                # A resumed session emits no event until typed into: it is
                # idle until the host says otherwise, so asleep mail can land.
                self._status.setdefault(sid, "idle")
            self._register(sid, title=self._title(sid))  # reclaim keeps the name (R5)
        self._hostset.persist()
        hosted = self.hosted_sessions()
        self._publish_standing(hosted)
        try:
            # Re-hosted rows are fresh from the first moment, not one cycle later.
            self.store.heartbeat(hosted)
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat startup heartbeat failed: {err!r}")
        self.poller.deliver_pending()
        if self.real_timer:
            self.poller.start()

    def system_prompt_section(self) -> str:
        """The system prompt's chat section; empty when chat was disabled at
        init (or before `start()`): like the poller, the prompt gate is read
        once, and a restart applies a toggle to it (R29)."""
        return system_prompt_section(self.enabled)

    def dispose(self) -> None:
        """Stops the poller's timer (a process shutting down without an exit)."""
        if self.poller is not None:
            self.poller.dispose()

    def _startup_session(self, cfg) -> str | None:
        """The `-s`/`-c` session to reclaim and host at init (R5), or None.

        With auto-registration off, or for a session that left (a tombstone),
        the startup path neither registers nor hosts it (R7, R30): the session
        is hosted from its first status event like any other. `-c` is not even
        resolved then."""
        if not cfg.auto_register:
            return None
        sid = self._resolve_startup_session()
        if sid is None:
            return None
        try:
            if self.store.has_tombstone(sid):
                return None
        except Exception as err:  # noqa: BLE001 - unknown standing: host nothing rather than a leaver
            self._log(f"[thatch] chat:startup tombstone check for {sid} failed: {err!r}")
            return None
        return sid

    def _resolve_startup_session(self) -> str | None:
        try:
            argv = list(self.cmdline_reader(self.pid) or ())
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat:startup cannot read the command line: {err!r}")
            return None
        target = parse_startup_target(argv)
        if target is None:
            return None
        kind, sid = target
        if kind == "session":
            return sid
        # -c: the same target the TUI picks - newest top-level session here.
        try:
            sessions = list(self.client.list_sessions(self.directory) or ())
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat:startup cannot list sessions for -c: {err!r}")
            return None
        sessions.sort(key=lambda s: _field(s, "updated_ms", 0) or 0, reverse=True)
        for s in sessions:
            if not _field(s, "parent_id"):
                return _field(s, "id")
        return None

    # -- host events ---------------------------------------------------------

    def on_chat_message(self, session_id: str, parts: Sequence[Mapping]) -> None:
        """A prompt arrived (fires before the model runs)."""
        if not self._live(session_id) or is_chat_echo_parts(parts):
            return
        if self.policy.sender_cap is not None and is_user_message(parts):
            try:
                self.store.note_user_prompt(session_id)  # the sender cap starts again
            except Exception as err:  # noqa: BLE001
                self._log(f"[thatch] chat user-prompt note for {session_id} failed: {err!r}")
        self._auto_register(session_id)

    def on_session_status(self, session_id: str, status: str) -> None:
        """session.status: host the session (a child never, R25); on idle also
        backstop-register, refresh the topic and flush its mail at once."""
        if not self._live(session_id):
            return
        if status not in STATUSES:
            self._log(f"[thatch] chat: unknown session status {status!r} for {session_id}")
        if self._is_top_level(session_id) is not False:
            self._host(session_id)
        with self._lock:
            self._status[session_id] = status
        if status != "idle":
            return
        self._drop_machinery_corpse(session_id)
        if not self._auto_register(session_id):
            self._refresh_topic(session_id)
        if self.poller is not None:
            self.poller.deliver_pending()

    def on_compacting(self, session_id: str, compacting: bool) -> None:
        """Compaction starts or ends: the delivery gate only (no hosting)."""
        if not self._live(session_id):
            return
        with self._lock:
            if compacting:
                self._compacting.add(session_id)
            else:
                self._compacting.discard(session_id)

    def on_machinery_child(self, session_id: str, parent_id: str | None, *, title: str = EXTRACTION_CHILD_TITLE,
                           reason: str = MACHINERY_REASON) -> None:
        """The plugin created a child session of its own (fact extraction). The
        in-memory parent map keeps it out of the directory, and under the later
        design a durable marker does too, surviving a reload (D-later-2)."""
        if not self._live(session_id):
            return
        with self._lock:
            self._parents[session_id] = parent_id
        if self.policy.machinery_markers:
            try:
                self.store.mark_machinery(session_id, reason)
            except Exception as err:  # noqa: BLE001 - the title still keeps it out
                self._log(f"[thatch] chat machinery marker for {session_id} ({title}) failed: {err!r}")

    def on_session_deleted(self, session_id: str) -> None:
        """session.deleted: leave at once (row + tombstone), stop hosting (R17)."""
        if self.enabled and _usable_id(session_id):
            self._leave(session_id)

    def on_exit(self, session_id: str) -> None:
        """A greenlit /thatch/exit: leave before the host vanishes (R7)."""
        if self.enabled and _usable_id(session_id):
            self._leave(session_id)

    def call_tool(self, session_id: str, tool: str, args: Mapping[str, Any] | None = None) -> ToolReply:
        """A thatch_chat_* call from `session_id`; the host session is the identity.
        The call acts (it may register the session) but hosts nothing: the
        session's own status events do that."""
        reply = self.tools.call(tool, args or {}, identity=session_id)
        if reply.echo:
            try:
                # Non-synthetic so the TUI renders it; no_reply so no turn starts.
                self.client.prompt_async(
                    session_id, [{"type": "text", "text": reply.echo, "synthetic": False}], no_reply=True,
                )
            except Exception as err:  # noqa: BLE001 - an echo never fails the tool (R27)
                self._log(f"[thatch] chat echo to {session_id} failed: {err!r}")
        return reply

    # -- hosting ---------------------------------------------------------------

    def _live(self, session_id: str) -> bool:
        """Events count only when chat was enabled at init and the session lives.

        An event without a usable session id names nothing to host: letting it
        in would put a non-id into the hosted set every poll cycle reads.
        """
        if not self.enabled or not _usable_id(session_id):
            return False
        with self._lock:
            return session_id not in self._gone

    def _host(self, session_id: str) -> None:
        """A status event: host the session; a re-hosted one graduates to permanent."""
        self._hostset.touch(session_id, clock.now_ms())
        self._publish_standing([session_id])

    # -- messaging policy (thatch_core.policy) ------------------------------------

    def _policy_poller_args(self) -> dict[str, Any]:
        """The poller's policy knobs; none under thatch's design (the poller's own defaults)."""
        if self.policy.is_default:
            return {}
        if self.policy.messaging_default and not self.policy.machinery_markers:
            return {}
        return {"max_nudges_per_hour": self.policy.nudges_per_hour, "upkeep": self._policy_upkeep}

    def _publish_standing(self, session_ids) -> None:
        """Tell every sender what these hosted sessions do with incoming mail (once each)."""
        if self.policy.messaging_default:
            return
        for sid in session_ids:
            if sid in self._published:
                continue
            try:
                self.store.publish_inbound(sid, self.policy)
                self._published.add(sid)
            except Exception as err:  # noqa: BLE001 - retried at the session's next event
                self._log(f"[thatch] chat policy publish for {sid} failed: {err!r}")

    def _policy_upkeep(self) -> None:
        """Each poll cycle: approval prompts that ran out drop their message and tell its sender;
        machinery markers past the auto-row TTL age out (the later design)."""
        if self.policy.machinery_markers:
            self.store.age_machinery()
        if self.policy.messaging_default:
            return
        hosted = self.hosted_sessions()
        self._publish_standing(hosted)
        self.store.expire_held(hosted)

    def review_held(self, session_id: str, decision: str, *, from_session: str | None = None):
        """The user approves or declines a held message in `session_id` (Qoder's /peers
        approve / deny); an approval is delivered by the next delivery pass."""
        return self.store.review_held(session_id, decision, from_session=from_session)

    def _leave(self, session_id: str) -> None:
        with self._lock:
            self._gone.add(session_id)
            self._status.pop(session_id, None)
            self._compacting.discard(session_id)
        self._hostset.drop(session_id)
        try:
            self.store.unregister(session_id)
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat unregister of {session_id} failed: {err!r}")

    def hosted_sessions(self) -> list[str]:
        """The sessions this process beats and delivers for (sorted). Re-hosted
        sessions whose grace ran out without activity drop out here (R15)."""
        hosted, expired = self._hostset.expire(clock.now_ms())
        if expired:
            with self._lock:
                for sid in expired:
                    self._status.pop(sid, None)
                    self._compacting.discard(sid)
        return hosted

    def can_deliver(self, session_id: str) -> bool:
        """The watcher gate (R19): last known status idle and not compacting."""
        with self._lock:
            return self._status.get(session_id) == "idle" and session_id not in self._compacting

    def _deliver(self, session_id: str, senders: list[str], count: int) -> None:
        self.client.prompt_async(
            session_id, [{"type": "text", "text": chat_notification_nudge(senders, count), "synthetic": True}],
        )

    def rehosting(self) -> list[str]:
        """Sessions currently hosted only by grace (for tests and reports)."""
        return self._hostset.rehosting()

    # -- registration ------------------------------------------------------------

    def _title(self, session_id: str) -> str | None:
        try:
            return self.client.session_title(session_id)
        except Exception as err:  # noqa: BLE001 - a title is advisory
            self._log(f"[thatch] chat cannot fetch the title of {session_id}: {err!r}")
            return None

    def _is_top_level(self, session_id: str) -> bool | None:
        """True/False from the host, cached (a parent never changes); None when unknown."""
        with self._lock:
            if session_id in self._parents:
                return self._parents[session_id] is None
        try:
            parent = self.client.session_parent(session_id)
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat cannot fetch the parent of {session_id}: {err!r}")
            return None
        with self._lock:
            self._parents[session_id] = parent
        return parent is None

    def _auto_register(self, session_id: str) -> bool:
        """Join the directory automatically when allowed (R1, R7, R30).

        True when this call registered the session (the title it fetched is
        then the topic, so the idle handler skips a second refresh).
        """
        cfg = self.config_source.load()
        if not (cfg.enabled and cfg.auto_register):
            return False
        try:
            if self.policy.machinery_markers and self.store.is_machinery(session_id):
                return False  # the plugin's own child: never a participant (D-later-2)
            if self.store.get(session_id) is not None or self.store.has_tombstone(session_id):
                return False
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat auto-register check failed: {err!r}")
            return False
        if not self._is_top_level(session_id):
            return False  # child sessions never join; unknown parent: try at the next event
        title = self._title(session_id)
        if self.policy.machinery_markers and is_machinery_title(title):
            return False  # the title survives even a lost marker
        # The session may have been deleted while the title was fetched: the
        # store's tombstone gate inside register refuses it (no resurrection).
        return self._register(session_id, title=title)

    def _drop_machinery_corpse(self, session_id: str) -> None:
        """The idle path heals: a marked session's directory row (registered
        before the marker counted, or by a process without it) is deleted."""
        if not self.policy.machinery_markers:
            return
        try:
            self.store.drop_machinery_row(session_id)
        except Exception as err:  # noqa: BLE001 - retried at the next idle
            self._log(f"[thatch] chat machinery cleanup of {session_id} failed: {err!r}")

    def _register(self, session_id: str, *, title: str | None) -> bool:
        claims = {"policy": self.policy} if self.policy.name_claims else {}
        try:
            res = self.store.register(
                session_id, kind="opencode", project=self.project, directory=self.directory,
                title=title, auto=True, explicit=False, **claims,
            )
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat registration of {session_id} failed: {err!r}")
            return False
        return bool(res.ok)

    def _refresh_topic(self, session_id: str) -> None:
        """Converge an auto row's topic on the live title (R3); the store keeps
        legacy rows' topics and ignores placeholder titles."""
        try:
            row = self.store.get(session_id)
            if row is None or not row.auto:
                return
            title = self._title(session_id)
            if title:
                self.store.refresh_topic(session_id, title)
        except Exception as err:  # noqa: BLE001
            self._log(f"[thatch] chat topic refresh of {session_id} failed: {err!r}")
