"""The MCP-host side of chat: Claude Code and Cursor (R29-R32, R35, R36).

MCP tool calls carry no session context, so these hosts get their chat
identity from the thatch hook instead of the host:

- ``chat_hook_line`` runs at session start and on every prompt. It
  ensure-registers ``mcp_<sha256(lower-cased host session id)[:12]>`` (carrying
  over a row an earlier thatch_core keyed by the raw id, then adopting a forked
  predecessor, R33), records parent pid -> session for the anti-spoofing
  layer (R32) and returns the line the hook prints:
  ``[thatch] chat: you are NAME (no unread mail for you).`` (``prompts.hook_line``).
- ``McpChatServer`` is the MCP server's tool entry. It resolves the caller
  with ``resolve_chat_identity`` (host context > parent-pid anchor >
  ``CLAUDE_CODE_SESSION_ID`` > claimed ``as``) and delegates to ``ChatTools``.
- ``claude_stop_hook`` / ``cursor_stop_hook`` are the turn-end mail checks:
  no MCP server can start a turn, so the end of a turn is the wake analog;
  both point to mail only when it is due like a wake (the delivered stamp
  bounds repeats), and Cursor's follow-up is the wake nudge itself.

Every surface here is gated on ``chat.enabled`` read per call: a disabled
feature prints nothing and reminds of nothing (R29).
"""
from __future__ import annotations

import os
import random
import re
from collections.abc import Mapping
from dataclasses import replace

from thatch_core import clock, later
from thatch_core.constants import RENUDGE_MINUTES
from thatch_core.continuation import adopt_continuation
from thatch_core.db import StoreError
from thatch_core.ids import MCP_PREFIX, legacy_mcp_session_id, mcp_session_id  # mcp_session_id: public here too
from thatch_core.names import render_participant
from thatch_core.policy import DEFAULT as DEFAULT_POLICY
from thatch_core.policy import Policy
from thatch_core.prompts import (  # noqa: F401 - LEAVE_LINE: public here too
    LEAVE_LINE,
    chat_notification_nudge,
    hook_line,
    leave_line,
    mail_pointer,
    unknown_claim,
)
from thatch_core.store_guard import is_id, text_problem
from thatch_core.tools import ChatTools, ToolReply

UNKNOWN_CLAIM = ('No registered session named "{name}". Call chat_register without "as" '
                 "for a fresh identity.")

ERR_AS_TEXT = 'The "as" name must be valid text ({problem}).'

# The hook line, for tests to parse back.
HOOK_LINE_RE = re.compile(r"^\[thatch\] chat: you are (?P<name>\S+) "
                          r"\((?:no unread mail|(?P<unread>\d+) unread message\(s\)) for you\)")

# Larger than any stored ISO stamp: used as the "delivered before" cutoff when
# every unread row counts, whatever its delivery stamp.
_ANY_DELIVERY = "9999-12-31T23:59:59Z"


def chat_settings(config) -> tuple[bool, bool]:
    """(enabled, auto_register) from whatever the caller holds: a
    ``config.ConfigSource`` / ``StaticConfig`` (anything with ``load()``,
    re-read per call so a toggle applies at once), a ``config.ChatConfig``,
    a dict in the config-file shape, or None (the defaults)."""
    if config is None:
        return True, True
    if hasattr(config, "load"):
        config = config.load()
    if isinstance(config, dict):
        chat = config.get("chat", config)
        chat = chat if isinstance(chat, dict) else {}
        return bool(chat.get("enabled", True)), bool(chat.get("autoRegister", True))
    return bool(getattr(config, "enabled", True)), bool(getattr(config, "auto_register", True))


def _enabled(config) -> bool:
    return chat_settings(config)[0]


def _policy(config):
    """The design options of whatever config the caller holds (seed 000's when it has none)."""
    if hasattr(config, "load"):
        config = config.load()
    policy = getattr(config, "policy", None)
    return policy if isinstance(policy, Policy) else DEFAULT_POLICY


