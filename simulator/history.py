"""The run history: one append-only JSONL file per process, merged at the end.

Every process (the orchestrator and each harness incarnation) owns one
`Recorder` writing `history/<proc>.<incarnation>.jsonl`. A line is written
with a single `os.write` on an `O_APPEND` descriptor, no userspace buffer:
once `emit` returns the event is in the kernel, so a SIGKILL a microsecond
later (a crash point, a kill fault) loses nothing already recorded.

`merge` puts the files together in dispatch order: `(dispatch, proc rank,
incarnation, seq)`. An event a process recorded under a provisional dispatch
number (a window of the windowed engine, simulator/engine/window.py) gets its
final number from the engine's `Renumbering` as the merge decodes it, before
the sort: the per-process files stay as they were written (D-history-3).
Nothing non-deterministic is ever written (no pid, no wall time, keys
sorted), so the same scenario and seed give a byte-identical `history.jsonl`.
See docs/history.md for the event catalog and `simulator/events.py` for its
kinds and their fields, which `emit` checks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from simulator.events import CRASH, HARNESS_FIELDS, ORCHESTRATOR_FIELDS, Event, check, decode

ORCHESTRATOR = "orchestrator"
HISTORY_DIR = "history"
MERGED_NAME = "history.jsonl"

# (process label, incarnation) -> {provisional dispatch number: final one}: what the windowed
# engine learnt of the entries a process ran in its windows, handed to `merge`.
Renumbering = Mapping[tuple[str, int], Mapping[int, int]]


# sort_keys + compact separators: the bytes depend on the values only. One
# encoder built once: json.dumps with these options builds a new one per call
# (a few us of every event); the output is the same bytes.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def encode_event(obj: Any) -> str:
    """One history line, without its newline: keys sorted, compact, non-ASCII kept."""
    return _ENCODER.encode(obj)


def process_file(run_dir: os.PathLike | str, proc: str, incarnation: int) -> Path:
    """Where one process incarnation's events are written."""
    return Path(run_dir) / HISTORY_DIR / f"{proc}.{incarnation}.jsonl"


class Recorder:
    """Appends this process's events to its own history file.

    `current(dispatch, t)` is set by the worker (or the orchestrator) before
    each command, so harness code just calls `emit(KIND, session, **data)`
    with a kind of `simulator.events`. The orchestrator's recorder takes the
    orchestrator's kinds, any other the harnesses'; an undeclared kind or
    field raises `UndeclaredEvent` before anything is written. `strict =
    False` lifts the check, for a test double recording kinds of its own.
    """

    def __init__(self, path: os.PathLike | str, proc: str, *, incarnation: int = 0) -> None:
        self.path = Path(path)
        self.proc = proc
        self.incarnation = incarnation
        self.dispatch = 0
        self.t = 0
        self._seq = 0
        self._kinds: set[str] = set()
        self._fields = ORCHESTRATOR_FIELDS if proc == ORCHESTRATOR else HARNESS_FIELDS
        self.strict = True
        self.crashes: list[dict[str, Any]] = []  # crash events so far (the worker reports new ones)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: Optional[int] = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    @classmethod
    def for_process(cls, run_dir: os.PathLike | str, proc: str, incarnation: int = 0) -> "Recorder":
        return cls(process_file(run_dir, proc, incarnation), proc, incarnation=incarnation)

    def current(self, dispatch: int, t: int) -> None:
        """The dispatch being served and its virtual time; stamps every later event."""
        self.dispatch = dispatch
        self.t = t

    def emit(self, kind: str, /, session: Optional[str] = None, **data: Any) -> dict[str, Any]:
        if self.strict:
            check(kind, data, self._fields)
        event = {
            "t": self.t,
            "dispatch": self.dispatch,
            "proc": self.proc,
            "inc": self.incarnation,
            "session": session,
            "kind": kind,
            "data": data,
            "seq": self._seq,
        }
        line = (encode_event(event) + "\n").encode("utf-8")
        if self._fd is None:
            raise RuntimeError(f"recorder for {self.proc} is closed")
        # One write per line: O_APPEND makes it atomic against other writers
        # and nothing sits in a buffer a SIGKILL could lose.
        written = os.write(self._fd, line)
        while written < len(line):  # a short write on a regular file is rare; finish it
            written += os.write(self._fd, line[written:])
        self._seq += 1
        self._kinds.add(kind)
        if kind == CRASH:
            self.crashes.append(dict(data, session=session))
        return event

    def has_emitted(self, kind: str) -> bool:
        return kind in self._kinds

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self) -> None:  # pragma: no cover - best effort
        try:
            self.close()
        except Exception:
            pass


