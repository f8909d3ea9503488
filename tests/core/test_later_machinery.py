"""The later design's machinery sessions (D-later-2).

The plugin's own extraction child (title `thatch-extraction`) gets a durable
`chat_machinery` marker; both auto-register paths (prompt and idle) refuse a
marked session or the machinery title; the idle path deletes a corpse row it
finds; markers age out with the 7-day TTL; an explicit register is
unaffected. Seed 000's design keeps children out by the parent map alone (R1,
R25).
"""

from __future__ import annotations

import json

import pytest

from thatch_core.config import ConfigSource
from thatch_core.db import open_db
from thatch_core.later import EXTRACTION_CHILD_TITLE
from thatch_core.policy import LATER, policy_to_config
from thatch_core.runtime import OpencodeRuntime
from thatch_core.store import ChatStore

from opencodekit import FakeClient

PROMPT = [{"type": "text", "text": "hello"}]


@pytest.fixture
def store(db_path, frozen):
    conn = open_db(db_path)
    yield ChatStore(conn)
    conn.close()


def runtime(store, tmp_path, client, policy=LATER):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"chat": {"policy": policy_to_config(policy)}}))
    rt = OpencodeRuntime(store, client, directory=str(tmp_path), project="p", config_source=ConfigSource(path),
                         pid=1, cmdline_reader=lambda pid: ["opencode"], state_dir=tmp_path / "state",
                         log=lambda m: None)
    rt.start()
    return rt


def markers(store):
    return store.conn.execute("SELECT session_id, reason FROM chat_machinery").fetchall()


@pytest.mark.rules("R1", "R25")
def test_a_marked_child_never_auto_registers_even_after_a_reload(store, tmp_path):
    """R1/R25 under the later design: the marker outlives the in-memory parent map (no title to go by here)."""
    client = FakeClient()
    rt = runtime(store, tmp_path, client)
    rt.on_machinery_child("ses_x", "ses_parent")
    assert markers(store) == [("ses_x", "extraction")]
    reloaded = runtime(store, tmp_path, client)  # a reload: the parent map is gone, the host says top level
    reloaded.on_chat_message("ses_x", PROMPT)
    reloaded.on_session_status("ses_x", "idle")
    assert store.get("ses_x") is None


def test_the_machinery_title_alone_refuses_both_paths(store, tmp_path):
    client = FakeClient(titles={"ses_t": EXTRACTION_CHILD_TITLE, "ses_ok": "Real work"})
    rt = runtime(store, tmp_path, client)
    rt.on_chat_message("ses_t", PROMPT)
    rt.on_session_status("ses_t", "idle")
    rt.on_chat_message("ses_ok", PROMPT)
    assert store.get("ses_t") is None and store.get("ses_ok") is not None


def test_the_idle_path_deletes_a_corpse_row(store, tmp_path):
    store.register("ses_corpse", project="p", title=EXTRACTION_CHILD_TITLE)  # an older process registered it
    store.mark_machinery("ses_corpse")
    rt = runtime(store, tmp_path, FakeClient())
    rt.on_chat_message("ses_corpse", PROMPT)
    assert store.get("ses_corpse") is not None  # the prompt path refuses; only the idle path heals
    rt.on_session_status("ses_corpse", "idle")
    assert store.get("ses_corpse") is None and not store.has_tombstone("ses_corpse")


def test_an_explicit_register_is_unaffected(store, tmp_path):
    rt = runtime(store, tmp_path, FakeClient(titles={"ses_x": EXTRACTION_CHILD_TITLE}))
    rt.on_machinery_child("ses_x", "ses_parent")
    reply = rt.call_tool("ses_x", "chat_register")
    assert reply.ok and store.get("ses_x") is not None


def test_markers_age_out_with_the_auto_row_ttl(store, tmp_path, frozen):
    rt = runtime(store, tmp_path, FakeClient())
    rt.on_machinery_child("ses_old", "ses_parent")
    frozen.tick(7 * 86_400)
    rt.poller.poll()
    assert markers(store) == [("ses_old", "extraction")]  # exactly 7 days: kept
    frozen.tick(1)
    rt.poller.poll()
    assert markers(store) == []


def test_seed_000s_design_writes_no_marker_and_the_parent_map_keeps_the_child_out(store, tmp_path):
    client = FakeClient(titles={"ses_x": EXTRACTION_CHILD_TITLE})
    path = tmp_path / "config.json"
    path.write_text("{}")
    rt = OpencodeRuntime(store, client, directory=str(tmp_path), project="p", config_source=ConfigSource(path),
                         pid=1, cmdline_reader=lambda pid: ["opencode"], state_dir=tmp_path / "s0",
                         log=lambda m: None)
    rt.start()
    rt.on_machinery_child("ses_x", "ses_parent")
    rt.on_chat_message("ses_x", PROMPT)
    assert markers(store) == [] and store.get("ses_x") is None
