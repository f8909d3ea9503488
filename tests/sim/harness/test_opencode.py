"""The fake opencode harness driven in-process: real temp-dir db, freezegun.

Each test builds a HarnessContext like the orchestrator would, drives the
harness with Commands at virtual times (follow-ups run in agenda order by
`harnesskit.Driver`), and checks the history events a checker would read and the
shared database.
"""

from __future__ import annotations

import json

import pytest

from simulator.harness.opencode import parse_nudge
from harnesskit import Driver, make_ctx, session_info, typed_act
from simulator.protocol import OP_POLL, OP_START, OP_TURN_END
from thatch_core.db import open_db
from thatch_core.poller import ChatPoller
from thatch_core.store import ChatStore

A, B, C = "ses_alice0000000001", "ses_bob00000000002", "ses_carol000000003"


@pytest.fixture
def drivers(tmp_path, frozen_sim):
    made = []

    def make(sessions, label="h1", **extra):
        ctx = make_ctx(tmp_path, label, "opencode", sessions, **extra)
        d = Driver(ctx, tmp_path / "run", frozen_sim)
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()


def db_rows(tmp_path, sql, args=()):
    conn = open_db(tmp_path / "thatch.db")
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def kinds(events):
    return [e["kind"] for e in events]


def two_sessions(drivers, a_agent="reader", b_agent="reader", **kw):
    d = drivers([session_info("alice", A, agent=a_agent, title="Release QA"),
                 session_info("bob", B, agent=b_agent)], **kw)
    d.send(OP_START, 0)
    d.run_until(30_000)  # both first prompts (at start) and their turns: idle
    return d


@pytest.mark.rules("R1")
def test_first_prompt_registers_before_the_model_runs(drivers, tmp_path):
    """R1: the first real user message registers the session before its turn
    starts; a child (sub-agent) session never auto-registers."""
    d = drivers([session_info("alice", A), session_info("kid", C, parent="alice", parent_id=A)])
    reply = d.send(OP_START, 0)
    assert [(f.at, f.session, f.args) for f in reply.followups] == [
        (0, "alice", typed_act("prompt", "alice")), (0, "kid", typed_act("prompt", "kid"))]
    d.run_until(0)
    alice = [e for e in d.events(session="alice") if e["kind"] in ("registered", "turn-start")]
    assert kinds(alice) == ["registered", "turn-start"]
    assert alice[0]["data"]["how"] == "first-prompt"
    assert db_rows(tmp_path, "SELECT session_id FROM chat_sessions") == [(A,)]
    assert d.events("ready")


@pytest.mark.rules("R1")
def test_a_session_joining_on_idle_registers_at_its_first_idle_event(drivers):
    """R1: the first idle event is the registration backstop for a session
    that shows up without a user message; `explicit` sessions stay out until
    their own chat_register."""
    d = drivers([session_info("tab", A, joins="idle", start="5s"), session_info("quiet", B, joins="explicit")])
    reply = d.send(OP_START, 0)
    assert [(f.at, f.session, f.args) for f in reply.followups] == [(5_000, "tab", typed_act("appear", "tab"))]
    d.run_until(10_000)
    assert [(e["session"], e["data"]["how"]) for e in d.events("registered")] == [("tab", "idle")]
    assert d.events("turn-start") == []
    d.act(11_000, "register", "quiet", step=2)
    assert [(e["session"], e["data"]["how"]) for e in d.events("registered")][-1] == ("quiet", "explicit")


@pytest.mark.rules("R19", "R20", "R21")
def test_one_wake_names_each_sender_once_and_counts_all(drivers, tmp_path):
    """R19, R20, R21: an idle recipient gets ONE wake for all its pending mail
    (deduplicated sender names and the count, never bodies); its reader agent
    reads in the wake turn."""
    d = drivers([session_info("alice", A), session_info("bob", B), session_info("carol", C)])
    d.send(OP_START, 0)
    d.run_until(30_000)
    d.act(31_000, "send", "alice", to="carol", body="secret-body-1")
    d.act(31_000, "send", "bob", to="carol", body="secret-body-2")
    d.act(32_000, "send", "alice", to="carol", body="secret-body-3")
    d.send(OP_POLL, 60_000)
    wakes = d.events("wake", "carol")
    assert len(wakes) == 1
    names = {e["data"]["name"] for e in d.events("registered")}
    data = wakes[0]["data"]
    assert data["count"] == 3 and data["hosted"] is True
    assert len(data["senders"]) == 2 and set(data["senders"]) <= names
    assert "secret-body" not in data["text"]
    turn = d.events("turn-start", "carol")[-1]
    assert turn["data"]["cause"] == "wake"
    reads = [e for e in d.events("tool-result", "carol") if e["data"]["tool"] == "thatch_chat_read"]
    assert len(reads) == 1 and "secret-body-3" in reads[0]["data"]["text"]
    assert db_rows(tmp_path, "SELECT COUNT(*) FROM chat_messages WHERE read_at IS NULL") == [(0,)]


