"""The seven chat tools as one surface shared by every host.

`ChatTools.call(tool, args, identity=...)` turns a tool call into the text the
model reads (`ToolReply.text`), a success flag, and the transcript echo the
opencode host shows as a `[chat]` bubble (`ToolReply.echo`, R27). Identity is
resolved by the caller (the opencode runtime passes its host session id, the
MCP server its anchored id) and is never taken from `args` here.

Config is re-read on every call (R29), so `chat.enabled: false` makes the
next call refuse without a restart. The replies are the real thatch's
(`thatch_core.prompts`); a store refusal comes back as the store's exact text,
after `Not sent: ` for a send or broadcast and `Registration failed: ` for a
register. Only successful register/send/read/broadcast calls echo.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from thatch_core import clock, later, staleness
from thatch_core.db import StoreBusy, StoreError, StoreFault
from thatch_core.prompts import (
    DISABLED_REPLY, EMPTY_ROSTER, INBOX_EMPTY, LIST_NOT_REGISTERED, NOT_REGISTERED_STATUS, NOT_REGISTERED_UNREGISTER,
    ORIGIN_CLAIMED, ORIGIN_DRAWN, ORIGIN_KEPT, ORIGIN_REJOINED, REGISTER_FAILED, SEND_NOTE_ACTIVE,
    SEND_NOTE_BETWEEN_TURNS, SEND_NOTE_STALE, STALE_EXPLAINER, UNREGISTERED_REPLY, broadcast_reply, chat_echo_text,
    chat_inbox_frame, chat_page_frame, checkout_mark, inbox_line, not_sent, registered_reply, roster_header,
    roster_section, sent_reply, short_stamp, short_tool, status_reply,
)
from thatch_core.policy import DEFAULT as DEFAULT_POLICY
from thatch_core.policy import Policy
from thatch_core.store import ERR_BODY_TYPE
from thatch_core.store import ERR_NOT_REGISTERED as NOT_REGISTERED  # the store's exact text

ERR_TO_TYPE = 'The recipient ("to") must be text: a name from chat_list or a session id.'


@dataclass(frozen=True)
class ToolReply:
    """What a tool call returns: the model-facing text, success, and the echo."""

    text: str
    ok: bool
    echo: str | None = None


def _refuse(text: str) -> ToolReply:
    return ToolReply(text=text, ok=False, echo=None)


def store_failure_text(err: StoreError) -> str:
    """The reply to a call the store could not serve (D-store-19). Every store
    method is atomic, so nothing changed; whether a retry can help depends on
    the failure: a lock passes, a damaged, read-only or full database does not."""
    if isinstance(err, StoreBusy):
        return f"Chat is temporarily unavailable ({err}); nothing was changed - try again."
    if isinstance(err, StoreFault):
        return (f"Chat is unavailable: {err.reason} ({err}); nothing was changed, "
                f"and trying again will not help until {err.remedy}.")
    return f"Chat could not complete the call ({err}); nothing was changed."


def _text_arg(args: Mapping[str, Any], key: str, fallback: str | None = None) -> str | None:
    """A text argument: "" when absent or null, None when it is not a string."""
    value = args.get(key, args.get(fallback) if fallback else None)
    if value is None:
        return ""
    return value if isinstance(value, str) else None


def loc_token(worktree: str | None) -> str:
    """The roster's checkout-kind token (R4)."""
    return f"loc: {checkout_mark(worktree)}"


