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

from thatch_core.db import (
    BUSY_RETRIES, CALL_BUDGET, StoreError, backoff_s, is_busy, spend_busy_attempt, wrap_error,
)
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
        # The real schema stores an undetected checkout as '' (its column is NOT NULL).
        auto=bool(auto), worktree=worktree if worktree in ("root", "worktree") else None,
        registered_at=reg, last_seen=seen,
    )


def chunks(items: Sequence, size: int = CHUNK) -> Iterable[Sequence]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


@functools.lru_cache(maxsize=CHUNK + 1)
def marks(n: int) -> str:
    return ",".join("?" * n)


# ----------------------------------------------------------------------
# Argument checks
# ----------------------------------------------------------------------

# SQLite's INTEGER is a signed 64-bit number: a larger Python int cannot be bound.
MAX_SQL_INT = 2**63 - 1


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be stored as text, or None: a lone surrogate
    (``"\udc80"``, which ``json.loads`` makes of a ``\\udc80`` escape) has no UTF-8 form."""
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"unpaired surrogate {shown(value[exc.start])} at character {exc.start + 1}"
    return None


def is_text(value: Any) -> bool:
    """A string that can be stored (valid Unicode, no lone surrogate)."""
    return isinstance(value, str) and text_problem(value) is None


def shown(value: str) -> str:
    """``value`` safe to put in a reply: a lone surrogate as its ``\\udc80`` escape."""
    return value.encode("utf-8", "backslashreplace").decode("utf-8")


def is_id(value: Any) -> bool:
    """A usable session id (or name): storable text with something besides blanks."""
    return is_text(value) and bool(value.strip())


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


class IdMemo:
    """:func:`id_list` of the last list given, kept by one store for its poller.

    A poller passes the same hosted list every cycle; the answer is a pure
    function of the list's items (immutable strings), so an equal list gets
    the same answer without re-checking each id (D-speed-core-4). Anything
    but a plain list of plain strings takes :func:`id_list` every time.
    """

    __slots__ = ("key", "ids")

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.ids: tuple = ()

    def __call__(self, values: Any) -> tuple:
        if type(values) is not list:
            return tuple(id_list(values))
        key = tuple(values)
        if key == self.key:
            return self.ids
        ids = tuple(id_list(key))
        if all(type(v) is str for v in key):
            self.key, self.ids = key, ids
        return ids


def is_row_id(value: Any) -> bool:
    """A usable message id or pid: a positive int SQLite can hold (a bool is not a number here)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_SQL_INT


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
    """Advisory text (a title, a project): a storable string, else no value."""
    return value if is_text(value) else None


# ----------------------------------------------------------------------
# The call guard
# ----------------------------------------------------------------------

def guarded(method):
    """Serialise calls on one store and translate every sqlite3 error.

    A statement that still hits SQLITE_BUSY (rare outside ``BEGIN``) re-runs
    the whole method: each public method is atomic, so nothing of the failed
    try persisted. Inside an open transaction a retry is impossible (the
    transaction is already rolled back by ``immediate``), so it surfaces.
    Every wait on the lock in one call, here and in ``immediate``, spends the
    call's one :func:`~thatch_core.db.busy_budget` (D-store-18). A value the
    argument checks let through and sqlite cannot bind is a StoreError too,
    never a ``UnicodeEncodeError`` or ``OverflowError`` (D-store-20).
    """
    doing = method.__name__

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        # The common case inline (no helper frames): one try that succeeds.
        # Every failure takes _retrying, which runs the whole retry loop.
        with self._lock:
            # thatch_core.db.busy_budget, inline: a nested call joins the outer budget.
            opened = CALL_BUDGET.left is None
            if opened:
                CALL_BUDGET.left = BUSY_RETRIES
            try:
                return method(self, *args, **kwargs)
            except sqlite3.Error as exc:
                return _retrying(method, self, args, kwargs, exc, doing)
            except (UnicodeEncodeError, OverflowError) as exc:
                raise StoreError(f"a value given to {doing} cannot be stored ({exc})") from exc
            finally:
                if opened:
                    CALL_BUDGET.left = None
    return wrapper


def _retrying(method, store, args, kwargs, exc: Exception, doing: str):
    """The guard's loop after the first try of ``method`` raised ``exc``: re-run
    it while a statement outside a transaction was busy and the budget lasts."""
    attempt = 0
    while True:
        if not isinstance(exc, sqlite3.Error):
            raise StoreError(f"a value given to {doing} cannot be stored ({exc})") from exc
        if not (is_busy(exc) and not _in_tx(store.conn) and spend_busy_attempt(BUSY_RETRIES - attempt - 1)):
            raise wrap_error(exc, doing) from exc
        time.sleep(backoff_s(attempt))
        attempt += 1
        try:
            return method(store, *args, **kwargs)
        except (sqlite3.Error, UnicodeEncodeError, OverflowError) as again:
            exc = again


def _in_tx(conn: sqlite3.Connection) -> bool:
    try:
        return conn.in_transaction
    except sqlite3.Error:  # a closed connection
        return False