@pytest.mark.rules("R19")
def test_busy_window_holds_the_wake_and_its_end_flushes_at_once(drivers):
    """R19: no wake lands while the recipient is busy; the idle event at the
    window's end flushes the pending mail immediately (no poll needed)."""
    from simulator.scenario.model import Window

    d = drivers([session_info("alice", A), session_info("bob", B, agent={"kind": "reader", "busy": [
        Window(**{"from": 40_000, "until": 100_000})]})])
    reply = d.send(OP_START, 0)
    assert [(f.at, f.args["on"]) for f in reply.followups if f.op == "window"] == [(40_000, True), (100_000, False)]
    d.run_until(30_000)
    d.run_until(40_000)  # bob's window opens
    d.act(45_000, "send", "alice", to="bob", body="ping")
    d.send(OP_POLL, 60_000)
    d.send(OP_POLL, 90_000)
    assert d.events("wake", "bob") == []
    d.run_until(100_000)  # the window closes: idle flush
    wakes = d.events("wake", "bob")
    assert len(wakes) == 1 and wakes[0]["t"] == 100_000


@pytest.mark.rules("R19")
def test_compacting_blocks_delivery(drivers):
    """R19: a compacting session is not woken; the end of compaction is an idle
    event that delivers."""
    d = two_sessions(drivers)
    d.send("window", 31_000, "bob", what="compacting", on=True)
    d.act(32_000, "send", "alice", to="bob", body="ping")
    d.send(OP_POLL, 60_000)
    assert d.events("wake", "bob") == []
    d.send("window", 70_000, "bob", what="compacting", on=False)
    assert [e["t"] for e in d.events("wake", "bob")] == [70_000]


@pytest.mark.rules("R27")
def test_echo_bubbles_for_conversational_calls_only(drivers):
    """R27: register/send/read echo as non-synthetic bubbles; list and failed
    calls do not; an echo starts no turn."""
    d = two_sessions(drivers)
    d.act(31_000, "send", "alice", to="bob", body="hello bob", step=4)
    d.act(32_000, "list", "alice", step=5)
    d.act(33_000, "send", "alice", to_raw="nobody-00001", body="x", step=6)
    d.act(34_000, "read", "bob", step=7)
    echoes = [(e["session"], e["data"]["text"]) for e in d.events("echo")]
    assert echoes[0][0] == "alice" and echoes[0][1].startswith("[chat] to ") and "hello bob" in echoes[0][1]
    assert echoes[1][0] == "bob" and echoes[1][1].startswith("[chat] inbox\n[thatch] chat inbox: 1 message(s)")
    assert len(echoes) == 2
    results = {e["data"]["step"]: e["data"] for e in d.events("tool-result") if "step" in e["data"]}
    assert results[6]["ok"] is False and 'No registered session named "nobody-00001"' in results[6]["text"]
    assert results[5]["ok"] and results[5]["text"].startswith("[chat] 2 sessions registered\nActive (2):")
    # no turn other than the two user turns
    assert [e["data"]["cause"] for e in d.events("turn-start")] == ["user", "user"]


def test_send_to_a_label_uses_the_assigned_name(drivers):
    """A `to` label resolves to the recipient's assigned name read from the db."""
    d = two_sessions(drivers)
    bob_name = next(e["data"]["name"] for e in d.events("registered", "bob"))
    d.act(31_000, "send", "alice", to="bob")  # faker body
    call = d.events("tool-call", "alice")[-1]["data"]
    assert call["args"]["to"] == bob_name and call["args"]["body"]


