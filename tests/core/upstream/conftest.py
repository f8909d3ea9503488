"""Fixtures of the ported upstream cases: a real SQLite file per test, a frozen
clock, a second raw connection for fixture surgery (aging stamps, legacy rows),
and a registration helper that can steer the pool pick to a chosen base.

The real suite hands a base to each registration ("alice" gives
``alice-00001``); thatch_core's bases are always pool draws, so the helper
steers the draw instead: ``reg(sid, "a-corn")`` yields ``a-corn-00001`` on a
fresh database, exactly as the real helper's "alice" yields ``alice-00001``.
"""

from __future__ import annotations

import random
import sqlite3

import pytest

from thatch_core.db import open_db
from thatch_core.store import ChatStore


class SteeredPick:
    """A stand-in for the store's rng whose pool pick is the chosen base."""

    def __init__(self, base: str):
        self.base = base

    def choice(self, seq):
        assert self.base in seq, f"{self.base!r} is not a pool base"
        return self.base


@pytest.fixture
def store(db_path, frozen):
    conn = open_db(db_path)
    yield ChatStore(conn, rng=random.Random(0))
    conn.close()


@pytest.fixture
def raw(store, db_path):
    """A second connection to the same file, for row surgery the store does not expose."""
    conn = sqlite3.connect(db_path, isolation_level=None)
    yield conn
    conn.close()


@pytest.fixture
def reg(store):
    """``reg(sid, base=None, project="p", title=None)``: register, failing the test at the setup line."""

    def register(sid, base=None, project="p", title=None, **kw):
        store.rng = SteeredPick(base) if base is not None else random.Random(0)
        res = store.register(sid, project=project, title=title, **kw)
        assert res.ok, f"reg({sid}, {base}) failed: {res.error}"
        return res

    return register


@pytest.fixture
def steered():
    """The steering pick itself, for a test that builds its own store."""
    return SteeredPick