def _host_id_ok(host_session_id) -> bool:
    # A hook payload without a usable session id (none, blank, or not valid
    # text: a lone surrogate has no UTF-8 form to hash) names no conversation:
    # the hook stays silent rather than break the host's prompt.
    return is_id(host_session_id)


def chat_hook_line(store, config, host_session_id: str, *, project=None, directory=None,
                   transcript_path=None, ppid: int | None = None) -> str | None:
    """The SessionStart / prompt hook (R29-R33). Returns the line to print, or
    None when chat is disabled or the store cannot answer (a hook must never
    break the host's prompt)."""
    if not _enabled(config) or not _host_id_ok(host_session_id):
        return None
    mcp_id = mcp_session_id(host_session_id)
    try:
        if store.get(mcp_id) is None and not store.has_tombstone(mcp_id):
            # An id an earlier thatch_core derived from the raw, mixed-case host
            # id moves to the real derivation with its name, mail and leave
            # (D-real-host-1); a no-op for a lower-case host id.
            store.continue_session(legacy_mcp_session_id(host_session_id), mcp_id)
            if transcript_path and store.get(mcp_id) is None and not store.has_tombstone(mcp_id):
                adopt_continuation(store, host_session_id, transcript_path)
        # The anchor is recorded even after a leave: the MCP server then
        # resolves this conversation's own id, so an explicit chat_register
        # rejoins it instead of minting an unrelated per-conversation id.
        if ppid is not None:
            store.record_host_pid(ppid, mcp_id)
        if store.has_tombstone(mcp_id):
            return leave_line(mcp_id)
        # autoRegister is deliberately not consulted (R30): the hook is the
        # host's identity anchor, not auto-joining.
        claims = _policy(config)
        result = store.register(mcp_id, kind="mcp", project=project, directory=directory, auto=True,
                                **({"policy": claims} if claims.name_claims else {}))
        if not result.ok:
            return leave_line(mcp_id) if result.tombstoned else None
        others = [(n, k) for n, k in store.pending_by_project(project) if n != result.name] if project else []
        return hook_line(result.name, store.unread_count(mcp_id), others)
    except StoreError:
        return None


def resolve_chat_identity(store, *, host_context: str | None = None, ppid: int | None = None,
                          env_session_id: str | None = None, claimed_as: str | None = None) -> str | None:
    """The caller's chat session id, most trustworthy source first (R32):
    opencode host context > parent-pid anchor (fresh within 600 s, enforced
    by the store) > ``CLAUDE_CODE_SESSION_ID`` > the claimed ``as`` name/id."""
    if host_context:
        return host_context
    if ppid is not None:
        anchored = store.resolve_host_pid(ppid)
        if anchored:
            return anchored
    if is_id(env_session_id):
        derived = mcp_session_id(env_session_id)
        # A tombstoned id still is this conversation (it left): resolving it
        # lets chat_register rejoin the right identity.
        if store.get(derived) is not None or store.has_tombstone(derived):
            return derived
    if isinstance(claimed_as, str) and claimed_as.strip():
        claim = claimed_as.strip()
        row = store.find(claim)
        if row is not None:
            return row.session_id
        # A left conversation has no row (and so no name) but keeps its id:
        # the leave line hands that id out, so chat_register can rejoin it.
        if store.has_tombstone(claim):
            return claim
    return None


def mcp_project_dir(env=None, *, thatch_first: bool = False) -> str:
    """The MCP server's project directory: the host's project variables, else
    the working directory. Under the later design (``mcp_project_env``)
    ``THATCH_PROJECT_DIR``, which a project-local setup pins, comes first."""
    env = os.environ if env is None else env
    for key in later.PROJECT_ENV_LATER if thatch_first else later.PROJECT_ENV_SEED:
        if env.get(key):
            return env[key]
    return os.getcwd()


# The tools that act as the caller: an `as` that names nobody is answered with who is missing.
_NEEDS_IDENTITY = ("thatch_chat_send", "thatch_chat_read", "thatch_chat_broadcast", "thatch_chat_unregister")


