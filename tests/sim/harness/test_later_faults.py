"""The later design's faults and host options in the fake opencode host: a retried committed call, a plugin
reload in the same process, a host that clips tool outputs, and the plugin's machinery child."""

from __future__ import annotations

import pytest

from harnesskit import Driver, make_ctx, session_info
from simulator.design import MACHINERY_TITLE
from simulator.protocol import OP_RELOAD, OP_RETRY, OP_START
from thatch_core.db import open_db

A, B, X = "ses_alice0000000001", "ses_bob00000000002", "ses_xtract00000003"


@pytest.fixture
def drivers(tmp_path, frozen_sim):
    made = []

    def make(sessions, label="h1", **extra):
        d = Driver(make_ctx(tmp_path, label, "opencode", sessions, **extra), tmp_path / "run", frozen_sim)
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()


def messages(tmp_path) -> list[tuple]:
    conn = open_db(tmp_path / "thatch.db")
    try:
        return conn.execute("SELECT from_session, to_session, body FROM chat_messages ORDER BY id").fetchall()
    finally:
        conn.close()


def two_sessions(drivers, **kw):
    d = drivers([session_info("alice", A, agent="silent"), session_info("bob", B, agent="silent")], **kw)
    d.send(OP_START, 0)
    d.run_until(30_000)
    return d


def test_a_retry_calls_the_sessions_last_call_again_with_identical_arguments(drivers, tmp_path):
    """The host's second call is recorded with the fault step that caused it, and (seed 000's design has no
    de-duplication) stores the body a second time."""
    d = two_sessions(drivers)
    d.act(60_000, "send", "alice", to="bob", body="tag the release")
    reply = d.send(OP_RETRY, 62_000, "alice", tool="send", times=1, step=4)
    assert reply.ok and reply.result == {"tool": "thatch_chat_send"}
    calls = d.events("tool-call", "alice")
    assert calls[-1]["data"]["retry"] == 4 and calls[-1]["data"]["args"] == calls[-2]["data"]["args"]
    assert [m[2] for m in messages(tmp_path)] == ["tag the release", "tag the release"]


def test_a_retry_with_no_such_call_is_refused(drivers):
    d = two_sessions(drivers)
    assert not d.send(OP_RETRY, 60_000, "alice", tool="broadcast", times=1, step=0).ok


def test_a_reload_is_a_fresh_runtime_in_the_same_process(drivers):
    """The old runtime's in-memory state goes with it; the sessions and the store live on."""
    d = two_sessions(drivers)
    old = d.harness.runtime
    assert old.hosted_sessions()
    assert d.send(OP_RELOAD, 60_000, None, step=0).ok
    assert d.harness.runtime is not old and d.harness.store is not None


def test_a_clipping_host_shows_the_model_only_the_first_n_characters(drivers):
    d = two_sessions(drivers, clip=100)
    d.act(60_000, "send", "alice", to="bob", body="x" * 500)
    d.act(61_000, "read", "bob")
    result = d.events("tool-result", "bob")[-1]["data"]
    assert len(result["text"]) == 100 and result["clipped_from"] > 500


def test_the_machinery_child_looks_top_level_to_the_host_and_carries_the_machinery_title(drivers, tmp_path):
    """Only the plugin knows its child's parent: the host lists it top-level under the machinery title, and the
    fake host tells the runtime of it at its creation (`on_machinery_child`), whose in-memory child map keeps it
    out of the directory even on seed 000's design (only a reload that forgets the map lets it in)."""
    d = drivers([session_info("alice", A, agent="silent"),
                 session_info("extract", X, parent="alice", parent_id=A, machinery=True, joins="idle")])
    d.send(OP_START, 0)
    d.run_until(30_000)
    assert d.harness.client.session_parent(X) is None
    assert d.harness.client.session_title(X) == MACHINERY_TITLE
    assert [e["session"] for e in d.events("registered")] == ["alice"]
