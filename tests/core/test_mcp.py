"""The MCP-host side: identity hook, identity resolution, MCP server, turn-end
mail checks (R6, R29-R32, R35, R36).

Real temp-dir SQLite; the parent-pid test forks real processes.
"""
from __future__ import annotations

import hashlib
import os
import random
import re

import multiprocess
import pytest
from freezegun import freeze_time

from thatch_core.config import ChatConfig, ConfigSource, StaticConfig
from thatch_core.constants import CURSOR_FOLLOWUP_CAP
from thatch_core.db import open_db
from thatch_core.mcp import (
    HOOK_LINE_RE, LEAVE_LINE, UNKNOWN_CLAIM, McpChatServer, chat_hook_line, claude_stop_hook,
    cursor_stop_hook, mcp_session_id, resolve_chat_identity,
)
from thatch_core.ids import legacy_mcp_session_id
from thatch_core.prompts import DISABLED_REPLY, chat_notification_nudge
from thatch_core.store import ChatStore

ON = StaticConfig(ChatConfig())
OFF = StaticConfig(ChatConfig(enabled=False))
NO_AUTO = StaticConfig(ChatConfig(auto_register=False))
T0 = "2026-11-29T12:00:00Z"


def name_of(line):
    m = HOOK_LINE_RE.match(line or "")
    assert m, f"not a hook line: {line!r}"
    return m["name"]


def server(store, host="claude-code", *, ppid=-1, env=None, config=ON, seed=11):
    # ppid=-1 never matches an anchor: tests opt in to the ppid layer explicitly.
    return McpChatServer(store, config, host=host, ppid=ppid, env=env or {}, rng=random.Random(seed))


# ---------------------------------------------------------------------------
# Identity hook
# ---------------------------------------------------------------------------

@pytest.mark.rules("R31")
def test_mcp_session_id_hashes_the_host_session_id():
    """R31: mcp_<sha256(host session id)[:12]>, stable and host-id specific."""
    sid = "2f0c1d8e-0000-4000-8000-000000000001"
    assert mcp_session_id(sid) == "mcp_" + hashlib.sha256(sid.encode()).hexdigest()[:12]
    assert re.fullmatch(r"mcp_[0-9a-f]{12}", mcp_session_id(sid))
    assert mcp_session_id(sid) != mcp_session_id(sid + "x")


@pytest.mark.rules("R31")
def test_mcp_session_id_hashes_the_lower_cased_host_id():
    """R31: the real thatch lower-cases the host session id before hashing, so a
    mixed-case id and its lower-case form are one conversation (D-real-host-1)."""
    assert mcp_session_id("ABC") == "mcp_ba7816bf8f01" == mcp_session_id("abc")
    assert legacy_mcp_session_id("ABC") == "mcp_" + hashlib.sha256(b"ABC").hexdigest()[:12]
    assert legacy_mcp_session_id("abc") == mcp_session_id("abc")


@pytest.mark.rules("R31", "R7")
def test_hook_carries_a_legacy_mixed_case_id_over_to_the_real_one(store):
    """R31, R7: a row an earlier thatch_core keyed by the raw mixed-case host id
    moves to the lower-cased id at the next hook, keeping its name and mail; a
    legacy leave moves too, so the hook still prints the leave line."""
    old = legacy_mcp_session_id("Host-A")
    res = store.register(old, kind="mcp", auto=True)
    store.register("peer", kind="opencode")
    store.send("peer", res.name, "kept")
    line = chat_hook_line(store, ON, "Host-A")
    assert name_of(line) == res.name and "(1 unread message(s) for you)" in line
    assert store.get(old) is None and store.get(mcp_session_id("host-a")).name == res.name

    gone = legacy_mcp_session_id("Host-B")
    store.register(gone, kind="mcp", auto=True)
    store.unregister(gone)
    line = chat_hook_line(store, ON, "Host-B")
    assert line.startswith(LEAVE_LINE) and mcp_session_id("Host-B") in line