def _normalize_tool(tool: str) -> str:
    return tool if tool.startswith("thatch_") else "thatch_" + tool


class McpChatServer:
    """The chat tools as the thatch MCP server exposes them on Claude Code and
    Cursor. Identity: see ``resolve_chat_identity``. On Claude Code the server
    is a child of the host process, so its own parent pid finds the anchor the
    hooks recorded, and the host sets ``CLAUDE_CODE_SESSION_ID`` in its
    environment; Cursor's hooks and MCP server share one workspace process
    (ambiguous ppid, no per-session env), so only the claimed ``as`` is used
    there - the documented trust posture."""

    def __init__(self, store, config_source, *, host: str = "claude-code", ppid: int | None = None,
                 env=None, rng: random.Random | None = None, project: str | None = None,
                 directory: str | None = None):
        if host not in ("claude-code", "cursor"):
            raise ValueError(f'unknown MCP host {host!r}: expected "claude-code" or "cursor"')
        self.store = store
        self.host = host
        self._config_source = config_source
        self._rng = rng or random.Random()
        env = os.environ if env is None else env
        if host == "claude-code":
            self._ppid = os.getppid() if ppid is None else ppid
            self._env_session_id = env.get("CLAUDE_CODE_SESSION_ID") or None
        else:
            self._ppid = None
            self._env_session_id = None
        self.tools = ChatTools(store, config_source, host_kind="mcp", mint_session_id=self.mint_session_id,
                               project=project, directory=directory)

    def identity(self, claimed_as: str | None = None) -> str | None:
        """The session id a call with this claim acts as (None: unresolved)."""
        return resolve_chat_identity(self.store, ppid=self._ppid, env_session_id=self._env_session_id,
                                     claimed_as=claimed_as)

    def mint_session_id(self) -> str:
        """A fresh per-conversation id for a hookless conversation (R6). Not
        remembered by the server: on Cursor one server serves many
        conversations, so the model carries the returned name as ``as``."""
        return MCP_PREFIX + "".join(self._rng.choice("0123456789abcdef") for _ in range(12))

    def call(self, tool: str, args: dict | None = None):
        """Run one thatch_chat_* tool (the ``thatch_`` prefix is optional).

        MCP hosts have no transcript echo bubbles (seed 000's host table):
        the reply never carries one, so a caller cannot render one by mistake.
        """
        reply = self._call(tool, args)
        return replace(reply, echo=None) if reply.echo is not None else reply

    def _call(self, tool, args):
        if not _enabled(self._config_source):
            return self.tools.call(tool, {}, identity=None)  # the [disabled] reply
        if not isinstance(tool, str):
            return ToolReply(text=f"Unknown chat tool {tool!r}.", ok=False, echo=None)
        tool = _normalize_tool(tool)
        if args is not None and not isinstance(args, Mapping):
            return ToolReply(text="Tool arguments must be an object.", ok=False, echo=None)
        args = dict(args or {})
        claimed = args.pop("as", None)
        if isinstance(claimed, str) and text_problem(claimed):
            return ToolReply(text=ERR_AS_TEXT.format(problem=text_problem(claimed)), ok=False, echo=None)
        claimed = claimed.strip() if isinstance(claimed, str) and claimed.strip() else None
        identity = self.identity(claimed)
        if tool == "thatch_chat_register" and identity is None and claimed is not None:
            # Refused rather than silently minting: a model that believes it
            # is NAME must learn NAME is gone (pruned or left), not go on
            # acting as a stranger under a name it thinks it has.
            return ToolReply(text=UNKNOWN_CLAIM.format(name=claimed), ok=False, echo=None)
        if tool in _NEEDS_IDENTITY and identity is None and claimed is not None:
            return ToolReply(text=unknown_claim(claimed), ok=False, echo=None)
        refused = self._foreign_claim(claimed, identity)
        if refused is not None and tool == "thatch_chat_register":
            # The real reclaim path never confirms another project's row: it
            # registers a fresh identity for this project and says why (D-later-6).
            fresh = self.tools.call(tool, args, identity=None)
            if not fresh.ok:
                return fresh
            row = self.store.get(identity)
            prefix = later.claim_replaced(claimed, row.project if row is not None else None)
            return ToolReply(text=f"{prefix}\n{fresh.text}", ok=True, echo=fresh.echo)
        if refused is not None:
            return ToolReply(text=refused, ok=False, echo=None)
        return self.tools.call(tool, args, identity=identity)

    def _foreign_claim(self, claimed: str | None, identity: str | None) -> str | None:
        """Under the later design's project-bound claims: the refusal of an
        identity that came from the claimed `as` alone and whose row is not of
        this server's project (D-later-6). A left id (no row) is not refused:
        the leave line hands it out so the conversation can rejoin."""
        if claimed is None or identity is None or not self.tools._policy().project_bound_as:
            return None
        if self.identity(None) is not None:
            return None  # anchored by the host (parent pid or env): the claim decided nothing
        row = self.store.get(identity)
        if row is None:
            return None
        ours = self.tools.project
        if row.project is not None and ours is not None and row.project == ours:
            return None
        return later.claim_refused(claimed, row.project, ours)


