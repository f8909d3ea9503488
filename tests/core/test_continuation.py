"""Continuation adoption across Claude Code session-id forks (R33).

Real temp-dir SQLite, real transcript files in a temp projects directory.
"""
from __future__ import annotations

import json

import pytest

from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.continuation import (
    adopt_continuation, append_continued_in, continued_in_record, predecessor_map,
    resolve_registered_predecessor, transcript_path_for,
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
    """R33: the continued-in record the simulator writes (docs/transcripts.md)."""
    rec = continued_in_record("old-1", "new-2", timestamp="2026-11-29T13:00:00Z")
    assert rec == {"type": "system", "subtype": "continued_in", "sessionId": "old-1",
                   "continuedInSessionId": "new-2", "timestamp": "2026-11-29T13:00:00Z"}
    path = tmp_path / "old-1.jsonl"
    append_continued_in(path, "old-1", "new-2", timestamp="2026-11-29T13:00:00Z")
    assert json.loads(path.read_text().splitlines()[-1]) == rec


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

    rejoin = f'To rejoin as this conversation, pass as: "{mcp_session_id("host-b")}".'
    assert hook(store, projects, "host-b") == f"{LEAVE_LINE} {rejoin}"

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


@pytest.mark.rules("R33")
def test_corrupt_lines_and_cycles_are_skipped(store, projects):
    """R33: garbage, half-written and non-object lines are skipped; a cycle
    in corrupt records ends the walk instead of looping."""
    store.register(mcp_session_id("host-a"), kind="mcp")
    path = write_transcript(projects, "host-a")
    with open(path, "ab") as fh:
        fh.write(b"{not json\n\xff\xfe continued_in\n[\"continued_in\"]\n")
        fh.write(b'{"type":"system","subtype":"continued_in","continuedInSessionId":42}\n')
    append_continued_in(path, "host-a", "host-b")
    with open(path, "ab") as fh:
        fh.write(b'{"type":"system","subtype":"continued_in","sessionId":"host-a","contin')  # torn
    assert resolve_registered_predecessor(store, "host-b", projects / "host-b.jsonl") == mcp_session_id("host-a")

    # x <-> y name each other: no registered ancestor, and no endless walk.
    append_continued_in(write_transcript(projects, "host-x"), "host-x", "host-y")
    append_continued_in(write_transcript(projects, "host-y"), "host-y", "host-x")
    assert resolve_registered_predecessor(store, "host-x", projects / "host-x.jsonl") is None


@pytest.mark.rules("R33")
def test_only_the_tail_is_scanned(projects):
    """R33: the record is a finished transcript's last line; a record buried
    before the scanned tail is not found (bounded cost per hook)."""
    path = transcript_path_for(projects, "host-a")
    append_continued_in(path, "host-a", "host-b")
    write_transcript(projects, "host-a", lines=200)  # ~10 kB after the record
    assert predecessor_map(projects, tail_bytes=1024) == {}
    assert predecessor_map(projects, tail_bytes=1 << 20) == {"host-b": "host-a"}


@pytest.mark.rules("R33")
def test_missing_session_id_falls_back_to_the_file_name(projects):
    """R33: a record without sessionId names its own transcript's session."""
    path = write_transcript(projects, "host-a")
    with open(path, "a") as fh:
        fh.write(json.dumps({"type": "system", "subtype": "continued_in", "continuedInSessionId": "host-b"}) + "\n")
    assert predecessor_map(projects) == {"host-b": "host-a"}


@pytest.mark.rules("R33")
def test_later_record_wins_when_two_name_the_same_new_id(projects):
    """R33: two old sessions naming one new id: the later timestamp is the real fork."""
    append_continued_in(write_transcript(projects, "host-a"), "host-a", "host-c", timestamp="2026-11-29T10:00:00Z")
    append_continued_in(write_transcript(projects, "host-b"), "host-b", "host-c", timestamp="2026-11-29T11:00:00Z")
    assert predecessor_map(projects) == {"host-c": "host-b"}
