"""The shared SQLite file: connection setup, schema, migrations, transactions.

Every opencode process on the machine (and every hook / MCP server) opens the
same WAL database. Three habits keep that safe (see docs/pitfalls.md):

- ``isolation_level=None`` and explicit ``BEGIN IMMEDIATE`` for every
  read-modify-write: a deferred ``BEGIN`` that reads then writes fails with
  ``SQLITE_BUSY_SNAPSHOT`` whatever the busy timeout.
- SQLite's busy handler is unfair, so a real ``SQLITE_BUSY`` can escape the
  timeout: :func:`immediate` retries with a bounded backoff and then raises
  :class:`StoreBusy`. One store call waits on a held lock at most
  :data:`BUSY_RETRIES` times in all (:func:`busy_budget`), so it gives up
  within :func:`worst_case_busy_ms`, well inside one poll interval.
- No connection crosses a fork: open one per process, after the fork.

Schema versions (``PRAGMA user_version``):

- 0: a fresh file, a file the real thatch wrote (it never stamps a version;
  its chat tables are already the current ones), or the 002-era schema of
  thatch 0.1.41 (:data:`LEGACY_SCHEMA_002`): ``chat_sessions`` without
  ``auto``/``worktree`` and with a case-sensitive ``name``, ``chat_messages``
  with ``via_broadcast``, no counters, tombstones or host-pid tables. Its
  rows become legacy rows (``auto = 0``), as the real thatch reads them.
- 2: thatch_core's earlier schema: the real tables without their defaults,
  ``chat_name_counters.counter`` (the last number drawn) and
  ``chat_host_pids (pid, session_id, recorded_at)``.
- 3: the current schema (:data:`SCHEMA_VERSION`): the real thatch's chat
  tables, columns and defaults, plus thatch_core's own tables. 1 is reserved
  for the 002-era layout should a stamped copy of it ever turn up.

Migration is idempotent and inspects the actual tables rather than trusting
the stamp, so a half-migrated or hand-edited file converges too.
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
import time
import urllib.parse
from contextlib import contextmanager
from typing import Iterator

from thatch_core import clock
from thatch_core.policy import POLICY_DDL


class StoreError(Exception):
    """A store operation failed; the message says what was refused and why."""


class StoreBusy(StoreError):
    """The database stayed locked by other processes past the retry budget: transient, a retry may succeed."""


class StoreFault(StoreError):
    """The database cannot serve until someone acts: damaged, read-only, its disk full or failing,
    or not openable. ``kind`` says which (a key of :data:`FAULT_KINDS`); retrying does not help."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind

    @property
    def reason(self) -> str:
        return FAULT_KINDS[self.kind][0]

    @property
    def remedy(self) -> str:
        return FAULT_KINDS[self.kind][1]


SCHEMA_VERSION = 3

# The connection settings are the real ThatchDB's (busy_timeout 5000,
# foreign_keys ON, SQLite's default synchronous FULL): one thatch.db is opened
# by both, and each connection is governed by its own (D-store-23).
BUSY_TIMEOUT_MS = 5000
SYNCHRONOUS = "FULL"
FOREIGN_KEYS = True
# Retry budget for SQLITE_BUSY that escapes the busy handler. Counted in
# attempts, never in elapsed time: time.monotonic is frozen under freezegun.
# Each attempt waits at most the busy timeout, so one store call waits at most
# BUSY_RETRIES x BUSY_TIMEOUT_MS (plus the backoff): 25 s, under the 30 s poll
# interval (D-store-18).
BUSY_RETRIES = 5
_BACKOFF_BASE_S = 0.005
_BACKOFF_CAP_S = 0.25

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6

# Primary result codes that no retry cures (D-store-19), and what the reply says of each.
FAULT_KINDS = {
    "corrupt": ("the chat database file is damaged", "it is repaired or replaced"),
    "read-only": ("the chat database is read-only", "it is writable again"),
    "full": ("the disk holding the chat database is full", "space is freed"),
    "disk": ("the disk failed while reading or writing the chat database", "the disk is fixed"),
    "unopenable": ("the chat database cannot be opened", "its file and directory can be read and written"),
}
_FAULT_CODES = {11: "corrupt", 26: "corrupt", 8: "read-only", 13: "full", 10: "disk", 14: "unopenable",
                3: "unopenable", 23: "unopenable"}

