"""Lock contention: a tiny forked process holding the database write lock.

It takes `BEGIN IMMEDIATE` and keeps it until told to release, like another
writer (another thatch process, a backup tool) would. The parent side
(`LockHolder`) runs in the orchestrator; `_main` runs in the fork.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Optional

from multiprocess.connection import Connection
from multiprocess.context import ForkContext
from multiprocess.process import BaseProcess

from simulator.child import hygiene


def _main(conn: Connection, db_path: str, parent_pid: int, inherited: list[Connection]) -> None:
    hygiene.enter(parent_pid, inherited)
    db = sqlite3.connect(db_path, isolation_level=None, timeout=30)
    try:
        db.execute("BEGIN IMMEDIATE")
        conn.send("held")
        try:
            conn.recv()  # "release" (or EOF: the orchestrator is gone)
        except EOFError:
            pass
        db.execute("COMMIT")
    finally:
        db.close()
    hygiene.leave(0)


class LockHolder:
    """A forked process holding `BEGIN IMMEDIATE` on the db from `start()` to `release()`.

    The caller (the orchestrator) must have no SQLite connection open when it
    calls `start()`: the holder is a fork like any harness.
    """

    def __init__(self, db_path: Path, ctx: ForkContext, close_in_child: Optional[list[Connection]] = None) -> None:
        self.db_path = Path(db_path)
        self._ctx = ctx
        self._close = list(close_in_child or [])
        self.proc: Optional[BaseProcess] = None
        self.conn: Optional[Connection] = None

    def start(self, timeout_s: float = 10.0) -> None:
        parent_end, child_end = self._ctx.Pipe()
        self.proc = self._ctx.Process(
            target=_main, args=(child_end, str(self.db_path), os.getpid(), self._close + [parent_end]),
            daemon=True, name="thatch-lock-holder")
        self.proc.start()
        child_end.close()
        self.conn = parent_end
        if not parent_end.poll(timeout_s):
            raise RuntimeError("the lock holder did not take the database lock in time")
        parent_end.recv()

    def release(self, timeout_s: float = 5.0) -> None:
        if self.proc is None:
            return
        try:
            self.conn.send("release")
        except (OSError, EOFError):
            pass
        self.proc.join(timeout_s)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(1.0)
        self.conn.close()
        self.proc = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.is_alive()
