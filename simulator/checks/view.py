"""The run as the judges see it: its typed history, its final database, and the indexes over them.

Properties (`simulator.checks.delivery`, `.liveness`, `.messages`, `.identity`, ...), reach claims
(`simulator.checks.reach`) and point expectations (`simulator.checks.expectations`) all ask the
same questions of a run. `RunView` holds the answers, each computed once in a small index
(`simulator.checks.indexes`): `hosting` (incarnations and what each hosts when), `names` (ids
and assigned names), `mail` (calls and results, leaves, new mail) and `disturbances` (sleeps,
locks, stalls), from what a user could observe (docs/history.md events and the SQLite file),
never from thatch_core internals. `cut(i)` is the run as it stood at history position i.

The view is tolerant on purpose: a harness may omit an optional field (`step`, `hosted`), and a
checker must then judge less, never crash.
"""

from __future__ import annotations

import sqlite3
from functools import partial
from pathlib import Path
from typing import Any, Iterable, Optional

from simulator.checks.indexes.disturbances import Disturbances
from simulator.checks.indexes.hosting import Hosting, Incarnation
from simulator.checks.indexes.mail import LEAVE_ACTIONS, Call, Mail, brief, short_tool
from simulator.checks.indexes.names import Names
from simulator.clock import parse_iso_ms
from simulator.design import STALE_MS
from simulator.events import PHASE, RUN_START, SAMPLE
from simulator.history import History
from simulator.scenario.model import Scenario

__all__ = ["RunView", "Call", "Incarnation", "LEAVE_ACTIONS", "brief", "short_tool", "load_db"]


class RunView:
    def __init__(self, spec: Optional[Scenario], history: Iterable[Any], db_path: Any,
                 run_info: Optional[dict] = None, *, db: Optional[dict] = None, t_end: Optional[int] = None,
                 epoch_ms: Optional[int] = None) -> None:
        self.spec = spec
        self.run_info = dict(run_info or {})
        self.history = history if isinstance(history, History) else History.decode(history)
        self.stale_ms = int(self.run_info.get("stale_ms", STALE_MS))
        self.db_path = db_path
        self.db = db if db is not None else load_db(db_path)
        self.t_end = t_end if t_end is not None else self._t_end()
        self.drain_t = next((e.t for e in self.history.of(PHASE) if e.phase == "drain"), None)
        self.steps = list(getattr(spec, "steps", []) or [])
        self.agents = {s.id: s.agent for p in getattr(spec, "processes", []) for s in p.sessions}
        # Asked per event by the judges, so read from the steps once.
        self.older_labels: dict[str, str] = spec.older_labels() if spec is not None else {}
        self.epoch_ms = epoch_ms if epoch_ms is not None else self._epoch()
        self.disturbances = Disturbances(self.history, self.steps)
        self.proc_kind = {p.id: p.kind for p in getattr(spec, "processes", [])}  # process label -> host kind
        # A function of the epoch, not the bound `self.vt`: an index holding the view would make a
        # cycle, and the run's records would then wait for a full collection instead of going with it.
        self.names = Names(self.history, self.db, self.proc_kind, self.run_info, partial(virtual_ms, self.epoch_ms))
        self.mail = Mail(self.history, self.steps, self.names, self.disturbances, self.t_end, self.history.limit)
        self.hosting = Hosting(self.history, spec, self.steps, self.mail, self.disturbances, self.t_end, self.run_info,
                               self.proc_kind)

    @property
    def children(self) -> set[str]:
        return self.hosting.children

    def cut(self, i: float) -> "RunView":
        """The run as it stood at history position i: every index built from the events up to it
        (the final database, the run's end and its epoch stay the whole run's)."""
        return RunView(self.spec, self.history.cut(i), self.db_path, self.run_info, db=self.db, t_end=self.t_end,
                       epoch_ms=self.epoch_ms)

    def _t_end(self) -> int:
        end = next((e.t for e in self.history.of(PHASE) if e.phase == "end"), None)
        if end is not None:
            return end
        if "duration_ms" in self.run_info:
            return int(self.run_info["duration_ms"]) + int(self.run_info.get("drain_ms", 0))
        return max((e.t for e in self.history), default=0)

    def lineage(self, label: Optional[str]) -> Optional[str]:
        """The session a label continues: a fork's older id (`fork.older_as`) is the forked session's."""
        return self.older_labels.get(label, label) if label is not None else None

    # -- time -----------------------------------------------------------------

    def _epoch(self) -> Optional[int]:
        """Wall ms of virtual time 0: given, or bounded from samples' last_seen."""
        if self.run_info.get("epoch_ms") is not None:
            return int(self.run_info["epoch_ms"])
        for e in self.history.of(RUN_START):
            if e.epoch_ms is not None:
                return int(e.epoch_ms)
        best = None
        for e in self.history.of(SAMPLE):
            for row in e.sessions.values():
                ms = parse_iso_ms(row.last_seen)
                if ms is not None:
                    best = ms - e.t if best is None else max(best, ms - e.t)
        return best

    def vt(self, iso: Any) -> Optional[int]:
        """Virtual time of a stored ISO stamp (None when unknown)."""
        return virtual_ms(self.epoch_ms, iso)


def virtual_ms(epoch_ms: Optional[int], iso: Any) -> Optional[int]:
    """Virtual time of a stored ISO stamp, given the wall ms of virtual time 0 (None when either is unknown)."""
    ms = parse_iso_ms(iso)
    return None if ms is None or epoch_ms is None else ms - epoch_ms


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