# ---------------------------------------------------------------------------
# Turn-end mail checks (R36)
# ---------------------------------------------------------------------------

def _mail_batch(store, mcp_id: str, cutoff: str):
    rows = store.pending_notifications([mcp_id], cutoff)
    senders = list(dict.fromkeys(render_participant(r.from_name, r.from_session) for r in rows))
    return rows, senders


def claude_stop_hook(store, config, host_session_id: str, *, stop_hook_active: bool = False) -> dict | None:
    """Claude Code's Stop hook: block the stop with a pointer-only reminder when
    mail is due. Mail is due like a wake (R18): unread and never reminded, or
    reminded more than the re-nudge window ago. The reminder names every
    unread sender and the total unread count, and stamps delivered_at on all
    of it: with the host's ``stop_hook_active`` that bounds repeats (D-mcp-4)."""
    if stop_hook_active or not _enabled(config) or not _host_id_ok(host_session_id):
        return None
    mcp_id = mcp_session_id(host_session_id)
    try:
        row = store.get(mcp_id)
        if row is None:
            return None
        if not store.pending_notifications([mcp_id], clock.iso_minutes_ago(RENUDGE_MINUTES)):
            return None
        rows, senders = _mail_batch(store, mcp_id, _ANY_DELIVERY)
        store.mark_delivered([r.id for r in rows])
    except StoreError:
        return None
    return {"decision": "block", "reason": mail_pointer(row.name, senders, len(rows))}


def cursor_stop_hook(store, config, session_id: str, *, status: str, loop_count: int | None = None) -> dict:
    """Cursor's turn-end check (``thatch chat-notify``): after a completed turn,
    auto-submit the wake nudge as a follow-up when mail is due like a wake
    (R18: unread and never pointed to, or pointed to more than the re-nudge
    window ago), stamping delivered_at on all of it; ``{}`` otherwise, and
    always after an aborted or errored turn. The delivered stamp is what keeps
    a follow-up from repeating; the chain's cap is Cursor's own ``loop_limit``
    (``CURSOR_FOLLOWUP_CAP`` in the hooks config), so ``loop_count`` is not
    consulted (D-real-host-4)."""
    if not _enabled(config) or status != "completed" or not _host_id_ok(session_id):
        return {}
    mcp_id = mcp_session_id(session_id)
    try:
        if store.get(mcp_id) is None:
            return {}
        if not store.pending_notifications([mcp_id], clock.iso_minutes_ago(RENUDGE_MINUTES)):
            return {}
        rows, senders = _mail_batch(store, mcp_id, _ANY_DELIVERY)
        store.mark_delivered([r.id for r in rows])
    except StoreError:
        return {}
    return {"followup_message": chat_notification_nudge(senders, len(rows))}