@pytest.mark.rules("R22")
def test_ping_pong_stops_at_its_reply_limit(drivers):
    """R22 (P10): two ping-pong agents exchange until their reply limit."""
    d = drivers([session_info("alice", A, agent={"kind": "ping-pong", "reply_limit": 2}),
                 session_info("bob", B, agent={"kind": "ping-pong", "reply_limit": 2})])
    d.send(OP_START, 0)
    d.run_until(30_000)
    d.act(31_000, "send", "alice", to="bob", body="start")
    t = 60_000
    while t < 900_000:
        d.send(OP_POLL, t)
        d.run_until(t + 29_000)
        t += 30_000
    sends = [e for e in d.events("tool-call") if e["data"]["tool"] == "thatch_chat_send"]
    assert len(sends) == 1 + 2 + 2
    assert len(d.events("wake")) == 5


@pytest.mark.rules("R3")
def test_title_is_a_placeholder_until_the_first_turn_ends(drivers, tmp_path):
    """R3: the placeholder title never becomes the topic; after the first turn
    the idle refresh sets the spec title as topic; a later title step wins."""
    d = drivers([session_info("alice", A, title="Release QA")])
    d.send(OP_START, 0)
    d.run_until(0)
    assert db_rows(tmp_path, "SELECT topic FROM chat_sessions") == [(None,)]
    d.run_until(21_000)
    assert db_rows(tmp_path, "SELECT topic FROM chat_sessions") == [("Release QA",)]
    d.act(22_000, "title", "alice", title="Payments refactor")
    d.act(23_000, "prompt", "alice", text="y")
    d.run_until(43_000)
    assert db_rows(tmp_path, "SELECT topic FROM chat_sessions") == [("Payments refactor",)]


@pytest.mark.rules("R5")
def test_resume_with_s_reclaims_the_name_and_flushes_asleep_mail(drivers, tmp_path):
    """R5: a new process started with `-s <id>` reclaims the row and name at
    start and delivers the mail that queued while it was down at once."""
    d = two_sessions(drivers)
    bob_name = next(e["data"]["name"] for e in d.events("registered", "bob"))
    d.close()
    other = drivers([session_info("alice", A)], label="h2", names_by_label={"bob": B})
    other.send(OP_START, 31_000)
    assert other.act(32_000, "send", "alice", to="bob", body="while you were away").result["ok"]
    again = drivers([session_info("bob", B)], label="h3", startup=("-s", B), resumed="bob")
    again.send(OP_START, 200_000)
    reg = again.events("registered", "bob")
    assert reg and reg[0]["data"] == {"session_id": B, "name": bob_name, "how": "startup"}
    wakes = again.events("wake", "bob")
    assert [w["t"] for w in wakes] == [200_000]
    assert again.events("turn-start", "bob")[0]["data"]["cause"] == "wake"


@pytest.mark.rules("R5")
def test_resume_with_c_takes_the_newest_top_level_session(drivers):
    """R5: `-c` resolves the newest top-level session of the directory."""
    d = two_sessions(drivers)
    d.close()
    sessions = [session_info("bob", B)]
    listing = [{"id": A, "parent_id": None, "updated_ms": 5}, {"id": B, "parent_id": None, "updated_ms": 9},
               {"id": C, "parent_id": B, "updated_ms": 99}]
    again = drivers(sessions, label="h2", startup=("-c", None), directory_sessions=listing, resumed="bob")
    again.send(OP_START, 100_000)
    assert [e["session"] for e in again.events("registered")] == ["bob"]


@pytest.mark.rules("R17", "R7")
def test_delete_unregisters_with_a_tombstone(drivers, tmp_path):
    """R17, R7: session.deleted removes the row and writes a tombstone at once;
    the deleted session gets no further turns."""
    d = two_sessions(drivers)
    d.act(31_000, "delete", "bob")
    assert db_rows(tmp_path, "SELECT session_id FROM chat_sessions") == [(A,)]
    assert db_rows(tmp_path, "SELECT session_id FROM chat_leave_tombstones") == [(B,)]
    reply = d.act(32_000, "send", "alice", to="bob", body="gone?")
    assert reply.result["ok"] is False


@pytest.mark.rules("R29")
def test_disabled_at_start_means_no_poller_and_disabled_tools(drivers, tmp_path):
    """R29: chat.enabled false at init: no poller, no registration; tools refuse
    with the [disabled] reply."""
    sessions = [session_info("alice", A)]
    ctx_dir = tmp_path / "h1"
    ctx_dir.mkdir(parents=True, exist_ok=True)
    (ctx_dir / "config.json").write_text(json.dumps({"chat": {"enabled": False}}))
    d = drivers(sessions)
    d.send(OP_START, 0)
    assert d.send(OP_POLL, 30_000).result == {"poller": False}
    assert d.events("poll") == []
    reply = d.act(31_000, "status", "alice")
    assert reply.result["ok"] is False and reply.result["text"].startswith("[disabled]")