# The chat tables exactly as the real thatch creates them (src/db.ts): the
# same tables, columns, types, constraints and defaults, so one thatch.db
# serves both (D-real-store-5). Timestamps default to the second-resolution
# UTC form every writer uses, so string comparison between stamps holds.
_NOW_DEFAULT = "(strftime('%Y-%m-%dT%H:%M:%SZ','now'))"

_SESSIONS_DDL = f"""
CREATE TABLE chat_sessions (
    session_id    TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE COLLATE NOCASE,
    topic         TEXT,
    project       TEXT,
    host_kind     TEXT NOT NULL DEFAULT ('opencode'),
    registered_at TEXT NOT NULL DEFAULT {_NOW_DEFAULT},
    last_seen     TEXT NOT NULL DEFAULT {_NOW_DEFAULT},
    auto          INTEGER NOT NULL DEFAULT 0,
    worktree      TEXT NOT NULL DEFAULT ('')
)"""

# Endpoints are deliberately not foreign keys (R11): leaving the directory
# must never be blocked by, or cascade into, message history.
_MESSAGES_DDL = f"""
CREATE TABLE chat_messages (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    from_session  TEXT NOT NULL,
    to_session    TEXT NOT NULL,
    body          TEXT NOT NULL,
    created_at    TEXT NOT NULL DEFAULT {_NOW_DEFAULT},
    delivered_at  TEXT,
    read_at       TEXT,
    via_broadcast INTEGER NOT NULL DEFAULT 0
)"""

# `next` is the next unassigned number of a base (a first draw hands out 1
# and stores 2), as in the real thatch; schema 2 kept the last drawn number
# in `counter` (migrated as counter + 1).
_COUNTERS_DDL = """
CREATE TABLE chat_name_counters (
    base TEXT PRIMARY KEY,
    next INTEGER NOT NULL DEFAULT 1
)"""

_TOMBSTONES_DDL = f"""
CREATE TABLE chat_leave_tombstones (
    session_id TEXT PRIMARY KEY,
    left_at    TEXT NOT NULL DEFAULT {_NOW_DEFAULT}
)"""

_HOST_PIDS_DDL = f"""
CREATE TABLE chat_host_pids (
    ppid       INTEGER PRIMARY KEY,
    session_id TEXT NOT NULL,
    seen_at    TEXT NOT NULL DEFAULT {_NOW_DEFAULT}
)"""

# Tables the real thatch keeps that thatch_core never writes (a reaped
# session's name claim, which seed 001 rules out: a returning session gets a
# fresh name; plugin machinery markers). Created so a thatch_core file has
# every real chat table; a real file's rows in them are kept untouched.
_REAL_ONLY_DDL = (
    "CREATE TABLE IF NOT EXISTS chat_name_claims ("
    " name TEXT PRIMARY KEY, session_id TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS chat_machinery ("
    f" session_id TEXT PRIMARY KEY, reason TEXT NOT NULL, created_at TEXT NOT NULL DEFAULT {_NOW_DEFAULT})",
)

# The 002-era layout (thatch 0.1.41, the version seed 002's chat.ts is from),
# never stamped with a user_version: the columns that chat.ts writes and reads,
# `chat_messages.via_broadcast` included (its send stores 0, its broadcast 1).
# Nothing here creates it: it is what `_migrate` must accept, kept as one
# definition for the simulator's `legacy:` worlds and the tests.
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
    read_at       TEXT,
    via_broadcast INTEGER NOT NULL DEFAULT 0
)""",
)

# thatch_core's own tables: the prune record (which sessions a pass pruned:
# PruneResult, and what the simulator's judges read) and the indexes.
_OTHER_DDL = _REAL_ONLY_DDL + (
    "CREATE TABLE IF NOT EXISTS chat_pruned ("
    " session_id TEXT PRIMARY KEY, pruned_at TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS chat_messages_to_unread"
    " ON chat_messages (to_session, read_at)",
    "CREATE INDEX IF NOT EXISTS chat_messages_from ON chat_messages (from_session)",
) + POLICY_DDL  # the messaging policies' tables (thatch_core.policy)

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


def fault_kind(exc: BaseException) -> str | None:
    """The key of :data:`FAULT_KINDS` for an error no retry cures, else None."""
    code = getattr(exc, "sqlite_errorcode", None)
    return _FAULT_CODES.get(code & 0xFF) if isinstance(code, int) else None


def wrap_error(exc: sqlite3.Error, doing: str) -> StoreError:
    """Turn a raw sqlite3 exception into the store's own error type: StoreBusy
    (transient), StoreFault (permanent), or StoreError."""
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    if is_busy(exc):
        return StoreBusy(f"database is locked by another process while {doing} ({name}): {exc}")
    kind = fault_kind(exc)
    if kind is not None:
        return StoreFault(f"database error while {doing} ({name}): {exc}", kind)
    return StoreError(f"database error while {doing} ({name}): {exc}")


class _CallBudget(threading.local):
    """Per thread: the lock waits the running store call has left (None: no call running)."""

    left: int | None = None


_budget = _CallBudget()
# The store's call guard reads and sets ``CALL_BUDGET.left`` inline (it runs on every call).
CALL_BUDGET = _budget


@contextmanager
def busy_budget(attempts: int = BUSY_RETRIES) -> Iterator[None]:
    """One store call's waits on a held lock: a busy statement, ``BEGIN`` or
    ``COMMIT`` anywhere inside spends one attempt, and the call gives up
    (StoreBusy) when they are spent. A nested budget joins the outer one.
    The store's call guard opens the same budget inline, on :data:`CALL_BUDGET`."""
    if _budget.left is not None:
        yield
        return
    _budget.left = attempts
    try:
        yield
    finally:
        _budget.left = None