@pytest.mark.rules("R31")
def test_hook_ensure_registers_and_prints_name_and_unread(store):
    """R31: the hook registers the derived id as an mcp row, keeps the name on
    every prompt, and prints the name and the unread count in the real hook's words."""
    line = chat_hook_line(store, ON, "host-a", project="demo")
    name = name_of(line)
    assert line == f"[thatch] chat: you are {name} (no unread mail for you)."
    row = store.get(mcp_session_id("host-a"))
    assert (row.name, row.host_kind, row.auto, row.project) == (name, "mcp", True, "demo")

    store.register("peer", kind="opencode")
    store.send("peer", name, "one")
    store.send("peer", name, "two")
    line = chat_hook_line(store, ON, "host-a", project="demo")
    assert name_of(line) == name
    assert line == f"[thatch] chat: you are {name} (2 unread message(s) for you)."
    store.register("peer2", kind="opencode", project="demo")
    store.send("peer", store.get("peer2").name, "for the other session")
    store.register("elsewhere", kind="opencode", project="other")
    store.send("peer", store.get("elsewhere").name, "another project")
    line = chat_hook_line(store, ON, "host-a", project="demo")
    assert line == (f"[thatch] chat: you are {name} (2 unread message(s) for you). "
                    f"Others in this project with unread mail: {store.get('peer2').name} (1).")


@pytest.mark.rules("R29")
def test_disabled_chat_silences_every_mcp_surface(store):
    """R29: chat.enabled false - no hook line (and no registration), no Stop
    reminder, no Cursor follow-up, and every tool answers [disabled]."""
    store.register("peer", kind="opencode")
    a = mcp_session_id("host-a")
    store.register(a, kind="mcp")
    store.send("peer", a, "mail")

    assert chat_hook_line(store, OFF, "host-b") is None
    assert store.get(mcp_session_id("host-b")) is None
    assert claude_stop_hook(store, OFF, "host-a") is None
    assert cursor_stop_hook(store, OFF, "host-a", status="completed", loop_count=0) == {}
    reply = server(store, config=OFF).call("thatch_chat_register", {})
    assert (reply.ok, reply.text) == (False, DISABLED_REPLY)
    assert server(store, "cursor", config=OFF).call("chat_status", {"as": a}).text == DISABLED_REPLY


@pytest.mark.rules("R29")
def test_hook_rereads_the_config_file_per_call(store, tmp_path):
    """R29: the hook gates on the live config file: a toggle applies at once."""
    cfg_file = tmp_path / "config.json"
    source = ConfigSource(cfg_file)
    cfg_file.write_text('{"chat": {"enabled": false}}')
    assert chat_hook_line(store, source, "host-a") is None
    cfg_file.write_text('{"chat": {"enabled": true}}')
    assert name_of(chat_hook_line(store, source, "host-a"))


@pytest.mark.rules("R30")
def test_hook_registers_even_with_auto_register_off(store):
    """R30: chat.autoRegister false stops automatic joining, not the MCP
    hook's identity anchor."""
    name = name_of(chat_hook_line(store, NO_AUTO, "host-a"))
    assert store.get(mcp_session_id("host-a")).name == name


@pytest.mark.rules("R7", "R31", "R6", "R32")
def test_leave_line_after_unregister_and_explicit_rejoin(store):
    """R7, R31, R6, R32: after chat_unregister the hook prints the leave line and
    does not rejoin; the parent-pid anchor no longer resolves (no directory row
    behind it), so an explicit chat_register passing the id the leave line
    names rejoins the same conversation under a fresh name."""
    first = name_of(chat_hook_line(store, ON, "host-a", ppid=9001))
    srv = server(store, ppid=9001)
    assert srv.call("thatch_chat_unregister", {}).ok

    for _ in range(2):
        line = chat_hook_line(store, ON, "host-a", ppid=9001)
        assert line.startswith(LEAVE_LINE) and mcp_session_id("host-a") in line
    assert store.get(mcp_session_id("host-a")) is None
    assert store.resolve_host_pid(9001) is None

    reply = srv.call("thatch_chat_register", {"as": mcp_session_id("host-a")})
    assert reply.ok
    second = name_of(chat_hook_line(store, ON, "host-a", ppid=9001))
    assert second != first and second in reply.text
    assert store.get(mcp_session_id("host-a")).name == second


# ---------------------------------------------------------------------------
# Identity resolution and anti-spoofing
# ---------------------------------------------------------------------------

@pytest.mark.rules("R32")
def test_hook_records_the_parent_pid_anchor(store):
    """R32: the hook maps the host's pid to the conversation's id."""
    chat_hook_line(store, ON, "host-a", ppid=4242)
    assert store.resolve_host_pid(4242) == mcp_session_id("host-a")


