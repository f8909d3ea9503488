"""The store's edges: how long a call may wait on a lock, honest replies for faults no retry cures,
and views that only read (D-store-18, D-store-19, D-store-21)."""

from __future__ import annotations

import io
import os
import random
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest

from thatch_core import cli as chat_cli
from thatch_core import db as dbmod
from thatch_core.config import StaticConfig
from thatch_core.constants import POLL_INTERVAL_MS
from thatch_core.db import StoreBusy, StoreError, StoreFault, open_db, open_db_readonly
from thatch_core.store import ChatStore
from thatch_core.store_guard import guarded
from thatch_core.tools import ChatTools


def two_sessions(path, **kwargs) -> tuple[sqlite3.Connection, ChatStore]:
    conn = open_db(path, **kwargs)
    store = ChatStore(conn, rng=random.Random(0))
    store.register("ses_a")
    store.register("ses_b")
    return conn, store


# -- the busy budget ---------------------------------------------------------


@pytest.mark.rules("R13", "R24")
def test_one_store_call_gives_up_on_a_held_lock_within_one_poll_interval():
    """Six waits of the busy timeout at most, whatever the call does: below the 30 s poll interval."""
    assert dbmod.worst_case_busy_ms() < POLL_INTERVAL_MS
    assert dbmod.worst_case_busy_ms() <= dbmod.BUSY_RETRIES * dbmod.BUSY_TIMEOUT_MS + 1000


def test_a_store_call_under_a_held_lock_makes_at_most_the_budgeted_attempts(db_path):
    conn, store = two_sessions(db_path, busy_timeout_ms=10)
    locker = open_db(db_path)
    locker.execute("BEGIN IMMEDIATE")
    begins = []
    conn.set_trace_callback(lambda sql: begins.append(sql) if sql.startswith("BEGIN") else None)
    try:
        with pytest.raises(StoreBusy):
            store.send("ses_a", "ses_b", "hi")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
        conn.set_trace_callback(None)
    assert len(begins) == dbmod.BUSY_RETRIES


class FlakyStore(ChatStore):
    """A store whose method meets a locked statement `busy_statements` times, then writes."""

    busy_statements = 0

    @guarded
    def poke(self) -> None:
        if self.busy_statements:
            self.busy_statements -= 1
            raise sqlite3.OperationalError("database is locked")
        with dbmod.immediate(self.conn):
            self.conn.execute("INSERT INTO chat_name_counters VALUES ('poke', 1)")


def test_statement_retries_and_the_write_lock_share_one_budget(db_path):
    conn = open_db(db_path, busy_timeout_ms=10)
    store = FlakyStore(conn)
    store.busy_statements = 2
    locker = open_db(db_path)
    locker.execute("BEGIN IMMEDIATE")
    begins = []
    conn.set_trace_callback(lambda sql: begins.append(sql) if sql.startswith("BEGIN") else None)
    try:
        with pytest.raises(StoreBusy):
            store.poke()
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert len(begins) == dbmod.BUSY_RETRIES - 2  # two waits went to the statement
    store.busy_statements = dbmod.BUSY_RETRIES  # more busy statements than the budget: it gives up, never loops
    with pytest.raises(StoreBusy):
        store.poke()
    assert store.busy_statements == 0
    conn.close()


def test_a_lock_that_passes_within_the_budget_is_waited_out(db_path):
    conn = open_db(db_path, busy_timeout_ms=10)
    store = FlakyStore(conn)
    store.busy_statements = dbmod.BUSY_RETRIES - 1
    store.poke()
    assert conn.execute("SELECT next FROM chat_name_counters WHERE base = 'poke'").fetchone() == (1,)
    conn.close()


# -- permanent faults ------------------------------------------------------------


def test_a_read_only_database_is_a_fault_and_the_reply_says_retrying_will_not_help(db_path):
    two_sessions(db_path)[0].close()
    ro = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
    tools = ChatTools(ChatStore(ro), StaticConfig())
    with pytest.raises(StoreFault) as info:
        ChatStore(ro).send("ses_a", "ses_b", "hi")
    assert info.value.kind == "read-only"
    reply = tools.call("thatch_chat_send", {"to": "ses_b", "body": "hi"}, identity="ses_a")
    assert not reply.ok
    assert reply.text.startswith("Chat is unavailable: the chat database is read-only (database error while writing ")
    assert reply.text.endswith("); nothing was changed, and trying again will not help until it is writable again.")
    assert "try again." not in reply.text
    ro.close()


