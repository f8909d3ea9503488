"""The shared SQLite file: connection setup, schema, migrations, transactions.

Every opencode process on the machine (and every hook / MCP server) opens the
same WAL database. Three habits keep that safe (see docs/pitfalls.md):

- ``isolation_level=None`` and explicit ``BEGIN IMMEDIATE`` for every
  read-modify-write: a deferred ``BEGIN`` that reads then writes fails with
  ``SQLITE_BUSY_SNAPSHOT`` whatever the busy timeout.
- SQLite's busy handler is unfair, so a real ``SQLITE_BUSY`` can escape the
  timeout: :func:`immediate` retries with a bounded backoff and then raises
  :class:`StoreBusy`.
- No connection crosses a fork: open one per process, after the fork.

Schema versions (``PRAGMA user_version``):

- 0: a fresh file, or the 002-era schema (:data:`LEGACY_SCHEMA_002`, which
  never stamped a version):
  ``chat_sessions`` without ``auto``/``worktree`` and with a case-sensitive
  ``name``, ``chat_messages`` without ``via_broadcast``, no counters,
  tombstones, host-pid or pruned tables.
- 2: the current schema (:data:`SCHEMA_VERSION`). 1 is reserved for the
  002-era layout should a stamped copy of it ever turn up.

Migration is idempotent and inspects the actual tables rather than trusting
the stamp, so a half-migrated or hand-edited file converges too.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
from contextlib import contextmanager
from typing import Iterator

from thatch_core import clock


class StoreError(Exception):
    """A store operation failed; the message says what was refused and why."""


class StoreBusy(StoreError):
    """The database stayed locked by other processes past the retry budget."""


SCHEMA_VERSION = 2

# Retry budget for SQLITE_BUSY that escapes the busy handler. Counted in
# attempts, never in elapsed time: time.monotonic is frozen under freezegun.
BUSY_RETRIES = 6
_BACKOFF_BASE_S = 0.005
_BACKOFF_CAP_S = 0.25

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6

_SESSIONS_DDL = """
CREATE TABLE chat_sessions (
    session_id    TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE COLLATE NOCASE,
    topic         TEXT,
    project       TEXT,
    host_kind     TEXT NOT NULL DEFAULT 'opencode',
    auto          INTEGER NOT NULL DEFAULT 0,
    worktree      TEXT,
    registered_at TEXT NOT NULL,
    last_seen     TEXT NOT NULL
)"""

_MESSAGES_DDL = """
CREATE TABLE IF NOT EXISTS chat_messages (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    from_session  TEXT NOT NULL,
    to_session    TEXT NOT NULL,
    body          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    delivered_at  TEXT,
    read_at       TEXT,
    via_broadcast INTEGER NOT NULL DEFAULT 0
)"""

# The 002-era layout, exactly as chat.ts created it (never stamped a
# user_version). Nothing here creates it: it is what `_migrate` must accept,
# kept as one definition for the simulator's `legacy:` worlds and the tests.
LEGACY_SCHEMA_002 = (
    """
CREATE TABLE chat_sessions (
    session_id    TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    topic         TEXT,
    project       TEXT,
    host_kind     TEXT NOT NULL DEFAULT 'opencode',
    registered_at TEXT NOT NULL,
    last_seen     TEXT NOT NULL
)""",
    """
CREATE TABLE chat_messages (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    from_session  TEXT NOT NULL,
    to_session    TEXT NOT NULL,
    body          TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    delivered_at  TEXT,
    read_at       TEXT
)""",
)

# Endpoints are deliberately not foreign keys (R11): leaving the directory
# must never be blocked by, or cascade into, message history.
_OTHER_DDL = (
    "CREATE TABLE IF NOT EXISTS chat_name_counters ("
    " base TEXT PRIMARY KEY, counter INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS chat_leave_tombstones ("
    " session_id TEXT PRIMARY KEY, left_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS chat_host_pids ("
    " pid INTEGER PRIMARY KEY, session_id TEXT NOT NULL, recorded_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS chat_pruned ("
    " session_id TEXT PRIMARY KEY, pruned_at TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS chat_messages_to_unread"
    " ON chat_messages (to_session, read_at)",
    "CREATE INDEX IF NOT EXISTS chat_messages_from ON chat_messages (from_session)",
)

_SESSION_COLUMNS = (
    "session_id", "name", "topic", "project", "host_kind", "auto", "worktree",
    "registered_at", "last_seen",
)


# --------------------------------------------------------------------------
# Errors and retry
# --------------------------------------------------------------------------

def is_busy(exc: BaseException) -> bool:
    """True for SQLITE_BUSY / SQLITE_LOCKED (any extended code)."""
    if not isinstance(exc, sqlite3.Error):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def wrap_error(exc: sqlite3.Error, doing: str) -> StoreError:
    """Turn a raw sqlite3 exception into the store's own error type."""
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    if is_busy(exc):
        return StoreBusy(f"database is locked by another process while {doing} ({name}): {exc}")
    return StoreError(f"database error while {doing} ({name}): {exc}")