def spend_busy_attempt(local_left: int) -> bool:
    """After a busy failure: whether one more attempt may run (and spend it).
    Inside a :func:`busy_budget` the call's budget decides, else ``local_left``
    (the attempts the caller has left, this one excluded)."""
    left = _budget.left
    if left is None:
        return local_left > 0
    _budget.left = left - 1
    return left - 1 > 0


def worst_case_busy_ms(busy_timeout_ms: int = BUSY_TIMEOUT_MS, attempts: int = BUSY_RETRIES) -> int:
    """The longest one store call waits on a lock held by others before StoreBusy:
    every attempt waits out the busy timeout, with the longest backoff between."""
    backoff = sum(min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** a) * 1.5 for a in range(attempts - 1))
    return attempts * busy_timeout_ms + round(backoff * 1000)


def backoff_s(attempt: int) -> float:
    """Sleep before retry ``attempt`` (0-based): exponential, capped, jittered.

    The jitter is derived from the pid, not from a random source: processes
    still de-synchronise, and a run stays reproducible.
    """
    base = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * (2 ** attempt))
    jitter = ((os.getpid() * 7919 + attempt * 104729) % 1000) / 1000.0
    return base * (0.5 + jitter)


def _retry_busy(fn, doing: str, attempts: int):
    """Run ``fn()`` retrying SQLITE_BUSY; StoreBusy once the budget is spent
    (the call's :func:`busy_budget` when there is one, else ``attempts``)."""
    try:
        return fn()
    except sqlite3.Error as exc:
        return _retry_after(exc, fn, doing, attempts)


def _retry_after(exc: sqlite3.Error, fn, doing: str, attempts: int):
    """The rest of :func:`_retry_busy` once its first try of ``fn`` failed with ``exc``."""
    attempt = 0
    while True:
        if not is_busy(exc):
            raise wrap_error(exc, doing) from exc
        if not spend_busy_attempt(attempts - attempt - 1):
            raise StoreBusy(
                f"database stayed locked while {doing} "
                f"({attempt + 1} attempts): {exc}"
            ) from exc
        time.sleep(backoff_s(attempt))
        attempt += 1
        try:
            return fn()
        except sqlite3.Error as again:
            exc = again


# --------------------------------------------------------------------------
# Transactions
# --------------------------------------------------------------------------

