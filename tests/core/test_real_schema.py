"""One thatch.db for both: the real thatch's chat tables open in thatch_core, and
thatch_core's file answers the real thatch's queries.

The real thatch (sysread/thatch, src/db.ts and src/chat.ts) creates its chat
tables without a schema stamp and reads them with the statements below. The
DDL here is that schema restated (same tables, columns, types, constraints and
defaults); the rows are the ones its code writes: assigned-name auto rows, a
claimed-era legacy row, mail read and unread, broadcast fan-out, counters
holding the next unassigned number, parent-pid anchors, tombstones, a name
claim and a machinery marker, beside a table of its own that is not chat.
"""

from __future__ import annotations

import random
import sqlite3

import pytest
from freezegun import freeze_time

from thatch_core.db import SCHEMA_VERSION, open_db, schema_version
from thatch_core.names import NAME_POOL
from thatch_core.store import ChatStore

NOW = "2026-11-29T13:45:07Z"
STAMP = "(strftime('%Y-%m-%dT%H:%M:%SZ','now'))"

REAL_DDL = [
    "CREATE TABLE stores (name TEXT PRIMARY KEY)",
    f"""CREATE TABLE chat_sessions (
          session_id TEXT PRIMARY KEY,
          name TEXT NOT NULL UNIQUE COLLATE NOCASE,
          topic TEXT,
          project TEXT,
          host_kind TEXT NOT NULL DEFAULT ('opencode'),
          registered_at TEXT NOT NULL DEFAULT {STAMP},
          last_seen TEXT NOT NULL DEFAULT {STAMP},
          auto INTEGER NOT NULL DEFAULT 0,
          worktree TEXT NOT NULL DEFAULT (''))""",
    f"""CREATE TABLE chat_messages (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          from_session TEXT NOT NULL,
          to_session TEXT NOT NULL,
          body TEXT NOT NULL,
          created_at TEXT NOT NULL DEFAULT {STAMP},
          delivered_at TEXT,
          read_at TEXT,
          via_broadcast INTEGER NOT NULL DEFAULT 0)""",
    "CREATE TABLE chat_name_counters (base TEXT PRIMARY KEY, next INTEGER NOT NULL DEFAULT 1)",
    "CREATE TABLE chat_name_claims (name TEXT PRIMARY KEY, session_id TEXT NOT NULL)",
    f"CREATE TABLE chat_leave_tombstones (session_id TEXT PRIMARY KEY, left_at TEXT NOT NULL DEFAULT {STAMP})",
    f"""CREATE TABLE chat_machinery (
          session_id TEXT PRIMARY KEY, reason TEXT NOT NULL, created_at TEXT NOT NULL DEFAULT {STAMP})""",
    f"""CREATE TABLE chat_host_pids (
          ppid INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seen_at TEXT NOT NULL DEFAULT {STAMP})""",
]