@pytest.mark.rules("R32")
def test_identity_priority(store):
    """R32: host context > ppid anchor > CLAUDE_CODE_SESSION_ID > claimed as."""
    for host_id, pid in (("host-a", 1), ("host-b", 2), ("host-c", 3)):
        chat_hook_line(store, ON, host_id, ppid=pid)
    a, b, c = (mcp_session_id(h) for h in ("host-a", "host-b", "host-c"))
    c_name = store.get(c).name
    full = dict(host_context="ses_opencode", ppid=1, env_session_id="host-b", claimed_as=c_name)
    assert resolve_chat_identity(store, **full) == "ses_opencode"
    assert resolve_chat_identity(store, **{**full, "host_context": None}) == a
    assert resolve_chat_identity(store, **{**full, "host_context": None, "ppid": 77}) == b
    assert resolve_chat_identity(store, ppid=77, env_session_id="never-hooked", claimed_as=c_name) == c
    assert resolve_chat_identity(store, claimed_as=c_name.upper()) == c
    assert resolve_chat_identity(store, claimed_as="nobody-00001") is None
    assert resolve_chat_identity(store) is None


@pytest.mark.rules("R32")
def test_claude_code_server_ignores_a_spoofed_as(store):
    """R32: on Claude Code the anchored identity wins over a claimed `as`:
    the model cannot send as another session."""
    chat_hook_line(store, ON, "host-a", ppid=100)
    victim = name_of(chat_hook_line(store, ON, "host-b", ppid=200))
    store.register("peer", kind="opencode")
    peer = store.get("peer").name

    reply = server(store, ppid=100).call("thatch_chat_send", {"as": victim, "to": peer, "body": "hi"})
    assert reply.ok
    (msg,) = store.message_feed()
    assert msg.from_session == mcp_session_id("host-a")


@pytest.mark.rules("R32")
def test_claude_code_server_falls_back_to_the_env_session_id(store):
    """R32: without a fresh anchor, CLAUDE_CODE_SESSION_ID (set by the host at
    spawn) beats the claimed `as`."""
    chat_hook_line(store, ON, "host-a")
    other = name_of(chat_hook_line(store, ON, "host-b"))
    srv = server(store, env={"CLAUDE_CODE_SESSION_ID": "host-a"})
    reply = srv.call("thatch_chat_status", {"as": other})
    assert store.get(mcp_session_id("host-a")).name in reply.text


@pytest.mark.rules("R32")
def test_cursor_server_uses_only_the_claimed_as(store):
    """R32: Cursor's hooks and MCP server share one process: the ppid and the
    environment are ignored, the claimed `as` decides."""
    chat_hook_line(store, ON, "cur-a", ppid=os.getppid())
    b_name = name_of(chat_hook_line(store, ON, "cur-b"))
    srv = McpChatServer(store, ON, host="cursor", env={"CLAUDE_CODE_SESSION_ID": "cur-a"})
    assert b_name in srv.call("thatch_chat_status", {"as": b_name}).text
    assert "Not registered" in srv.call("thatch_chat_status", {}).text
    assert not srv.call("thatch_chat_read", {}).ok


@pytest.mark.rules("R32")
def test_stale_anchor_is_ignored(store):
    """R32: an anchor older than 600 s no longer resolves (bounds pid reuse);
    the server then falls back to the claimed `as`."""
    with freeze_time(T0) as clock:
        chat_hook_line(store, ON, "host-a", ppid=555)
        b_name = name_of(chat_hook_line(store, ON, "host-b"))
        srv = server(store, ppid=555)
        clock.tick(599)
        assert srv.identity(b_name) == mcp_session_id("host-a")
        clock.tick(2)
        assert store.resolve_host_pid(555) is None
        assert srv.identity(b_name) == mcp_session_id("host-b")
        # The next prompt's hook refreshes the anchor.
        chat_hook_line(store, ON, "host-a", ppid=555)
        assert srv.identity(b_name) == mcp_session_id("host-a")


def _hook_child(db_path, conn_end):
    """A hook invocation: a child of the host, recording os.getppid()."""
    conn = open_db(db_path)
    try:
        conn_end.send(chat_hook_line(ChatStore(conn), ON, "real-host-session", ppid=os.getppid()))
    finally:
        conn.close()


