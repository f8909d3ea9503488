"""Scripted models of a session's model turns, and the turn queue they run in.

An agent is what a session's model does when a turn starts. It never touches
thatch_core directly: it acts through a `ToolPath` the harness gives it (the
opencode runtime's tool call, or an MCP server call with `as`), so every act
is recorded by the harness as a tool-call / tool-result pair like any other.

Kinds (`simulator.scenario.model.Agent.kind`):
- `reader`: on a mail turn (a wake prompt, a Stop-hook reminder, a Cursor
  follow-up) it calls chat_read, then pages through every message it saw
  only part of, as a model does: a line the later design clipped (its
  `[clipped: showing N ...]` marker) or the line a clipping host cut the
  output in; `chat_read message=ID offset=K`, K being what has reached it so
  far, until the whole body has;
- `ping-pong`: reads, then sends one reply to each distinct sender in what it
  read, up to `reply_limit` replies over its life (None: no limit; the rate
  cap is what bounds the exchange, P10);
- `silent`: does nothing on mail turns and never reads, so its mail stays
  unread and it is re-nudged.
On a user turn no agent does anything chat-related: scripted steps do that.

`TurnState` is the per-session turn bookkeeping every harness kind shares: a
session is in at most one turn, busy windows hold it busy, and turns
triggered while it is busy are queued until it is idle again.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol

from simulator.replies import ReadOutcome, decode_page, decode_reply

# Turn causes that mean "you have mail": the agent acts on these only.
MAIL_CAUSES = frozenset({"wake", "reminder", "followup"})

class ToolReplyLike(Protocol):
    ok: bool
    text: str


# call(tool, args) -> reply; the harness records the call and its result.
ToolPath = Callable[[str, dict[str, Any]], ToolReplyLike]


def senders_in_read(text: str) -> list[str]:
    """Distinct sender names of a chat_read output, first-seen order; departed
    senders are left out (they cannot be answered)."""
    return list(dict.fromkeys(m.sender for m in _read(text).messages if not m.departed))


def _read(text: str) -> ReadOutcome:
    return decode_reply("read", True, text or "")


class Agent:
    """The base agent: acts on nothing."""

    kind = "silent"

    def __init__(self, spec: Any = None, *, body: Optional[Callable[[], str]] = None):
        self.spec = spec
        self.turn_ms: int = int(getattr(spec, "turn", 20_000) or 0)
        self._body = body or (lambda: "ack")
        self.replies = 0

    def on_turn(self, cause: str, tools: ToolPath) -> None:
        """Called when a turn starts, before its end is scheduled."""


class SilentAgent(Agent):
    kind = "silent"


# A model gives up on a message after this many pages (a page that shows no new character ends it too).
MAX_PAGES_PER_MESSAGE = 50


def unfinished_lines(text: str) -> list[tuple[int, int]]:
    """(message id, characters of its body seen) of each drained message whose body did not all reach
    the reader: a line with the later design's clip marker, the last line when the output ends before the
    inbox's closing fence (the host cut it), and the parts a seen `(message 1 of N)` announces that no
    seen line showed (a split body's parts are stored together, so their ids follow the first's). Only
    lines that carry their id (paged reads) can be paged."""
    lines = [m for m in _read(text).messages if m.id is not None]
    seen_ids = {m.id for m in lines}
    out = []
    for n, m in enumerate(lines):
        if m.parts:
            out += [(m.id + k, 0) for k in range(1, m.parts) if m.id + k not in seen_ids]
        if m.clip:
            out.append((m.id, m.clip[0]))
        elif n + 1 == len(lines) and not m.whole_line:
            out.append((m.id, len(m.body)))
    return out


def page_through(tools: ToolPath, message_id: int, offset: int) -> None:
    """Read one message page by page from `offset` until its end has reached the reader."""
    for _ in range(MAX_PAGES_PER_MESSAGE):
        reply = tools("thatch_chat_read", {"message": message_id, "offset": offset})
        page = decode_page(getattr(reply, "text", "") or "")
        if not getattr(reply, "ok", False) or page is None:
            return
        seen = page.end if page.fenced else page.start + len(page.chars)  # a cut page: what of it was visible
        if seen <= offset or seen >= page.total:
            return
        offset = seen


class ReaderAgent(Agent):
    kind = "reader"

    def on_turn(self, cause: str, tools: ToolPath) -> None:
        if cause not in MAIL_CAUSES:
            return
        reply = tools("thatch_chat_read", {})
        for message_id, seen in unfinished_lines(getattr(reply, "text", "") if getattr(reply, "ok", False) else ""):
            page_through(tools, message_id, seen)


class PingPongAgent(Agent):
    kind = "ping-pong"

    def __init__(self, spec: Any = None, *, body: Optional[Callable[[], str]] = None):
        super().__init__(spec, body=body)
        self.reply_limit: Optional[int] = getattr(spec, "reply_limit", None)

    def on_turn(self, cause: str, tools: ToolPath) -> None:
        if cause not in MAIL_CAUSES:
            return
        reply = tools("thatch_chat_read", {})
        if not getattr(reply, "ok", False):
            return
        for sender in senders_in_read(reply.text):
            if self.reply_limit is not None and self.replies >= self.reply_limit:
                return
            self.replies += 1
            tools("thatch_chat_send", {"to": sender, "body": self._body()})


AGENTS: dict[str, type[Agent]] = {"reader": ReaderAgent, "ping-pong": PingPongAgent, "silent": SilentAgent}


def make_agent(spec: Any, *, body: Optional[Callable[[], str]] = None) -> Agent:
    """The agent for a `simulator.scenario.model.Agent` (None: a default reader)."""
    kind = getattr(spec, "kind", "reader") if spec is not None else "reader"
    try:
        cls = AGENTS[kind]
    except KeyError:
        raise ValueError(f"unknown agent kind {kind!r}: expected one of {', '.join(AGENTS)}") from None
    return cls(spec, body=body)


@dataclass
class TurnState:
    """Per-session turn bookkeeping shared by every harness kind.

    `in_turn`: a model turn runs; `busy_window` / `compacting`: the agent's
    scripted windows; `queue`: causes of turns that arrived while busy.
    """

    in_turn: bool = False
    cause: Optional[str] = None
    busy_window: bool = False
    compacting: bool = False
    turns: int = 0                     # turns ended so far (the title lands after the first)
    queue: deque = field(default_factory=deque)

    @property
    def busy(self) -> bool:
        return self.in_turn or self.busy_window

    @property
    def status(self) -> str:
        return "busy" if self.busy else "idle"

    def request(self, cause: str) -> bool:
        """A turn is wanted. True: start it now; False: queued until idle."""
        if self.busy or self.compacting:
            self.queue.append(cause)
            return False
        return True

    def begin(self, cause: str) -> None:
        self.in_turn = True
        self.cause = cause

    def end(self) -> None:
        self.in_turn = False
        self.cause = None
        self.turns += 1

    def next_queued(self) -> Optional[str]:
        """The next queued cause when the session can take a turn now."""
        if self.busy or self.compacting or not self.queue:
            return None
        return self.queue.popleft()