# Rows as the real code writes them: its register inserts auto = 1 and worktree
# '' when undetected; its send/broadcast set via_broadcast 0/1; its counter
# draw stores the next unassigned number (ba-sil drew 1 and 2, e-cho drew 1).
REAL_ROWS = [
    ("INSERT INTO stores VALUES (?)", [("global",)]),
    ("INSERT INTO chat_sessions (session_id, name, topic, project, host_kind, registered_at, last_seen,"
     " auto, worktree) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", [
         ("ses_1Ab", "ba-sil-00001", "Fix the login bug", "shop", "opencode", NOW, NOW, 1, "root"),
         ("ses_2Cd", "ba-sil-00002", None, "shop", "opencode", NOW, NOW, 1, ""),
         ("mcp_0a1b2c3d4e5f", "e-cho-00001", "payments", "shop", "mcp", NOW, NOW, 1, "worktree"),
         ("ses_legacy", "Landru", "claimed-era topic", None, "opencode",
          "2026-01-01T00:00:00Z", "2026-01-01T00:00:00Z", 0, ""),
     ]),
    ("INSERT INTO chat_messages (from_session, to_session, body, created_at, delivered_at, read_at,"
     " via_broadcast) VALUES (?, ?, ?, ?, ?, ?, ?)", [
         ("ses_1Ab", "ses_2Cd", "is the release green?", "2026-11-29T13:00:00Z", None, None, 0),
         ("ses_2Cd", "ses_1Ab", "yes", "2026-11-29T13:01:00Z", "2026-11-29T13:01:30Z",
          "2026-11-29T13:02:00Z", 0),
         ("mcp_0a1b2c3d4e5f", "ses_1Ab", "deploying", "2026-11-29T13:10:00Z", None, None, 1),
         ("mcp_0a1b2c3d4e5f", "ses_2Cd", "deploying", "2026-11-29T13:10:00Z", "2026-11-29T13:10:30Z", None, 1),
         ("ses_departed", "ses_2Cd", "bye", "2026-11-29T13:20:00Z", None, None, 0),
     ]),
    ("INSERT INTO chat_name_counters VALUES (?, ?)", [("ba-sil", 3), ("e-cho", 2)]),
    ("INSERT INTO chat_name_claims VALUES (?, ?)", [("ba-sil-00000", "ses_reaped")]),
    ("INSERT INTO chat_leave_tombstones VALUES (?, ?)", [("ses_left", "2026-11-29T12:00:00Z")]),
    ("INSERT INTO chat_machinery VALUES (?, ?, ?)", [("ses_child", "extraction", "2026-11-29T12:30:00Z")]),
    ("INSERT INTO chat_host_pids VALUES (?, ?, ?)", [
        (4242, "mcp_0a1b2c3d4e5f", "2026-11-29T13:40:00Z"),
        (5353, "ses_left", "2026-11-29T13:40:00Z"),
    ]),
]

CHAT_TABLES = ("chat_sessions", "chat_messages", "chat_name_counters", "chat_name_claims",
               "chat_leave_tombstones", "chat_machinery", "chat_host_pids")


def build_real_db(path) -> None:
    c = sqlite3.connect(path)
    c.execute("PRAGMA journal_mode = WAL")
    for ddl in REAL_DDL:
        c.execute(ddl)
    for sql, rows in REAL_ROWS:
        c.executemany(sql, rows)
    c.commit()
    c.close()


def dump(conn, tables=CHAT_TABLES + ("stores",)) -> dict[str, list[tuple]]:
    return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}


def rng_drawing(base: str) -> random.Random:
    """An rng whose first pool draw is ``base`` (the draw is ``rng.choice(NAME_POOL)``)."""
    for seed in range(10_000):
        if random.Random(seed).choice(NAME_POOL) == base:
            return random.Random(seed)
    raise AssertionError(f"no seed draws {base}")


@pytest.mark.rules("R2", "R7", "R11", "R32")
def test_a_real_database_opens_and_migrates_without_losing_a_row(db_path):
    """R2, R7, R11, R32: every real row survives the open unchanged (the real
    tables already are the current ones); names continue from `next`, so no
    name is minted twice; tombstones, anchors and mail read as the real thatch
    meant them."""
    build_real_db(db_path)
    before = dump(sqlite3.connect(db_path))
    conn = open_db(db_path)
    try:
        assert schema_version(conn) == SCHEMA_VERSION
        assert dump(conn) == before
        with freeze_time(NOW):
            store = ChatStore(conn, rng=rng_drawing("ba-sil"))
            fresh = store.register("ses_3Ef", project="shop")
            assert fresh.ok and fresh.name == "ba-sil-00003"
            assert conn.execute("SELECT next FROM chat_name_counters WHERE base = 'ba-sil'").fetchone() == (4,)
            assert store.register("ses_left").tombstoned
            assert store.resolve_host_pid(4242) == "mcp_0a1b2c3d4e5f"
            assert store.resolve_host_pid(5353) is None  # its session left: no row behind the anchor
            assert store.find("LANDRU").session_id == "ses_legacy"
            assert store.get("ses_2Cd").worktree is None and store.get("ses_1Ab").worktree == "root"
            inbox = store.read("ses_2Cd")
        assert [(i.from_name, i.body) for i in inbox] == [
            ("ba-sil-00001", "is the release green?"), ("e-cho-00001", "deploying"),
            ("unknown (ses_departed, departed)", "bye")]
        assert store.unread_count("ses_1Ab") == 1
        assert [r.via_broadcast for r in store.message_feed()] == [False, False, True, True, False]
        after = dump(conn)
        for table in set(CHAT_TABLES) - {"chat_messages", "chat_name_counters"}:
            assert set(before[table]) <= set(after[table]), table
        assert [r[:4] for r in after["chat_messages"]] == [r[:4] for r in before["chat_messages"]]
        assert dict(after["chat_name_counters"]) == {"ba-sil": 4, "e-cho": 2}
        assert after["chat_name_claims"] == before["chat_name_claims"]  # kept, never used (seed 001)
    finally:
        conn.close()
    again = open_db(db_path)  # a second open is a no-op
    assert dump(again) == after
    again.close()