@pytest.mark.rules("R29", "R30")
def test_config_step_rewrites_the_file_and_tools_reread_it(drivers, tmp_path):
    """R29, R30: a config step rewrites the process's config file; the tools
    re-read it per call."""
    d = two_sessions(drivers)
    d.act(31_000, "config", None, process="h1", enabled=False)
    assert json.loads((tmp_path / "h1" / "config.json").read_text())["chat"]["enabled"] is False
    assert d.act(32_000, "list", "alice").result["text"].startswith("[disabled]")
    d.act(33_000, "config", None, process="h1", enabled=True, autoRegister=False)
    assert d.act(34_000, "list", "alice").result["ok"]


def test_cli_steps_record_their_output(drivers):
    """cli_list / cli_tail run the CLI views over the db; the output is the result."""
    d = two_sessions(drivers)
    d.act(31_000, "send", "alice", to="bob", body="tail me")
    d.act(32_000, "cli_list", None, stale="all", step=3)
    d.act(33_000, "cli_tail", None, limit=5, step=4)
    res = {e["data"]["step"]: e["data"] for e in d.events("tool-result") if "step" in e["data"]}
    assert res[3]["tool"] == "cli_list" and res[3]["text"].startswith("# Active Sessions\nNAME")
    line = json.loads(res[4]["text"].splitlines()[0])
    assert line["event"] == "sent" and line["body"] == "tail me"


def test_overrides_build_the_broken_variants(drivers):
    """ctx.overrides["store"] and ["poller"] replace the real classes."""
    seen = {}

    class CountingStore(ChatStore):
        def heartbeat(self, ids):
            seen["beats"] = seen.get("beats", 0) + 1
            return super().heartbeat(ids)

    class CountingPoller(ChatPoller):
        def poll(self):
            seen["polls"] = seen.get("polls", 0) + 1
            return super().poll()

    d = drivers([session_info("alice", A)], overrides={"store": CountingStore, "poller": CountingPoller})
    d.send(OP_START, 0)
    d.send(OP_POLL, 30_000)
    assert seen == {"beats": 2, "polls": 1}  # the startup beat and one cycle


def test_turn_end_of_a_closed_session_is_ignored(drivers):
    d = two_sessions(drivers)
    d.act(31_000, "prompt", "bob", text="again")
    d.act(32_000, "delete", "bob")
    assert d.send(OP_TURN_END, 51_000, "bob", cause="user").ok
    assert d.events("turn-end", "bob")[-1]["t"] == 20_000


def test_unknown_action_is_refused(drivers):
    d = drivers([session_info("alice", A)])
    d.send(OP_START, 0)
    reply = d.act(1_000, "dance", "alice")
    assert not reply.ok and "no action 'dance'" in reply.error


@pytest.mark.rules("R20")
def test_parse_nudge_handles_departed_senders():
    """R20: the wake text names senders and a count; a departed sender's
    rendering keeps its own comma."""
    from thatch_core.prompts import chat_notification_nudge

    text = chat_notification_nudge(["ba-sil-00001", "unknown (ses_abc, departed)"], 3)
    assert parse_nudge(text) == (["ba-sil-00001", "unknown (ses_abc, departed)"], 3)
    assert parse_nudge(chat_notification_nudge([], 1)) == ([], 1)


@pytest.mark.rules("R24")
def test_a_store_failure_the_poller_catches_is_recorded(drivers):
    """R24: a heartbeat that hits a lock is caught by the poller (the cycle
    goes on) and shows in the history as a store-error."""
    from thatch_core.db import StoreBusy

    class LockedHeartbeat(ChatStore):
        def heartbeat(self, ids):
            raise StoreBusy("database is locked")

    d = drivers([session_info("alice", A)], overrides={"store": LockedHeartbeat})
    d.send(OP_START, 0)
    assert d.send(OP_POLL, 30_000).ok
    errors = [e["data"] for e in d.events("store-error")]
    assert [e["where"] for e in errors] == ["startup heartbeat", "heartbeat"]
    assert all(e["error"].startswith("StoreBusy") for e in errors)
