"""The fake Cursor workspace driven in-process: hooks and MCP in one process."""

from __future__ import annotations

import json

import pytest

from harnesskit import Driver, make_ctx, session_info
from simulator.protocol import OP_FORK, OP_POLL, OP_START, OP_TURN_END
from thatch_core.constants import CURSOR_FOLLOWUP_CAP
from thatch_core.db import open_db
from thatch_core.mcp import mcp_session_id

A = "0b7c2f4e-1111-4aaa-8aaa-00000000000a"
B = "0b7c2f4e-2222-4bbb-8bbb-00000000000b"


@pytest.fixture
def workspace(tmp_path, frozen_sim):
    made = []

    def make(alice="reader", bob="reader"):
        ctx = make_ctx(tmp_path, "ws", "cursor", [session_info("alice", A, agent=alice),
                                                  session_info("bob", B, agent=bob)])
        d = Driver(ctx, tmp_path / "run", frozen_sim)
        made.append(d)
        d.send(OP_START, 0)
        d.run_until(1_000)  # both first prompts, at start
        return d

    yield make
    for d in made:
        d.close()


def hooks(d, session, hook):
    return [e["data"] for e in d.events("hook", session) if e["data"]["hook"] == hook]


@pytest.mark.rules("R31", "R36")
def test_prompt_hook_registers_the_mcp_id_and_prints_the_name(workspace, tmp_path):
    """R31, R36: the prompt hook ensure-registers mcp_<sha256(id)[:12]> and
    prints the name and unread count; tools then pass that name as `as`."""
    d = workspace()
    line = hooks(d, "alice", "UserPromptSubmit")[0]["line"]
    name = d.events("registered", "alice")[0]["data"]["name"]
    assert line == f"[thatch] chat: you are {name} (no unread mail for you)."
    conn = open_db(tmp_path / "thatch.db")
    try:
        assert conn.execute("SELECT name FROM chat_sessions WHERE session_id = ?",
                            (mcp_session_id(A),)).fetchone() == (name,)
    finally:
        conn.close()
    d.act(2_000, "status", "alice")
    call = d.events("tool-call", "alice")[-1]["data"]
    assert call["args"] == {"as": name}
    assert d.events("tool-result", "alice")[-1]["data"]["text"].startswith(f"[chat] registered as {name}:")


@pytest.mark.rules("R36")
def test_stop_hook_follow_up_starts_a_turn_where_the_agent_reads(workspace):
    """R36: unread mail at turn end auto-submits a pointer-only follow-up; the
    agent reads in that follow-up turn; the next stop finds nothing."""
    d = workspace()
    d.act(2_000, "send", "bob", to="alice", body="secret body")
    d.run_until(30_000)
    stops = hooks(d, "alice", "stop")
    assert stops[0]["decision"] == "followup" and "secret body" not in stops[0]["line"]
    assert "Chat: 1 unread message from" in stops[0]["line"]  # the wake nudge itself
    causes = [e["data"]["cause"] for e in d.events("turn-start", "alice")]
    assert causes == ["user", "followup"]
    d.run_until(60_000)
    assert [s["decision"] for s in hooks(d, "alice", "stop")] == ["followup", None]
    reads = [e for e in d.events("tool-result", "alice") if e["data"]["tool"] == "thatch_chat_read"]
    assert len(reads) == 1 and "secret body" in reads[0]["data"]["text"]


@pytest.mark.rules("R36", "R18")
def test_a_silent_agent_gets_one_follow_up_per_renudge_window(workspace):
    """R36, R18: a silent agent never reads; the delivered stamp keeps the next
    turn end from pointing to the same mail again inside the re-nudge window,
    so the chain stops after one follow-up; after the window it points again."""
    d = workspace(alice="silent")
    d.act(2_000, "send", "bob", to="alice", body="read me")
    d.run_until(500_000)
    assert [s["decision"] for s in hooks(d, "alice", "stop")] == ["followup", None]
    d.act(600_000, "prompt", "alice", text="again")
    d.run_until(700_000)
    assert hooks(d, "alice", "stop")[-1]["decision"] is None  # still inside the window
    d.act(1_200_000, "prompt", "alice", text="later")
    d.run_until(1_300_000)
    assert [s["decision"] for s in hooks(d, "alice", "stop")][-2:] == ["followup", None]


