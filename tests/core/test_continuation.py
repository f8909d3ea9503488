"""Continuation adoption across Claude Code session-id forks (R33).

Real temp-dir SQLite, real transcript files in a temp projects directory.
"""
from __future__ import annotations

import json
import os

import pytest

from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.continuation import (
    MAX_SCANNED_TRANSCRIPTS, TAIL_BYTES, adopt_continuation, append_continued_in, continued_in_record,
    continued_in_target, resolve_registered_predecessor, transcript_path_for,
)
from thatch_core.mcp import LEAVE_LINE, HOOK_LINE_RE, chat_hook_line, mcp_session_id

CFG = StaticConfig(ChatConfig())


@pytest.fixture
def projects(tmp_path):
    d = tmp_path / "projects" / "-work-demo"
    d.mkdir(parents=True)
    return d


def write_transcript(projects, host_id, *, lines=3):
    """A transcript with a few ordinary records (what a turn writes)."""
    path = transcript_path_for(projects, host_id)
    with open(path, "a", encoding="utf-8") as fh:
        for i in range(lines):
            fh.write(json.dumps({"type": "user", "sessionId": host_id, "message": f"turn {i}"}) + "\n")
    return path


def fork_chain(projects, ids):
    """ids[0] forked into ids[1], which forked into ids[2], ...; each old
    transcript ends with its continued-in record."""
    for old, new in zip(ids, ids[1:]):
        write_transcript(projects, old)
        append_continued_in(transcript_path_for(projects, old), old, new)
    write_transcript(projects, ids[-1], lines=1)


def hook(store, projects, host_id, **kw):
    return chat_hook_line(store, CFG, host_id, transcript_path=str(transcript_path_for(projects, host_id)), **kw)


@pytest.mark.rules("R33")
def test_record_shape_is_the_documented_one(tmp_path):
    """R33: the continued-in record is Claude Code's (docs/transcripts.md): type `continued-in`,
    the old id as `sessionId`, the new one under `continuedInSessionId`, one compact line."""
    rec = continued_in_record("old-1", "new-2")
    assert rec == {"type": "continued-in", "sessionId": "old-1", "continuedInSessionId": "new-2"}
    path = tmp_path / "old-1.jsonl"
    path.write_text('{"type":"user"}\n')
    append_continued_in(path, "old-1", "new-2")
    last = path.read_text().splitlines()[-1]
    assert last == '{"type":"continued-in","sessionId":"old-1","continuedInSessionId":"new-2"}'
    assert continued_in_target(path) == "new-2"


@pytest.mark.rules("R33", "R31")
def test_chain_of_three_hops_adopts_name_and_mail_in_both_columns(store, projects):
    """R33, R31: A is registered with mail both ways; A -> B -> C -> D forks.
    The hook for D walks three hops back and carries name and mail over."""
    a_line = hook(store, projects, "host-a")
    name = HOOK_LINE_RE.match(a_line)["name"]
    a = mcp_session_id("host-a")
    store.register("peer", kind="opencode")
    assert store.send("peer", a, "to a").ok
    assert store.send(a, "peer", "from a").ok
    fork_chain(projects, ["host-a", "host-b", "host-c", "host-d"])

    d_line = hook(store, projects, "host-d")

    d = mcp_session_id("host-d")
    assert HOOK_LINE_RE.match(d_line)["name"] == name
    assert HOOK_LINE_RE.match(d_line)["unread"] == "1"
    assert store.get(a) is None and store.get(d).name == name
    feed = store.message_feed()
    assert {(r.from_session, r.to_session) for r in feed} == {("peer", d), (d, "peer")}
    # Nothing was registered for the intermediate ids.
    assert all(store.get(mcp_session_id(h)) is None for h in ("host-b", "host-c"))


@pytest.mark.rules("R33")
def test_walk_stops_at_the_nearest_registered_ancestor(store, projects):
    """R33: with A and C both registered, D adopts C (the nearest), not A."""
    hook(store, projects, "host-a")
    store.register(mcp_session_id("host-c"), kind="mcp")
    fork_chain(projects, ["host-a", "host-b", "host-c", "host-d"])
    got = resolve_registered_predecessor(store, "host-d", transcript_path_for(projects, "host-d"))
    assert got == mcp_session_id("host-c")


@pytest.mark.rules("R33")
@pytest.mark.parametrize("hops,found", [(10, True), (11, False)])
def test_chain_walk_is_capped_at_ten_hops(store, projects, hops, found):
    """R33: an ancestor 10 hops back is adopted; one 11 hops back is out of reach."""
    ids = [f"host-{i:02d}" for i in range(hops + 1)]
    store.register(mcp_session_id(ids[0]), kind="mcp")
    fork_chain(projects, ids)
    got = resolve_registered_predecessor(store, ids[-1], transcript_path_for(projects, ids[-1]))
    assert (got == mcp_session_id(ids[0])) is found
    assert adopt_continuation(store, ids[-1], transcript_path_for(projects, ids[-1])) is found


