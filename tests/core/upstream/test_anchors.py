"""The real suite's "host-pid identity anchor" and "continuation adoption" blocks (R32, R33).

The real anchor lookup takes its freshness window as an argument (600 s in
every case); thatch_core's ``resolve_host_pid`` holds the same 600 s. The
real predecessor scan takes a callback saying which host ids are
registered; thatch_core's reads the store (a host id counts when its mcp id
has a row or a tombstone), so the chain cases register mcp rows.
"""

from __future__ import annotations

import json

import pytest

from thatch_core import clock
from thatch_core.continuation import continued_in_target, resolve_registered_predecessor
from thatch_core.ids import mcp_session_id


def handoff(old: str, new: str) -> str:
    return json.dumps({"type": "continued-in", "sessionId": old, "continuedInSessionId": new}) + "\n"


@pytest.mark.rules("R32")
def test_anchor_records_and_resolves(store, reg):
    """
    "records and resolves a fresh mapping when the session exists": a recorded
    parent pid resolves to its registered session (R32).
    """
    reg("ses_anchor")
    store.record_host_pid(4242, "ses_anchor")
    assert store.resolve_host_pid(4242) == "ses_anchor"


@pytest.mark.rules("R32")
def test_stale_anchor_ignored(store, reg, raw):
    """
    "stale mappings are ignored (pid reuse hazard)": an anchor last seen an
    hour ago resolves to nothing (R32).
    """
    reg("ses_old")
    store.record_host_pid(5151, "ses_old")
    raw.execute("UPDATE chat_host_pids SET seen_at = ?", (clock.iso_minutes_ago(60),))
    assert store.resolve_host_pid(5151) is None


@pytest.mark.rules("R32")
def test_anchor_to_gone_session(store, reg):
    """
    "mapping to a pruned session resolves to null": once its session left the
    directory, the anchor resolves to nothing (R32).
    """
    reg("ses_gone")
    store.record_host_pid(6262, "ses_gone")
    store.unregister("ses_gone")
    assert store.resolve_host_pid(6262) is None


@pytest.mark.rules("R6", "R32")
def test_reregistration_revives_anchor(store, reg):
    """
    "re-registration under the same session id revives the mapping": after a
    leave the anchor is dead; an explicit rejoin (which clears the tombstone)
    brings it back (R6, R32).
    """
    reg("ses_back")
    store.record_host_pid(7373, "ses_back")
    store.unregister("ses_back")
    assert store.resolve_host_pid(7373) is None
    assert store.register("ses_back", project="p", explicit=True).ok
    assert store.resolve_host_pid(7373) == "ses_back"


@pytest.mark.rules("R33")
def test_continued_in_target_reads_tail(tmp_path):
    """
    "continuedInTarget reads the hand-off record from the file tail": a
    transcript ending in a continued-in record names the new id; one ending in
    anything else, or in a line that is not JSON, names none (R33).
    """
    path = tmp_path / "aaaa-1111.jsonl"
    path.write_text('{"type":"user","message":{"content":"hi"}}\n' + handoff("aaaa-1111", "bbbb-2222"))
    assert continued_in_target(path) == "bbbb-2222"
    path.write_text('{"type":"user","message":{"content":"hi"}}\n{"type":"assistant","message":{"content":"x"}}\n')
    assert continued_in_target(path) is None
    path.write_text("not json\n")
    assert continued_in_target(path) is None


@pytest.mark.rules("R33")
def test_scan_finds_handing_sibling(store, reg, tmp_path):
    """
    "scanPredecessorTranscript finds the sibling handing off to this session":
    the sibling whose record names the new id is its predecessor; an unrelated
    hand-off is not, and the predecessor itself has none (R33).
    """
    (tmp_path / "old-one.jsonl").write_text(handoff("old-one", "new-one"))
    (tmp_path / "unrelated.jsonl").write_text(handoff("x", "y"))
    (tmp_path / "new-one.jsonl").write_text('{"type":"user"}\n')
    reg(mcp_session_id("old-one"), kind="mcp")
    assert resolve_registered_predecessor(store, "new-one", tmp_path / "new-one.jsonl") == mcp_session_id("old-one")
    assert resolve_registered_predecessor(store, "old-one", tmp_path / "old-one.jsonl") is None


@pytest.mark.rules("R33")
def test_walks_to_nearest_registered(store, reg, raw, tmp_path):
    """
    "resolveRegisteredPredecessor walks to the nearest registered ancestor":
    along gen0 -> gen1 -> gen2, nothing registered gives none, gen1 registered
    gives gen1, and only gen0 registered walks through gen1 to gen0 (R33).
    """
    (tmp_path / "gen0.jsonl").write_text(handoff("gen0", "gen1"))
    (tmp_path / "gen1.jsonl").write_text(handoff("gen1", "gen2"))
    (tmp_path / "gen2.jsonl").write_text('{"type":"user"}\n')
    transcript = tmp_path / "gen2.jsonl"
    assert resolve_registered_predecessor(store, "gen2", transcript) is None
    reg(mcp_session_id("gen1"), kind="mcp")
    assert resolve_registered_predecessor(store, "gen2", transcript) == mcp_session_id("gen1")
    raw.execute("DELETE FROM chat_sessions")  # a row gone without a leave: nothing left to find
    reg(mcp_session_id("gen0"), kind="mcp")
    assert resolve_registered_predecessor(store, "gen2", transcript) == mcp_session_id("gen0")


@pytest.mark.rules("R33")
def test_continue_moves_identity(store, reg, raw):
    """
    "continueSession moves the identity, mail, anchors, and tombstone": the row
    moves to the new id under the same name with the peer's unread mail, and
    the anchor follows; a tombstone beside a live row follows the next move
    too (R33).
    """
    name = reg("ses_old_cont", kind="mcp").name
    reg("ses_peer_cont")
    store.send("ses_peer_cont", "ses_old_cont", "mail for you")
    store.send("ses_old_cont", "ses_peer_cont", "and one back")
    store.record_host_pid(999, "ses_old_cont")
    assert store.continue_session("ses_old_cont", "ses_new_cont")
    assert store.find("ses_old_cont") is None and store.find("ses_new_cont").name == name
    assert len(store.read("ses_new_cont")) == 1
    assert store.resolve_host_pid(999) == "ses_new_cont"
    raw.execute("INSERT INTO chat_leave_tombstones (session_id, left_at) VALUES (?, ?)",
                ("ses_new_cont", clock.iso_minutes_ago(1)))
    assert store.continue_session("ses_new_cont", "ses_newer_cont")
    assert not store.has_tombstone("ses_new_cont") and store.has_tombstone("ses_newer_cont")


@pytest.mark.rules("R33")
def test_continue_without_old_row_is_noop(store):
    """
    "continueSession with no old row is a no-op": nothing moves and the new id
    stays unknown (R33).
    """
    assert not store.continue_session("ses_never_was", "ses_whatever")
    assert store.find("ses_whatever") is None