@pytest.mark.rules("R36")
def test_cursor_caps_the_follow_up_chain_at_its_loop_limit(workspace):
    """R36: with new mail arriving during every follow-up, each turn end is due
    again; Cursor's own loop_limit ends the chain after that many follow-ups
    without asking the hook, and the next user prompt starts a fresh chain."""
    d = workspace(alice="silent")
    for at in range(2_000, 200_000, 1_000):
        d.act(at, "send", "bob", to="alice", body=f"news {at}")
    d.run_until(300_000)
    assert [s["decision"] for s in hooks(d, "alice", "stop")] == ["followup"] * CURSOR_FOLLOWUP_CAP
    causes = [e["data"]["cause"] for e in d.events("turn-start", "alice")]
    assert causes == ["user"] + ["followup"] * CURSOR_FOLLOWUP_CAP


@pytest.mark.rules("R36")
def test_aborted_turn_is_never_continued(workspace):
    """R36: an aborted turn gets no follow-up even with mail unread."""
    d = workspace()
    d.act(2_000, "send", "bob", to="alice", body="x")
    d.agenda.clear()
    d.send(OP_TURN_END, 20_000, "alice", cause="user", status="aborted")
    assert hooks(d, "alice", "stop")[-1]["decision"] is None
    assert [e["data"]["cause"] for e in d.events("turn-start", "alice")] == ["user"]


@pytest.mark.rules("R32")
def test_cursor_identity_is_the_claimed_as(workspace):
    """R32: Cursor keeps the claimed-`as` path (one workspace process: no pid
    anchor), so a call claiming another session's name acts as it."""
    d = workspace()
    bob = d.events("registered", "bob")[0]["data"]["name"]
    d.act(2_000, "status", "alice", **{})
    reply = d.harness.tool("alice", "thatch_chat_status", {"as": bob})
    assert reply.text.startswith(f"[chat] registered as {bob}:")


def test_cursor_has_no_poller_and_no_fork(workspace):
    d = workspace()
    assert not d.send(OP_POLL, 30_000).ok
    assert not d.send(OP_FORK, 30_000, "alice", new_host_id="x").ok


@pytest.mark.rules("R36")
def test_hooks_get_cursors_payloads_and_the_workspace_reads_their_json(tmp_path, frozen_sim, monkeypatch):
    """R36: each hook run is `thatch-core hook EVENT` on the payload Cursor writes (conversation_id,
    generation_id, workspace_roots, the prompt, or the stop's status and loop_count); the workspace takes
    additional_context as context, followup_message as the next prompt, {} as the end of the turn."""
    import simulator.harness.cursor as cursor

    runs, real = [], cursor.run_hook

    def recording(command, payload, **kw):
        result = real(command, payload, **kw)
        runs.append((command, json.loads(payload), result.stdout))
        return result

    monkeypatch.setattr(cursor, "run_hook", recording)
    ctx = make_ctx(tmp_path, "ws", "cursor", [session_info("alice", A, agent="reader"),
                                              session_info("bob", B, agent="reader")])
    d = Driver(ctx, tmp_path / "run", frozen_sim)
    try:
        d.send(OP_START, 0)
        d.run_until(1_000)
        d.act(2_000, "send", "bob", to="alice", body="secret body")
        d.run_until(60_000)
    finally:
        d.close()
    alice = [r for r in runs if r[1]["conversation_id"] == A]
    assert [(c, p["hook_event_name"]) for c, p, _ in alice] == [
        ("UserPromptSubmit", "beforeSubmitPrompt"), ("chat-notify", "stop"), ("chat-notify", "stop")]
    assert all(p["workspace_roots"] == [str(ctx.directory)] and "transcript_path" not in p for _, p, _ in alice)
    assert len({p["generation_id"] for _, p, _ in alice}) == 3
    prompt, first, second = alice
    assert json.loads(prompt[2]) == {"additional_context": hooks(d, "alice", "UserPromptSubmit")[0]["line"]}
    assert [(p["status"], p["loop_count"]) for _, p, _ in (first, second)] == [("completed", 0), ("completed", 1)]
    assert json.loads(first[2]) == {"followup_message": hooks(d, "alice", "stop")[0]["line"]}
    assert json.loads(second[2]) == {} and hooks(d, "alice", "stop")[1]["decision"] is None