@pytest.mark.rules("R33", "R7")
def test_tombstone_follows_the_fork(store, projects):
    """R33, R7: a session that left stays left after its id forks: the new
    id's hook prints the leave line and does not rejoin."""
    hook(store, projects, "host-a")
    a = mcp_session_id("host-a")
    store.register("peer", kind="opencode")
    assert store.send("peer", a, "kept").ok
    assert store.unregister(a)
    fork_chain(projects, ["host-a", "host-b"])

    assert hook(store, projects, "host-b") == f'{LEAVE_LINE} (pass as: "{mcp_session_id("host-b")}")'

    b = mcp_session_id("host-b")
    assert store.get(b) is None
    assert store.has_tombstone(b) and not store.has_tombstone(a)
    assert [r.to_session for r in store.message_feed()] == [b]


@pytest.mark.rules("R33", "R32")
def test_host_pid_anchors_follow(store, projects):
    """R33, R32: an anchor recorded for the old id resolves to the new id."""
    a = mcp_session_id("host-a")
    store.register(a, kind="mcp")
    store.record_host_pid(4321, a)
    fork_chain(projects, ["host-a", "host-b"])
    assert adopt_continuation(store, "host-b", transcript_path_for(projects, "host-b"))
    assert store.resolve_host_pid(4321) == mcp_session_id("host-b")


@pytest.mark.rules("R33")
def test_known_id_and_missing_trail_adopt_nothing(store, projects, tmp_path):
    """R33: a registered id is never re-adopted; no record, no directory, no
    transcript path all mean "register fresh"."""
    store.register(mcp_session_id("host-a"), kind="mcp")
    fork_chain(projects, ["host-a", "host-b"])
    store.register(mcp_session_id("host-b"), kind="mcp")
    assert not adopt_continuation(store, "host-b", transcript_path_for(projects, "host-b"))
    assert not adopt_continuation(store, "host-z", transcript_path_for(projects, "host-z"))
    assert not adopt_continuation(store, "host-b2", tmp_path / "nowhere" / "host-b2.jsonl")
    assert resolve_registered_predecessor(store, "host-b", None) is None


def set_mtime(path, seconds):
    """Give a transcript a modification time (seconds after an arbitrary epoch)."""
    ns = (1_800_000_000 + seconds) * 1_000_000_000
    os.utime(path, ns=(ns, ns))


def predecessor_of(store, projects, new_id):
    return resolve_registered_predecessor(store, new_id, transcript_path_for(projects, new_id))


@pytest.mark.rules("R33")
def test_a_record_that_is_not_the_last_line_is_not_adopted(store, projects):
    """R33: only the last non-empty line counts: a record followed by any other record hands
    nothing off; blank lines after it do not hide it."""
    store.register(mcp_session_id("host-a"), kind="mcp")
    path = write_transcript(projects, "host-a")
    append_continued_in(path, "host-a", "host-b")
    with open(path, "a") as fh:
        fh.write("\n  \n\n")
    assert predecessor_of(store, projects, "host-b") == mcp_session_id("host-a")
    write_transcript(projects, "host-a", lines=1)
    assert predecessor_of(store, projects, "host-b") is None
    assert not adopt_continuation(store, "host-b", transcript_path_for(projects, "host-b"))


@pytest.mark.rules("R33")
def test_only_the_last_line_of_the_final_4_kib_counts(store, projects):
    """R33: a long transcript ending with the record is adopted (only its tail is read); a record
    whose own line is longer than the 4096-byte tail is cut by the read and is not a record."""
    store.register(mcp_session_id("host-a"), kind="mcp")
    path = write_transcript(projects, "host-a", lines=400)  # far more than the tail
    assert path.stat().st_size > 4 * TAIL_BYTES
    append_continued_in(path, "host-a", "host-b")
    assert predecessor_of(store, projects, "host-b") == mcp_session_id("host-a")

    padded = dict(continued_in_record("host-c", "host-d"), note="x" * TAIL_BYTES)
    transcript_path_for(projects, "host-c").write_text(json.dumps(padded) + "\n")
    store.register(mcp_session_id("host-c"), kind="mcp")
    assert continued_in_target(transcript_path_for(projects, "host-c")) is None
    assert predecessor_of(store, projects, "host-d") is None


