"""Tiny shared fixtures: real SQLite files per test (never a mock) and frozen wall clocks."""

from __future__ import annotations

import random

import pytest
from freezegun import freeze_time

from chatkit import World
from historykit import ALICE, BOB, N_ALICE, N_BOB, make_db
from simulator import clock
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
    a process when it forks (docs/pitfalls.md).
    """
    c = open_db(db_path)
    yield c
    c.close()


@pytest.fixture
def store(conn):
    """A ChatStore on ``conn`` drawing names with ``random.Random(0)``."""
    return ChatStore(conn, rng=random.Random(0))


@pytest.fixture
def db(tmp_path):
    """A final database for the checker tests: historykit's alice and bob
    registered, no mail (test_expectations overrides it with mail)."""
    return make_db(tmp_path / "thatch.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)))


@pytest.fixture
def frozen():
    """Wall time frozen at 2026-11-29 12:00:00 UTC; move it with ``frozen.tick(s)``."""
    with freeze_time("2026-11-29 12:00:00") as f:
        yield f


@pytest.fixture
def frozen_sim():
    """Wall time frozen at the simulator's START_INSTANT, as a harness child
    sees it: tests drive it through harnesskit.Driver."""
    freezer = freeze_time(clock.START_INSTANT, tick=False)
    yield freezer.start()
    freezer.stop()


@pytest.fixture
def world(db_path, frozen):
    """A real store with two opencode sessions registered (chatkit.World)."""
    conn = open_db(db_path)
    yield World(ChatStore(conn))
    conn.close()