class ChatTools:
    """Dispatches thatch_chat_* calls against a ChatStore.

    `host_kind` is what a new row is registered as. On an "mcp" host a
    register call with no resolved identity mints a fresh per-conversation
    session id through `mint_session_id()` (R6). `project`, `directory` and
    `title_for(session_id)` describe the caller for a row this surface
    creates (an opencode runtime passes its own).
    """

    def __init__(
        self,
        store,
        config_source,
        *,
        host_kind: str = "opencode",
        mint_session_id: Callable[[], str] | None = None,
        project: str | None = None,
        directory: str | None = None,
        title_for: Callable[[str], str | None] | None = None,
    ):
        self.store = store
        self.config_source = config_source
        self.host_kind = host_kind
        self.mint_session_id = mint_session_id
        self.project = project
        self.directory = directory
        self.title_for = title_for
        self._handlers: dict[str, Callable[[Mapping[str, Any], str | None], ToolReply]] = {
            "register": self._register,
            "list": self._list,
            "send": self._send,
            "read": self._read,
            "unregister": self._unregister,
            "broadcast": self._broadcast,
            "status": self._status,
        }

    def call(self, tool: str, args: Mapping[str, Any] | None, *, identity: str | None) -> ToolReply:
        """Runs one tool. Unknown tool names are a refusal, not an exception."""
        if not self.config_source.load().enabled:
            return _refuse(DISABLED_REPLY)
        if not isinstance(tool, str):
            return _refuse(f"Unknown chat tool {tool!r}.")
        if args is not None and not isinstance(args, Mapping):
            return _refuse("Tool arguments must be an object.")
        if identity is not None and not isinstance(identity, str):
            identity = None  # no usable identity: the tools answer as for a stranger
        handler = self._handlers.get(short_tool(tool))
        if handler is None:
            return _refuse(f"Unknown chat tool {tool!r}.")
        try:
            return handler(args or {}, identity)
        except StoreError as err:
            return _refuse(store_failure_text(err))

    # -- register / unregister -----------------------------------------------

    def _register(self, args: Mapping[str, Any], identity: str | None) -> ToolReply:
        if identity is None:
            if self.host_kind != "mcp" or self.mint_session_id is None:
                return _refuse(REGISTER_FAILED + "this host gave no session to register.")
            # A hookless MCP conversation: a fresh identity for this conversation only.
            identity = self.mint_session_id()
        title = None
        if self.title_for is not None:
            try:
                title = self.title_for(identity)
            except Exception:  # noqa: BLE001 - a title is advisory; register without it
                title = None
        policy = self._policy()
        res = self.store.register(
            identity,
            kind=self.host_kind,
            project=self.project,
            directory=self.directory,
            title=title,
            auto=True,  # assigned-name rows are auto rows on every host; only legacy rows are not
            explicit=True,
            **({"policy": policy} if policy.name_claims else {}),
        )
        if not res.ok:
            return _refuse(REGISTER_FAILED + (res.error or "the store refused the row."))
        origin = (ORIGIN_KEPT if res.reclaimed else ORIGIN_REJOINED if res.rejoined
                  else ORIGIN_CLAIMED if getattr(res, "claimed", False) else ORIGIN_DRAWN)
        row = self.store.get(identity)
        text = registered_reply(res.name, identity, self.project, row.topic if row else None,
                                origin=origin, mcp=self.host_kind == "mcp")
        return ToolReply(text=text, ok=True, echo=chat_echo_text("register", name=res.name))

    def _unregister(self, args: Mapping[str, Any], identity: str | None) -> ToolReply:
        if identity is None:
            return _refuse(NOT_REGISTERED)
        if not self.store.unregister(identity):
            return ToolReply(text=NOT_REGISTERED_UNREGISTER, ok=True, echo=None)
        return ToolReply(text=UNREGISTERED_REPLY, ok=True, echo=None)

    # -- roster ----------------------------------------------------------------

    def _list(self, args: Mapping[str, Any], identity: str | None) -> ToolReply:
        now = clock.now_ms()
        # split_roster sorts with sort_roster and splits by liveness: every mcp row is Active (R14, R16, R35).
        active, stale, _ = staleness.split_roster(self.store.list_sessions(), now)
        me = self.store.get(identity) if identity else None
        my_unread = self.store.unread_count(identity) if me else 0

        def line(r) -> str:
            parts = [r.name]
            if me is not None and r.session_id == me.session_id:
                parts[0] += f" (you, {my_unread} unread)"
            parts.append(f"seen {staleness.human_age(r.last_seen, now)}")
            parts.append(f"project: {r.project}" if r.project else "project: -")
            parts.append(loc_token(r.worktree))
            if r.host_kind != "opencode":
                parts.append(f"host: {r.host_kind}")
            if r.topic:
                parts.append(f"topic: {r.topic}")
            return "- " + " | ".join(parts)

        if not active and not stale:
            return ToolReply(text=EMPTY_ROSTER, ok=True, echo=None)
        out = [roster_header(len(active) + len(stale)), roster_section("Active", len(active))]
        out += [line(r) for r in active] or ["(none)"]
        out += ["", roster_section("Stale", len(stale)), STALE_EXPLAINER]
        out += [line(r) for r in stale] or ["(none)"]
        if me is None:
            out += ["", LIST_NOT_REGISTERED]
        return ToolReply(text="\n".join(out), ok=True, echo=None)

    # -- messages ----------------------------------------------------------------

    def _send(self, args: Mapping[str, Any], identity: str | None) -> ToolReply:
        if identity is None:
            return _refuse(not_sent(NOT_REGISTERED))
        body, to = _text_arg(args, "body", "message"), _text_arg(args, "to")
        if body is None:  # a number, bytes, a mapping: refused, never turned into text (D-store-20)
            return _refuse(not_sent(ERR_BODY_TYPE))
        if to is None:
            return _refuse(not_sent(ERR_TO_TYPE))
        policy = self._policy()
        # Under thatch's design the store gets no policy argument: a stand-in store with the plain signature works.
        res = self.store.send(identity, to, body, **({} if policy.is_default else {"policy": policy}))
        if not res.ok:
            return _refuse(not_sent(res.error or "the store refused the message."))
        rcpt = res.recipient
        name = rcpt.name if rcpt is not None else to
        if getattr(res, "reply", None):  # a policy decided: held for the recipient's user
            return ToolReply(text=res.reply, ok=True, echo=chat_echo_text("send", to=name, body=body.strip()))
        if rcpt is not None and rcpt.host_kind == "mcp" and res.recipient_stale:
            note = SEND_NOTE_BETWEEN_TURNS  # R35: an mcp row's age only means "between turns"
        elif res.recipient_stale:
            note = SEND_NOTE_STALE
        else:
            note = SEND_NOTE_ACTIVE
        sid = rcpt.session_id if rcpt is not None else to
        suppressed = getattr(res, "suppressed", False)
        notes = [note]
        parts = getattr(res, "parts", 1)
        if parts > 1:  # the reply says it was split (D-later-3)
            notes.append(later.parts_note(parts, later.part_len(policy.split_part_len) or 0))
        if suppressed:  # a retry: the copy is there (D-later-1)
            notes.append(later.DEDUP_NOTE)
        # A suppressed retry stored nothing new, so there is nothing new to echo.
        echo = None if suppressed else chat_echo_text("send", to=name, body=body.strip())
        return ToolReply(text=sent_reply(name, sid, *notes), ok=True, echo=echo)

    def _read(self, args: Mapping[str, Any], identity: str | None) -> ToolReply:
        if identity is None or self.store.get(identity) is None:
            return _refuse(NOT_REGISTERED)
        paged = self._policy().paged_reads
        if args.get("message") is not None or args.get("offset") is not None:
            return self._page(args, identity) if paged else _refuse(later.PAGING_OFF)
        items = self.store.read(identity)
        if not items:
            # Nothing conversational happened: no bubble for an empty drain.
            return ToolReply(text=INBOX_EMPTY, ok=True, echo=None)
        marked = self._unregistered_marks(items)
        if paged:  # every line carries its id, a long body shows one page and a marker (D-later-4)
            lines = [inbox_line(marked.get(it.id, it.from_name), it.created_at, later.clipped(it.body, it.id), it.id)
                     for it in items]
            framed = chat_inbox_frame(lines, note=later.PAGING_NOTE)
        else:
            lines = [inbox_line(marked.get(it.id, it.from_name), it.created_at, it.body) for it in items]
            framed = chat_inbox_frame(lines)
        return ToolReply(text=framed, ok=True, echo=chat_echo_text("read", inbox=framed))

    def _page(self, args: Mapping[str, Any], identity: str) -> ToolReply:
        """One page of one message addressed to the caller; drains nothing, marks nothing read."""
        message_id, offset = args.get("message"), args.get("offset", 0)
        if message_id is None:
            return _refuse(later.OFFSET_WITHOUT_MESSAGE)
        offset = 0 if offset is None else offset
        if not (type(message_id) is int and message_id >= 1 and type(offset) is int and offset >= 0):
            return _refuse(later.BAD_PAGE_ARGS)
        item = self.store.message_for(identity, message_id)
        if item is None:
            return _refuse(later.NO_SUCH_MESSAGE.format(id=message_id))
        ok, text = later.page_text(item.body, item.id, offset)
        if not ok:
            return _refuse(text)
        line = later.page_line(item.id, item.from_name, short_stamp(item.created_at))
        return ToolReply(text=chat_page_frame([line, text], later.PAGE_DONE), ok=True, echo=None)

    def _policy(self) -> Policy:
        """The caller's messaging policy, re-read per call like the other switches."""
        return getattr(self.config_source.load(), "policy", DEFAULT_POLICY)

    def _unregistered_marks(self, items) -> dict[int, str]:
        """Messages approved from an unregistered sender read as `<id> (unregistered)`
        (held for approval first: only a policy that holds them can have any)."""
        if self._policy().unregistered != "hold":
            return {}
        ids = self.store.unregistered_message_ids([it.id for it in items])
        return {it.id: f"{it.from_session[:12]} (unregistered)" for it in items if it.id in ids}

    def _broadcast(self, args: Mapping[str, Any], identity: str | None) -> ToolReply:
        if identity is None:
            return _refuse(not_sent(NOT_REGISTERED))
        body = _text_arg(args, "body", "message")
        if body is None:
            return _refuse(not_sent(ERR_BODY_TYPE))
        policy = self._policy()
        res = self.store.broadcast(identity, body, **({"policy": policy} if policy.later else {}))
        if not res.ok:
            return _refuse(not_sent(res.error or "the store refused the message."))
        n = len(res.recipients)
        text = broadcast_reply(res.recipients, res.skipped, getattr(res, "held", ()), getattr(res, "refused", ()))
        text = later.broadcast_notes(text, len(getattr(res, "suppressed", ())), getattr(res, "parts", 1),
                                     later.part_len(policy.split_part_len) or 0)
        return ToolReply(text=text, ok=True, echo=chat_echo_text("broadcast", count=n, body=body.strip()))

    def _status(self, args: Mapping[str, Any], identity: str | None) -> ToolReply:
        st = self.store.status(identity) if identity is not None else None
        if st is None or not st.registered:
            return ToolReply(text=NOT_REGISTERED_STATUS, ok=True)
        return ToolReply(text=status_reply(st.name, st.pending, st.total, mcp=self.host_kind == "mcp"), ok=True)
