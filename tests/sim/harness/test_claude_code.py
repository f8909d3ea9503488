"""The fake Claude Code host in a real forked process (the engine's worker loop).

The host runs `simulator.child.worker.child_main` in a `multiprocess` fork child,
so its MCP server and hook runs are real grandchildren whose parent pid is
the host's: the anti-spoofing anchor (R32) is exercised for real. The test
process opens its own database connection only after the host is forked,
and only under a freezer set to the same virtual instant.
"""

from __future__ import annotations

import json
import os
import random
from contextlib import contextmanager
from pathlib import Path

import multiprocess
import pytest
from freezegun import freeze_time

from simulator import clock
from simulator.design import LEAVE_LINE_PREFIX
from harnesskit import make_ctx, session_info, typed_act
from simulator.history import read_events
from simulator.protocol import OP_ACT, OP_FORK, OP_START, OP_STOP, OP_TURN_END, Command
from simulator.child.worker import child_main
from simulator.harness import make_harness
from thatch_core.db import open_db
from thatch_core.mcp import mcp_session_id
from thatch_core.store import ChatStore

A = "5f0c8a1e-0000-4aaa-8aaa-0000000000a1"
A2 = "5f0c8a1e-0000-4aaa-8aaa-0000000000a2"
BOB = "ses_bob0000000000001"


def children_of(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after ')'
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(entry))
    return out


class Host:
    """A claude-code harness process driven over the worker's pipe."""

    def __init__(self, tmp_path: Path, agent: str = "reader", label: str = "cc", **extra) -> None:
        self.tmp = tmp_path
        self.label = label
        self.ctx = make_ctx(tmp_path, label, "claude-code", [session_info("alice", A, agent=agent)],
                            names_by_label={"bob": BOB}, **extra)
        self.run_dir = tmp_path / "run"
        fork = multiprocess.get_context("fork")
        self.conn, child_end = fork.Pipe()
        self.proc = fork.Process(target=child_main, daemon=True,
                                 args=(child_end, self.ctx, make_harness, str(self.run_dir), os.getpid(), [self.conn]))
        self.proc.start()
        child_end.close()
        self.dispatch = 0

    def send(self, op: str, t: int, session: str | None = "alice", **args):
        self.dispatch += 1
        self.conn.send(Command(dispatch=self.dispatch, t=t, op=op, session=session, args=args))
        reply = self.conn.recv()
        assert not reply.fatal, reply.error
        return reply

    def act(self, t: int, action: str, **args):
        return self.send(OP_ACT, t, **typed_act(action, "alice", **args))

    def events(self, kind=None):
        evs = read_events(self.run_dir / "history" / f"{self.label}.0.jsonl")
        return [e for e in evs if kind is None or e["kind"] == kind]

    def hooks(self, hook):
        return [e["data"] for e in self.events("hook") if e["data"]["hook"] == hook]

    def stop(self) -> None:
        if self.proc.is_alive():
            try:
                self.send(OP_STOP, 10**7, session=None)
            except (EOFError, OSError, AssertionError):
                pass
            self.proc.join(5)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(2)


@pytest.fixture
def host(tmp_path):
    made = []

    def make(**kw):
        h = Host(tmp_path, **kw)
        made.append(h)
        return h

    yield make
    for h in made:
        h.stop()


@contextmanager
def store_at(tmp_path, t):
    """The test's own view of the db, at virtual time `t` (after the forks)."""
    with freeze_time(clock.instant(t), tick=False):
        conn = open_db(tmp_path / "thatch.db")
        try:
            yield ChatStore(conn, rng=random.Random(99))
        finally:
            conn.close()


def _first_prompt(h, tmp_path) -> tuple[str, dict]:
    """Start the host with bob registered in the store (project demo), then alice's first prompt:
    bob's name and the `registered` event data of alice's hook join."""
    h.send(OP_START, 0, session=None)
    with store_at(tmp_path, 500) as store:
        bob = store.register(BOB, project="demo").name
    h.act(1_000, "prompt", text="hello")
    return bob, h.events("registered")[0]["data"]


