"""A read-only index over one run's history and final database, for the checkers.

Properties P1-P10 (`simulator.checks.delivery`, `.liveness`, `.messages`,
`.identity`), reach claims (`simulator.checks.reach`) and point expectations
(`simulator.checks.expectations`) all ask the same questions of a run: which
process incarnation hosted a session when, which chat session ids and assigned
names a session label went by, which tool call produced which result, what the
final database holds. `RunView` answers them once, from what a user could
observe (docs/history.md events and the SQLite file), and never from
thatch_core internals.

The view is tolerant on purpose: a harness may omit an optional field
(`step`, `hosted`), and a checker must then judge less, never crash.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from simulator.clock import parse_iso_ms
from simulator.design import (
    AUTO_ROW_TTL_MS, CHAT_ID_PREFIXES, DEFAULT_POLL_MS, DEFAULT_REHOST_GRACE_MS, STALE_MS, mcp_session_id,
)
from simulator.replies import IDENTITY, SENT, Outcome, decode_hook_line, decode_reply
from simulator.scenario.kinds import DEFAULT_HOST, HOSTS
from simulator.scenario.labels import LABEL_PLACEHOLDER
from simulator.events import (
    FAULT, FAULT_FIRED, FORK, HOOK, LEAVE, PHASE, POLL, PROCESS_EXIT, PROCESS_START, REGISTERED, RUN_START, SAMPLE,
    SLEEP_END, SLEEP_START, STATUS, STEP_DROPPED, TOOL_CALL, TOOL_RESULT, TURN_START, USER_PROMPT, data_of, hook_line,
    sample_rows, step_of,
)
from simulator.scenario.model import Scenario

LEAVE_ACTIONS = ("unregister", "delete", "exit")


def short_tool(tool: Any) -> str:
    """`thatch_chat_send` / `chat_send` / `send` -> `send`."""
    tool = str(tool or "")
    for prefix in ("thatch_chat_", "chat_"):
        if tool.startswith(prefix):
            return tool[len(prefix):]
    return tool


def brief(e: dict[str, Any]) -> dict[str, Any]:
    """A witness copy of an event (long texts clipped so a report stays short)."""
    out = dict(e)
    data = dict(data_of(out))
    for key in ("text", "line"):
        if isinstance(data.get(key), str) and len(data[key]) > 300:
            data[key] = data[key][:297] + "..."
    out["data"] = data
    return out


@dataclass
class Incarnation:
    """One life of a process label: from its process-start to its process-exit."""

    proc: str
    n: int
    kind: str
    start_t: int
    start_i: int
    sessions: set[str]
    rehosted: set[str] = field(default_factory=set)
    rehost_of: Optional[str] = None
    resumed: Optional[str] = None
    # A resumed session its command line does not open (a bare `-s`, a `-c`
    # that continues another or none): hosted only once it is used (D-sim-22).
    dormant: set[str] = field(default_factory=set)
    # The session that command line opens instead (a `-c` continuing the newest one): the
    # process hosts it from its start, like a resumed session it opens.
    opened: Optional[str] = None
    predecessor: Optional["Incarnation"] = None      # the dead incarnation this one re-hosts from
    end_t: Optional[int] = None
    end_i: Optional[int] = None
    reason: Optional[str] = None
    start_event: Optional[dict[str, Any]] = None
    exit_event: Optional[dict[str, Any]] = None

    def alive(self, t: int, i: Optional[int] = None) -> bool:
        """Alive at virtual time t (and, when given, at history position i)."""
        if t < self.start_t or (i is not None and i < self.start_i):
            return False
        if self.end_t is None:
            return True
        if i is not None and self.end_i is not None:
            return i < self.end_i
        return t < self.end_t

    @property
    def died(self) -> bool:
        return self.reason in ("killed", "crashed", "restart")


@dataclass
class Call:
    """A tool call paired with its result (result None: it never returned)."""

    proc: str
    session: Optional[str]
    tool: str
    args: dict[str, Any]
    call: Optional[dict[str, Any]]
    result: Optional[dict[str, Any]]

    @property
    def ok(self) -> bool:
        return bool(self.result and data_of(self.result).get("ok"))

    @property
    def text(self) -> str:
        return str(data_of(self.result or {}).get("text") or "")

    @cached_property
    def outcome(self) -> Outcome:
        """The reply decoded once (simulator.replies): ok or which refusal, and what it says."""
        return decode_reply(self.tool, self.ok, self.text, clipped_from=data_of(self.result or {}).get("clipped_from"))

    @property
    def t(self) -> int:
        return (self.result or self.call)["t"]

    @property
    def i(self) -> int:
        return (self.result or self.call)["i"]

    @property
    def body(self) -> str:
        return str(self.args.get("body", self.args.get("message", "")) or "").strip()

    def witness(self) -> list[dict[str, Any]]:
        return [brief(e) for e in (self.call, self.result) if e is not None]


class RunView:
    def __init__(self, spec: Optional[Scenario], history: list[dict[str, Any]], db_path: Any,
                 run_info: Optional[dict] = None):
        self.spec = spec
        self.run_info = dict(run_info or {})
        self.history = [dict(e, i=e.get("i", n)) for n, e in enumerate(history)]
        self.stale_ms = int(self.run_info.get("stale_ms", STALE_MS))
        self.by_kind: dict[str, list[dict]] = {}
        for e in self.history:
            self.by_kind.setdefault(e["kind"], []).append(e)
        self.t_end = self._t_end()
        self.drain_t = next((e["t"] for e in self.of(PHASE) if data_of(e).get("phase") == "drain"), None)
        self.steps = list(getattr(spec, "steps", []) or [])
        self.proc_kind = {p.id: p.kind for p in getattr(spec, "processes", [])}
        self.agents = {s.id: s.agent for p in getattr(spec, "processes", []) for s in p.sessions}
        # Sub-agent children: a polling host never hosts one, even once it joined the directory (R13).
        self.children = {s.id for p in getattr(spec, "processes", []) for s in p.sessions if s.parent}
        # Asked per event by the judges, so read from the steps once.
        self.older_labels: dict[str, str] = spec.older_labels() if spec is not None else {}
        self._rehost_graces: Optional[dict[str, int]] = None
        self._touches_of: Optional[dict[str, list[tuple[float, int]]]] = None
        self._obs: Optional[list] = None
        self._by_name: Optional[dict[str, str]] = None
        self.db = load_db(db_path)  # first: the id index reads the final rows
        self._index_incarnations()
        self._index_ids()
        self._index_calls()
        self._leaves: Optional[list[dict]] = None
        self._activity: dict[tuple[int, str], Optional[int]] = {}
        self._trim_rehosted()
        self.epoch_ms = self._epoch()
        self._mark_unjoinable_startups()

    # -- basic access -------------------------------------------------------

    def of(self, *kinds: str, session: Optional[str] = None, proc: Optional[str] = None) -> list[dict]:
        evs = [e for k in kinds for e in self.by_kind.get(k, [])]
        if len(kinds) > 1:
            evs.sort(key=lambda e: e["i"])
        return [e for e in evs
                if (session is None or e.get("session") == session) and (proc is None or e.get("proc") == proc)]

    def _t_end(self) -> int:
        for e in self.history:
            if e["kind"] == PHASE and data_of(e).get("phase") == "end":
                return e["t"]
        if "duration_ms" in self.run_info:
            return int(self.run_info["duration_ms"]) + int(self.run_info.get("drain_ms", 0))
        return max((e["t"] for e in self.history), default=0)

    def poll_ms(self, proc: Optional[str]) -> int:
        table = self.run_info.get("poll_interval_ms") or {}
        if proc in table:
            return int(table[proc])
        for p in getattr(self.spec, "processes", []):
            if p.id == proc:
                return int(p.poll_interval)
        return DEFAULT_POLL_MS

    def step_action(self, e: dict) -> Optional[str]:
        idx = step_of(e)
        if isinstance(idx, int) and 0 <= idx < len(self.steps):
            return self.steps[idx].action
        return None

    # -- processes ----------------------------------------------------------

    def _index_incarnations(self) -> None:
        self.incs: list[Incarnation] = []
        latest: dict[str, Incarnation] = {}
        for e in self.of(PROCESS_START, PROCESS_EXIT):
            d = data_of(e)
            proc = d.get("target")
            if e["kind"] == PROCESS_START:
                sessions = set((d.get("sessions") or {}).keys())
                if d.get("resumed"):
                    sessions.add(d["resumed"])
                # A resume whose command line opens another session (or none): the resumed one
                # is dormant, the opened one hosted.
                opens_other = bool(d.get("resumed")) and "opens" in d and d["opens"] != d["resumed"]
                opened = d["opens"] if opens_other else None
                if opened:
                    sessions.add(opened)
                rehosted: set[str] = set()
                old = latest.get(d.get("rehost_of")) if d.get("rehost_of") else None
                if old is not None:
                    rehosted = set(old.sessions) - sessions
                inc = Incarnation(proc, int(d.get("incarnation", 0)),
                                  d.get("proc_kind") or self.proc_kind.get(proc, DEFAULT_HOST),
                                  e["t"], e["i"], sessions | rehosted, rehosted, d.get("rehost_of"), d.get("resumed"),
                                  start_event=e)
                if opens_other:
                    inc.dormant, inc.opened = {d["resumed"]}, opened
                inc.predecessor = old
                self.incs.append(inc)
                latest[proc] = inc
            else:
                inc = latest.get(proc)
                if inc is not None and inc.end_t is None:
                    inc.end_t, inc.end_i, inc.reason, inc.exit_event = e["t"], e["i"], d.get("reason"), e

    def _trim_rehosted(self) -> None:
        """A restarted polling daemon re-hosts what its predecessor was hosting when it ended, not
        every session of the predecessor's process (R13, R15): a session it never saw a status
        event for, a sub-agent child, or a re-hosted one whose grace had run out is not in it. Such
        a tab is still open in the new daemon, which hosts it from its first status event on."""
        for inc in self.incs:
            old = inc.predecessor
            if old is None or not HOSTS[old.kind].polls:
                continue
            polls = [e for e in self.of(POLL, proc=old.proc)
                     if old.start_i < e["i"] and (old.end_i is None or e["i"] < old.end_i)]
            last_poll = data_of(polls[-1]) if polls else None
            drop = {label for label in inc.rehosted if not self._hosted_at_end(old, label, last_poll)}
            inc.rehosted -= drop
            inc.dormant |= drop

    def _hosted_at_end(self, old: Incarnation, label: str, last_poll: Optional[dict]) -> bool:
        if label in self.children:
            return False
        if last_poll is not None and label in (last_poll.get("hosted", (label,)) or ()):
            return True  # its last poll beat it (a poll that lists no hosted set beat them all)
        if label in old.rehosted:
            return self.hosted_from(old, label, old.end_t if old.end_t is not None else self.t_end) is not None
        if label in (old.resumed, old.opened) and label not in old.dormant:
            return True
        return self.first_activity(old, label) is not None

    def config_at_start(self, inc: Incarnation, key: str) -> bool:
        """`chat.enabled` (key "enabled") or `chat.autoRegister` ("auto_register") as `inc` read it
        at its start: the spec's value, then every config step before the start. A config step at
        the very start time counts only when it turns the setting off (the order is unknown)."""
        spec = next((p for p in getattr(self.spec, "processes", []) if p.id == inc.proc), None)
        value = getattr(spec.config, key) if spec is not None else True
        dropped = {step_of(e) for e in self.of(STEP_DROPPED)}
        for idx, step in enumerate(self.steps):
            if step.action != "config" or idx in dropped or step.args.process != inc.proc:
                continue
            new = getattr(step.args, key)
            if new is None:
                continue
            if step.at < inc.start_t:
                value = new
            elif step.at == inc.start_t:
                value = value and new
        return value

    def _mark_unjoinable_startups(self) -> None:
        """The session a resume's command line opens is neither registered nor hosted at the
        process's start when auto-registration was off then or the session had left (a tombstone,
        D-real-host-3): like a resumed session its command line does not open, it is hosted
        from its first use."""
        for inc in self.incs:
            label = inc.opened or inc.resumed
            if not label or label in inc.dormant or not HOSTS[inc.kind].polls:
                continue
            if not self.config_at_start(inc, "auto_register") or self._left_before(label, inc.start_i):
                inc.dormant.add(label)

    def _left_before(self, label: str, i: int) -> bool:
        """Had `label` left the directory (an ok leave not followed by an explicit register) before
        history position i?"""
        leaves = [e["i"] for e in self.leaves(label) if e["i"] < i]
        if not leaves:
            return False
        return not any(leaves[-1] < e["i"] < i for e in self.explicit_registers(label))

    def inc_of(self, e: dict) -> Optional[Incarnation]:
        """The incarnation of the process that recorded a harness event."""
        best = None
        for inc in self.incs:
            if inc.proc == e.get("proc") and inc.start_i <= e["i"] and (inc.end_i is None or e["i"] <= inc.end_i):
                best = inc
        return best

    def hosts(self, label: str, t: int, i: Optional[int] = None, kinds: Iterable[str] = ()) -> list[Incarnation]:
        """Live incarnations hosting `label` at (t, i)."""
        return [inc for inc in self.incs
                if label in inc.sessions and inc.alive(t, i) and (not kinds or inc.kind in kinds)]

    def rehost_grace(self, inc: Incarnation) -> int:
        """The re-hosting grace of a process a `restart` step starts (the first such step naming one)."""
        if self._rehost_graces is None:
            self._rehost_graces = {}
            for step in self.steps:
                if step.action == "restart" and step.restart.grace is not None:
                    self._rehost_graces.setdefault(step.restart.into, int(step.restart.grace))
        return self._rehost_graces.get(inc.proc, DEFAULT_REHOST_GRACE_MS)

    def hosting(self, inc: Incarnation, label: str, t: int) -> bool:
        """Does `inc` (alive) host `label` at t? (`hosted_from`)"""
        return self.hosted_from(inc, label, t) is not None

    def hosted_from(self, inc: Incarnation, label: str, t: int) -> Optional[int]:
        """Since when `inc` (alive) hosts `label` without a break up to t; None when it does not
        at t. A rehosted session counts within the grace, or for good once it showed activity
        there (R15 graduation); a dormant resumed one (its command line opened another session
        or none) only from its first use. A graduation is never seen ahead of time. A polling
        host never hosts a sub-agent child (R13)."""
        if label not in inc.sessions or (label in self.children and HOSTS[inc.kind].polls):
            return None
        first = self.first_activity(inc, label)
        if label in inc.dormant:
            return first if first is not None and first <= t else None
        grace_end = self.rehost_deadline(inc, label)
        if label not in inc.rehosted or t < grace_end:
            return inc.start_t
        if first is None or first > t:
            return None
        return inc.start_t if first < grace_end else first

    def rehost_deadline(self, inc: Incarnation, label: str) -> int:
        """When `inc`'s re-hosting of `label` ends unless the session shows activity first: the
        process start plus its grace, except for a session the predecessor was itself only
        re-hosting, which keeps the predecessor's deadline (a chain of daemon restarts must not
        keep a closed tab fresh forever, D-runtime-15)."""
        old = inc.predecessor
        if old is not None and label in old.rehosted:
            first = self.first_activity(old, label)
            deadline = self.rehost_deadline(old, label)
            if first is None or first >= deadline:
                return deadline
        return inc.start_t + self.rehost_grace(inc)

    @staticmethod
    def activity_kinds(inc: Incarnation) -> tuple[str, ...]:
        """The history events that count as a session's activity in `inc` (`first_activity`)."""
        return (STATUS,) if HOSTS[inc.kind].polls else (TOOL_CALL, USER_PROMPT, TURN_START)

    def first_activity(self, inc: Incarnation, label: str) -> Optional[int]:
        """Virtual time of `label`'s first activity in `inc`'s life, cached: P4 and the delivery
        gate ask it for every sample and every cut. In a polling host (opencode) that is the
        session's first status report: only session.status events host a session there, a
        prompt or a tool call alone does not (the real runtime's hosted set). Elsewhere any
        call, prompt or turn counts."""
        key = (id(inc), label)
        if key not in self._activity:
            self._activity[key] = next(
                (e["t"] for e in self.of(*self.activity_kinds(inc), proc=inc.proc)
                 if e.get("session") == label and inc.start_i < e["i"] and (inc.end_i is None or e["i"] < inc.end_i)),
                None)
        return self._activity[key]

    def asleep(self, t: int, slack: int = 0) -> bool:
        """True inside a machine sleep, or within `slack` ms after it ends."""
        start = None
        for e in self.of(SLEEP_START, SLEEP_END):
            if e["kind"] == SLEEP_START:
                start = e["t"]
            elif start is not None:
                if start <= t <= e["t"] + slack:
                    return True
                start = None
        return start is not None and t >= start

    def lock_windows(self) -> list[tuple[int, int]]:
        """(start, end) of every lock fault held against the database."""
        if "_locks" in self.__dict__:
            return self.__dict__["_locks"]
        out: list[tuple[int, int]] = []
        self.__dict__["_locks"] = out
        for e in self.of(FAULT):
            if data_of(e).get("fault") != "lock":
                continue
            args = data_of(e).get("args") or {}
            dur = args.get("for") or args.get("duration")
            idx = step_of(e)
            if dur is None and isinstance(idx, int) and idx < len(self.steps) and self.steps[idx].lock:
                dur = self.steps[idx].lock.duration
            out.append((e["t"], e["t"] + int(dur or 0)))
        return out

    def stall_windows(self) -> list[tuple[Optional[str], int, int]]:
        """(process, start, end) of every `stall` fault that took effect: its poll timer was lost."""
        if "_stalls" not in self.__dict__:
            self.__dict__["_stalls"] = [
                (detail.get("target"), e["t"], int(detail.get("until") or e["t"]))
                for e in self.of(FAULT_FIRED) if data_of(e).get("fault") == "stall"
                for detail in [data_of(e).get("detail") or {}]]
        return self.__dict__["_stalls"]

    # -- identities ---------------------------------------------------------

    def _index_ids(self) -> None:
        self.ids: dict[str, list[str]] = {}
        def add(label, sid):
            if label and sid and sid not in self.ids.setdefault(label, []):
                self.ids[label].append(sid)
        for e in self.of(PROCESS_START):
            d = data_of(e)
            kind = d.get("proc_kind") or self.proc_kind.get(d.get("target"), DEFAULT_HOST)
            for label, sid in (d.get("sessions") or {}).items():
                add(label, sid if not HOSTS[kind].mcp or str(sid).startswith(CHAT_ID_PREFIXES) else mcp_session_id(sid))
        for label, sids in (self.run_info.get("row_ids") or {}).items():
            for sid in sids:
                add(label, sid)
        by_name = {str(r["name"]).lower(): r["session_id"] for r in self.db.get("sessions") or ()}
        for e in self.of(REGISTERED):
            sid = data_of(e).get("session_id")
            if sid is None and data_of(e).get("name"):
                # A hookless MCP mint: the harness never learns the fresh id,
                # but the name it was told leads to the row (if it still exists).
                sid = by_name.get(str(data_of(e)["name"]).lower())
            add(e.get("session"), sid)
        for e in self.of(SAMPLE):
            for label, row in sample_rows(e).items():
                add(label, row.get("session_id"))
        for e in self.of(FORK):
            for key in ("old_host_id", "new_host_id"):
                if data_of(e).get(key):
                    add(e.get("session"), mcp_session_id(data_of(e)[key]))
        self.label_of = {sid: label for label, sids in self.ids.items() for sid in sids}

    def names_of(self, label: str) -> list[str]:
        """Every assigned name the label went by, in first-seen order."""
        out: list[str] = []
        for _, lab, name in self.name_observations():
            if lab == label and name and name not in out:
                out.append(name)
        return out

    def name_observations(self) -> list[tuple[dict, str, Optional[str]]]:
        """(event, label, name or None when not registered) from samples, registered events and hook lines."""
        if self._obs is not None:
            return self._obs
        out = []
        for e in self.of(SAMPLE, REGISTERED, HOOK):
            if e["kind"] == HOOK:
                shown = decode_hook_line(hook_line(e))
                if shown.kind == IDENTITY:
                    out.append((e, e.get("session"), shown.name))
            elif e["kind"] == REGISTERED:
                out.append((e, e.get("session"), data_of(e).get("name")))
            else:
                for label, row in sample_rows(e).items():
                    out.append((e, label, row.get("name") if row.get("registered") else None))
        self._obs = out
        return out

    def name_at(self, label: str, i: Optional[int] = None) -> Optional[str]:
        name = None
        for e, lab, n in self.name_observations():
            if lab == label and n and (i is None or e["i"] <= i):
                name = n
        if name is None and i is None:
            row = self.final_row(label)
            name = row["name"] if row else None
        return name

    def final_row(self, label: str) -> Optional[dict]:
        """The label's row in the final database under its newest id: a fork chain past the
        hop limit (R33) leaves the old row behind, registered under the old name."""
        rows = {r["session_id"]: r for r in self.db["sessions"]}
        return next((rows[sid] for sid in reversed(self.ids.get(label, ())) if sid in rows), None)

    def id_names(self) -> dict[str, str]:
        """chat session id -> a name it went by (db rows win)."""
        out = {}
        for label, sids in self.ids.items():
            names = self.names_of(label)
            for sid in sids:
                if names:
                    out[sid] = names[-1]
        for e in self.of(REGISTERED):
            d = data_of(e)
            if d.get("session_id") and d.get("name"):
                out[d["session_id"]] = d["name"]
        for r in self.db["sessions"]:
            out[r["session_id"]] = r["name"]
        return out

    def label_for_name(self, name: str) -> Optional[str]:
        """The label that went by `name` (case-insensitive), None when no one did. A name no
        observation saw (a registration at a machine's wake, the run ending before the next
        sample) is read from the final rows: names are never reissued."""
        if self._by_name is None:
            self._by_name = {}
            for _, label, n in self.name_observations():
                if n:
                    self._by_name.setdefault(n.lower(), label)
            for row in self.db["sessions"]:
                label = self.label_of.get(row["session_id"])
                if label is not None and row.get("name"):
                    self._by_name.setdefault(str(row["name"]).lower(), label)
        return self._by_name.get(str(name).lower())

    def name_by(self, label: str, t: int) -> Optional[str]:
        """The last name `label` went by at or before virtual time t (None: no name yet).
        A session that left keeps its last name here, as for step replies (`name_at`)."""
        name = None
        for e, lab, n in self.name_observations():
            if lab == label and n and e["t"] <= t:
                name = n
        return name

    def expand(self, text: Any, at: Any = "end") -> Any:
        """`{label}` -> the name that session went by at time `at` (`end`: its final
        name); left as the literal `{label}` when it had none by then. A point
        expectation at 3m must see the 3m name, not one minted later in the run."""
        if not isinstance(text, str):
            return text
        look = self.name_at if at == "end" else (lambda label: self.name_by(label, int(at)))
        return LABEL_PLACEHOLDER.sub(lambda m: look(m.group(1)) or m.group(0), text)

    # -- tool calls -----------------------------------------------------------

    def _index_calls(self) -> None:
        self.calls: list[Call] = []
        pending: dict[tuple, list[Call]] = {}
        for e in self.of(TOOL_CALL, TOOL_RESULT):
            key = (e.get("proc"), e.get("session"), short_tool(data_of(e).get("tool")))
            if e["kind"] == TOOL_CALL:
                c = Call(e.get("proc"), e.get("session"), key[2], dict(data_of(e).get("args") or {}), e, None)
                pending.setdefault(key, []).append(c)
                self.calls.append(c)
            elif pending.get(key):
                pending[key].pop(0).result = e
            else:
                self.calls.append(Call(e.get("proc"), e.get("session"), key[2], {}, None, e))
        self.calls.sort(key=lambda c: c.i)

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
                to = c.outcome.to if c.outcome.kind == SENT else str(c.args.get("to", ""))
                if (self.label_for_name(to) or self.label_of.get(to)) == label:
                    out.append(c)
            elif any(self.label_for_name(x) == label for x in c.outcome.recipients):
                out.append(c)
        return out

    def landed(self, idx: int, at: int) -> int:
        """When step `idx`, scripted at `at`, ran: a machine asleep then runs it at the wake, in
        script order with every other step it deferred, so a sleep step deferred with it and
        scripted before it may defer it again (past the run's end: it never ran). A call at
        the instant it landed may come before or after it."""
        if "_sleeps" not in self.__dict__:
            sleeps, fault_step = [], None
            for e in self.of(FAULT, SLEEP_START):
                if e["kind"] == FAULT:
                    fault_step = step_of(e) if data_of(e).get("fault") == "sleep" else None
                elif data_of(e).get("until") is not None:
                    sleeps.append((e["t"], int(data_of(e)["until"]), fault_step))
            self.__dict__["_sleeps"] = sleeps
        moved = True
        while moved:
            moved = False
            for start, until, by in self.__dict__["_sleeps"]:
                if start <= at < until and (start < at or by is None or by < idx):
                    at, moved = until, True
        return at

    def leaves(self, label: Optional[str] = None) -> list[dict]:
        """Ok leaves: an unregister result, or a delete / exit step (the harness records no
        result for those, so a synthetic `leave` event stands at the end of the step's time)."""
        if self._leaves is None:
            out = [e for e in self.of(TOOL_RESULT) if data_of(e).get("ok") and
                   (short_tool(data_of(e).get("tool")) in LEAVE_ACTIONS or self.step_action(e) in LEAVE_ACTIONS)]
            dropped = {step_of(e) for e in self.of(STEP_DROPPED)}
            for idx, step in enumerate(self.steps):
                at = self.landed(idx, step.at)
                never_ran = at != step.at and at > self.t_end  # deferred by a sleep past the run's end
                if step.action in ("delete", "exit") and idx not in dropped and not never_ran:
                    who = step.args.session
                    # The step ran somewhere inside its time's dispatches: stand before them all
                    # (P7 then leaves same-time observations unjudged).
                    pos = next((e["i"] for e in self.history if e["t"] >= at), len(self.history)) - 0.5
                    if self._registered_before(who, at):
                        out.append({"i": pos, "t": at, "dispatch": None, "proc": None, "session": who,
                                    "kind": LEAVE, "data": {"step": idx, "action": step.action}})
            self._leaves = sorted(out, key=lambda e: e["i"])
        return [e for e in self._leaves if label is None or e.get("session") == label]

    def vanishings(self) -> Iterator[tuple[str, dict, dict, dict]]:
        """`(label, prev, sample, row)` for each session that went from registered in
        sample `prev` to not registered in `sample` with no leave or fork in between:
        the only way out of the directory that leaves no event is prune (R26)."""
        last: dict[str, dict] = {}
        for s in self.of(SAMPLE):
            for label, row in sample_rows(s).items():
                if row.get("registered"):
                    last[label] = s
                elif label in last:
                    prev = last.pop(label)
                    between = self.leaves(label) + self.of(FORK, session=label)
                    if not any(prev["i"] < x["i"] < s["i"] for x in between):
                        yield label, prev, s, row

    def lineage(self, label: Optional[str]) -> Optional[str]:
        """The session a label continues: a fork's older id (`fork.older_as`) is the forked session's."""
        return self.older_labels.get(label, label) if label is not None else None

    def could_be_pruned(self, label: str, before: dict, after: dict) -> bool:
        """Could the hourly prune (R26) have deleted `label`'s row between two events: was it
        silent for longer than the auto-row TTL at some instant in between? The row is touched
        by the beats of the polls hosting it and by its registrations; a sample shows its
        last_seen. The silence starts at the last touch known at `before` (the run's start when
        none is)."""
        touches = self._touches(label)
        seen = max((t for i, t in touches if i <= before["i"]), default=0)
        for i, t in touches:
            if before["i"] < i < after["i"]:
                if t - seen > AUTO_ROW_TTL_MS:
                    return True
                seen = max(seen, t)
        return after["t"] - seen > AUTO_ROW_TTL_MS

    def _touches(self, label: str) -> list[tuple[float, int]]:
        """(position, virtual time) of each known touch of `label`'s row, in history order."""
        if self._touches_of is None:  # asked per cut of P10: one pass over the history for every label
            index: dict[str, list[tuple[float, int]]] = {}
            for e in self.of(POLL, REGISTERED, SAMPLE):
                if e["kind"] == SAMPLE:
                    for who, row in sample_rows(e).items():
                        seen = (self.vt(row.get("last_seen"))
                                if row and row.get("registered") and row.get("last_seen") else None)
                        if seen is not None:
                            index.setdefault(who, []).append((e["i"], seen))
                else:
                    touched = {e.get("session"), *(data_of(e).get("hosted") or ())}
                    for who in touched:
                        index.setdefault(who, []).append((e["i"], e["t"]))
            self._touches_of = {who: sorted(out) for who, out in index.items()}
        return list(self._touches_of.get(label, ()))

    def _registered_before(self, label: str, t: int) -> bool:
        """Was the label's last name observation before time t a registered one (or none at all)?"""
        last = [n for e, lab, n in self.name_observations() if lab == label and e["t"] < t]
        return not last or last[-1] is not None

    def explicit_registers(self, label: Optional[str] = None) -> list[dict]:
        out = [c.result for c in self.calls_of("register", label, ok=True)]
        out += [e for e in self.of(REGISTERED, session=label) if data_of(e).get("how") == "explicit"]
        return sorted(out, key=lambda e: e["i"])

    # -- time -----------------------------------------------------------------

    def _epoch(self) -> Optional[int]:
        """Wall ms of virtual time 0: given, or bounded from samples' last_seen."""
        for src in (self.run_info, *(data_of(e) for e in self.of(RUN_START))):
            if src.get("epoch_ms") is not None:
                return int(src["epoch_ms"])
        best = None
        for e in self.of(SAMPLE):
            for row in sample_rows(e).values():
                ms = parse_iso_ms(row.get("last_seen"))
                if ms is not None:
                    best = ms - e["t"] if best is None else max(best, ms - e["t"])
        return best

    def vt(self, iso: Any) -> Optional[int]:
        """Virtual time of a stored ISO stamp (None when unknown)."""
        ms = parse_iso_ms(iso)
        return None if ms is None or self.epoch_ms is None else ms - self.epoch_ms


def load_db(db_path: Any) -> dict[str, list[dict[str, Any]]]:
    """The final database's tables as lists of dicts (empty when absent)."""
    out: dict[str, list[dict[str, Any]]] = {"sessions": [], "messages": [], "pruned": [], "tombstones": [], "held": []}
    if db_path is None or not Path(db_path).exists():
        return out
    conn = sqlite3.connect(str(db_path))
    conn.row_factory = sqlite3.Row
    try:
        for key, table in (("sessions", "chat_sessions"), ("messages", "chat_messages"),
                           ("pruned", "chat_pruned"), ("tombstones", "chat_leave_tombstones"),
                           ("held", "chat_held")):  # messages a policy held (simulator/checks/policies.py)
            try:
                out[key] = [dict(r) for r in conn.execute(f"SELECT * FROM {table}")]
            except sqlite3.Error:
                pass
    finally:
        conn.close()
    return out