def backoff_s(attempt: int) -> float:
    """Sleep before retry ``attempt`` (0-based): exponential, capped, jittered.

    The jitter is derived from the pid, not from a random source: processes
    still de-synchronise, and a run stays reproducible.
    """
    base = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * (2 ** attempt))
    jitter = ((os.getpid() * 7919 + attempt * 104729) % 1000) / 1000.0
    return base * (0.5 + jitter)


def _retry_busy(fn, doing: str, attempts: int):
    """Run ``fn()`` retrying SQLITE_BUSY; StoreBusy once the budget is spent."""
    for attempt in range(attempts):
        try:
            return fn()
        except sqlite3.Error as exc:
            if not is_busy(exc):
                raise wrap_error(exc, doing) from exc
            if attempt == attempts - 1:
                raise StoreBusy(
                    f"database stayed locked while {doing} "
                    f"({attempts} attempts): {exc}"
                ) from exc
            time.sleep(backoff_s(attempt))
    raise AssertionError("unreachable")  # pragma: no cover


# --------------------------------------------------------------------------
# Transactions
# --------------------------------------------------------------------------

@contextmanager
def immediate(conn: sqlite3.Connection, *, attempts: int | None = None) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any error).

    The write lock is taken up front, so reads inside see the state the
    writes apply to (no BUSY_SNAPSHOT). A ``BEGIN`` that stays busy past the
    busy handler is retried ``attempts`` times (default :data:`BUSY_RETRIES`)
    with backoff, then :class:`StoreBusy`. A raw ``sqlite3.Error`` raised in
    the body is rolled back and re-raised as :class:`StoreError`.

    Used inside an already-open transaction it joins it (no new BEGIN), so
    helpers compose into one atomic unit.
    """
    if conn.in_transaction:
        yield conn
        return
    n = BUSY_RETRIES if attempts is None else max(1, attempts)
    _retry_busy(lambda: conn.execute("BEGIN IMMEDIATE"), "starting a write transaction", n)
    try:
        yield conn
    except BaseException as exc:
        _rollback(conn)
        if isinstance(exc, sqlite3.Error):
            raise wrap_error(exc, "writing") from exc
        raise
    else:
        try:
            _retry_busy(lambda: conn.execute("COMMIT"), "committing", n)
        except BaseException:
            _rollback(conn)
            raise


def _rollback(conn: sqlite3.Connection) -> None:
    # SQLite may already have rolled back (some errors end the transaction).
    try:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
    except sqlite3.Error:
        pass


# --------------------------------------------------------------------------
# Opening and schema
# --------------------------------------------------------------------------

def open_db(path: "str | os.PathLike[str]", *, busy_timeout_ms: int = 5000) -> sqlite3.Connection:
    """Open (creating and migrating as needed) the shared chat database.

    WAL, ``synchronous=NORMAL``, foreign keys off, ``isolation_level=None``.
    Safe when several processes open the same fresh file at once: the schema
    step runs under ``BEGIN IMMEDIATE`` and re-inspects the tables inside it.
    ``check_same_thread`` is off because the poller's timer thread uses the
    connection; ChatStore serialises its own calls with a lock.
    """
    try:
        conn = sqlite3.connect(
            os.fspath(path),
            timeout=busy_timeout_ms / 1000.0,
            isolation_level=None,
            check_same_thread=False,
        )
    except sqlite3.Error as exc:
        raise wrap_error(exc, f"opening {os.fspath(path)!r}") from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        # Switching to WAL needs a brief exclusive lock; a concurrent opener
        # can make it busy, so it gets the same bounded retry.
        mode = _retry_busy(
            lambda: conn.execute("PRAGMA journal_mode = WAL").fetchone()[0],
            "switching to WAL", BUSY_RETRIES,
        )
        if str(mode).lower() != "wal":
            raise StoreError(f"could not switch {os.fspath(path)!r} to WAL (journal_mode={mode})")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = OFF")
        with immediate(conn):
            _migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def schema_version(conn: sqlite3.Connection) -> int:
    """The ``PRAGMA user_version`` stamp of the open database."""
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as exc:
        raise wrap_error(exc, "reading the schema version") from exc


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def _table_sql(conn: sqlite3.Connection, table: str) -> str | None:
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
    ).fetchone()
    return row[0] if row else None


_NOCASE_NAME_RE = re.compile(r"\bname\b[^,]*\bCOLLATE\s+NOCASE\b", re.IGNORECASE)


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema to :data:`SCHEMA_VERSION`; a no-op when it is there.

    Runs inside the caller's ``BEGIN IMMEDIATE``: a second process opening
    at the same moment waits, then finds the work done.
    """
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"database schema version {version} is newer than this code "
            f"understands ({SCHEMA_VERSION}); upgrade thatch_core instead of "
            "opening it with an older build"
        )
    _ensure_sessions(conn)
    _ensure_messages(conn)
    for ddl in _OTHER_DDL:
        conn.execute(ddl)
    if version != SCHEMA_VERSION:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _ensure_sessions(conn: sqlite3.Connection) -> None:
    sql = _table_sql(conn, "chat_sessions")
    if sql is None:
        conn.execute(_SESSIONS_DDL)
        return
    cols = _columns(conn, "chat_sessions")
    if all(c in cols for c in _SESSION_COLUMNS) and _NOCASE_NAME_RE.search(sql):
        return
    _rebuild_sessions(conn, cols)