def _mcp_child(db_path, conn_end):
    """The MCP server: another child of the same host, resolving its parent."""
    conn = open_db(db_path)
    try:
        srv = McpChatServer(ChatStore(conn), ON, host="claude-code", env={})
        conn_end.send((srv.identity("someone-else"), srv.call("thatch_chat_status", {}).text))
    finally:
        conn.close()


def _run_child(target, db_path):
    ctx = multiprocess.get_context("fork")
    recv_end, send_end = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=target, args=(str(db_path), send_end))
    proc.start()
    try:
        send_end.close()
        result = recv_end.recv()  # blocking, no timeout: safe for any clock
        proc.join(10)
        assert proc.exitcode == 0
        return result
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join(5)


@pytest.mark.rules("R32")
def test_real_parent_pid_anchor_across_processes(db_path):
    """R32: a forked hook child records its real parent pid; a sibling child
    (the MCP server) resolves the same session from its own os.getppid().
    No connection is open in this process while it forks."""
    line = _run_child(_hook_child, db_path)
    identity, status = _run_child(_mcp_child, db_path)
    assert identity == mcp_session_id("real-host-session")
    assert f"[chat] registered as {name_of(line)}:" in status


# ---------------------------------------------------------------------------
# MCP server registration
# ---------------------------------------------------------------------------

@pytest.mark.rules("R6")
def test_register_without_hook_mints_a_fresh_identity_per_conversation(store):
    """R6: with no anchor, env id or `as`, chat_register mints a fresh
    per-conversation id (seeded rng), and `as` reclaims that name later."""
    srv = server(store, seed=1)
    first = srv.call("thatch_chat_register", {})
    second = srv.call("chat_register", {})
    assert first.ok and second.ok
    names = [r.name for r in store.list_sessions()]
    assert len(names) == 2 and all(n in t for n, t in zip(sorted(names), sorted([first.text, second.text])))
    assert all(re.fullmatch(r"mcp_[0-9a-f]{12}", r.session_id) and r.host_kind == "mcp"
               for r in store.list_sessions())

    again = srv.call("thatch_chat_register", {"as": names[0]})
    assert again.ok and "already registered" in again.text and names[0] in again.text
    assert len(store.list_sessions()) == 2

    unknown = srv.call("thatch_chat_register", {"as": "gone-00042"})
    assert (unknown.ok, unknown.text) == (False, UNKNOWN_CLAIM.format(name="gone-00042"))

    # The same seed mints the same ids: deterministic for a scenario seed.
    assert server(store, seed=1).mint_session_id() == server(store, seed=1).mint_session_id()


@pytest.mark.rules("R31", "R6")
def test_register_with_hook_identity_is_idempotent(store):
    """R31, R6: chat_register from a hooked conversation keeps the hook's name."""
    name = name_of(chat_hook_line(store, ON, "host-a", ppid=31))
    reply = server(store, ppid=31).call("thatch_chat_register", {})
    assert reply.ok and name in reply.text
    assert [r.name for r in store.list_sessions()] == [name]


@pytest.mark.rules("R35", "R12")
def test_old_mcp_rows_still_receive_broadcasts(store):
    """R35, R12: an mcp row an hour between turns still receives a broadcast;
    an opencode row that old is skipped as stale."""
    with freeze_time(T0) as clock:
        sleeper = name_of(chat_hook_line(store, ON, "host-sleeper"))
        store.register("ses_dead", kind="opencode")
        dead = store.get("ses_dead").name
        clock.tick(3600)
        sender = name_of(chat_hook_line(store, ON, "host-sender", ppid=61))
        reply = server(store, ppid=61).call("thatch_chat_broadcast", {"body": "main moved"})
    assert reply.ok and f"\nrecipients: {sleeper}\nskipped stale: {dead}\n" in reply.text
    assert [(r.from_, r.to, r.via_broadcast) for r in store.message_feed()] == [(sender, sleeper, True)]


# ---------------------------------------------------------------------------
# Turn-end mail checks
# ---------------------------------------------------------------------------