@pytest.mark.rules("R31", "R32")
def test_hook_anchor_beats_a_spoofed_as(host, tmp_path):
    """R31, R32: SessionStart and UserPromptSubmit hooks (real children of the
    host) register mcp_<sha256(id)[:12]> and anchor the host pid; the MCP
    server child resolves its parent pid, so a call claiming bob's name still
    acts as alice."""
    h = host()
    bob, alice = _first_prompt(h, tmp_path)
    assert [e["data"]["hook"] for e in h.events("hook")] == ["SessionStart", "UserPromptSubmit"]
    assert alice["session_id"] == mcp_session_id(A) and alice["how"] == "hook"
    with store_at(tmp_path, 1_500) as store:
        anchors = store.conn.execute("SELECT ppid, session_id FROM chat_host_pids").fetchall()
    assert anchors == [(h.proc.pid, mcp_session_id(A))]
    reply = h.act(2_000, "send", to_raw=bob, body="spoof?", **{"as": bob})
    # The claimed `as` (bob) lost to the pid anchor: alice sent it to bob.
    assert reply.result["ok"], reply.result
    with store_at(tmp_path, 2_500) as store:
        rows = store.conn.execute("SELECT from_session, to_session FROM chat_messages").fetchall()
    assert rows == [(mcp_session_id(A), BOB)]


@pytest.mark.rules("R36")
def test_stop_hook_reminds_and_the_turn_continues_with_a_read(host, tmp_path):
    """R36: mail that arrived during a turn blocks the Stop with a pointer-only
    reminder; the turn continues, the reader reads, and the second Stop (with
    stop_hook_active) lets it end. The next prompt's line shows the count."""
    h = host()
    alice = _first_prompt(h, tmp_path)[1]["name"]
    with store_at(tmp_path, 2_000) as store:
        assert store.send(BOB, alice, "the secret body").ok
        store.send(BOB, alice, "second")
    reply = h.send(OP_TURN_END, 21_000, cause="user")
    assert [(f.at, f.args) for f in reply.followups] == [(41_000, {"cause": "reminder", "stop_hook_active": True})]
    stop = h.hooks("Stop")[0]
    assert stop["decision"] == "block" and "2 unread messages" in stop["line"] and "secret" not in stop["line"]
    read = [e for e in h.events("tool-result") if e["data"]["tool"] == "thatch_chat_read"]
    assert len(read) == 1 and "the secret body" in read[0]["data"]["text"]
    h.send(OP_TURN_END, 41_000, cause="reminder", stop_hook_active=True)
    assert [s["decision"] for s in h.hooks("Stop")] == ["block", None]
    assert [e["data"]["cause"] for e in h.events("turn-start")] == ["user", "reminder"]
    with store_at(tmp_path, 50_000) as store:
        store.send(BOB, alice, "third")
    h.act(60_000, "prompt", text="next")
    assert "(1 unread message(s) for you)" in h.hooks("UserPromptSubmit")[-1]["line"]


@pytest.mark.rules("R33")
def test_fork_appends_continued_in_and_the_next_hook_adopts(host, tmp_path):
    """R33: a session-id fork ends the old transcript with Claude Code's
    continued-in record; the next hook sees the unknown id and adopts the
    name and mail onto mcp(new id)."""
    h = host()
    name = _first_prompt(h, tmp_path)[1]["name"]
    h.send(OP_TURN_END, 21_000, cause="user")
    with store_at(tmp_path, 25_000) as store:
        store.send(BOB, name, "before the fork")
    h.send(OP_FORK, 30_000, new_host_id=A2, session="alice", step=3)
    old_transcript = (h.ctx.transcripts_dir / f"{A}.jsonl").read_text().splitlines()
    assert json.loads(old_transcript[-1]) == {"type": "continued-in", "sessionId": A, "continuedInSessionId": A2}
    assert h.events("fork")[0]["data"] == {"old_host_id": A, "new_host_id": A2}
    h.act(31_000, "prompt", text="after")
    adopted = h.events("registered")[-1]["data"]
    assert adopted == {"session_id": mcp_session_id(A2), "name": name, "how": "adopt"}
    # The record stays the old transcript's last line: the new id's turns go to its own file.
    assert (h.ctx.transcripts_dir / f"{A}.jsonl").read_text().splitlines() == old_transcript
    assert (h.ctx.transcripts_dir / f"{A2}.jsonl").is_file()
    assert f"you are {name} (1 unread message(s) for you)" in h.hooks("SessionStart")[-1]["line"]
    with store_at(tmp_path, 32_000) as store:
        assert store.get(mcp_session_id(A)) is None
        assert store.get(mcp_session_id(A2)).name == name
    # tools still act as the adopted identity
    assert h.act(33_000, "status").result["text"].startswith(f"[chat] registered as {name}: 1 unread")