def _rebuild_sessions(conn: sqlite3.Connection, cols: list[str]) -> None:
    """Copy an old ``chat_sessions`` into the current layout.

    Old rows become legacy rows (``auto = 0``: prune keeps them, their topic
    is never refreshed from titles) unless the old table already had an
    ``auto`` column. The name gains NOCASE uniqueness; two old names that
    differ only in case cannot both survive that, so the later-registered
    one gets a ``-2``, ``-3`` ... suffix (D-store-6) instead of being lost.
    """
    now = clock.iso()
    select = ", ".join(c if c in cols else "NULL" for c in _SESSION_COLUMNS)
    order = "registered_at, rowid" if "registered_at" in cols else "rowid"
    rows = conn.execute(f"SELECT {select} FROM chat_sessions ORDER BY {order}").fetchall()
    taken: set[str] = set()
    fixed = []
    for sid, name, topic, project, kind, auto, worktree, reg, seen in rows:
        base = name or sid
        candidate, n = base, 1
        while candidate.casefold() in taken:
            n += 1
            candidate = f"{base}-{n}"
        taken.add(candidate.casefold())
        fixed.append((
            sid, candidate, topic, project, kind or "opencode",
            1 if auto else 0, worktree, reg or seen or now, seen or reg or now,
        ))
    conn.execute("DROP TABLE IF EXISTS chat_sessions_migrating")
    conn.execute(_SESSIONS_DDL.replace("chat_sessions", "chat_sessions_migrating", 1))
    conn.executemany(
        "INSERT INTO chat_sessions_migrating (session_id, name, topic, project, host_kind,"
        " auto, worktree, registered_at, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        fixed,
    )
    conn.execute("DROP TABLE chat_sessions")
    conn.execute("ALTER TABLE chat_sessions_migrating RENAME TO chat_sessions")


def _ensure_messages(conn: sqlite3.Connection) -> None:
    conn.execute(_MESSAGES_DDL)
    cols = _columns(conn, "chat_messages")
    # Old rows predate broadcast marking: they read as ordinary sends.
    if "via_broadcast" not in cols:
        conn.execute("ALTER TABLE chat_messages ADD COLUMN via_broadcast INTEGER NOT NULL DEFAULT 0")
    if "delivered_at" not in cols:
        conn.execute("ALTER TABLE chat_messages ADD COLUMN delivered_at TEXT")
    if "read_at" not in cols:
        conn.execute("ALTER TABLE chat_messages ADD COLUMN read_at TEXT")