@pytest.mark.rules("R33")
def test_the_201st_newest_sibling_is_not_scanned(store, projects):
    """R33: at most the 200 newest siblings (by modification time) are read, the hook's own
    transcript not counted among them; a record in an older one is out of reach."""
    store.register(mcp_session_id("host-a"), kind="mcp")
    fork_chain(projects, ["host-a", "host-b"])
    set_mtime(transcript_path_for(projects, "host-a"), 0)
    set_mtime(transcript_path_for(projects, "host-b"), 10_000)  # the hook's own: newest, excluded
    for i in range(MAX_SCANNED_TRANSCRIPTS - 1):
        set_mtime(write_transcript(projects, f"filler-{i:03d}", lines=1), 100 + i)
    assert predecessor_of(store, projects, "host-b") == mcp_session_id("host-a")  # the 200th newest
    set_mtime(write_transcript(projects, "filler-last", lines=1), 50)
    assert predecessor_of(store, projects, "host-b") is None  # now the 201st
    set_mtime(transcript_path_for(projects, "host-a"), 60)
    assert predecessor_of(store, projects, "host-b") == mcp_session_id("host-a")


@pytest.mark.rules("R33")
@pytest.mark.parametrize("newer", ["host-a", "host-b"])
def test_the_newest_sibling_wins_when_two_name_the_same_id(store, projects, newer):
    """R33: two transcripts hand off to one new id: the one modified last is the predecessor."""
    for old in ("host-a", "host-b"):
        store.register(mcp_session_id(old), kind="mcp")
        append_continued_in(write_transcript(projects, old), old, "host-c")
        set_mtime(transcript_path_for(projects, old), 100 if old == newer else 50)
    assert predecessor_of(store, projects, "host-c") == mcp_session_id(newer)


@pytest.mark.rules("R33")
@pytest.mark.parametrize("last", [
    b'{"type":"continued-in","sessionId":"host-a","contin',                          # torn mid-write
    b"{not json",
    b"\xff\xfe continued-in \xff",
    b'["continued-in", "host-b"]',
    b'"continued-in"',
    b"null",
    b'{"type":"system","subtype":"continued_in","sessionId":"host-a","continuedInSessionId":"host-b"}',
    b'{"type":"continued_in","continuedInSessionId":"host-b"}',
    b'{"type":"continued-in","continuedInSessionId":""}',
    b'{"type":"continued-in","continuedInSessionId":42}',
    b'{"type":"continued-in","continuedInSessionId":null}',
    b'{"type":"continued-in","continuedInSessionId":["host-b"]}',
    b'{"type":"continued-in","sessionId":"host-b"}',
    b"[" * 2000 + b"]" * 2000,                                           # nested deeper than the parser goes
], ids=["torn", "garbage", "bytes", "array", "string", "null", "old-format", "underscore", "empty-id", "int-id",
        "null-id", "list-id", "no-key", "nested"])
def test_a_malformed_last_line_hands_nothing_off(store, projects, last):
    """R33: a last line that is not a well-formed continued-in record naming a non-empty id
    adopts nothing, whatever came before it (here a good record) - and never raises."""
    store.register(mcp_session_id("host-a"), kind="mcp")
    path = write_transcript(projects, "host-a")
    append_continued_in(path, "host-a", "host-b")
    with open(path, "ab") as fh:
        fh.write(last + b"\n")
    assert continued_in_target(path) is None
    assert predecessor_of(store, projects, "host-b") is None


@pytest.mark.rules("R33")
def test_the_predecessor_is_named_by_the_file_not_the_record(store, projects):
    """R33: the transcript's file name is the predecessor's host id; the record's own
    `sessionId` is not read."""
    store.register(mcp_session_id("host-a"), kind="mcp")
    store.register(mcp_session_id("host-z"), kind="mcp")
    append_continued_in(write_transcript(projects, "host-a"), "host-z", "host-b")
    assert predecessor_of(store, projects, "host-b") == mcp_session_id("host-a")


@pytest.mark.rules("R33")
def test_unreadable_siblings_and_cycles_end_quietly(store, projects):
    """R33: a directory named like a transcript, an empty file and a dangling link are skipped;
    records that name each other in a cycle run out of hops instead of looping."""
    (projects / "dir.jsonl").mkdir()
    (projects / "empty.jsonl").write_bytes(b"")
    (projects / "dangling.jsonl").symlink_to(projects / "gone")
    append_continued_in(write_transcript(projects, "host-x"), "host-x", "host-y")
    append_continued_in(write_transcript(projects, "host-y"), "host-y", "host-x")
    assert predecessor_of(store, projects, "host-x") is None
    assert not adopt_continuation(store, "host-x", transcript_path_for(projects, "host-x"))
