"""Continuation adoption for Claude Code session-id forks (R33).

Claude Code forks its session id on resume (and sometimes spontaneously: an
agent-team conversion, a self-update, a config reload). The MCP identity is
derived from the host session id (``mcp_<sha256(id)[:12]>``), so a fork
would strand the old identity's name and mailbox. The host leaves a trail in
its transcripts: each session writes ``<projects_dir>/<host_session_id>.jsonl``
and, when a session is continued under a new id, the OLD transcript gets a
final record

    {"type": "system", "subtype": "continued_in",
     "sessionId": "<old host id>", "continuedInSessionId": "<new host id>",
     "timestamp": "2026-11-29T13:45:07Z"}

(the format is defined in docs/transcripts.md; the simulator writes it with
``append_continued_in``). When a hook sees an UNKNOWN session id it reads the
tails of the sibling transcripts, follows continued-in records backwards from
the new id, and adopts the nearest ancestor that is registered or tombstoned:
``ChatStore.continue_session`` moves the name, mail (both columns), host-pid
anchors and tombstone to the new id.

Only file tails are read: the record is the last line of a finished
transcript, and a busy projects directory holds many large transcripts, so a
full scan on every prompt hook would be the slow path of every turn.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from thatch_core import clock
from thatch_core.constants import CONTINUATION_MAX_HOPS
from thatch_core.ids import mcp_session_id
from thatch_core.store_guard import is_text

CONTINUED_IN_TYPE = "system"
CONTINUED_IN_SUBTYPE = "continued_in"
TRANSCRIPT_SUFFIX = ".jsonl"
DEFAULT_TAIL_BYTES = 65_536

# Cheap byte-level prefilter: most transcript lines are model turns, and
# json-decoding every one of them would dominate the scan.
_MARKER = CONTINUED_IN_SUBTYPE.encode()


def continued_in_record(old_host_session_id: str, new_host_session_id: str,
                        *, timestamp: str | None = None) -> dict:
    """The continued-in record a forked session's OLD transcript ends with."""
    return {
        "type": CONTINUED_IN_TYPE,
        "subtype": CONTINUED_IN_SUBTYPE,
        "sessionId": old_host_session_id,
        "continuedInSessionId": new_host_session_id,
        "timestamp": timestamp or clock.iso(),
    }


def transcript_path_for(projects_dir: str | os.PathLike, host_session_id: str) -> Path:
    """Where Claude Code keeps a session's transcript."""
    return Path(projects_dir) / f"{host_session_id}{TRANSCRIPT_SUFFIX}"


def append_continued_in(old_transcript_path: str | os.PathLike, old_host_session_id: str,
                        new_host_session_id: str, *, timestamp: str | None = None) -> None:
    """Append the continued-in record to the old transcript (what the host does
    on a fork; the simulator's fake Claude Code calls this)."""
    record = continued_in_record(old_host_session_id, new_host_session_id, timestamp=timestamp)
    with open(old_transcript_path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, separators=(",", ":")) + "\n")


def _read_tail(path: Path, tail_bytes: int) -> list[bytes]:
    """The complete lines within the last ``tail_bytes`` of a file."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            start = max(0, size - tail_bytes)
            fh.seek(start)
            data = fh.read()
    except OSError:
        # Missing, unreadable or vanished mid-scan: a transcript that cannot
        # be read simply names no successor.
        return []
    lines = data.split(b"\n")
    if start > 0 and lines:
        lines = lines[1:]  # the first line was cut by the seek
    return lines


def _continued_in_records(path: Path, tail_bytes: int) -> list[tuple[str, str, str]]:
    """(old id, new id, timestamp) of every well-formed continued-in record in
    the tail of one transcript. Corrupt lines are skipped."""
    found = []
    for raw in _read_tail(path, tail_bytes):
        if _MARKER not in raw:
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            continue
        if not isinstance(rec, dict):
            continue
        if rec.get("type") != CONTINUED_IN_TYPE or rec.get("subtype") != CONTINUED_IN_SUBTYPE:
            continue
        new = rec.get("continuedInSessionId")
        # The file name is the host's own naming of the old session; it
        # stands in when a record omits sessionId.
        old = rec.get("sessionId") or path.name[: -len(TRANSCRIPT_SUFFIX)]
        # A `\udc80` escape in either id (no UTF-8 form, so no mcp id) makes the record corrupt.
        if not (is_text(new) and new and is_text(old)) or old == new:
            continue
        ts = rec.get("timestamp")
        found.append((old, new, ts if isinstance(ts, str) else ""))
    return found


def predecessor_map(directory: str | os.PathLike, *, exclude: str | os.PathLike | None = None,
                    tail_bytes: int = DEFAULT_TAIL_BYTES) -> dict[str, str]:
    """new host id -> old host id for every continued-in record found in the
    tails of the transcripts in ``directory``. If two records name the same
    new id, the later timestamp wins (a re-fork overwrote the first)."""
    best: dict[str, tuple[str, str]] = {}
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return {}
    skip = os.path.abspath(exclude) if exclude is not None else None
    for entry in entries:
        if not entry.name.endswith(TRANSCRIPT_SUFFIX):
            continue
        if skip is not None and os.path.abspath(entry.path) == skip:
            continue
        try:
            if not entry.is_file():
                continue
        except OSError:
            continue
        for old, new, ts in _continued_in_records(Path(entry.path), tail_bytes):
            if new not in best or ts >= best[new][1]:
                best[new] = (old, ts)
    return {new: old for new, (old, _) in best.items()}


def _known(store, mcp_id: str) -> bool:
    # A tombstoned ancestor counts: its leave must follow the conversation
    # to the new id instead of being silently undone by the fork.
    return store.get(mcp_id) is not None or store.has_tombstone(mcp_id)


def resolve_registered_predecessor(store, new_host_session_id: str, transcript_path,
                                   *, max_hops: int = CONTINUATION_MAX_HOPS,
                                   tail_bytes: int = DEFAULT_TAIL_BYTES) -> str | None:
    """The mcp id of the nearest registered (or tombstoned) ancestor of a new
    host session id, walking continued-in records backwards at most
    ``max_hops`` hops; None when there is none within reach."""
    if not transcript_path:
        return None
    try:
        path = Path(transcript_path)
    except TypeError:  # not a path at all: no trail to follow
        return None
    preds = predecessor_map(path.parent, exclude=path, tail_bytes=tail_bytes)
    current = new_host_session_id
    seen = {current}
    for _ in range(max_hops):
        old = preds.get(current)
        if old is None or old in seen:  # chain ends, or a corrupt cycle
            return None
        candidate = mcp_session_id(old)
        if _known(store, candidate):
            return candidate
        seen.add(old)
        current = old
    return None


def adopt_continuation(store, new_host_session_id: str, transcript_path, *,
                       max_hops: int = CONTINUATION_MAX_HOPS,
                       tail_bytes: int = DEFAULT_TAIL_BYTES) -> bool:
    """Move the nearest registered ancestor's identity onto the new host
    session id. False when the new id is already known or no ancestor is
    found (the caller then registers the id fresh)."""
    if not isinstance(new_host_session_id, str) or not new_host_session_id:
        return False
    new_mcp = mcp_session_id(new_host_session_id)
    if _known(store, new_mcp):
        return False
    old_mcp = resolve_registered_predecessor(store, new_host_session_id, transcript_path,
                                             max_hops=max_hops, tail_bytes=tail_bytes)
    if old_mcp is None:
        return False
    # The store moves a registered row or, for a session that left, its
    # tombstone; mail, anchors and the tombstone follow either way.
    return store.continue_session(old_mcp, new_mcp)
