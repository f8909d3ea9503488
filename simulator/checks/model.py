"""The reference model of the chat (P11): a small state machine stated from docs/rules.md.

It follows a run's history event by event and predicts what each tool reply
may be: ok or which refusal (R9, R29), the resolved recipient of a send, a
broadcast's recipients and skips (R12, R35), the unread counts of a status
reply or a hook line (R31, R34), the mail a read drains and its order (R10),
reclaimed or fresh names (R2, R6), the transcript echo (R27). The rows a run
leaves are judged by `simulator.checks.model_rows`.

What the model knows of a session is often partial, so every fact is a set
of possibilities, as a linearizability checker keeps one:

- `reg[id]`: True / False / None (unknown: an auto-registration no event
  showed, a crash cut a register, a prune could have taken the row);
- an inbox is a list of messages, each `certain` (committed and unread) or
  not (a send a crash cut, a read that raced it); an inbox marked inexact may
  hold mail the model never saw (a continuation migrated mail in, a legacy
  row, a policy approved a held message);
- bodies of sends whose fate is unknown (`ghosts`) may turn up in any read.

A call that another state change interleaved with (concurrent dispatch) is
judged against the states before and after it. Where the model knows too
little it predicts every outcome; it fails only on a reply no allowed state
gives, and says which it predicted. It never imports thatch_core.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

from simulator.checks.view import Call, RunView
from simulator.design import PID_FRESH_MS, SECOND_MS, unrenamed
from simulator.events import Echo, Event, ToolResult
from simulator.scenario.kinds import HOSTS
from simulator.scenario.policies import PolicyOptions

# Tools whose ok reply leaves a transcript echo (R27): register, send, read (non-empty), broadcast.
ECHOING_TOOLS = ("register", "send", "read", "broadcast")


def modeled(options: PolicyOptions) -> bool:
    """The design the model states: thatch's seed-000 messaging, none of the later design's options."""
    return options.is_thatch and not getattr(options, "later", None)


def opening(c: Call) -> Event:
    """The event that opened call `c`: its tool-call, or its result when no call was recorded. A
    call and its result may fall in different dispatches; the model places a call where it began."""
    return c.call if c.call is not None else c.result  # type: ignore[return-value]


@dataclass
class Msg:
    body: str
    certain: bool


@dataclass
class Box:
    """One inbox: the mail the model saw arrive and not yet leave; `exact` False when mail the model
    never saw may be there too."""

    msgs: list[Msg] = field(default_factory=list)
    exact: bool = True

    def bounds(self, ghosts: bool) -> tuple[int, float]:
        lo = sum(1 for m in self.msgs if m.certain)
        return lo, (len(self.msgs) if self.exact and not ghosts else math.inf)

    def blur(self) -> None:
        for m in self.msgs:
            m.certain = False


@dataclass
class Surprise:
    """A reply or row the model did not predict."""

    what: str
    predicted: str
    actual: str
    events: list[Any] = field(default_factory=list)  # records, or witness copies of a call's events

    def line(self) -> str:
        return f"{self.what}: the model predicted {self.predicted}; it was {self.actual}"


@dataclass
class Model:
    view: RunView
    reg: dict[str, Optional[bool]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)          # chat id -> its name
    tomb: dict[str, Optional[bool]] = field(default_factory=dict)
    boxes: dict[str, Box] = field(default_factory=dict)
    owner: dict[str, str] = field(default_factory=dict)          # name (lower) -> label that held it
    ghosts: set[str] = field(default_factory=set)
    surprises: list[Surprise] = field(default_factory=list)
    judged: int = 0
    changes: int = 0
    started: dict[int, int] = field(default_factory=dict)       # id(call) -> changes at its tool-call
    echoes: dict[int, list[Echo]] = field(default_factory=dict)  # id(call) -> the echoes its turn printed
    returned: dict[str, list[str]] = field(default_factory=dict)  # label -> bodies its reads returned
    blurred_reads: set[str] = field(default_factory=set)        # labels a read of unknown outcome touched
    touches: dict[str, list[tuple[int, ToolResult]]] = field(default_factory=dict)  # id -> (t, status result)
    loose: bool = False                                          # the run mixes in a design not modeled
    leaves: list[tuple[str, Event]] = field(default_factory=list)  # (id, leave event) the model is sure of
    # Sends and broadcasts called and not yet answered: they commit at some instant in between, so a
    # read may return their mail before their reply is recorded; what it took is `consumed`.
    pending: dict[int, Call] = field(default_factory=dict)
    consumed: dict[tuple[str, str], int] = field(default_factory=dict)
    # Concurrent dispatch: the calls each dispatch ran at once, whose order the history does not keep
    # (each process records its own events; the files are merged by dispatch, then process).
    together: dict[int, list[Call]] = field(default_factory=dict)
    # Concurrent dispatch: the processes whose registrations or leaves fell in each wave (the merge
    # orders a wave's events by process, so another process's may have come after a call's).
    wave_moves: dict[int, set[str]] = field(default_factory=dict)
    # Ids whose 002-era mail may pass the sweep age within the run (swept once they are out).
    sweepable: set[str] = field(default_factory=set)
    # R32: per Claude Code incarnation, the parent-pid anchor its last prompt hook recorded:
    # (label, chat id, virtual time). Gone when a later hook, a fork or a leave may have moved it.
    anchors: dict[int, tuple[str, str, int]] = field(default_factory=dict)
    # Body -> the chat ids that may have sent it (None among them: any sender), for the sender a
    # read shows (R32: an anchored Claude Code call acts as its conversation, whatever `as` says).
    senders: dict[str, set[Optional[str]]] = field(default_factory=dict)
    # process label -> (instant, `chat.enabled` set) of its config steps (model_follow.config_changes).
    config_changes: dict[Optional[str], list[tuple[int, bool]]] = field(default_factory=dict)

    # -- knowledge ----------------------------------------------------------------

    def box(self, sid: str) -> Box:
        return self.boxes.setdefault(sid, Box(exact=not self.loose))

    def deliver(self, sid: str, body: str, certain: bool) -> None:
        """A message lands in `sid`'s inbox, unless a read already took it while its send was open."""
        key = (sid, body)
        if self.consumed.get(key):
            self.consumed[key] -= 1
            return
        self.box(sid).msgs.append(Msg(body, certain))

    def anchored(self, c: Call) -> Optional[str]:
        """R32: the chat id a Claude Code MCP server resolves from its parent-pid anchor for call
        `c`: the conversation whose session-start or prompt hook last recorded this process's pid,
        less than 600 s before, while its row is registered. None: no anchor the model is sure of
        (another conversation's hook, a fork since, a stale or missing anchor)."""
        inc = self.view.hosting.inc_of(opening(c))
        anchor = self.anchors.get(id(inc)) if inc is not None else None
        if anchor is None or anchor[0] != c.session or c.t - anchor[2] > PID_FRESH_MS - SECOND_MS:
            return None
        return anchor[1] if self.reg.get(anchor[1]) is True else None

    def note_sender(self, body: str, sid: Optional[str]) -> None:
        self.senders.setdefault(body, set()).add(sid)

    def pending_bodies(self, c: Optional[Call] = None) -> set[str]:
        """Bodies of sends that may have committed before `c` without their reply recorded yet."""
        out = {x.body for x in self.pending.values()}
        return out | {x.body for x in self.overlapping(c) if x.tool in ("send", "broadcast")}

    def overlapping(self, c: Optional[Call]) -> list[Call]:
        """The calls another process ran in the same concurrent dispatch as `c`."""
        if c is None:
            return []
        return self.overlapping_event(opening(c), c.proc)

    def overlapping_event(self, e: Event, proc: Optional[str] = None) -> list[Call]:
        """The calls a process other than `e`'s ran in the concurrent dispatch of event `e`."""
        if not self.together:
            return []
        proc = proc if proc is not None else e.proc
        return [x for x in self.together.get(e.dispatch, ()) if x.proc != proc]

    def moved_in_wave(self, c: Optional[Call]) -> bool:
        """Did another process register or leave a session in `c`'s concurrent dispatch?"""
        if c is None or not self.wave_moves:
            return False
        return bool(self.wave_moves.get(opening(c).dispatch, set()) - {c.proc})

    def acting(self, ids: list[Optional[str]], racy: bool) -> Optional[str]:
        """The one id a call that got past the registration check can have acted as, if only one can."""
        live = [sid for sid in ids if sid and (racy or self.reg.get(sid) is not False)]
        return live[0] if len(set(live)) == 1 else None

    def know(self, sid: Optional[str], reg: Optional[bool], name: Optional[str] = None,
             label: Optional[str] = None) -> None:
        if not sid:
            return
        if self.reg.get(sid, False) != reg:
            self.changes += 1
        self.reg[sid] = reg
        if reg is False and sid in self.sweepable:
            self.box(sid).blur()  # out of the directory: its old 002-era mail may be swept (R26)
        if name:
            self.names[sid] = name
            self.own(name, label or self.view.names.label_of.get(sid))

    def own(self, name: str, label: Optional[str]) -> None:
        if label is not None:
            self.owner.setdefault(name.lower(), self.view.lineage(label) or label)

    def blur_label(self, label: Optional[str]) -> None:
        """Forget what the model knows of a label's rows (a fork, an adoption, a crash it cannot follow)."""
        for sid in self.view.names.ids.get(label or "", ()):
            self.reg[sid] = None
            self.tomb[sid] = None
            box = self.box(sid)
            box.blur()
            box.exact = False
        if label:
            self.blurred_reads.add(label)
        self.changes += 1

    def by_name(self, name: str, *, unregistered: bool = False) -> list[str]:
        """The ids that answer to `name` (case-insensitively) or are that id, registered or maybe
        (or, with `unregistered`, in any state: a call racing a registration may see it)."""
        low = str(name).lower()
        out = [sid for sid, n in self.names.items()
               if n.lower() == low and (unregistered or self.reg.get(sid) is not False)]
        if not out and name in self.reg and (unregistered or self.reg[name] is not False):
            out = [name]
        return out

    def may_be_unknown_row(self, name: str) -> bool:
        """Could `name` be a row the model never saw (a legacy row, a mint no event named)?"""
        low = str(name).lower()
        legacy = {r.name.lower() for r in getattr(self.view.spec, "legacy", []) or []}
        seen = {n.lower() for n in self.names.values()} | set(self.owner)
        return low in legacy or (low not in seen and name not in self.reg and self.unknown_rows())

    def renamed_twin_in(self, name: str, names: set[str]) -> bool:
        """Is `name` a 002-era name with a case twin, found in `names` under NAME-K? The migration to
        the NOCASE column keeps both twins and renames the later-registered one NAME-2 (D-store-6),
        and which of the two was later the model does not know."""
        low = str(name).lower()
        if not self.legacy_twin(name):
            return False
        return any(n.lower() != low and unrenamed(n.lower()) == low for n in names)

    def legacy_twin(self, name: str) -> bool:
        """Do two 002-era rows claim `name` in different cases? Which keeps it and which becomes
        NAME-2 depends on their registration order (D-store-6), which the model does not know."""
        low = str(name).lower()
        return [r.name.lower() for r in getattr(self.view.spec, "legacy", []) or []].count(low) >= 2

    def unknown_rows(self) -> bool:
        """May the directory hold rows the model cannot name?"""
        return self.loose or any(v is None for v in self.reg.values()) or bool(getattr(self.view.spec, "legacy", None))

    def surprise(self, what: str, predicted: str, actual: str, events: Iterable[Any] = ()) -> None:
        self.surprises.append(Surprise(what, predicted, actual, [e for e in events if e is not None]))

    # -- who calls ----------------------------------------------------------------

    def identities(self, c: Call) -> tuple[list[Optional[str]], bool]:
        """(the chat ids the call may act as, whether that is certain). An opencode session acts as its
        own id; an MCP host's call as its conversation's id, a claimed `as`, or none (R32)."""
        ids = list(self.view.names.ids.get(c.session or "", ()))
        inc = self.view.hosting.inc_of(opening(c))
        mcp = inc is not None and HOSTS[inc.kind].mcp
        if not mcp and len(ids) == 1 and "as" not in c.args:
            return ids, True
        out: list[Optional[str]] = list(ids)
        if c.claim:
            out += self.by_name(c.claim) or [c.claim]
        return out + [None], False
