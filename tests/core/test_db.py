"""thatch_core.db: pragmas, schema, migration from the 002-era layout, transactions."""

from __future__ import annotations

import os
import random
import sqlite3
import threading

import multiprocess
import pytest

from thatch_core import db as dbmod
from thatch_core.db import LEGACY_SCHEMA_002, SCHEMA_VERSION, StoreBusy, StoreError, immediate, open_db, schema_version
from thatch_core.store import ChatStore

CTX = multiprocess.get_context("fork")

OLD_SCHEMA = """
CREATE TABLE memories (id INTEGER PRIMARY KEY, body TEXT);
{legacy};
INSERT INTO memories (body) VALUES ('unrelated table survives');
INSERT INTO chat_sessions VALUES
  ('ses_old1', 'Landru', 'release QA', 'thatch', 'opencode', '2026-01-01T10:00:00Z', '2026-01-02T10:00:00Z'),
  ('ses_old2', 'landru', NULL, NULL, 'opencode', '2026-01-01T11:00:00Z', '2026-01-02T11:00:00Z'),
  ('mcp_old3', 'Kirk', 'payments', 'shop', 'mcp', '2026-01-01T12:00:00Z', '2026-01-02T12:00:00Z');
INSERT INTO chat_messages (from_session, to_session, body, created_at, delivered_at, read_at) VALUES
  ('ses_old1', 'mcp_old3', 'is the release green?', '2026-01-01T13:00:00Z', NULL, NULL),
  ('mcp_old3', 'ses_old1', 'yes', '2026-01-01T13:01:00Z', '2026-01-01T13:01:30Z', '2026-01-01T13:02:00Z');
""".replace("{legacy}", ";\n".join(LEGACY_SCHEMA_002))


def make_old_db(path) -> None:
    c = sqlite3.connect(path)
    c.executescript(OLD_SCHEMA)
    c.commit()
    c.close()


def table_columns(conn, table):
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def test_open_sets_pragmas(conn):
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 0
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == dbmod.BUSY_TIMEOUT_MS
    assert conn.isolation_level is None
    assert schema_version(conn) == SCHEMA_VERSION


def test_fresh_schema_has_every_table(conn):
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"chat_sessions", "chat_messages", "chat_name_counters", "chat_leave_tombstones",
            "chat_host_pids", "chat_pruned"} <= tables
    assert table_columns(conn, "chat_sessions") == [
        "session_id", "name", "topic", "project", "host_kind", "auto", "worktree",
        "registered_at", "last_seen"]
    assert "via_broadcast" in table_columns(conn, "chat_messages")


@pytest.mark.rules("R2")
def test_name_uniqueness_is_case_insensitive_in_schema(conn):
    """R2: the name column is UNIQUE COLLATE NOCASE."""
    conn.execute("INSERT INTO chat_sessions (session_id, name, registered_at, last_seen)"
                 " VALUES ('a', 'Ba-Sil-00001', 'x', 'x')")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO chat_sessions (session_id, name, registered_at, last_seen)"
                     " VALUES ('b', 'ba-sil-00001', 'x', 'x')")


def test_reopen_is_idempotent(db_path):
    c1 = open_db(db_path)
    ChatStore(c1, rng=random.Random(1)).register("ses_a")
    c1.close()
    c2 = open_db(db_path)
    assert schema_version(c2) == SCHEMA_VERSION
    assert c2.execute("SELECT COUNT(*) FROM chat_sessions").fetchone()[0] == 1
    c2.close()


@pytest.mark.rules("R3", "R11", "R26")
def test_old_schema_upgraded_on_open(db_path):
    """R3, R11, R26: a 002-era database is migrated on open; every row survives,
    old sessions become legacy rows (auto=0), old messages read as plain sends,
    case-twin names are disambiguated instead of dropped."""
    make_old_db(db_path)
    c = open_db(db_path)
    try:
        assert schema_version(c) == SCHEMA_VERSION
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        rows = c.execute("SELECT session_id, name, topic, project, host_kind, auto, worktree,"
                         " registered_at, last_seen FROM chat_sessions ORDER BY session_id").fetchall()
        assert rows == [
            ("mcp_old3", "Kirk", "payments", "shop", "mcp", 0, None,
             "2026-01-01T12:00:00Z", "2026-01-02T12:00:00Z"),
            ("ses_old1", "Landru", "release QA", "thatch", "opencode", 0, None,
             "2026-01-01T10:00:00Z", "2026-01-02T10:00:00Z"),
            ("ses_old2", "landru-2", None, None, "opencode", 0, None,
             "2026-01-01T11:00:00Z", "2026-01-02T11:00:00Z"),
        ]
        msgs = c.execute("SELECT id, from_session, to_session, body, delivered_at, read_at,"
                         " via_broadcast FROM chat_messages ORDER BY id").fetchall()
        assert msgs == [
            (1, "ses_old1", "mcp_old3", "is the release green?", None, None, 0),
            (2, "mcp_old3", "ses_old1", "yes", "2026-01-01T13:01:30Z", "2026-01-01T13:02:00Z", 0),
        ]
        assert c.execute("SELECT body FROM memories").fetchall() == [("unrelated table survives",)]
        # The upgraded name column is case-insensitive now.
        with pytest.raises(sqlite3.IntegrityError):
            c.execute("INSERT INTO chat_sessions (session_id, name, registered_at, last_seen)"
                      " VALUES ('x', 'KIRK', 'x', 'x')")
        # New ids continue after the old AUTOINCREMENT high-water mark.
        s = ChatStore(c, rng=random.Random(0))
        assert s.register("ses_new").ok
        sent = s.send("ses_new", "kirk", "hello legacy")
        assert sent.ok and sent.message_id == 3
    finally:
        c.close()
    # A second open is a no-op on the migrated file.
    c = open_db(db_path)
    assert c.execute("SELECT COUNT(*) FROM chat_sessions").fetchone()[0] == 4
    c.close()


