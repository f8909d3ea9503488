"""A thatch.db written the 0.1.41 way opens in thatch_core with every row as it was.

The file is made with :data:`LEGACY_SCHEMA_002` and the very statements seed
002's ``chat.ts`` (thatch 0.1.41) runs: they are read out of the seed at test
time, so a statement the model lacks a column for (``via_broadcast``, which
0.1.41 writes on every send and broadcast) fails here as it would on a real
file. The seeds directory is the ``shared/seeds`` beside the repository, or
``THATCH_SEEDS_DIR``. The rows come back as 0.1.41 meant them: mail with its
delivery kind and stamps, sessions as legacy rows (``auto = 0``, the real
thatch's reading of claimed-era rows), which the prune keeps (R26, D-store-22).
"""

from __future__ import annotations

import os
import re
import sqlite3
from pathlib import Path

import pytest

from thatch_core.db import LEGACY_SCHEMA_002, open_db
from thatch_core.store import ChatStore

REPO = Path(__file__).resolve().parents[2]
SESSION = ("ses_landru", "Landru", "release QA", "acme/api", "opencode", "2026-01-01T10:00:00Z",
           "2026-01-02T10:00:00Z")
PEER = ("ses_kurn", "Kurn", None, "acme/api", "opencode", "2026-01-01T10:05:00Z", "2026-01-02T10:05:00Z")
MCP = ("mcp_0123456789ab", "kirk", "payments", "acme/shop", "mcp", "2026-01-01T11:00:00Z", "2026-01-02T11:00:00Z")


def seed_002() -> str:
    """The text of seed 002 (0.1.41's chat.ts), found beside the repository or through THATCH_SEEDS_DIR."""
    folder = Path(os.environ.get("THATCH_SEEDS_DIR") or REPO.parent / "shared" / "seeds")
    found = sorted(folder.glob("002_*.txt"))
    assert found, f"seed 002 (002_*.txt) not found in {folder}: set THATCH_SEEDS_DIR to the seeds directory"
    return found[0].read_text(encoding="utf-8")


def statements(text: str) -> dict[str, str]:
    """The SQL 0.1.41 writes a session, a send, a broadcast copy, a read stamp and a delivery stamp with."""
    quoted = re.findall(r'"((?:INSERT INTO|UPDATE) chat_[a-z_]+ [^"]+)"|`(UPDATE chat_messages [^`]+)`', text)
    sql = [a or b.replace("${marks}", "?") for a, b in quoted]

    def one(pattern: str) -> str:
        hits = [s for s in sql if re.search(pattern, s)]
        assert len(hits) == 1, f"seed 002 has {len(hits)} statements matching {pattern!r}"
        return hits[0]

    return {
        "session": one(r"^INSERT INTO chat_sessions "),
        "send": one(r"^INSERT INTO chat_messages .*, 0\)$"),
        "broadcast": one(r"^INSERT INTO chat_messages .*, 1\)$"),
        "read": one(r"^UPDATE chat_messages SET read_at = \?"),
        "delivered": one(r"^UPDATE chat_messages SET delivered_at = \?"),
    }


def write_0141_file(path) -> list[tuple]:
    """A file with 0.1.41's tables and rows; returns its messages as 0.1.41 left them."""
    sql = statements(seed_002())
    c = sqlite3.connect(path)
    c.executescript(";\n".join(LEGACY_SCHEMA_002))
    for row in (SESSION, PEER, MCP):
        c.execute(sql["session"], row)
    c.execute(sql["send"], ("ses_landru", "ses_kurn", "is the release green?", "2026-01-01T13:00:00Z"))
    for to in ("ses_kurn", "mcp_0123456789ab"):
        c.execute(sql["broadcast"], ("ses_landru", to, "main moved, rebase", "2026-01-01T13:05:00Z"))
    c.execute(sql["delivered"], ("2026-01-01T13:00:30Z", 1))
    c.execute(sql["read"], ("2026-01-01T13:01:00Z", 1))
    c.commit()
    rows = c.execute("SELECT id, from_session, to_session, body, created_at, delivered_at, read_at, via_broadcast"
                     " FROM chat_messages ORDER BY id").fetchall()
    c.close()
    return rows


@pytest.mark.rules("R11", "R12", "R26")
def test_a_0141_file_reads_back_whole(db_path, frozen):
    """R11, R12, R26: every 0.1.41 session and message reads back, a broadcast still a broadcast."""
    written = write_0141_file(db_path)
    assert [r[-1] for r in written] == [0, 1, 1]
    conn = open_db(db_path)
    store = ChatStore(conn)
    for sid, name, topic, project, kind, registered, seen in (SESSION, PEER, MCP):
        row = store.get(sid)
        assert (row.name, row.topic, row.project, row.host_kind) == (name, topic, project, kind)
        assert (row.registered_at, row.last_seen, row.auto, row.worktree) == (registered, seen, False, None)
    assert conn.execute("SELECT id, from_session, to_session, body, created_at, delivered_at, read_at, via_broadcast"
                        " FROM chat_messages ORDER BY id").fetchall() == written
    assert [(m.body, m.from_name) for m in store.read("mcp_0123456789ab")] == [("main moved, rebase", "Landru")]
    conn.close()


@pytest.mark.rules("R26")
def test_0141_rows_are_legacy_rows_the_prune_keeps(db_path, frozen):
    """R26: a 0.1.41 row is a claimed-era row (the real thatch mints auto=1 only since assigned names),
    so however long it was silent the prune keeps it."""
    write_0141_file(db_path)
    conn = open_db(db_path)
    store = ChatStore(conn)
    frozen.move_to("2026-12-01T00:00:00Z")
    assert store.prune().pruned == ()
    assert {r.session_id for r in store.list_sessions()} == {SESSION[0], PEER[0], MCP[0]}
    conn.close()