class immediate:  # noqa: N801 - used as a context manager, named like the contextlib one it replaced
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on any error).

    The write lock is taken up front, so reads inside see the state the
    writes apply to (no BUSY_SNAPSHOT). A ``BEGIN`` that stays busy past the
    busy handler is retried ``attempts`` times (default :data:`BUSY_RETRIES`)
    with backoff, then :class:`StoreBusy`. A raw ``sqlite3.Error`` raised in
    the body is rolled back and re-raised as :class:`StoreError`.

    Used inside an already-open transaction it joins it (no new BEGIN), so
    helpers compose into one atomic unit. A class rather than a generator
    context manager: every poll opens one, and this costs a fraction of
    contextlib's machinery (D-speed-core-2).
    """

    __slots__ = ("conn", "attempts", "owns")

    def __init__(self, conn: sqlite3.Connection, *, attempts: int | None = None):
        self.conn = conn
        self.attempts = BUSY_RETRIES if attempts is None else max(1, attempts)
        self.owns = False

    def __enter__(self) -> sqlite3.Connection:
        conn = self.conn
        if conn.in_transaction:
            return conn
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            _retry_after(exc, lambda: conn.execute("BEGIN IMMEDIATE"), "starting a write transaction",
                         self.attempts)
        self.owns = True
        return conn

    def __exit__(self, exc_type, exc, tb) -> bool:
        if not self.owns:
            return False
        conn = self.conn
        if exc is not None:
            _rollback(conn)
            if isinstance(exc, sqlite3.Error):
                raise wrap_error(exc, "writing") from exc
            return False
        try:
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as failed:
                _retry_after(failed, lambda: conn.execute("COMMIT"), "committing", self.attempts)
        except BaseException:
            _rollback(conn)
            raise
        return False


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

def open_db(path: "str | os.PathLike[str]", *, busy_timeout_ms: int = BUSY_TIMEOUT_MS,
            synchronous: str = SYNCHRONOUS) -> sqlite3.Connection:
    """Open (creating and migrating as needed) the shared chat database.

    WAL, ``synchronous`` (FULL, the real thatch's), foreign keys on (the chat
    tables have none: R11), ``isolation_level=None``.
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
        if synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise StoreError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        conn.execute(f"PRAGMA foreign_keys = {'ON' if FOREIGN_KEYS else 'OFF'}")
        with immediate(conn):
            _migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def open_db_readonly(path: "str | os.PathLike[str]", *,
                     busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection | None:
    """A connection that only reads the chat database at ``path``, for views
    that write nothing (``thatch chat list`` / ``tail``), so they work where
    the file, its directory or the mount is read-only (D-store-21).

    Read-only first (sees other processes' commits); where SQLite cannot keep
    its WAL index beside a read-only file, ``immutable`` (reads the file as it
    stands). None when there is no such file or its schema is not current:
    only :func:`open_db`, which creates and migrates, can serve those.
    """
    target = os.fspath(path)
    if not os.path.isfile(target):
        return None
    uri = "file:" + urllib.parse.quote(os.path.abspath(target)) + "?mode=ro"
    for mode in (uri, uri + "&immutable=1"):
        try:
            conn = sqlite3.connect(mode, uri=True, timeout=busy_timeout_ms / 1000.0,
                                   isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            continue
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            conn.execute("SELECT 1 FROM chat_sessions LIMIT 1").fetchall()
        except sqlite3.Error as exc:
            conn.close()
            if is_busy(exc):  # a writer is busy: open_db waits for it; immutable would read a stale file
                return None
            continue
        if version != SCHEMA_VERSION:
            conn.close()
            return None
        return conn
    return None


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


def _shape(conn: sqlite3.Connection, table: str) -> dict[str, tuple]:
    """Column name -> (declared type, NOT NULL, has a default, primary-key position)."""
    return {r[1]: (str(r[2]).upper(), bool(r[3]), r[4] is not None, r[5])
            for r in conn.execute(f"PRAGMA table_info({table})")}


def _wanted_shapes() -> dict[str, dict[str, tuple]]:
    """What each rebuilt table must look like, read off its DDL (stated once, above)."""
    mem = sqlite3.connect(":memory:")
    try:
        out = {}
        for table, ddl in _REBUILT.items():
            mem.execute(ddl)
            out[table] = _shape(mem, table)
        return out
    finally:
        mem.close()


def _is_current(conn: sqlite3.Connection, table: str) -> bool:
    """Every wanted column is there with the wanted type, nullability, default and key.
    Extra columns (a development build's) are left alone."""
    have = _shape(conn, table)
    return all(have.get(col) == want for col, want in _WANTED[table].items())


def _migrate(conn: sqlite3.Connection) -> None:
    """Bring the schema to :data:`SCHEMA_VERSION`; a no-op when it is there.

    Runs inside the caller's ``BEGIN IMMEDIATE``: a second process opening
    at the same moment waits, then finds the work done. A file the real
    thatch wrote (never stamped) already has the current tables and only
    gains thatch_core's own; schema 2 files and 002-era files are rebuilt
    table by table, every row kept.
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
    _ensure_table(conn, "chat_name_counters", _COUNTER_COPY)
    _ensure_table(conn, "chat_leave_tombstones", {})
    _ensure_table(conn, "chat_host_pids", _HOST_PID_COPY)
    for ddl in _OTHER_DDL:
        conn.execute(ddl)
    if version != SCHEMA_VERSION:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


# Schema 2 names -> the current column's value, for the tables whose columns changed.
_COUNTER_COPY = {"next": ("counter", "counter + 1")}  # the last drawn -> the next unassigned
_HOST_PID_COPY = {"ppid": ("pid", "pid"), "seen_at": ("recorded_at", "recorded_at")}


def _ensure_table(conn: sqlite3.Connection, table: str, renamed: dict[str, tuple[str, str]]) -> None:
    """Create ``table``, or rebuild an old one into the current layout keeping every row.

    A current column is copied as it is; one schema 2 called otherwise comes
    from its ``renamed`` expression; one neither has takes its default.
    """
    if _table_sql(conn, table) is None:
        conn.execute(_REBUILT[table])
        return
    if _is_current(conn, table):
        return
    have = _columns(conn, table)
    cols, exprs = [], []
    for col in _WANTED[table]:
        old, expr = renamed.get(col, (col, col))
        if col in have:
            cols.append(col)
            exprs.append(col)
        elif old in have:
            cols.append(col)
            exprs.append(expr)
    tmp = f"{table}_migrating"
    conn.execute(f"DROP TABLE IF EXISTS {tmp}")
    conn.execute(_REBUILT[table].replace(table, tmp, 1))
    conn.execute(f"INSERT INTO {tmp} ({', '.join(cols)}) SELECT {', '.join(exprs)} FROM {table}")
    conn.execute(f"DROP TABLE {table}")
    conn.execute(f"ALTER TABLE {tmp} RENAME TO {table}")


def _ensure_sessions(conn: sqlite3.Connection) -> None:
    sql = _table_sql(conn, "chat_sessions")
    if sql is None:
        conn.execute(_SESSIONS_DDL)
        return
    if _is_current(conn, "chat_sessions") and _NOCASE_NAME_RE.search(sql):
        return
    _rebuild_sessions(conn, _columns(conn, "chat_sessions"))


def _rebuild_sessions(conn: sqlite3.Connection, cols: list[str]) -> None:
    """Copy an old ``chat_sessions`` into the current layout.

    Old rows become legacy rows (``auto = 0``: prune keeps them, their topic
    is never refreshed from titles) unless the old table already had an
    ``auto`` column; an undetected checkout reads ``''`` as the real schema
    stores it. The name gains NOCASE uniqueness; two old names that differ
    only in case cannot both survive that, so the later-registered one gets a
    ``-2``, ``-3`` ... suffix (D-store-6) instead of being lost (the real
    thatch keeps one and drops the others: D-real-store-6).
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
            1 if auto else 0, worktree or "", reg or seen or now, seen or reg or now,
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
    """``chat_messages`` in the current layout. Old rows predate broadcast
    marking and read as ordinary sends; a rebuild (to gain the created_at
    default) keeps every id and the AUTOINCREMENT high-water mark, so no
    message id is ever handed out twice."""
    if _table_sql(conn, "chat_messages") is None:
        conn.execute(_MESSAGES_DDL)
        return
    cols = _columns(conn, "chat_messages")
    for col, decl in (("via_broadcast", "INTEGER NOT NULL DEFAULT 0"), ("delivered_at", "TEXT"),
                      ("read_at", "TEXT")):
        if col not in cols:
            conn.execute(f"ALTER TABLE chat_messages ADD COLUMN {col} {decl}")
    if _is_current(conn, "chat_messages"):
        return
    seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'chat_messages'").fetchone()
    _ensure_table(conn, "chat_messages", {})
    if seq is None:
        return
    if conn.execute("SELECT 1 FROM sqlite_sequence WHERE name = 'chat_messages'").fetchone():
        conn.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'chat_messages'", (seq[0],))
    else:
        conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('chat_messages', ?)", (seq[0],))


_REBUILT = {
    "chat_sessions": _SESSIONS_DDL,
    "chat_messages": _MESSAGES_DDL,
    "chat_name_counters": _COUNTERS_DDL,
    "chat_leave_tombstones": _TOMBSTONES_DDL,
    "chat_host_pids": _HOST_PIDS_DDL,
}
_WANTED = _wanted_shapes()