def test_the_open_adds_thatch_core_tables_beside_the_real_ones(db_path):
    """The real file gains thatch_core's own tables and stamp, nothing else moves."""
    build_real_db(db_path)
    real_sql = dict(sqlite3.connect(db_path).execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    conn = open_db(db_path)
    sql = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    conn.close()
    assert {k: sql[k] for k in real_sql} == real_sql
    assert "chat_pruned" in sql


def _thatch_core_db(db_path):
    """A file thatch_core wrote: registrations, a leave, mail read and unread,
    a broadcast, an anchor, all at NOW."""
    conn = open_db(db_path)
    with freeze_time(NOW):
        store = ChatStore(conn, rng=rng_drawing("e-cho"))
        a = store.register("ses_a", project="shop", title="Release work")
        store.rng = rng_drawing("e-cho")
        b = store.register("ses_b", project="shop")
        store.register("mcp_0a1b2c3d4e5f", kind="mcp", project="shop")
        store.register("ses_c")
        store.unregister("ses_c")
        store.send("ses_a", b.name, "unread one")
        store.send("ses_b", a.name, "read one")
        store.read("ses_a")
        store.broadcast("mcp_0a1b2c3d4e5f", "all hands")
        store.record_host_pid(4242, "mcp_0a1b2c3d4e5f")
    conn.close()
    return a.name, b.name


# The real thatch's reads (src/chat.ts), by the columns each one selects.
REAL_ROW = "session_id, name, topic, project, host_kind, registered_at, last_seen, worktree"


@pytest.mark.rules("R2", "R10", "R16", "R32", "R34")
def test_a_thatch_core_database_answers_the_real_queries(db_path):
    """R2, R10, R16, R32, R34: the real thatch's SELECTs, run on a file thatch_core
    wrote, give the rows thatch_core meant; its counter draw continues after
    thatch_core's without reissuing a name; its insert fits the columns."""
    a, b = _thatch_core_db(db_path)
    assert (a, b) == ("e-cho-00001", "e-cho-00002")
    c = sqlite3.connect(db_path)
    listed = {r[0]: r for r in c.execute(f"SELECT {REAL_ROW} FROM chat_sessions ORDER BY name")}
    assert {sid: (r[1], r[4], r[7]) for sid, r in listed.items()} == {
        "ses_a": (a, "opencode", ""), "ses_b": (b, "opencode", ""),
        "mcp_0a1b2c3d4e5f": (listed["mcp_0a1b2c3d4e5f"][1], "mcp", "")}
    m = listed["mcp_0a1b2c3d4e5f"][1]
    assert c.execute(f"SELECT {REAL_ROW} FROM chat_sessions WHERE name = ? COLLATE NOCASE",
                     (a.upper(),)).fetchone()[:4] == ("ses_a", a, "Release work", "shop")
    assert c.execute(f"SELECT {REAL_ROW} FROM chat_sessions WHERE session_id = ?",
                     ("ses_b",)).fetchone()[5:7] == (NOW, NOW)
    inbox = c.execute(
        "SELECT m.id, m.from_session, s.name AS from_name, m.body, m.created_at FROM chat_messages m"
        " LEFT JOIN chat_sessions s ON s.session_id = m.from_session"
        " WHERE m.to_session = ? AND m.read_at IS NULL ORDER BY m.id", ("ses_b",)).fetchall()
    assert [(r[2], r[3], r[4]) for r in inbox] == [(a, "unread one", NOW), (m, "all hands", NOW)]
    assert c.execute("SELECT COUNT(*) AS n FROM chat_messages WHERE to_session = ? AND read_at IS NULL",
                     ("ses_a",)).fetchone() == (1,)  # the broadcast; the direct mail was read
    assert c.execute(
        "SELECT COUNT(*) AS total, SUM(CASE WHEN read_at IS NULL THEN 1 ELSE 0 END) AS pending"
        " FROM chat_messages WHERE to_session = ?", ("ses_a",)).fetchone() == (2, 1)
    assert c.execute(
        "SELECT cs.name AS name, COUNT(*) AS pending FROM chat_messages m"
        " JOIN chat_sessions cs ON cs.session_id = m.to_session"
        " WHERE m.read_at IS NULL AND cs.project = ? GROUP BY cs.name ORDER BY cs.name",
        ("shop",)).fetchall() == [(a, 1), (b, 2)]
    feed = c.execute(
        "SELECT m.id, m.from_session, m.to_session, fs.name AS from_name, ts.name AS to_name,"
        " fs.topic AS from_topic, ts.topic AS to_topic, m.via_broadcast, m.body, m.created_at, m.read_at"
        " FROM chat_messages m LEFT JOIN chat_sessions fs ON fs.session_id = m.from_session"
        " LEFT JOIN chat_sessions ts ON ts.session_id = m.to_session ORDER BY m.id").fetchall()
    assert [(r[3], r[4], r[5], r[7], r[8], r[10] is not None) for r in feed] == [
        (a, b, "Release work", 0, "unread one", False),
        (b, a, None, 0, "read one", True),
        (m, a, None, 1, "all hands", False),
        (m, b, None, 1, "all hands", False),
    ]
    pending = c.execute(
        "SELECT m.id, m.to_session, m.from_session, s.name AS from_name FROM chat_messages m"
        " LEFT JOIN chat_sessions s ON s.session_id = m.from_session"
        " WHERE m.read_at IS NULL AND m.to_session IN (?, ?)"
        " AND (m.delivered_at IS NULL OR m.delivered_at <= ?)"
        " AND EXISTS (SELECT 1 FROM chat_sessions cs WHERE cs.session_id = m.to_session) ORDER BY m.id",
        ("ses_a", "ses_b", "2026-11-29T13:30:07Z")).fetchall()
    assert [(r[1], r[3]) for r in pending] == [("ses_b", a), ("ses_a", m), ("ses_b", m)]
    assert c.execute(
        "SELECT p.session_id FROM chat_host_pids p JOIN chat_sessions s ON s.session_id = p.session_id"
        " WHERE p.ppid = ? AND p.seen_at >= ?", (4242, "2026-11-29T13:35:07Z")).fetchall() == [
        ("mcp_0a1b2c3d4e5f",)]
    assert c.execute("SELECT 1 FROM chat_leave_tombstones WHERE session_id = ?", ("ses_c",)).fetchone() == (1,)
    assert c.execute("SELECT name FROM chat_name_claims WHERE session_id = ?", ("ses_c",)).fetchone() is None
    # The real draw continues thatch_core's count: e-cho handed out 1 and 2, so 3 is next.
    drawn = c.execute("INSERT INTO chat_name_counters (base, next) VALUES (?, 2) ON CONFLICT(base)"
                      " DO UPDATE SET next = next + 1 RETURNING next - 1 AS drawn", ("e-cho",)).fetchone()
    assert drawn == (3,)
    c.execute("INSERT INTO chat_sessions (session_id, name, topic, project, host_kind, registered_at,"
              " last_seen, auto, worktree) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?)",
              ("ses_real", "e-cho-00003", None, "shop", "opencode", NOW, NOW, ""))
    c.execute("INSERT INTO chat_host_pids (ppid, session_id, seen_at) VALUES (?, ?, ?) ON CONFLICT(ppid)"
              " DO UPDATE SET session_id = excluded.session_id, seen_at = excluded.seen_at", (4242, "ses_real", NOW))
    c.commit()
    c.close()
    conn = open_db(db_path)  # and thatch_core reads what the real code wrote back
    store = ChatStore(conn, rng=rng_drawing("e-cho"))
    with freeze_time(NOW):
        assert store.register("ses_d").name == "e-cho-00004"
        assert store.resolve_host_pid(4242) == "ses_real"
    conn.close()