@pytest.mark.rules("R36")
def test_claude_stop_hook_reminds_pointer_only(store):
    """R36: unread mail blocks the stop with a reminder naming senders and
    count (never bodies); not while already continuing; once reminded, not
    again until the re-nudge window passes or new mail arrives."""
    with freeze_time(T0) as clock:
        me = name_of(chat_hook_line(store, ON, "host-a"))
        assert claude_stop_hook(store, ON, "host-a") is None  # no mail
        store.register("p1", kind="opencode")
        store.register("p2", kind="opencode")
        n1, n2 = store.get("p1").name, store.get("p2").name
        store.send("p1", me, "SECRET-BODY-1")
        store.send("p2", me, "SECRET-BODY-2")
        store.send("p1", me, "SECRET-BODY-3")

        assert claude_stop_hook(store, ON, "host-a", stop_hook_active=True) is None
        out = claude_stop_hook(store, ON, "host-a")
        assert out["decision"] == "block"
        reason = out["reason"]
        assert "3 unread messages" in reason and f"{n1}, {n2}" in reason
        assert "Call chat_read" in reason and f'as: "{me}"' in reason
        assert "SECRET" not in reason

        assert claude_stop_hook(store, ON, "host-a") is None  # reminded already
        clock.tick(60)
        store.send("p2", me, "SECRET-BODY-4")
        assert "4 unread messages" in claude_stop_hook(store, ON, "host-a")["reason"]
        clock.tick(16 * 60)
        assert claude_stop_hook(store, ON, "host-a")["decision"] == "block"  # re-nudge window

        store.read(mcp_session_id("host-a"))
        assert claude_stop_hook(store, ON, "host-a") is None
    assert claude_stop_hook(store, ON, "never-hooked") is None


@pytest.mark.rules("R36", "R18", "R20")
def test_cursor_stop_hook_points_once_per_renudge_window(store, frozen):
    """R36, R18, R20: a completed turn with mail due gets the wake nudge as its
    follow-up (pointer-only) and stamps it delivered; the stamp suppresses a
    repeat inside the re-nudge window, whatever Cursor's loop count (Cursor's
    own loop_limit caps the chain); new mail is due again at once, old mail
    after the window; never after an aborted or errored turn (D-real-host-4)."""
    me = name_of(chat_hook_line(store, ON, "cur-a"))
    assert cursor_stop_hook(store, ON, "cur-a", status="completed", loop_count=0) == {}
    store.register("p1", kind="opencode")
    peer = store.get("p1").name
    store.send("p1", me, "SECRET-BODY")
    assert cursor_stop_hook(store, ON, "cur-a", status="aborted", loop_count=0) == {}
    assert cursor_stop_hook(store, ON, "cur-a", status="error", loop_count=0) == {}

    out = cursor_stop_hook(store, ON, "cur-a", status="completed", loop_count=0)
    assert out == {"followup_message": chat_notification_nudge([peer], 1)}
    assert "SECRET" not in out["followup_message"]
    for loop in (1, 2, CURSOR_FOLLOWUP_CAP + 5):
        assert cursor_stop_hook(store, ON, "cur-a", status="completed", loop_count=loop) == {}
    store.send("p1", me, "second")
    out = cursor_stop_hook(store, ON, "cur-a", status="completed", loop_count=1)
    assert out == {"followup_message": chat_notification_nudge([peer], 2)}
    frozen.tick(14 * 60)
    assert cursor_stop_hook(store, ON, "cur-a", status="completed", loop_count=0) == {}
    frozen.tick(61)
    assert "2 unread messages" in cursor_stop_hook(store, ON, "cur-a", status="completed")["followup_message"]

    store.read(mcp_session_id("cur-a"))
    frozen.tick(16 * 60)
    assert cursor_stop_hook(store, ON, "cur-a", status="completed", loop_count=0) == {}
    assert cursor_stop_hook(store, ON, "unknown-conv", status="completed", loop_count=0) == {}


@pytest.mark.rules("R27")
def test_mcp_replies_never_carry_an_echo(store):
    """R27: echo bubbles are an opencode surface (seed 000's host table: no
    echo on Claude Code or Cursor), so the MCP server's successful
    register/send/read/broadcast replies carry no echo text."""
    srv = server(store, "cursor")
    reg = srv.call("thatch_chat_register", {})
    me = store.list_sessions()[0].name
    store.register("peer", kind="opencode")
    peer = store.get("peer").name
    store.send("peer", me, "hi")
    replies = [reg, srv.call("chat_send", {"as": me, "to": peer, "body": "yo"}),
               srv.call("chat_read", {"as": me}), srv.call("chat_broadcast", {"as": me, "body": "all"})]
    assert all(r.ok for r in replies) and all(r.echo is None for r in replies)


