"""thatch_core.db: pragmas, schema, migration from the 002-era layout, transactions."""

from __future__ import annotations

import os
import random
import re
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
    assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL, as the real ThatchDB
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert dbmod.BUSY_TIMEOUT_MS == 5000
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == dbmod.BUSY_TIMEOUT_MS
    assert conn.isolation_level is None
    assert schema_version(conn) == SCHEMA_VERSION


@pytest.mark.rules("R2", "R32")
def test_fresh_schema_has_every_table(conn):
    """R2, R32: a fresh file has the real thatch's chat tables and columns in its
    column order (counters hold `next`, host pids are (ppid, session_id, seen_at))
    plus thatch_core's own prune record."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"chat_sessions", "chat_messages", "chat_name_counters", "chat_leave_tombstones",
            "chat_host_pids", "chat_name_claims", "chat_machinery", "chat_pruned"} <= tables
    assert table_columns(conn, "chat_sessions") == [
        "session_id", "name", "topic", "project", "host_kind", "registered_at", "last_seen",
        "auto", "worktree"]
    assert table_columns(conn, "chat_messages") == [
        "id", "from_session", "to_session", "body", "created_at", "delivered_at", "read_at", "via_broadcast"]
    assert table_columns(conn, "chat_name_counters") == ["base", "next"]
    assert table_columns(conn, "chat_host_pids") == ["ppid", "session_id", "seen_at"]
    assert table_columns(conn, "chat_leave_tombstones") == ["session_id", "left_at"]


def test_real_defaults_fill_omitted_columns(conn):
    """The real columns carry defaults: a row given only its keys is complete."""
    conn.execute("INSERT INTO chat_sessions (session_id, name) VALUES ('ses_d', 'd-00001')")
    conn.execute("INSERT INTO chat_messages (from_session, to_session, body) VALUES ('a', 'b', 'x')")
    conn.execute("INSERT INTO chat_name_counters (base) VALUES ('e-cho')")
    conn.execute("INSERT INTO chat_leave_tombstones (session_id) VALUES ('ses_l')")
    conn.execute("INSERT INTO chat_host_pids (ppid, session_id) VALUES (7, 'ses_d')")
    stamp = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
    host_kind, reg, seen, auto, worktree = conn.execute(
        "SELECT host_kind, registered_at, last_seen, auto, worktree FROM chat_sessions").fetchone()
    assert (host_kind, auto, worktree) == ("opencode", 0, "")
    assert re.fullmatch(stamp, reg) and re.fullmatch(stamp, seen)
    created, via = conn.execute("SELECT created_at, via_broadcast FROM chat_messages").fetchone()
    assert re.fullmatch(stamp, created) and via == 0
    assert conn.execute("SELECT next FROM chat_name_counters").fetchone() == (1,)
    assert re.fullmatch(stamp, conn.execute("SELECT left_at FROM chat_leave_tombstones").fetchone()[0])
    assert re.fullmatch(stamp, conn.execute("SELECT seen_at FROM chat_host_pids").fetchone()[0])


# thatch_core's schema 2, as open_db created it before the real thatch's schema was followed.
SCHEMA_2 = """
CREATE TABLE chat_sessions (
    session_id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE COLLATE NOCASE, topic TEXT, project TEXT,
    host_kind TEXT NOT NULL DEFAULT 'opencode', auto INTEGER NOT NULL DEFAULT 0, worktree TEXT,
    registered_at TEXT NOT NULL, last_seen TEXT NOT NULL);
CREATE TABLE chat_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT, from_session TEXT NOT NULL, to_session TEXT NOT NULL,
    body TEXT NOT NULL, created_at TEXT NOT NULL, delivered_at TEXT, read_at TEXT,
    via_broadcast INTEGER NOT NULL DEFAULT 0);