def test_newer_schema_is_refused(db_path):
    c = sqlite3.connect(db_path)
    c.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    c.close()
    with pytest.raises(StoreError, match=r"newer than this code"):
        open_db(db_path)


def test_open_error_is_a_store_error(tmp_path):
    with pytest.raises(StoreError):
        open_db(tmp_path)  # a directory, not a database file


def _open_at_once(path, barrier, sid):
    import ctypes
    import signal
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # die with the pytest worker
    barrier.wait()
    c = open_db(path)
    ChatStore(c, rng=random.Random(7)).register(sid)
    c.close()


@pytest.mark.parametrize("start", ["fresh", "old-schema"])
def test_two_processes_open_at_once(tmp_path, start):
    """Two processes opening (and creating or migrating) one file at the same
    moment both succeed and the schema lands exactly once."""
    for round_ in range(3):
        path = tmp_path / f"race{round_}.db"
        if start == "old-schema":
            make_old_db(path)
        barrier = CTX.Barrier(2)
        procs = [CTX.Process(target=_open_at_once, args=(str(path), barrier, f"ses_{i}"))
                 for i in range(2)]
        for p in procs:
            p.start()
        try:
            for p in procs:
                p.join(10)
                assert p.exitcode == 0
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
        c = open_db(path)
        assert schema_version(c) == SCHEMA_VERSION
        expected = 2 if start == "fresh" else 5
        assert c.execute("SELECT COUNT(*) FROM chat_sessions").fetchone()[0] == expected
        assert c.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        c.close()


def test_immediate_commits_and_rolls_back(conn):
    with immediate(conn):
        conn.execute("INSERT INTO chat_name_counters VALUES ('a', 1)")
    assert not conn.in_transaction
    with pytest.raises(RuntimeError):
        with immediate(conn):
            conn.execute("INSERT INTO chat_name_counters VALUES ('b', 1)")
            raise RuntimeError("boom")
    assert not conn.in_transaction
    assert conn.execute("SELECT base FROM chat_name_counters").fetchall() == [("a",)]


def test_immediate_wraps_sqlite_errors(conn):
    with pytest.raises(StoreError) as info:
        with immediate(conn):
            conn.execute("INSERT INTO chat_name_counters VALUES ('a', 1)")
            conn.execute("INSERT INTO chat_name_counters VALUES ('a', 1)")
    assert not isinstance(info.value, sqlite3.Error)
    assert "UNIQUE" in str(info.value)
    assert conn.execute("SELECT COUNT(*) FROM chat_name_counters").fetchone()[0] == 0


def test_immediate_nested_joins_outer(conn):
    with immediate(conn):
        with immediate(conn):
            conn.execute("INSERT INTO chat_name_counters VALUES ('a', 1)")
        assert conn.in_transaction
    assert conn.execute("SELECT COUNT(*) FROM chat_name_counters").fetchone()[0] == 1


def test_immediate_raises_store_busy_after_budget(db_path):
    victim = open_db(db_path, busy_timeout_ms=10)
    locker = open_db(db_path)
    locker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreBusy, match=r"stayed locked"):
            with immediate(victim, attempts=3):
                pass
        # The store surface raises the same StoreBusy, never sqlite3.OperationalError.
        with pytest.raises(StoreBusy):
            ChatStore(victim).register("ses_x")
        assert not victim.in_transaction
    finally:
        locker.execute("ROLLBACK")
        locker.close()
        victim.close()


def test_immediate_retries_until_lock_released(db_path):
    """A BUSY that escapes the busy handler is retried, not surfaced."""
    victim = open_db(db_path, busy_timeout_ms=10)
    locker = open_db(db_path)
    locker.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.05, lambda: locker.execute("ROLLBACK"))
    release.start()
    try:
        with immediate(victim, attempts=12):
            victim.execute("INSERT INTO chat_name_counters VALUES ('a', 1)")
    finally:
        release.join()
        locker.close()
    assert victim.execute("SELECT COUNT(*) FROM chat_name_counters").fetchone()[0] == 1
    victim.close()


def test_store_never_leaks_raw_sqlite_errors(db_path):
    c = open_db(db_path)
    s = ChatStore(c)
    c.close()
    with pytest.raises(StoreError) as info:
        s.list_sessions()
    assert not isinstance(info.value, sqlite3.Error)
    with pytest.raises(StoreError):
        s.register("ses_a")


def test_backoff_is_bounded_and_deterministic():
    delays = [dbmod.backoff_s(a) for a in range(20)]
    assert delays == [dbmod.backoff_s(a) for a in range(20)]
    assert max(delays) <= dbmod._BACKOFF_CAP_S * 1.5
    assert os.getpid() > 0
