"""`legacy:` rows: the world writes a 002-era database that open_db migrates (R2, R3, R26)."""

from __future__ import annotations

import sqlite3

import pytest

from historykit import make_spec
from simulator.engine.world import World
from thatch_core.db import open_db


def _world(tmp_path, legacy):
    spec = make_spec(legacy=legacy)
    world = World(spec, tmp_path, seed=5)
    world.build()
    return world


def _cols(path, table):
    conn = sqlite3.connect(path)
    try:
        return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    finally:
        conn.close()


@pytest.mark.rules("R2", "R3", "R26")
def test_world_writes_the_002_layout_and_open_db_migrates_it(tmp_path):
    """R2, R3, R26: the file starts 002-era (no auto/worktree/via_broadcast, no counters,
    case-sensitive names); after open_db the claimed rows are legacy rows (auto 0),
    a case clash gets a -2 suffix, and a declared session's row carries its own id."""
    world = _world(tmp_path, [
        {"name": "Scribe", "session": "alice", "topic": "Port the importer", "last_seen_ago": "8d"},
        {"name": "Planner", "mail": ["old note"]},
        {"name": "planner"},
    ])
    assert "auto" not in _cols(world.db_path, "chat_sessions")
    assert "via_broadcast" not in _cols(world.db_path, "chat_messages")
    assert "worktree" not in _cols(world.db_path, "chat_sessions")
    conn = open_db(world.db_path)
    try:
        rows = {r[0]: r[1:] for r in conn.execute("SELECT name, session_id, auto, topic FROM chat_sessions")}
        assert set(rows) == {"Scribe", "Planner", "planner-2"}
        assert rows["Scribe"][0] == world.session_id("alice") and rows["Scribe"][1:] == (0, "Port the importer")
        assert all(r[1] == 0 for r in rows.values())
        (to, via), = conn.execute("SELECT to_session, via_broadcast FROM chat_messages").fetchall()
        assert to == rows["Planner"][0] and via == 0
        assert conn.execute("SELECT count(*) FROM chat_name_counters").fetchone()[0] == 0
    finally:
        conn.close()


def test_no_legacy_rows_no_file(tmp_path):
    """Without `legacy:` the world leaves the database to the first open_db."""
    world = _world(tmp_path, [])
    assert not world.db_path.exists()


def test_orphan_ids_are_stable_and_do_not_move_the_world_draws(tmp_path):
    """Orphan ids come from their own generator: same seed, same ids; declared ids unchanged."""
    a = _world(tmp_path / "a", [{"name": "Planner"}])
    b = _world(tmp_path / "b", [])
    assert a.session_ids == b.session_ids
    from simulator.engine.legacy import legacy_session_id
    row = a.spec.legacy[0]
    assert legacy_session_id(a, 0, row) == legacy_session_id(a, 0, row)
