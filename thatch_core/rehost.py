"""The hosted set of one opencode runtime, and its rehost grace (R15).

A process beats and delivers only for the sessions it hosts (R13, R25). Open
TUI tabs reconnect to a restarted daemon but emit no events until typed
into, so a runtime persists the set it hosts and its successor re-hosts that
set for a bounded window (``REHOST_GRACE_MS``, 24 h, or
``THATCH_CHAT_REHOST_GRACE_MINUTES``): without it, alive-idle tabs would read
stale and mail to them would never wake them. A re-hosted session that shows
activity graduates to permanent hosting; a silent one (a closed tab) drops
out when its grace ends and goes stale.

The file (``state_dir/chat-hosted.json``) is
``{"version": 1, "sessions": {id: {"last_activity_ms", "rehost_until_ms"}}}``,
written atomically (temp file + ``os.replace``), so a SIGKILL never leaves
half a file (D-runtime-15). It is rewritten when what a successor reads from
it changes: which sessions are hosted and their rehost deadlines. Activity
alone (every busy/idle edge touches its session) does not rewrite it, so
``last_activity_ms`` is the activity at the set's last change (D-speed-core-6).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

HOSTED_STATE_FILE = "chat-hosted.json"


@dataclass
class Hosted:
    """One hosted session. ``rehost_until_ms`` is set while the session is only
    re-hosted from a previous runtime's set and has shown no activity here."""

    last_activity_ms: int
    rehost_until_ms: int | None = None


class HostedSet:
    """Which sessions this process hosts, persisted for the next runtime.

    Thread-safe (the poller's timer thread asks for the current set). The
    lock is never held while calling out, except for the small state file.
    """

    def __init__(self, state_dir: str | os.PathLike | None, grace_ms: int,
                 log: Callable[[str], None]):
        self.path = Path(state_dir) / HOSTED_STATE_FILE if state_dir is not None else None
        self.grace_ms = grace_ms
        self._log = log
        self._lock = threading.RLock()
        self._hosted: dict[str, Hosted] = {}
        # What a successor would read from the file this set last wrote (the
        # ids and their deadlines), and the file's identity right after: a
        # persist that changes neither over our own untouched file is
        # skipped (every host event persists; most change nothing a restart
        # reads).
        self._written: tuple[tuple, tuple] | None = None
        # The answer of the last expire, good until the earliest grace ends or
        # the set changes (every poll asks twice; D-speed-core-5).
        self._hosted_sorted: list[str] | None = None
        self._valid_until_ms: int | None = None

    def touch(self, session_id: str, now_ms: int) -> None:
        """Activity: host the session; a re-hosted one graduates to permanent."""
        with self._lock:
            self._hosted_sorted = None
            entry = self._hosted.get(session_id)
            if entry is None:
                self._hosted[session_id] = Hosted(now_ms)
            else:
                entry.last_activity_ms = now_ms
                entry.rehost_until_ms = None
        self.persist()

    def drop(self, session_id: str) -> None:
        """Stop hosting (the session was deleted or exited here)."""
        with self._lock:
            self._hosted_sorted = None
            self._hosted.pop(session_id, None)
        self.persist()

    def expire(self, now_ms: int) -> tuple[list[str], list[str]]:
        """``(hosted, expired)``: drop re-hosted sessions whose grace ran out
        without activity, and return the remaining set (sorted) and the
        dropped ids."""
        with self._lock:
            cached = self._hosted_sorted
            if cached is not None and (self._valid_until_ms is None or now_ms < self._valid_until_ms):
                return list(cached), []
            expired = [sid for sid, h in self._hosted.items()
                       if h.rehost_until_ms is not None and now_ms >= h.rehost_until_ms]
            for sid in expired:
                del self._hosted[sid]
            hosted = sorted(self._hosted)
            self._hosted_sorted = hosted
            self._valid_until_ms = min((h.rehost_until_ms for h in self._hosted.values()
                                        if h.rehost_until_ms is not None), default=None)
            hosted = list(hosted)
        if expired:
            self.persist()
        return hosted, expired

    def rehosting(self) -> list[str]:
        """Sessions hosted only by grace (sorted)."""
        with self._lock:
            return sorted(s for s, h in self._hosted.items() if h.rehost_until_ms is not None)

    def load_previous(self, now_ms: int) -> list[str]:
        """Re-host the previous runtime's set until its grace ends; returns the
        ids re-hosted.

        A session the old runtime hosted for real gets the full grace from
        now; one the old runtime was itself only re-hosting keeps its old
        deadline, so a chain of restarts cannot keep a closed tab fresh forever.
        """
        if self.path is None:
            return []
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            sessions = data.get("sessions", {}) if isinstance(data, dict) else {}
            if not isinstance(sessions, dict):
                sessions = {}
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as err:
            self._log(f"[thatch] chat cannot read the hosted set: {err!r}; nothing re-hosted")
            return []
        loaded = []
        with self._lock:
            for sid, rec in sessions.items():
                if not isinstance(rec, dict):
                    continue
                try:
                    until = rec.get("rehost_until_ms")
                    until = now_ms + self.grace_ms if until is None else int(until)
                    last = int(rec.get("last_activity_ms") or now_ms)
                except (TypeError, ValueError):
                    continue  # one garbled entry does not cost the others their grace
                if now_ms >= until:
                    continue
                self._hosted[sid] = Hosted(last, rehost_until_ms=until)
                self._hosted_sorted = None
                loaded.append(sid)
        return loaded

    def persist(self) -> None:
        if self.path is None:
            return
        with self._lock:
            restart_reads = tuple((sid, h.rehost_until_ms) for sid, h in sorted(self._hosted.items()))
            if self._written is not None and self._written[0] == restart_reads and self._written[1] is not None \
                    and self._file_id() == self._written[1]:
                return  # the file already holds this set, written by us
            data = {
                "version": 1,
                "sessions": {
                    sid: {"last_activity_ms": h.last_activity_ms, "rehost_until_ms": h.rehost_until_ms}
                    for sid, h in sorted(self._hosted.items())
                },
            }
            text = json.dumps(data, indent=1)
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
                tmp.write_text(text, encoding="utf-8")
                os.replace(tmp, self.path)  # a SIGKILL never leaves half a file
            except OSError as err:
                self._written = None
                self._log(f"[thatch] chat cannot persist the hosted set: {err!r}")
                return
            self._written = (restart_reads, self._file_id())

    def _file_id(self) -> tuple | None:
        """The state file's identity (a replace by anyone makes a new inode)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
