"""Which chat session ids and assigned names each session label went by, and when."""

from __future__ import annotations

from functools import cached_property
from typing import Any, Callable, Optional

from simulator.design import AUTO_ROW_TTL_MS, CHAT_ID_PREFIXES, mcp_session_id
from simulator.events import FORK, HOOK, POLL, PROCESS_START, REGISTERED, SAMPLE, Event, Hook, Registered, Sample
from simulator.history import History
from simulator.replies import IDENTITY, decode_hook_line
from simulator.scenario.kinds import DEFAULT_HOST, HOSTS
from simulator.scenario.labels import LABEL_PLACEHOLDER

# (the event that showed it, the label, its name then: None when it was not registered)
Observation = tuple[Event, Optional[str], Optional[str]]


class Names:
    def __init__(self, history: History, db: dict[str, list[dict[str, Any]]], proc_kind: dict[str, str],
                 run_info: dict[str, Any], vt: Callable[[Any], Optional[int]]) -> None:
        self.db = db
        self.vt = vt
        self.ids: dict[str, list[str]] = {}
        self._index_ids(history, proc_kind, run_info)
        self.label_of = {sid: label for label, sids in self.ids.items() for sid in sids}
        self.observations = self._observe(history)
        self._seen_as: dict[Optional[str], list[Observation]] = {}  # label -> its observations, in order
        for seen in self.observations:
            self._seen_as.setdefault(seen[1], []).append(seen)
        self._by_name = self._name_index()
        self._history = history  # the prune's touches are read from it on first use (P8, P10 and P6 ask)
        self._registered_names = {e.session_id: e.name for e in history.of(REGISTERED) if e.session_id and e.name}

    def _index_ids(self, history: History, proc_kind: dict[str, str], run_info: dict[str, Any]) -> None:
        def add(label: Optional[str], sid: Any) -> None:
            if label and sid and sid not in self.ids.setdefault(label, []):
                self.ids[label].append(sid)
        for e in history.of(PROCESS_START):
            kind = e.proc_kind or proc_kind.get(e.target, DEFAULT_HOST)
            for label, sid in e.sessions.items():
                add(label, sid if not HOSTS[kind].mcp or str(sid).startswith(CHAT_ID_PREFIXES) else mcp_session_id(sid))
        for label, sids in (run_info.get("row_ids") or {}).items():
            for sid in sids:
                add(label, sid)
        by_name = {str(r["name"]).lower(): r["session_id"] for r in self.db["sessions"]}
        for e in history.of(REGISTERED):
            sid = e.session_id
            if sid is None and e.name:
                # A hookless MCP mint: the harness never learns the fresh id,
                # but the name it was told leads to the row (if it still exists).
                sid = by_name.get(str(e.name).lower())
            add(e.session, sid)
        for e in history.of(SAMPLE):
            for label, row in e.sessions.items():
                add(label, row.session_id)
        for e in history.of(FORK):
            for sid in (e.old_host_id, e.new_host_id):
                if sid:
                    add(e.session, mcp_session_id(sid))

    @staticmethod
    def _observe(history: History) -> list[Observation]:
        out: list[Observation] = []
        for e in history.of(SAMPLE, REGISTERED, HOOK):
            if isinstance(e, Hook):
                shown = decode_hook_line(e.line or "")
                if shown.kind == IDENTITY:
                    out.append((e, e.session, shown.name))
            elif isinstance(e, Registered):
                out.append((e, e.session, e.name))
            elif isinstance(e, Sample):
                for label, row in e.sessions.items():
                    out.append((e, label, row.name if row.registered else None))
        return out

    def _name_index(self) -> dict[str, str]:
        """name (lower case) -> the label that went by it first; a name no observation saw (a
        registration at a machine's wake, the run ending before the next sample) is read from the
        final rows: names are never reissued."""
        out: dict[str, str] = {}
        for _, label, n in self.observations:
            if n:
                out.setdefault(n.lower(), label)  # type: ignore[arg-type]
        for row in self.db["sessions"]:
            label = self.label_of.get(row["session_id"])
            if label is not None and row.get("name"):
                out.setdefault(str(row["name"]).lower(), label)
        return out

    def name_observations(self) -> list[Observation]:
        """(event, label, name or None when not registered) from samples, registered events and hook lines."""
        return self.observations

    def seen_as(self, label: Optional[str]) -> list[Observation]:
        """The label's own name observations, in history order."""
        return self._seen_as.get(label, [])

    def names_of(self, label: str) -> list[str]:
        """Every assigned name the label went by, in first-seen order."""
        out: list[str] = []
        for _, _, name in self._seen_as.get(label, ()):
            if name and name not in out:
                out.append(name)
        return out

    def name_at(self, label: str, i: Optional[float] = None) -> Optional[str]:
        name = None
        for e, _, n in self._seen_as.get(label, ()):
            if n and (i is None or e.i <= i):
                name = n
        if name is None and i is None:
            row = self.final_row(label)
            name = row["name"] if row else None
        return name

    def name_by(self, label: str, t: int) -> Optional[str]:
        """The last name `label` went by at or before virtual time t (None: no name yet).
        A session that left keeps its last name here, as for step replies (`name_at`)."""
        name = None
        for e, _, n in self._seen_as.get(label, ()):
            if n and e.t <= t:
                name = n
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
        out.update(self._registered_names)
        for r in self.db["sessions"]:
            out[r["session_id"]] = r["name"]
        return out

    def label_for_name(self, name: str) -> Optional[str]:
        """The label that went by `name` (case-insensitive), None when no one did."""
        return self._by_name.get(str(name).lower())

    def expand(self, text: Any, at: Any = "end") -> Any:
        """`{label}` -> the name that session went by at time `at` (`end`: its final
        name); left as the literal `{label}` when it had none by then. A point
        expectation at 3m must see the 3m name, not one minted later in the run."""
        if not isinstance(text, str):
            return text
        look = self.name_at if at == "end" else (lambda label: self.name_by(label, int(at)))
        return LABEL_PLACEHOLDER.sub(lambda m: look(m.group(1)) or m.group(0), text)

    def registered_before(self, label: str, t: int) -> bool:
        """Was the label's last name observation before time t a registered one (or none at all)?"""
        last = [n for e, _, n in self._seen_as.get(label, ()) if e.t < t]
        return not last or last[-1] is not None

    # -- the hourly prune (R26) ---------------------------------------------------------

    @cached_property
    def _touches_of(self) -> dict[str, list[tuple[float, int]]]:
        """label -> (position, virtual time) of each known touch of its row, in history order."""
        index: dict[str, list[tuple[float, int]]] = {}
        for e in self._history.of(POLL, REGISTERED, SAMPLE):
            if isinstance(e, Sample):
                for who, row in e.sessions.items():
                    seen = self.vt(row.last_seen) if row.registered and row.last_seen else None
                    if seen is not None:
                        index.setdefault(who, []).append((e.i, seen))
            else:
                touched = {e.session, *((e.hosted or ()) if e.kind == POLL else ())}
                for who in touched:
                    index.setdefault(who, []).append((e.i, e.t))
        return {who: sorted(out) for who, out in index.items()}

    def could_be_pruned(self, label: str, before: Event, after: Event, *, end: Optional[int] = None) -> bool:
        """Could the hourly prune (R26) have deleted `label`'s row between two events: was it
        silent for longer than the auto-row TTL at some instant in between? The row is touched
        by the beats of the polls hosting it and by its registrations; a sample shows its
        last_seen. The silence starts at the last touch known at `before` (the run's start when
        none is). `end`: judge up to that time instead, past every event after `before`."""
        after_i, after_t = (float("inf"), end) if end is not None else (after.i, after.t)
        touches = self._touches_of.get(label, ())
        seen = max((t for i, t in touches if i <= before.i), default=0)
        for i, t in touches:
            if before.i < i < after_i:
                if t - seen > AUTO_ROW_TTL_MS:
                    return True
                seen = max(seen, t)
        return after_t - seen > AUTO_ROW_TTL_MS