CREATE TABLE chat_name_counters (base TEXT PRIMARY KEY, counter INTEGER NOT NULL);
CREATE TABLE chat_leave_tombstones (session_id TEXT PRIMARY KEY, left_at TEXT NOT NULL);
CREATE TABLE chat_host_pids (pid INTEGER PRIMARY KEY, session_id TEXT NOT NULL, recorded_at TEXT NOT NULL);
CREATE TABLE chat_pruned (session_id TEXT PRIMARY KEY, pruned_at TEXT NOT NULL);
INSERT INTO chat_sessions VALUES
  ('ses_a', 'e-cho-00003', 'work', 'p', 'opencode', 1, NULL, '2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z'),
  ('ses_b', 'ba-sil-00001', NULL, NULL, 'opencode', 1, 'root', '2026-01-01T00:00:00Z', '2026-01-02T00:00:00Z');
INSERT INTO chat_messages (from_session, to_session, body, created_at, read_at, via_broadcast) VALUES
  ('ses_a', 'ses_b', 'one', '2026-01-01T01:00:00Z', NULL, 0),
  ('ses_b', 'ses_a', 'two', '2026-01-01T02:00:00Z', '2026-01-01T03:00:00Z', 1),
  ('ses_b', 'ses_a', 'three', '2026-01-01T04:00:00Z', NULL, 0);
DELETE FROM chat_messages WHERE body = 'three';
INSERT INTO chat_name_counters VALUES ('e-cho', 3), ('ba-sil', 1);
INSERT INTO chat_leave_tombstones VALUES ('ses_gone', '2026-01-01T05:00:00Z');
INSERT INTO chat_host_pids VALUES (4242, 'ses_a', '2026-01-01T06:00:00Z');
INSERT INTO chat_pruned VALUES ('ses_old', '2026-01-01T07:00:00Z');
PRAGMA user_version = 2;
"""


@pytest.mark.rules("R2", "R7", "R11", "R32")
def test_schema_2_migrates_to_the_real_layout(db_path):
    """R2, R7, R11, R32: a schema-2 file keeps every row; `counter` (the last drawn)
    becomes `next` = counter + 1 so no name is ever minted twice; host pids and
    tombstones keep their rows under the real columns; message ids and the
    AUTOINCREMENT high-water mark survive; an undetected checkout reads ''."""
    c = sqlite3.connect(db_path)
    c.executescript(SCHEMA_2)
    c.close()
    c = open_db(db_path)
    try:
        assert schema_version(c) == SCHEMA_VERSION
        assert dict(c.execute("SELECT base, next FROM chat_name_counters")) == {"e-cho": 4, "ba-sil": 2}
        assert c.execute("SELECT ppid, session_id, seen_at FROM chat_host_pids").fetchall() == [
            (4242, "ses_a", "2026-01-01T06:00:00Z")]
        assert c.execute("SELECT * FROM chat_leave_tombstones").fetchall() == [("ses_gone", "2026-01-01T05:00:00Z")]
        assert c.execute("SELECT * FROM chat_pruned").fetchall() == [("ses_old", "2026-01-01T07:00:00Z")]
        assert c.execute("SELECT session_id, worktree, auto FROM chat_sessions ORDER BY session_id").fetchall() == [
            ("ses_a", "", 1), ("ses_b", "root", 1)]
        assert c.execute("SELECT id, body, read_at, via_broadcast FROM chat_messages ORDER BY id").fetchall() == [
            (1, "one", None, 0), (2, "two", "2026-01-01T03:00:00Z", 1)]
        store = ChatStore(c, rng=random.Random(0))
        assert store.get("ses_a").worktree is None and store.get("ses_b").worktree == "root"
        assert store.send("ses_a", "ba-sil-00001", "four").message_id == 4  # 3 was handed out once
        minted = {store.register(f"ses_n{i}").name for i in range(40)}
        assert not {"e-cho-00001", "e-cho-00002", "e-cho-00003", "ba-sil-00001"} & minted
    finally:
        c.close()
    c = open_db(db_path)  # a second open changes nothing
    assert c.execute("SELECT COUNT(*) FROM chat_messages").fetchone()[0] == 3
    c.close()


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
            ("mcp_old3", "Kirk", "payments", "shop", "mcp", 0, "",
             "2026-01-01T12:00:00Z", "2026-01-02T12:00:00Z"),
            ("ses_old1", "Landru", "release QA", "thatch", "opencode", 0, "",
             "2026-01-01T10:00:00Z", "2026-01-02T10:00:00Z"),
            ("ses_old2", "landru-2", None, None, "opencode", 0, "",
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