def read_events(path: os.PathLike | str) -> list[dict[str, Any]]:
    """The events of one per-process file; a torn last line (killed mid-write) is skipped."""
    events = []
    try:
        data = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return events
    for line in data.splitlines():
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def merge(run_dir: os.PathLike | str, proc_order: Optional[Iterable[str]] = None,
          renumbering: Optional[Renumbering] = None) -> list[dict[str, Any]]:
    """Merge every per-process file into `history.jsonl`; returns the events.

    Each event recorded under a provisional dispatch number that `renumbering`
    knows for its process incarnation takes its final number first (a number
    the table lacks stays as written). Order: dispatch, then the orchestrator,
    then processes in `proc_order`
    (the scenario's declaration order; unknown labels after, alphabetically),
    then incarnation and per-file sequence. The orchestrator records the
    events that *cause* a dispatch under that dispatch and the ones that
    *react* to a reply under a fresh dispatch, so "orchestrator first" is
    also causal order. Each event gets its position `i`; `seq` and `inc` are
    file bookkeeping and are dropped.
    """
    run_dir = Path(run_dir)
    rank = {ORCHESTRATOR: 0}
    for label in proc_order or ():
        rank.setdefault(label, len(rank))
    events: list[dict[str, Any]] = []
    for path in sorted((run_dir / HISTORY_DIR).glob("*.jsonl")):
        events.extend(_with_final_dispatch(read_events(path), renumbering or {}))

    def key(e: dict[str, Any]):
        proc = e.get("proc", "")
        return (e.get("dispatch", 0), rank.get(proc, len(rank)), proc, e.get("inc", 0), e.get("seq", 0))

    merged = []
    for i, e in enumerate(sorted(events, key=key)):
        merged.append({
            "i": i,
            "t": e.get("t", 0),
            "dispatch": e.get("dispatch", 0),
            "proc": e.get("proc"),
            "session": e.get("session"),
            "kind": e.get("kind"),
            "data": e.get("data", {}),
        })
    out = run_dir / MERGED_NAME
    with open(out, "w", encoding="utf-8", newline="\n") as fh:
        for e in merged:
            fh.write(encode_event(e) + "\n")
    return merged


def _with_final_dispatch(events: list[dict[str, Any]], renumbering: Renumbering) -> list[dict[str, Any]]:
    """`events` of one process file, each provisional dispatch number replaced by its final one."""
    for e in events:
        numbers = renumbering.get((e.get("proc"), e.get("inc", 0)))
        if numbers and e.get("dispatch") in numbers:
            e["dispatch"] = numbers[e["dispatch"]]
    return events


def load(path: os.PathLike | str) -> list[dict[str, Any]]:
    """Read a merged `history.jsonl` back."""
    return read_events(path)


def event_place(event: dict[str, Any], unknown: str = ORCHESTRATOR) -> str:
    """Where an event happened, `proc/session` or just `proc` (`unknown` when it names no process)."""
    return (event.get("proc") or unknown) + (f"/{event['session']}" if event.get("session") else "")


class History(Sequence[Event]):
    """A run's events in history order, each decoded once into its record (simulator/events.py).

    `of` finds events by kind (and session, process); `cut(i)` is the history as it stood at position
    i, events after it gone: every index the judges build from a cut history sees only what had
    happened by then."""

    __slots__ = ("events", "_by_kind", "limit")

    def __init__(self, events: Iterable[Event], limit: Optional[float] = None) -> None:
        self.events: tuple[Event, ...] = tuple(events)
        self.limit = limit  # the position it was cut at (None: the whole run)
        by_kind: dict[str, list[Event]] = {}
        for e in self.events:
            by_kind.setdefault(e.kind, []).append(e)
        self._by_kind = by_kind

    @classmethod
    def decode(cls, lines: Iterable[Any]) -> "History":
        """History lines (merged ones, or hand-built events without `i`) as records; records pass as they are."""
        return cls(e if isinstance(e, Event) else decode(e, n) for n, e in enumerate(lines))

    def __len__(self) -> int:
        return len(self.events)

    def __getitem__(self, n: Any) -> Any:
        return self.events[n]

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def of(self, *kinds: str, session: Optional[str] = None, proc: Optional[str] = None) -> list[Any]:
        """The events of these kinds, in history order, of one session or process when given."""
        evs = [e for k in kinds for e in self._by_kind.get(k, ())]
        if len(kinds) > 1:
            evs.sort(key=lambda e: e.i)
        if session is None and proc is None:
            return evs
        return [e for e in evs if (session is None or e.session == session) and (proc is None or e.proc == proc)]

    def cut(self, i: float) -> "History":
        """The history up to and including position i."""
        return History((e for e in self.events if e.i <= i), limit=i)