@pytest.mark.rules("R36", "R31")
def test_a_resumed_conversation_announces_its_mail_at_session_start(host, tmp_path):
    """R36, R31: a conversation resumed in a new host process runs SessionStart
    at once (no prompt needed): same name, and the mail that waited."""
    first = host()
    first.send(OP_START, 0, session=None)
    first.act(1_000, "prompt", text="hello")
    name = first.events("registered")[0]["data"]["name"]
    first.stop()
    with store_at(tmp_path, 30_000) as store:
        store.register(BOB, project="demo")
        store.send(BOB, name, "while you were away")
    again = host(label="cc2", resumed="alice")
    reply = again.send(OP_START, 60_000, session=None)
    assert [(f.at, f.args) for f in reply.followups] == [(60_000, typed_act("appear", "alice"))]
    again.act(60_000, "appear")
    line = again.hooks("SessionStart")[0]["line"]
    assert line.startswith(f"[thatch] chat: you are {name} (1 unread message(s) for you).")


@pytest.mark.rules("R6", "R7", "R31")
def test_leave_sticks_for_the_hook_and_an_explicit_register_mints_a_fresh_name(host, tmp_path):
    """R7, R31: after chat_unregister the hook prints the leave line instead of
    rejoining; R6: an explicit chat_register then mints a fresh name, which the
    agent uses as `as` from then on. A `to` label resolves through the MCP child."""
    h = host()
    bob, joined = _first_prompt(h, tmp_path)
    old = joined["name"]
    assert h.act(2_000, "unregister").result["ok"]
    h.act(3_000, "prompt", text="still there?")
    assert h.hooks("UserPromptSubmit")[-1]["line"].startswith(LEAVE_LINE_PREFIX)
    reply = h.act(4_000, "register").result
    fresh = h.events("registered")[-1]["data"]
    assert reply["ok"] and fresh["how"] == "explicit" and fresh["name"] != old
    h.act(5_000, "send", to="bob", body="hi bob")
    call = h.events("tool-call")[-1]["data"]
    assert call["args"] == {"to": bob, "body": "hi bob", "as": fresh["name"]}


def test_cli_runs_in_a_child_and_no_process_is_left_behind(host, tmp_path):
    """The host never opens the db: the CLI view runs in a child like a
    terminal would; after OP_STOP the host and every child are gone."""
    h = host()
    h.send(OP_START, 0, session=None)
    assert len(children_of(h.proc.pid)) == 1  # the MCP server child
    h.act(1_000, "prompt", text="hello")
    res = h.act(2_000, "cli_list", stale="all", step=9).result
    assert res["ok"] and res["text"].startswith("# Active Sessions\nNAME")
    assert len(children_of(h.proc.pid)) == 1  # hook and cli children reaped
    pid = h.proc.pid
    h.stop()
    assert not h.proc.is_alive() and children_of(pid) == []


class ListRecorder:
    def __init__(self):
        self.events = []

    def emit(self, kind, session=None, **data):
        self.events.append((kind, session, data))