@pytest.mark.rules("R31", "R36")
def test_hooks_with_unusable_payloads_stay_silent(store):
    """R31, R36: a hook payload with no usable session id prints nothing and
    reminds of nothing; bad tool shapes on the server are refusals."""
    for bad in (None, "", "  ", 42):
        assert chat_hook_line(store, ON, bad, ppid=4242) is None
        assert claude_stop_hook(store, ON, bad) is None
        assert cursor_stop_hook(store, ON, bad, status="completed", loop_count=0) == {}
    name_of(chat_hook_line(store, ON, "host-a"))
    store.register("peer", kind="opencode")
    store.send("peer", mcp_session_id("host-a"), "mail")
    assert cursor_stop_hook(store, ON, "host-a", status=None, loop_count=0) == {}
    assert chat_hook_line(store, ON, "host-b", ppid="not-a-pid") is not None
    assert store.list_sessions() and store.resolve_host_pid(4242) is None
    srv = server(store)
    assert not srv.call(None, {}).ok
    assert srv.call("thatch_chat_status", "garbage").text == "Tool arguments must be an object."
    assert resolve_chat_identity(store, env_session_id=5, claimed_as=["x"]) is None


ODD = (None, 5, -1, "", "  ", [], {}, object(), b"x", True, "host-a", {"as": 5, "to": [], "body": {}})


def test_no_odd_input_makes_a_hook_or_tool_raise(store, tmp_path):
    """The hook functions, the MCP server and ChatTools answer every odd input
    (wrong types, blanks, junk transcript paths) instead of raising: a hook
    must never break the host's prompt, a tool never crashes the server."""
    from thatch_core.tools import ChatTools

    name_of(chat_hook_line(store, ON, "host-a", ppid=77))
    store.register("peer", kind="opencode")
    tools = ChatTools(store, ON)
    servers = [server(store), server(store, "cursor")]
    tools_names = ("thatch_chat_register", "chat_list", "send", "thatch_chat_read",
                   "unregister", "broadcast", "status", "nope")
    for v in ODD:
        chat_hook_line(store, ON, v, project=v, directory=v, transcript_path=v, ppid=v)
        claude_stop_hook(store, ON, v, stop_hook_active=v)
        cursor_stop_hook(store, ON, v, status=v, loop_count=v)
        resolve_chat_identity(store, host_context=None, ppid=v, env_session_id=v, claimed_as=v)
        for t in tools_names + (v,):
            tools.call(t, v if not isinstance(v, str) else {"body": v}, identity=v)
            for srv in servers:
                srv.call(t, v if isinstance(v, dict) or v is None else {"as": v, "to": v, "body": v})
    for i, junk in enumerate((5, object(), b"x", ["a"], True, "\0", str(tmp_path / "no" / "such.jsonl"))):
        assert name_of(chat_hook_line(store, ON, f"host-new-{i}", transcript_path=junk))
    assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


@pytest.mark.rules("R6", "R7", "R32")
def test_cursor_conversation_rejoins_its_own_identity_after_a_leave(store):
    """R6, R7, R32: on Cursor (claimed `as` only) the leave line hands out the
    conversation's own id; chat_register with that `as` clears the tombstone
    and rejoins the hook's identity under a fresh name, after which the hook
    prints the ordinary line again. Other tools with that id still refuse
    until the rejoin (left sessions cannot send)."""
    hid = mcp_session_id("cur-a")
    old = name_of(chat_hook_line(store, ON, "cur-a"))
    srv = server(store, "cursor")
    assert srv.call("thatch_chat_unregister", {"as": old}).ok
    line = chat_hook_line(store, ON, "cur-a")
    assert line == f'{LEAVE_LINE} To rejoin as this conversation, pass as: "{hid}".'
    store.register("peer", kind="opencode")
    sent = srv.call("thatch_chat_send", {"as": hid, "to": "peer", "body": "x"})
    assert (sent.ok, sent.text) == (False, "Not sent: You are not registered - call chat_register first.")
    back = srv.call("thatch_chat_register", {"as": hid})
    assert back.ok and "fresh name" in back.text
    new = name_of(chat_hook_line(store, ON, "cur-a"))
    assert new != old and store.get(hid).name == new and not store.has_tombstone(hid)
    assert len(store.list_sessions()) == 2  # no unrelated minted identity
    # A name of a left session is gone: claiming it is still refused.
    assert srv.call("thatch_chat_register", {"as": old}).text == UNKNOWN_CLAIM.format(name=old)
