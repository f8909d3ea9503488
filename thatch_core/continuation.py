"""Continuation adoption for Claude Code session-id forks (R33).

Claude Code forks its session id on resume (and sometimes spontaneously: an
agent-team conversion, a self-update, a config reload). The MCP identity is
derived from the host session id (``mcp_<sha256(id)[:12]>``), so a fork
would strand the old identity's name and mailbox. The host leaves a trail in
its transcripts: each session writes ``<projects_dir>/<host_session_id>.jsonl``
and, when a conversation moves to a new id, the OLD transcript's last line
becomes

    {"type":"continued-in","sessionId":"<old host id>","continuedInSessionId":"<new host id>"}

(docs/transcripts.md). When a hook sees an UNKNOWN session id, the walk asks,
hop by hop, which sibling transcript hands off to the id in hand: it looks at
no more than the newest ``MAX_SCANNED_TRANSCRIPTS`` siblings (by modification
time, newest first, the current transcript excluded) and, in each, at nothing
but the last non-empty line inside the final ``TAIL_BYTES`` bytes. The first
sibling whose record names the id is the predecessor, and its file name (not
the record's ``sessionId``) is the predecessor's host id. The walk stops at
the nearest ancestor that is registered or tombstoned, at most
``CONTINUATION_MAX_HOPS`` hops back, and ``ChatStore.continue_session``
moves that identity (name, mail in both columns, anchors, tombstone) to the
new id.

The bounds are the real thatch's (docs/decisions/real.md): a busy
projects directory holds many large transcripts, and the scan runs on the
prompt hook of every turn.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from thatch_core.constants import CONTINUATION_MAX_HOPS
from thatch_core.ids import mcp_session_id
from thatch_core.store_guard import is_text

CONTINUED_IN_TYPE = "continued-in"
CONTINUED_IN_KEY = "continuedInSessionId"
TRANSCRIPT_SUFFIX = ".jsonl"
TAIL_BYTES = 4096
MAX_SCANNED_TRANSCRIPTS = 200


def continued_in_record(old_host_session_id: str, new_host_session_id: str) -> dict:
    """The record a forked conversation's OLD transcript ends with. Only
    ``type`` and ``continuedInSessionId`` are read; ``sessionId`` is what
    Claude Code writes beside them."""
    return {"type": CONTINUED_IN_TYPE, "sessionId": old_host_session_id, CONTINUED_IN_KEY: new_host_session_id}


def transcript_path_for(projects_dir: str | os.PathLike, host_session_id: str) -> Path:
    """Where Claude Code keeps a session's transcript."""
    return Path(projects_dir) / f"{host_session_id}{TRANSCRIPT_SUFFIX}"


def append_continued_in(old_transcript_path: str | os.PathLike, old_host_session_id: str,
                        new_host_session_id: str) -> None:
    """Append the continued-in record to the old transcript (what the host does on a fork)."""
    record = continued_in_record(old_host_session_id, new_host_session_id)
    with open(old_transcript_path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, separators=(",", ":")) + "\n")


