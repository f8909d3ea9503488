"""A planted bug for the exploration tests, importable by name (`--overrides explorekit:no_tombstone`).

The bug: a store whose leaves delete the row but write no tombstone (breaks
R7), so a session that left comes back on its next idle event. Exploration
meets it within a few dozen small seeds (P6 or P7 fails).
"""

from __future__ import annotations

import os
import sqlite3

import repo
from thatch_core import clock
from thatch_core.db import StoreBusy, immediate
from thatch_core.staleness import is_stale
from thatch_core.store import ChatStore
from thatch_core.store_guard import ROW_COLS, row_of
from thatch_core.types import BroadcastResult

OVERRIDES = "explorekit:no_tombstone"
TOMBSTONE_CHECKS = ("P6", "P7", "P11")  # P11: the reference model expects the tombstone row (R7)


class NoTombstoneStore(ChatStore):
    """A leave deletes the row but writes no tombstone (breaks R7)."""

    def unregister(self, session_id):
        with immediate(self.conn):
            return self.conn.execute("DELETE FROM chat_sessions WHERE session_id = ?", (session_id,)).rowcount > 0


def no_tombstone() -> dict:
    return {"store": NoTombstoneStore}


def subprocess_env() -> dict:
    """The environment for a `python -m simulator` / `pytest` subprocess that can import this module."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(repo.TESTS), str(repo.ROOT)]))
    env.pop("PYTEST_ADDOPTS", None)
    return env


def deferred_broadcast() -> dict:
    """`--overrides explorekit:deferred_broadcast`: the contention bug of the real broadcast."""
    return {"store": DeferredBroadcastStore}


def planted_seed() -> int:
    """The first small seed whose world meets the planted bug and stays short: no machine sleep
    and at most an hour of script. A week-long world (the 7-day TTL boundaries) meets it too,
    but each of its shrink runs costs seconds, and these tests check the filing, not the shrinker."""
    from simulator.explore.campaign import Settings, generated, run_spec
    from simulator.explore.swarm import SMALL

    settings = Settings(size=SMALL, overrides={"store": NoTombstoneStore})
    for seed in range(80):
        gen = generated(seed, settings)
        if gen.spec.duration > 3_600_000 or any(step.action == "sleep" for step in gen.spec.steps):
            continue
        if not run_spec(gen.spec, settings, keep="never").ok:
            return seed
    raise AssertionError("no short small seed below 80 meets the planted bug")


class DeferredBroadcastStore(ChatStore):
    """A planted contention bug, the real thatch's broadcast shape (seed 002's `db.transaction`): a
    deferred transaction reads the roster first and inserts after, so a write another process commits
    in between makes its first insert fail at once (SQLITE_BUSY_SNAPSHOT), whatever the busy timeout,
    and nothing retries it. Otherwise it is the design's broadcast: stale opencode rows are skipped."""

    def broadcast(self, from_session, body, *, policy=None):
        conn = self.conn
        conn.execute("BEGIN")
        try:
            if self._get(from_session) is None:
                conn.execute("ROLLBACK")
                return super().broadcast(from_session, body)  # the design's own refusals
            now_ms = clock.now_ms()
            rows = [row_of(r) for r in conn.execute(
                f"SELECT {ROW_COLS} FROM chat_sessions WHERE session_id != ? ORDER BY name COLLATE NOCASE",
                (from_session,)).fetchall()]
            live = [r for r in rows if not (r.host_kind == "opencode" and is_stale(r, now_ms))]
            ids = [conn.execute("INSERT INTO chat_messages (from_session, to_session, body, created_at, via_broadcast)"
                                " VALUES (?, ?, ?, ?, 1)", (from_session, r.session_id, body,
                                                            clock.iso(now_ms))).lastrowid for r in live]
            conn.execute("COMMIT")
        except sqlite3.OperationalError as exc:
            conn.execute("ROLLBACK")
            raise StoreBusy(f"database is locked by another process while broadcasting: {exc}") from exc
        return BroadcastResult(ok=True, recipients=tuple(r.name for r in live), message_ids=tuple(ids),
                               skipped=tuple(r.name for r in rows if r not in live))
