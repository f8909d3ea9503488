"""The real suite's "chat name-collation migration" block."""

from __future__ import annotations

import random
import sqlite3

import pytest

from thatch_core.db import open_db
from thatch_core.store import ChatStore

# The pre-NOCASE directory exactly as the real test builds it by hand.
PRE_NOCASE = """
CREATE TABLE chat_sessions (
    session_id    TEXT PRIMARY KEY,
    name          TEXT NOT NULL UNIQUE,
    project       TEXT,
    registered_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now')),
    last_seen     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ','now'))
)"""


@pytest.mark.rules("R2")
def test_case_sensitive_table_rebuilt_nocase(db_path, frozen, steered):
    """
    "a case-sensitive legacy table is rebuilt with NOCASE uniqueness": opening
    a database whose name column is only case-sensitively unique, holding
    ``Landru``, ``landru`` and ``Bob``, migrates it to case-insensitive
    uniqueness; a new registration lands on a name no survivor holds in any
    casing; a second open changes nothing (R2). Deliberately safer than the
    real migration, which keeps one of the case twins and drops the other:
    thatch_core keeps all three rows, the twin renamed (the real count is 2
    survivors, here 3).
    """
    legacy = sqlite3.connect(db_path, isolation_level=None)
    legacy.execute(PRE_NOCASE)
    for sid, name in (("ses_a", "Landru"), ("ses_b", "landru"), ("ses_c", "Bob")):
        legacy.execute("INSERT INTO chat_sessions (session_id, name) VALUES (?, ?)", (sid, name))
    legacy.close()

    conn = open_db(db_path)
    try:
        store = ChatStore(conn, rng=random.Random(0))
        names = [r.name for r in store.list_sessions()]
        assert len(names) == 3
        lowered = {n.lower() for n in names}
        assert len(lowered) == 3 and {"landru", "bob"} <= lowered
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("INSERT INTO chat_sessions (session_id, name, registered_at, last_seen)"
                         " VALUES ('ses_x', 'BOB', 'x', 'x')")
        store.rng = steered("la-ven-der")
        clash = store.register("ses_new", project="p")
        assert clash.ok and clash.name.lower() not in lowered
    finally:
        conn.close()
    conn = open_db(db_path)
    try:
        assert len(ChatStore(conn).list_sessions()) == 4
    finally:
        conn.close()