def _last_line(path: str | os.PathLike) -> str | None:
    """The last non-blank line within the final ``TAIL_BYTES`` of a file, or None."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - TAIL_BYTES))
            data = fh.read(TAIL_BYTES)
    except (OSError, ValueError):
        # Missing, a directory, unreadable or vanished mid-scan: a transcript
        # that cannot be read names no successor.
        return None
    # A line cut by the seek is kept as it is: it can only matter when it is
    # the one line in the tail, and then it is an over-long line that does
    # not parse.
    lines = [line for line in data.decode("utf-8", "replace").split("\n") if line.strip()]
    return lines[-1] if lines else None


def continued_in_target(path: str | os.PathLike) -> str | None:
    """The host id a transcript says its conversation continued in, when its
    last line is a continued-in record; None otherwise (any other or corrupt
    last line, an empty or unreadable file)."""
    line = _last_line(path)
    if line is None:
        return None
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: a deeply nested line
        return None
    if not isinstance(rec, dict) or rec.get("type") != CONTINUED_IN_TYPE:
        return None
    target = rec.get(CONTINUED_IN_KEY)
    return target if isinstance(target, str) and target else None


def _siblings(directory: Path) -> list[str]:
    """The ``*.jsonl`` names in ``directory``, newest modification first (name
    breaks ties, so equal stamps order the same way on every run)."""
    found = []
    try:
        with os.scandir(directory) as it:
            for entry in it:
                if not entry.name.endswith(TRANSCRIPT_SUFFIX):
                    continue
                try:
                    found.append((-entry.stat().st_mtime_ns, entry.name))
                except OSError:  # vanished or a dangling link: not a transcript
                    continue
    except (OSError, ValueError):  # ValueError: a path with a NUL in it
        return []
    return [name for _, name in sorted(found)]


class _Scan:
    """One hook's view of a projects directory: the sibling list is read once
    and each transcript's last line at most once, however many hops look."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.names = _siblings(directory)
        self.targets: dict[str, str | None] = {}

    def predecessor(self, host_session_id: str, exclude_name: str) -> str | None:
        """The host id (file stem) of the newest of the first ``MAX_SCANNED_TRANSCRIPTS``
        siblings other than ``exclude_name`` whose record names ``host_session_id``."""
        candidates = [n for n in self.names if n != exclude_name][:MAX_SCANNED_TRANSCRIPTS]
        for name in candidates:
            if name not in self.targets:
                self.targets[name] = continued_in_target(self.directory / name)
            if self.targets[name] == host_session_id:
                return name[: -len(TRANSCRIPT_SUFFIX)]
        return None


def _known(store, host_session_id: str) -> str | None:
    """The mcp id of a host id that is registered or tombstoned, else None. A
    tombstoned ancestor counts: its leave must follow the conversation to the
    new id instead of being undone by the fork (D-real-cont-2)."""
    if not is_text(host_session_id):  # a file name that is not UTF-8 has no mcp id
        return None
    mcp_id = mcp_session_id(host_session_id)
    return mcp_id if store.get(mcp_id) is not None or store.has_tombstone(mcp_id) else None


def resolve_registered_predecessor(store, new_host_session_id: str, transcript_path, *,
                                   max_hops: int = CONTINUATION_MAX_HOPS) -> str | None:
    """The mcp id of the nearest registered (or tombstoned) ancestor of a new
    host session id, at most ``max_hops`` hops back; None when there is none
    within reach."""
    if not transcript_path or not isinstance(new_host_session_id, str):
        return None
    try:
        path = Path(transcript_path)
    except TypeError:  # not a path at all: no trail to follow
        return None
    scan = _Scan(path.parent)
    # The first hop leaves out the hook's own transcript, each later one the
    # transcript of the id in hand. A cycle of corrupt records just runs out
    # of hops: every transcript is read once, so it costs nothing more.
    current, exclude = new_host_session_id, path.name
    for _ in range(max_hops):
        old = scan.predecessor(current, exclude)
        if old is None:
            return None
        found = _known(store, old)
        if found is not None:
            return found
        current, exclude = old, old + TRANSCRIPT_SUFFIX
    return None


def adopt_continuation(store, new_host_session_id: str, transcript_path, *,
                       max_hops: int = CONTINUATION_MAX_HOPS) -> bool:
    """Move the nearest registered ancestor's identity onto the new host
    session id. False when the new id is already known or no ancestor is
    found (the caller then registers the id fresh)."""
    if not isinstance(new_host_session_id, str) or not new_host_session_id:
        return False
    new_mcp = mcp_session_id(new_host_session_id)
    if store.get(new_mcp) is not None or store.has_tombstone(new_mcp):
        return False
    old_mcp = resolve_registered_predecessor(store, new_host_session_id, transcript_path, max_hops=max_hops)
    if old_mcp is None:
        return False
    # The store moves a registered row or, for a session that left, its
    # tombstone; mail, anchors and the tombstone follow either way.
    return store.continue_session(old_mcp, new_mcp)
