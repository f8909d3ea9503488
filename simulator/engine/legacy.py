"""A 002-era database for scenarios that start from an upgrade (`legacy:` rows).

The world writes it before any process starts, so the first process's
`open_db` migrates it for real: the 002 layout has
no `auto`/`worktree` columns and a case-sensitive unique name in
`chat_sessions`, no `via_broadcast` in `chat_messages`, and none of the
counters, tombstones, host-pid or pruned tables. It never stamps
`user_version`. Rows are claimed names: migration turns them into legacy rows
(auto = 0) that prune keeps and titles never re-topic (R3, R26).
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

from simulator.clock import START_EPOCH_MS, iso_stamp as iso
from simulator.design import OPENCODE_ID_PREFIX
from simulator.scenario.kinds import DEFAULT_ROW_KIND, HOSTS

# The 002-era chat.ts tables, written out here rather than taken from the code
# under test: its migration is judged by reading what the old release wrote.
SCHEMA_002 = (
    "CREATE TABLE chat_sessions (session_id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, topic TEXT,"
    " project TEXT, host_kind TEXT NOT NULL DEFAULT 'opencode', registered_at TEXT NOT NULL,"
    " last_seen TEXT NOT NULL)",
    "CREATE TABLE chat_messages (id INTEGER PRIMARY KEY AUTOINCREMENT, from_session TEXT NOT NULL,"
    " to_session TEXT NOT NULL, body TEXT NOT NULL, created_at TEXT NOT NULL, delivered_at TEXT,"
    " read_at TEXT)",
)

# The sender of `mail:` rows: a 002-era session that left long ago (no row).
LEGACY_SENDER = OPENCODE_ID_PREFIX + "0" * 20 + "0002"


def legacy_session_id(world, index: int, row) -> str:
    """The row's session id: its declared session's chat id, or a fixed
    orphan id drawn from its own generator (the world's draws stay as they were)."""
    if row.session is not None:
        return world.row_ids(row.session)[0]
    return OPENCODE_ID_PREFIX + format(random.Random(f"legacy:{world.seed}:{index}").getrandbits(96), "024x")


def write_legacy_db(world) -> None:
    """Create `world.db_path` in the 002-era layout holding the scenario's `legacy:` rows."""
    rows = world.spec.legacy
    if not rows:
        return
    path = Path(world.db_path)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for ddl in SCHEMA_002:
            conn.execute(ddl)
        for index, row in enumerate(rows):
            sid = legacy_session_id(world, index, row)
            # The row a 002-era host wrote: its session's host kind's rows (an orphan: the default kind's).
            host = None if row.session is None else world.procs[world.session_proc[row.session]].spec.kind
            kind = DEFAULT_ROW_KIND if host is None else HOSTS[host].row_kind
            seen = START_EPOCH_MS - row.last_seen_ago
            conn.execute("INSERT INTO chat_sessions (session_id, name, topic, project, host_kind, registered_at, "
                         "last_seen) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (sid, row.name, row.topic, row.project, kind, iso(seen - 1000),
                          row.last_seen_raw if row.last_seen_raw is not None else iso(seen)))
            for body in row.mail:
                conn.execute("INSERT INTO chat_messages (from_session, to_session, body, created_at)"
                             " VALUES (?, ?, ?, ?)",
                             (LEGACY_SENDER, sid, body, iso(seen)))
        conn.execute("COMMIT")
    finally:
        conn.close()