def test_a_full_disk_is_a_fault_and_no_accepted_row_is_lost(db_path):
    conn, store = two_sessions(db_path)
    assert store.send("ses_a", "ses_b", "kept").ok
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")
    reply = ChatTools(store, StaticConfig()).call("thatch_chat_send", {"to": "ses_b", "body": "x" * 9000},
                                                  identity="ses_a")
    assert reply.text.startswith("Chat is unavailable: the disk holding the chat database is full (")
    assert reply.text.endswith("trying again will not help until space is freed.")
    assert [r.body for r in store.message_feed()] == ["kept"]
    conn.close()


def test_a_damaged_file_is_a_fault(db_path):
    db_path.write_bytes(b"this is not a database " * 200)
    with pytest.raises(StoreFault) as info:
        open_db(db_path)
    assert info.value.kind == "corrupt" and info.value.reason == "the chat database file is damaged"


def test_a_lock_is_still_a_transient_reply(db_path):
    conn, store = two_sessions(db_path, busy_timeout_ms=10)
    locker = open_db(db_path)
    locker.execute("BEGIN IMMEDIATE")
    try:
        reply = ChatTools(store, StaticConfig()).call("thatch_chat_send", {"to": "ses_b", "body": "hi"},
                                                      identity="ses_a")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert (reply.text.startswith("Chat is temporarily unavailable (")
            and reply.text.endswith("nothing was changed - try again."))
    conn.close()


def test_an_unforeseen_store_error_is_neither_transient_nor_permanent(db_path):
    conn, store = two_sessions(db_path)
    conn.close()
    reply = ChatTools(store, StaticConfig()).call("thatch_chat_status", {}, identity="ses_a")
    assert (reply.text.startswith("Chat could not complete the call (")
            and reply.text.endswith("); nothing was changed."))


def test_a_value_sqlite_cannot_bind_is_a_store_error_never_a_raw_exception(db_path):
    conn, store = two_sessions(db_path)

    class Sloppy(ChatStore):
        @guarded
        def bind(self, value):
            return self.conn.execute("SELECT ?", (value,)).fetchone()

    sloppy = Sloppy(conn)
    for value in ("\udc80", 2**64):
        with pytest.raises(StoreError, match=r"^a value given to bind cannot be stored"):
            sloppy.bind(value)
    conn.close()


# -- views that only read ----------------------------------------------------------


def run_list(db_path) -> tuple[int, str]:
    out = io.StringIO()
    return chat_cli.main(["list", "--db", str(db_path), "--stale", "all"], out=out), out.getvalue()


@pytest.fixture
def shared_dir():
    """A directory every user can reach (a test's tmp_path sits under root-only directories)."""
    path = Path(tempfile.mkdtemp(prefix="thatch-shared-"))
    path.chmod(0o755)
    yield path
    path.chmod(0o755)
    shutil.rmtree(path, ignore_errors=True)


def in_child_that_cannot_write(directory: Path, fn) -> str:
    """`fn()`'s text, run in a child that may not write `directory`: an unprivileged user when the
    tests run as root (root writes anywhere), else the same user with the directory made read-only."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            else:
                directory.chmod(0o555)
            text = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the parent, which fails on it
            text = f"raised {type(exc).__name__}: {exc}"
        os.write(write, text.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    os.waitpid(pid, 0)
    return text


@pytest.mark.rules("R16")
def test_chat_list_reads_a_database_in_a_read_only_directory(shared_dir):
    db_path = shared_dir / "thatch.db"
    two_sessions(db_path)[0].close()
    assert sorted(p.name for p in shared_dir.iterdir()) == ["thatch.db"]  # no -wal or -shm left behind
    db_path.chmod(0o644)
    text = in_child_that_cannot_write(shared_dir, lambda: "%d\n%s" % run_list(db_path))
    rc, _, roster = text.partition("\n")
    assert rc == "0", text
    assert roster.startswith("NAME") and "Active (2):" in roster
    assert sorted(p.name for p in shared_dir.iterdir()) == ["thatch.db"]


def test_a_read_only_open_never_writes_and_sees_the_current_schema(db_path):
    assert open_db_readonly(db_path) is None  # no file: only open_db creates one
    two_sessions(db_path)[0].close()
    ro = open_db_readonly(db_path)
    assert len(ChatStore(ro).list_sessions()) == 2
    with pytest.raises(StoreFault):
        ChatStore(ro).register("ses_c")
    ro.close()


def test_an_old_schema_is_left_to_open_db_which_migrates_it(db_path):
    raw = sqlite3.connect(db_path)
    raw.executescript(";\n".join(dbmod.LEGACY_SCHEMA_002))
    raw.close()
    assert open_db_readonly(db_path) is None
    rc, text = run_list(db_path)
    assert rc == 0 and text == "No registered sessions.\n"
    assert dbmod.schema_version(open_db(db_path)) == dbmod.SCHEMA_VERSION
