"""Tiny shared fixtures: a real SQLite file per test, never a mock."""

from __future__ import annotations

import random

import pytest

from thatch_core.db import open_db
from thatch_core.store import ChatStore


@pytest.fixture
def db_path(tmp_path):
    """Path of a fresh (not yet created) database file in the test's tmp dir."""
    return tmp_path / "thatch.db"


@pytest.fixture
def conn(db_path):
    """An open connection to ``db_path`` (schema created), closed afterwards.

    Tests that fork must not use this fixture: no connection may be open in
    a process when it forks (shared/pitfalls.md).
    """
    c = open_db(db_path)
    yield c
    c.close()


@pytest.fixture
def store(conn):
    """A ChatStore on ``conn`` drawing names with ``random.Random(0)``."""
    return ChatStore(conn, rng=random.Random(0))
