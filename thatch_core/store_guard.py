"""Plumbing shared by the ChatStore modules: the call guard, row mapping,
chunking, and argument checks.

The store promises two things to every caller (docs/api-contract.md): no raw
``sqlite3`` exception ever escapes (``guarded`` translates them into
:class:`~thatch_core.db.StoreError` / :class:`~thatch_core.db.StoreBusy`),
and a bad argument (``None``, a number where an id belongs, a negative pid)
is answered like any other "no such thing" or refused with a text, never by
a ``TypeError`` from deep inside sqlite. The checks below are how the store
methods tell a usable argument from one that can only be refused.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from typing import Any, Iterable, Sequence

from thatch_core.db import BUSY_RETRIES, StoreBusy, backoff_s, is_busy, wrap_error
from thatch_core.types import SessionRow

HOST_KINDS = ("opencode", "mcp")

ROW_COLS = ("session_id, name, topic, project, host_kind, auto, worktree, "
            "registered_at, last_seen")
# SQLite's default bound-parameter limit is 999 on old builds; stay below it.
CHUNK = 500


def row_of(r: Sequence) -> SessionRow:
    """A ``chat_sessions`` row (selected as :data:`ROW_COLS`) as a SessionRow."""
    sid, name, topic, project, kind, auto, worktree, reg, seen = r
    return SessionRow(
        session_id=sid, name=name,
        topic=topic or None,  # an empty legacy topic reads as no topic
        project=project, host_kind=kind if kind in HOST_KINDS else "opencode",
        auto=bool(auto), worktree=worktree, registered_at=reg, last_seen=seen,
    )


def chunks(items: Sequence, size: int = CHUNK) -> Iterable[Sequence]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def marks(n: int) -> str:
    return ",".join("?" * n)


# ----------------------------------------------------------------------
# Argument checks
# ----------------------------------------------------------------------

def is_id(value: Any) -> bool:
    """A usable session id (or name): a string with something besides blanks."""
    return isinstance(value, str) and bool(value.strip())


def id_list(values: Any) -> list[str]:
    """Distinct usable ids, in order. A bare string is one id (not its
    characters); anything that is not a string or an iterable of them yields
    what it can, so a garbled hosted list beats the sessions it does name."""
    if isinstance(values, str):
        values = (values,)
    try:
        items = list(values)
    except TypeError:
        return []
    return list(dict.fromkeys(v for v in items if is_id(v)))


def is_row_id(value: Any) -> bool:
    """A usable message id or pid: a positive int (a bool is not a number here)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def row_id_list(values: Any) -> list[int]:
    """Distinct positive int ids, in order; a single int is one id."""
    if isinstance(values, int):
        values = (values,)
    try:
        items = list(values)
    except TypeError:
        return []
    return list(dict.fromkeys(v for v in items if is_row_id(v)))


def text_or_none(value: Any) -> str | None:
    """Advisory text (a title, a project): a string, else no value."""
    return value if isinstance(value, str) else None


# ----------------------------------------------------------------------
# The call guard
# ----------------------------------------------------------------------

def guarded(method):
    """Serialise calls on one store and translate every sqlite3 error.

    A statement that still hits SQLITE_BUSY (rare outside ``BEGIN``) re-runs
    the whole method: each public method is atomic, so nothing of the failed
    try persisted. Inside an open transaction a retry is impossible (the
    transaction is already rolled back by ``immediate``), so it surfaces.
    """
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        doing = method.__name__
        with self._lock:
            for attempt in range(BUSY_RETRIES):
                try:
                    return method(self, *args, **kwargs)
                except sqlite3.Error as exc:
                    if is_busy(exc) and attempt < BUSY_RETRIES - 1 and not _in_tx(self.conn):
                        time.sleep(backoff_s(attempt))
                        continue
                    raise wrap_error(exc, doing) from exc
            raise StoreBusy(f"database stayed locked during {doing}")  # pragma: no cover
    return wrapper


def _in_tx(conn: sqlite3.Connection) -> bool:
    try:
        return conn.in_transaction
    except sqlite3.Error:  # a closed connection
        return False
