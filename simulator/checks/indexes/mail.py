"""Tool calls paired with their results, and what they did to the directory and the inboxes:
new mail per recipient, leaves (a `delete` / `exit` step stands in as a synthetic `Leave`),
explicit registrations, and rows that vanished with no event (the hourly prune)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Iterator, Optional

from simulator.checks.indexes.disturbances import Disturbances
from simulator.checks.indexes.names import Names
from simulator.events import (
    FORK, REGISTERED, SAMPLE, TOOL_CALL, TOOL_RESULT, Event, Leave, Sample, SampleRow, ToolCall,
    ToolResult,
)
from simulator.history import History
from simulator.replies import SENT, Outcome, decode_reply

LEAVE_ACTIONS = ("unregister", "delete", "exit")


def short_tool(tool: Any) -> str:
    """`thatch_chat_send` / `chat_send` / `send` -> `send`."""
    tool = str(tool or "")
    for prefix in ("thatch_chat_", "chat_"):
        if tool.startswith(prefix):
            return tool[len(prefix):]
    return tool


def brief(e: Any) -> dict[str, Any]:
    """A witness copy of an event (long texts clipped so a report stays short)."""
    out = e.as_dict() if isinstance(e, Event) else dict(e)
    data = dict(out.get("data") or {})
    for key in ("text", "line"):
        if isinstance(data.get(key), str) and len(data[key]) > 300:
            data[key] = data[key][:297] + "..."
    out["data"] = data
    return out


@dataclass
class Call:
    """A tool call paired with its result (result None: it never returned)."""

    proc: Optional[str]
    session: Optional[str]
    tool: str
    args: dict[str, Any]
    call: Optional[ToolCall]
    result: Optional[ToolResult]

    @property
    def ok(self) -> bool:
        return bool(self.result is not None and self.result.ok)

    @property
    def text(self) -> str:
        return str(self.result.text or "") if self.result is not None else ""

    @cached_property
    def outcome(self) -> Outcome:
        """The reply decoded once (simulator.replies): ok or which refusal, and what it says."""
        clipped_from = self.result.clipped_from if self.result is not None else None
        return decode_reply(self.tool, self.ok, self.text, clipped_from=clipped_from)

    @property
    def event(self) -> Event:
        """The result, or the call when it never returned."""
        return self.result if self.result is not None else self.call  # type: ignore[return-value]

    @property
    def t(self) -> int:
        return self.event.t

    @property
    def i(self) -> float:
        return self.event.i

    @property
    def step(self) -> Optional[int]:
        """The scripted step whose result this is (None: a turn's own call, or no result)."""
        return self.result.step if self.result is not None else None

    # The arguments the model passed, as the chat tools name them: one reader each.

    @property
    def to(self) -> str:
        """The recipient a send named ("" for none)."""
        return str(self.args.get("to") or "")

    @property
    def claim(self) -> Optional[str]:
        """The session a call claimed to be (`as`), None for no claim."""
        claim = self.args.get("as")
        return str(claim) if claim else None

    @property
    def body_arg(self) -> Any:
        """The body a send or broadcast passed, as written (the tools take `body`, or `message`)."""
        return self.args.get("body", self.args.get("message"))

    @property
    def body(self) -> str:
        return str(self.body_arg or "").strip()

    @property
    def page(self) -> Optional[tuple[Any, Any]]:
        """A paged read's (message id, offset) as passed; None for a read of the inbox."""
        if self.args.get("message") is None:
            return None
        return self.args["message"], self.args.get("offset")

    def witness(self) -> list[dict[str, Any]]:
        return [brief(e) for e in (self.call, self.result) if e is not None]


class Mail:
    def __init__(self, history: History, steps: list[Any], names: Names, disturbances: Disturbances,
                 t_end: int, limit: Optional[float] = None) -> None:
        self.history = history
        self.steps = steps
        self.names = names
        self.calls = self._pair_calls(history)
        self._leaves = self._find_leaves(history, disturbances, t_end, limit)

    @staticmethod
    def _pair_calls(history: History) -> list[Call]:
        calls: list[Call] = []
        pending: dict[tuple, list[Call]] = {}
        for e in history.of(TOOL_CALL, TOOL_RESULT):
            key = (e.proc, e.session, short_tool(e.tool))
            if isinstance(e, ToolCall):
                c = Call(e.proc, e.session, key[2], dict(e.args), e, None)
                pending.setdefault(key, []).append(c)
                calls.append(c)
            elif pending.get(key):
                pending[key].pop(0).result = e
            else:
                calls.append(Call(e.proc, e.session, key[2], {}, None, e))
        calls.sort(key=lambda c: c.i)
        return calls

    def step_action(self, e: Any) -> Optional[str]:
        """The action of the scripted step an event names (None: no step)."""
        idx = getattr(e, "step", None)
        if isinstance(idx, int) and 0 <= idx < len(self.steps):
            return self.steps[idx].action
        return None

    def calls_of(self, tool: str, session: Optional[str] = None, ok: Optional[bool] = None) -> list[Call]:
        return [c for c in self.calls if c.tool == tool and (session is None or c.session == session)
                and (ok is None or (c.result is not None and c.ok == ok))]

    def new_mail(self, label: str, i0: float, i1: float) -> int:
        """Messages accepted for `label` between history positions i0 and i1 (sends and broadcasts)."""
        return len(self.new_mail_calls(label, i0, i1))

    def new_mail_calls(self, label: str, i0: float, i1: float) -> list[Call]:
        """The ok sends and broadcasts that gave `label` a message between positions i0 and i1."""
        out = []
        for c in self.calls:
            if not (i0 < c.i < i1) or not c.ok or c.tool not in ("send", "broadcast"):
                continue
            if c.tool == "send":
                to = c.outcome.to if c.outcome.kind == SENT else c.to
                if (self.names.label_for_name(to) or self.names.label_of.get(to)) == label:
                    out.append(c)
            elif any(self.names.label_for_name(x) == label for x in c.outcome.recipients):
                out.append(c)
        return out

    def _find_leaves(self, history: History, disturbances: Disturbances, t_end: int,
                     limit: Optional[float]) -> list[Any]:
        """Ok leaves: an unregister result, or a delete / exit step (the harness records no
        result for those, so a synthetic `Leave` stands at the end of the step's time)."""
        out: list[Any] = [e for e in history.of(TOOL_RESULT) if e.ok and
                          (short_tool(e.tool) in LEAVE_ACTIONS or self.step_action(e) in LEAVE_ACTIONS)]
        for idx, step in enumerate(self.steps):
            at = disturbances.landed(idx, step.at)
            never_ran = at != step.at and at > t_end  # deferred by a sleep past the run's end
            if step.action in ("delete", "exit") and idx not in disturbances.dropped and not never_ran:
                who = step.args.session
                # The step ran somewhere inside its time's dispatches: stand before them all
                # (P7 then leaves same-time observations unjudged).
                pos = next((e.i for e in history if e.t >= at), len(history)) - 0.5
                if (limit is None or pos <= limit) and self.names.registered_before(who, at):
                    out.append(Leave(i=pos, t=at, dispatch=None, proc=None, session=who, step=idx,
                                     action=step.action))
        return sorted(out, key=lambda e: e.i)

    def leaves(self, label: Optional[str] = None) -> list[Any]:
        return [e for e in self._leaves if label is None or e.session == label]

    def explicit_registers(self, label: Optional[str] = None) -> list[Any]:
        out: list[Any] = [c.result for c in self.calls_of("register", label, ok=True)]
        out += [e for e in self.history.of(REGISTERED, session=label) if e.how == "explicit"]
        return sorted(out, key=lambda e: e.i)

    def vanishings(self) -> Iterator[tuple[str, Sample, Sample, SampleRow]]:
        """`(label, prev, sample, row)` for each session that went from registered in
        sample `prev` to not registered in `sample` with no leave or fork in between:
        the only way out of the directory that leaves no event is prune (R26)."""
        last: dict[str, Sample] = {}
        for s in self.history.of(SAMPLE):
            for label, row in s.sessions.items():
                if row.registered:
                    last[label] = s
                elif label in last:
                    prev = last.pop(label)
                    between = self.leaves(label) + self.history.of(FORK, session=label)
                    if not any(prev.i < x.i < s.i for x in between):
                        yield label, prev, s, row