def test_crash_point_fires_in_a_hook_child_and_is_recorded_by_the_parent(tmp_path):
    """A crash point armed in the harness process is copied into a hook child;
    when it fires there, the child's crash event reaches the parent's recorder,
    the parent sees ChildCrashed, and the spent point is disarmed."""
    from simulator.child.crash_points import crash_points
    from simulator.harness.support import open_connection
    from simulator.harness.procs import ChildCrashed, ServerChild, run_in_child

    ctx = make_ctx(tmp_path, "cc", "claude-code", [])
    rec = ListRecorder()
    points = crash_points()
    points.arm(point="register-insert", step=5)
    try:
        def register():
            conn = open_connection(ctx)
            return ChatStore(conn).register("ses_x", project=None).name

        with pytest.raises(ChildCrashed):
            run_in_child(register, recorder=rec)
        assert [(k, d["point"], d["step"]) for k, _, d in rec.events] == [("crash", "register-insert", 5)]
        assert not points.armed
        assert run_in_child(lambda: 41 + 1) == 42

        def setup():
            conn = open_connection(ctx)
            store = ChatStore(conn)
            return lambda req: store.register(req, project=None).name

        server = ServerChild(setup, recorder=rec, t=0)
        try:
            assert server.request(1_000, "ses_y")
            points.arm(point="register-insert", step=6)  # armed after the server forked
            with pytest.raises(ChildCrashed):
                server.request(2_000, "ses_z")
            assert rec.events[-1][2]["step"] == 6 and not server.alive
            assert server.request(3_000, "ses_z")  # a fresh child serves the next call
        finally:
            server.close()
    finally:
        points.disarm()


@pytest.fixture
def recorded_hooks(tmp_path, monkeypatch):
    """Every `thatch-core hook EVENT` run of a host forked after this: (command, payload, stdout), appended
    by the hook child itself to a file (the host and its children inherit the wrapper)."""
    import simulator.harness.claude_code as claude_code

    log = tmp_path / "hook-runs.jsonl"
    real = claude_code.run_hook

    def recording(command, payload, **kw):
        result = real(command, payload, **kw)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(json.dumps([command, json.loads(payload), result.stdout, result.stderr]) + "\n")
        return result

    monkeypatch.setattr(claude_code, "run_hook", recording)
    return lambda: [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.rules("R31", "R36")
def test_hook_children_get_claude_codes_payloads_and_the_host_reads_their_output(host, tmp_path, recorded_hooks):
    """R31, R36: each hook child runs `thatch-core hook EVENT` on the payload Claude Code writes (session id,
    transcript path, cwd, event name, and the prompt or stop_hook_active); the host takes the printed
    line as context and the Stop JSON as its decision."""
    h = host()
    name = _first_prompt(h, tmp_path)[1]["name"]
    with store_at(tmp_path, 2_000) as store:
        store.send(BOB, name, "mail")
    h.send(OP_TURN_END, 21_000, cause="user")
    h.send(OP_TURN_END, 41_000, cause="reminder", stop_hook_active=True)
    runs = recorded_hooks()
    assert [(r[0], r[1]["hook_event_name"]) for r in runs] == [
        ("SessionStart", "SessionStart"), ("UserPromptSubmit", "UserPromptSubmit"), ("Stop", "Stop"), ("Stop", "Stop")]
    transcript = str(h.ctx.transcripts_dir / f"{A}.jsonl")
    for _, payload, _, stderr in runs:
        assert (payload["session_id"], payload["transcript_path"], payload["cwd"]) == (
            A, transcript, str(h.ctx.directory)) and stderr == ""
    assert runs[0][1]["source"] == "startup" and runs[1][1]["prompt"] == "hello"
    assert [r[1]["stop_hook_active"] for r in runs[2:]] == [False, True]
    assert runs[1][2].strip() == h.hooks("UserPromptSubmit")[0]["line"]
    assert json.loads(runs[2][2]) == {"decision": "block", "reason": h.hooks("Stop")[0]["line"]}
    assert runs[3][2] == "" and h.hooks("Stop")[1] == {"hook": "Stop", "line": None, "decision": None,
                                                             "stop_hook_active": True}
