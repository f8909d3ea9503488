"""OpencodeRuntime: the plugin's chat logic over a real temp-dir SQLite store.

The opencode SDK client is a small recording fake (it records prompts and
answers title/parent/list questions); the database is real.
"""

import json

import pytest

from thatch_core.config import ConfigSource
from thatch_core.db import open_db
from thatch_core.prompts import DISABLED_REPLY
from thatch_core.runtime import HOSTED_STATE_FILE, OpencodeRuntime
from thatch_core.store import ChatStore

from opencodekit import FakeClient

USER = [{"type": "text", "text": "please fix the build", "synthetic": False}]


@pytest.fixture
def store(db_path, frozen):
    conn = open_db(db_path)
    yield ChatStore(conn)
    conn.close()


@pytest.fixture
def cfg(tmp_path):
    path = tmp_path / "config.json"

    def write(enabled=True, auto=True):
        path.write_text(json.dumps({"chat": {"enabled": enabled, "autoRegister": auto}}))
        return ConfigSource(path)

    write()
    return write


@pytest.fixture
def make(store, cfg, tmp_path):
    made = []

    def make(client=None, argv=("opencode",), config=None, state_dir=None, **kw):
        rt = OpencodeRuntime(
            store, client or FakeClient(), directory=str(tmp_path), project="proj",
            config_source=config or cfg(), pid=4242, cmdline_reader=lambda pid: list(argv),
            state_dir=state_dir, log=kw.pop("log", lambda m: None), **kw,
        )
        made.append(rt)
        return rt

    yield make
    for rt in made:
        rt.dispose()


def send(store, frm, to, body="hi"):
    if store.get(frm) is None:
        store.register(frm, project="proj")
    res = store.send(frm, to, body)
    assert res.ok, res.error
    return res.message_id


# -- registration -------------------------------------------------------------

@pytest.mark.rules("R1")
def test_first_user_message_registers_before_the_model(make, store):
    """R1: a top-level session's first real user message registers it (the
    row exists when on_chat_message returns) with the title as topic."""
    client = FakeClient(titles={"ses_top": "Fix the flaky build"})
    rt = make(client)
    rt.start()
    rt.on_chat_message("ses_top", USER)
    row = store.get("ses_top")
    assert row is not None and row.auto and row.topic == "Fix the flaky build"
    assert row.project == "proj"
    # Registered, not hosted: only the session's status events host it (R25).
    assert rt.hosted_sessions() == []
    rt.on_session_status("ses_top", "busy")
    assert rt.hosted_sessions() == ["ses_top"]


@pytest.mark.rules("R13", "R25")
def test_only_status_events_host_a_session(make, store):
    """R13, R25: the hosted set is the sessions seen in session.status events
    (plus startup and rehost), minus children, as the real runtime's. A prompt,
    a compaction and a tool call host nothing; a tool call on an unhosted
    session still acts (here it registers) without joining the beat set."""
    rt = make(FakeClient(parents={"ses_kid": "ses_top"}))
    rt.start()
    rt.on_chat_message("ses_a", USER)
    rt.on_compacting("ses_a", True)
    rt.on_compacting("ses_a", False)
    reply = rt.call_tool("ses_t", "thatch_chat_register", {})
    assert reply.ok and store.get("ses_t") is not None and store.get("ses_a") is not None
    assert rt.hosted_sessions() == []
    send(store, "ses_x", "ses_t")
    rt.poller.poll()
    assert rt.client.wakes() == []  # not hosted: this process never prompts it
    rt.call_tool("ses_kid", "thatch_chat_register", {})
    for sid in ("ses_t", "ses_kid"):
        rt.on_session_status(sid, "idle")
    assert rt.hosted_sessions() == ["ses_t"]  # the child is never hosted
    assert len(rt.client.wakes("ses_t")) == 1


@pytest.mark.rules("R1")
def test_child_sessions_never_auto_register(make, store):
    """R1: sub-agent (child) sessions never auto-register, by message or idle."""
    rt = make(FakeClient(parents={"ses_child": "ses_top"}))
    rt.start()
    rt.on_chat_message("ses_child", USER)
    rt.on_session_status("ses_child", "idle")
    assert store.get("ses_child") is None


@pytest.mark.rules("R1", "R3")
def test_idle_backstop_registers_and_refreshes_topic(make, store):
    """R1, R3: the first idle event is a backstop; every idle refreshes an auto
    row's topic from the live title; placeholder titles never become topics."""
    client = FakeClient(titles={"ses_a": "New session - 2026-11-29T12:00:00.000Z"})
    rt = make(client)
    rt.start()
    rt.on_session_status("ses_a", "idle")
    assert store.get("ses_a") is not None and store.get("ses_a").topic is None
    client.titles["ses_a"] = "Ship   the\nrelease"
    rt.on_session_status("ses_a", "busy")
    rt.on_session_status("ses_a", "idle")
    assert store.get("ses_a").topic == "Ship the release"
    client.titles["ses_a"] = "Untitled"
    rt.on_session_status("ses_a", "idle")
    assert store.get("ses_a").topic == "Ship the release"


@pytest.mark.rules("R3")
def test_legacy_rows_keep_their_topic(make, store):
    """R3: a legacy (non-auto) row keeps its topic whatever the title says."""
    store.register("ses_legacy", project="proj", title="hand-set topic", auto=False)
    rt = make(FakeClient(titles={"ses_legacy": "Something else"}))
    rt.start()
    rt.on_session_status("ses_legacy", "idle")
    assert store.get("ses_legacy").topic == "hand-set topic"


@pytest.mark.rules("R27", "R1")
def test_echo_only_messages_skip_the_machinery(make, store):
    """R27, R1: a message made only of [chat] bubbles neither registers nor hosts."""
    rt = make()
    rt.start()
    rt.on_chat_message("ses_a", [{"type": "text", "text": "[chat] -> bob: hi", "synthetic": False}])
    assert store.get("ses_a") is None and rt.hosted_sessions() == []


@pytest.mark.rules("R30")
def test_auto_register_false_means_no_automatic_joining(make, store, cfg):
    """R30: chat.autoRegister false: no join by message, idle or -s startup;
    an explicit thatch_chat_register still works, and wakes still arrive."""
    config = cfg(auto=False)
    rt = make(argv=["opencode", "-s", "ses_s"], config=config)
    rt.start()
    assert rt.hosted_sessions() == [] and rt.startup_session is None
    rt.on_chat_message("ses_a", USER)
    rt.on_session_status("ses_a", "idle")
    assert store.get("ses_a") is None and store.get("ses_s") is None
    reply = rt.call_tool("ses_a", "thatch_chat_register", {})
    assert reply.ok and store.get("ses_a") is not None
    send(store, "ses_x", "ses_a")
    rt.on_session_status("ses_a", "idle")
    assert len(rt.client.wakes("ses_a")) == 1


# -- leaving --------------------------------------------------------------------

@pytest.mark.rules("R7", "R17")
def test_session_deleted_unregisters_at_once(make, store):
    """R7, R17: session.deleted deletes the row, writes a tombstone and stops
    hosting; a later event for it does not bring it back."""
    rt = make()
    rt.start()
    rt.on_chat_message("ses_a", USER)
    rt.on_session_deleted("ses_a")
    assert store.get("ses_a") is None and store.has_tombstone("ses_a")
    assert rt.hosted_sessions() == []
    rt.on_session_status("ses_a", "idle")
    assert store.get("ses_a") is None and rt.hosted_sessions() == []


@pytest.mark.rules("R7")
def test_greenlit_exit_and_tool_leave_stick(make, store):
    """R7: a greenlit exit and chat_unregister both leave with a tombstone;
    neither the next message nor the next idle re-registers the session."""
    rt = make()
    rt.start()
    for s in ("ses_a", "ses_b"):
        rt.on_chat_message(s, USER)
    rt.on_exit("ses_a")
    assert rt.call_tool("ses_b", "thatch_chat_unregister", {}).ok
    for s in ("ses_a", "ses_b"):
        rt.on_chat_message(s, USER)
        rt.on_session_status(s, "idle")
        assert store.get(s) is None and store.has_tombstone(s)
    assert "ses_a" not in rt.hosted_sessions()


@pytest.mark.rules("R7")
def test_delete_during_title_fetch_does_not_resurrect(make, store):
    """R7: session.deleted landing while the auto-register awaits the title
    (here: inside session_title) wins; no row is resurrected."""
    client = FakeClient(titles={"ses_a": "Doomed"})
    rt = make(client)
    client.on_title = rt.on_session_deleted
    rt.start()
    rt.on_chat_message("ses_a", USER)
    assert store.get("ses_a") is None
    assert store.has_tombstone("ses_a")
    assert rt.hosted_sessions() == []
    client.on_title = None
    rt.on_session_status("ses_a", "idle")
    assert store.get("ses_a") is None


# -- startup ----------------------------------------------------------------------

@pytest.mark.rules("R5")
def test_dash_s_reclaims_name_and_delivers_asleep_mail(make, store, frozen):
    """R5: -s <id> read from the OS command line re-registers the session at
    start (name kept, heartbeat refreshed) and kicks a delivery pass."""
    store.register("ses_s", project="proj", title="Old work")
    name = store.get("ses_s").name
    send(store, "ses_x", "ses_s", "while you were out")
    frozen.tick(3600)
    rt = make(argv=["/usr/bin/bun", "/opt/opencode", "-s", "ses_s"])
    rt.start()
    assert store.get("ses_s").name == name
    assert store.get("ses_s").last_seen == "2026-11-29T13:00:00Z"
    assert rt.hosted_sessions() == ["ses_s"] and rt.startup_session == "ses_s"
    wakes = rt.client.wakes("ses_s")
    assert len(wakes) == 1 and store.get("ses_x").name in wakes[0]
    assert "while you were out" not in wakes[0]


@pytest.mark.rules("R5")
def test_dash_c_resolves_newest_top_level_session(make, store):
    """R5: -c resolves the newest (by updated time) session without a parent."""
    client = FakeClient(sessions=[
        {"id": "ses_old", "parent_id": None, "updated_ms": 100},
        {"id": "ses_kid", "parent_id": "ses_new", "updated_ms": 900},
        {"id": "ses_new", "parent_id": None, "updated_ms": 500},
    ])
    rt = make(client, argv=["opencode", "--continue"])
    rt.start()
    assert rt.startup_session == "ses_new"
    assert store.get("ses_new") is not None and store.get("ses_kid") is None


@pytest.mark.rules("R5", "R7")
def test_dash_s_respects_a_tombstone(make, store):
    """R5, R7: a session that left is not re-registered by -s startup."""
    store.register("ses_s")
    store.unregister("ses_s")
    rt = make(argv=["opencode", "-s", "ses_s"])
    rt.start()
    assert store.get("ses_s") is None


@pytest.mark.rules("R5", "R7", "R30")
def test_startup_path_neither_registers_nor_hosts_when_it_may_not_join(make, store, cfg):
    """R5, R7, R30: with autoRegister off, or for a session that left, the -s/-c
    startup path neither registers nor hosts the session (the real runtime's
    rule, D-real-host-3); -c is not even resolved with autoRegister off;
    the session is hosted from its first status event like any other."""
    class Counting(FakeClient):
        lists = 0

        def list_sessions(self, directory):
            Counting.lists += 1
            return super().list_sessions(directory)

    top = [{"id": "ses_c", "parent_id": None, "updated_ms": 1}]
    off = make(Counting(sessions=top), argv=["opencode", "-c"], config=cfg(auto=False))
    off.start()
    assert Counting.lists == 0 and off.startup_session is None and off.hosted_sessions() == []
    store.register("ses_gone")
    store.unregister("ses_gone")
    for argv, client in ((["opencode", "-s", "ses_gone"], FakeClient()),
                         (["opencode", "-c"], FakeClient(sessions=[{"id": "ses_gone", "updated_ms": 1}]))):
        rt = make(client, argv=argv, config=cfg())
        rt.start()
        assert rt.startup_session is None and rt.hosted_sessions() == []
        assert store.get("ses_gone") is None
        rt.on_session_status("ses_gone", "idle")
        assert rt.hosted_sessions() == ["ses_gone"] and store.get("ses_gone") is None


# -- delivery ---------------------------------------------------------------------

@pytest.mark.rules("R19", "R20")
def test_idle_flush_and_busy_compacting_gate(make, store):
    """R19, R20: mail waits while busy or compacting; the idle event flushes
    it at once with one synthetic pointer-only wake."""
    rt = make()
    rt.start()
    rt.on_chat_message("ses_b", USER)
    rt.on_session_status("ses_b", "busy")
    send(store, "ses_a", "ses_b", "secret body")
    send(store, "ses_a", "ses_b", "another")
    rt.poller.poll()
    assert rt.client.wakes() == []
    rt.on_compacting("ses_b", True)
    rt.on_session_status("ses_b", "idle")
    assert rt.client.wakes() == []
    rt.on_compacting("ses_b", False)
    rt.on_session_status("ses_b", "idle")
    wakes = rt.client.wakes("ses_b")
    assert len(wakes) == 1 and "2 unread messages" in wakes[0]
    assert "secret body" not in wakes[0]
    sid, parts, no_reply = rt.client.prompts[-1]
    assert parts == [{"type": "text", "text": wakes[0], "synthetic": True}] and not no_reply


@pytest.mark.rules("R19")
def test_failed_wake_stays_pending_and_retries(make, store):
    """R19: a wake prompt the server refuses stays pending and retries next cycle."""
    rt = make()
    rt.start()
    rt.on_session_status("ses_b", "idle")
    send(store, "ses_a", "ses_b")
    rt.client.fail_prompts = True
    rt.poller.poll()
    rt.client.fail_prompts = False
    assert rt.client.wakes() == []
    rt.poller.poll()
    assert len(rt.client.wakes("ses_b")) == 1


@pytest.mark.rules("R25", "R13")
def test_each_process_only_prompts_sessions_it_hosts(store, cfg, tmp_path):
    """R25, R13: two runtimes on one database; each poll beats and wakes only
    its own hosted sessions, so every message has one deliverer."""
    c1, c2 = FakeClient(), FakeClient()
    kw = dict(directory=str(tmp_path), project="proj", config_source=cfg(), pid=1,
              cmdline_reader=lambda pid: [], log=lambda m: None)
    r1, r2 = OpencodeRuntime(store, c1, **kw), OpencodeRuntime(store, c2, **kw)
    r1.start(), r2.start()
    r1.on_session_status("ses_one", "idle")
    r2.on_session_status("ses_two", "idle")
    send(store, "ses_one", "ses_two", "to two")
    send(store, "ses_two", "ses_one", "to one")
    r1.poller.poll()
    r2.poller.poll()
    assert [s for s, p, nr in c1.prompts] == ["ses_one"]
    assert [s for s, p, nr in c2.prompts] == ["ses_two"]


# -- tools and echo ------------------------------------------------------------------

@pytest.mark.rules("R27", "R9")
def test_tool_echo_is_fire_and_forget(make, store):
    """R27, R9: a successful send echoes as a non-synthetic no_reply part; a
    failing echo never fails the tool; failed calls and list never echo; the
    echo fed back as a chat.message is skipped."""
    rt = make()
    rt.start()
    rt.on_chat_message("ses_a", USER)
    rt.on_chat_message("ses_b", USER)
    nb = store.get("ses_b").name
    reply = rt.call_tool("ses_a", "thatch_chat_send", {"to": nb, "body": "hello"})
    assert reply.ok and rt.client.echoes("ses_a") == [f"[chat] to {nb}: hello"]
    assert rt.client.prompts[-1][1] == [{"type": "text", "text": f"[chat] to {nb}: hello", "synthetic": False}]
    n = len(rt.client.prompts)
    assert not rt.call_tool("ses_a", "thatch_chat_send", {"to": nb, "body": ""}).ok
    assert rt.call_tool("ses_a", "thatch_chat_list", {}).ok
    assert len(rt.client.prompts) == n
    rt.client.fail_prompts = True
    assert rt.call_tool("ses_a", "thatch_chat_send", {"to": nb, "body": "again"}).ok
    rt.client.fail_prompts = False
    rt.on_chat_message("ses_new", [{"type": "text", "text": f"[chat] to {nb}: hello", "synthetic": False}])
    assert store.get("ses_new") is None and "ses_new" not in rt.hosted_sessions()


@pytest.mark.rules("R34", "R10")
def test_tools_take_the_host_session_as_identity(make, store):
    """R34, R10: call_tool acts as the calling session: status and read are its own."""
    rt = make()
    rt.start()
    rt.on_chat_message("ses_b", USER)
    send(store, "ses_a", "ses_b", "for b")
    st = rt.call_tool("ses_b", "thatch_chat_status", {})
    assert st.ok and "1 unread of 1 total" in st.text
    rd = rt.call_tool("ses_b", "thatch_chat_read", {})
    assert "for b" in rd.text
    assert rt.client.echoes("ses_b")[-1].startswith("[chat] inbox\n[thatch] chat inbox: 1 message(s)")


# -- disabled -----------------------------------------------------------------------

@pytest.mark.rules("R29")
def test_disabled_at_init_runs_nothing(make, store, cfg):
    """R29: chat.enabled false at init: no poller, no -s registration, nothing
    hosted, events do nothing, tools refuse with the [disabled] reply."""
    store.register("ses_s")
    send(store, "ses_x", "ses_s")
    rt = make(argv=["opencode", "-s", "ses_s"], config=cfg(enabled=False))
    rt.start()
    assert rt.poller is None and rt.hosted_sessions() == []
    rt.on_chat_message("ses_a", USER)
    rt.on_session_status("ses_a", "idle")
    assert store.get("ses_a") is None and rt.hosted_sessions() == [] and rt.client.prompts == []
    reply = rt.call_tool("ses_a", "thatch_chat_register", {})
    assert (reply.text, reply.ok, reply.echo) == (DISABLED_REPLY, False, None)


@pytest.mark.rules("R29")
def test_poller_gate_read_only_at_init(make, store, cfg):
    """R29: disabling after init leaves the poller running (restart needed)
    while the tools refuse at once."""
    config = cfg()
    rt = make(config=config)
    rt.start()
    rt.on_chat_message("ses_b", USER)
    cfg(enabled=False)
    assert rt.poller is not None
    assert rt.call_tool("ses_b", "thatch_chat_status", {}).text == DISABLED_REPLY


# -- rehost grace -----------------------------------------------------------------------

@pytest.mark.rules("R15", "R14")
def test_restart_rehosts_then_silent_sessions_age_out(make, store, frozen, tmp_path):
    """R15, R14: a restarted runtime re-hosts the dead one's set (beating it
    and waking it as idle); a session with activity graduates to permanent
    hosting; a silent one drops out when the grace ends and goes stale."""
    state = tmp_path / "state"
    old = make(state_dir=state)
    old.start()
    for s in ("ses_open", "ses_closed"):
        old.on_chat_message(s, USER)
        old.on_session_status(s, "idle")
    saved = json.loads((state / HOSTED_STATE_FILE).read_text())
    assert sorted(saved["sessions"]) == ["ses_closed", "ses_open"]
    old.dispose()  # the old daemon dies: no unregister

    frozen.tick(45)
    new = make(state_dir=state, rehost_grace_ms=10 * 60_000)
    new.start()
    assert new.hosted_sessions() == ["ses_closed", "ses_open"]
    assert store.get("ses_open").last_seen == "2026-11-29T12:00:45Z"  # beaten at once
    send(store, "ses_x", "ses_closed", "mail for a silent tab")
    new.poller.poll()
    assert len(new.client.wakes("ses_closed")) == 1  # silent rehosted counts as idle
    frozen.tick(60)
    new.on_session_status("ses_open", "idle")  # activity: graduates
    assert new.rehosting() == ["ses_closed"]
    frozen.tick(9 * 60)
    new.poller.poll()
    assert new.hosted_sessions() == ["ses_open"]
    frozen.tick(61)
    new.poller.poll()
    from thatch_core.staleness import is_stale
    assert is_stale(store.get("ses_closed")) and not is_stale(store.get("ses_open"))
    saved = json.loads((state / HOSTED_STATE_FILE).read_text())
    assert list(saved["sessions"]) == ["ses_open"]


@pytest.mark.rules("R15")
def test_rehost_chain_keeps_the_original_deadline(make, frozen, tmp_path, monkeypatch):
    """R15: the grace comes from THATCH_CHAT_REHOST_GRACE_MINUTES when not
    given; a session only re-hosted (never active) keeps its first deadline
    across further restarts, so a closed tab cannot stay fresh forever."""
    monkeypatch.setenv("THATCH_CHAT_REHOST_GRACE_MINUTES", "30")
    state = tmp_path / "state"
    first = make(state_dir=state)
    first.start()
    first.on_session_status("ses_tab", "idle")
    second = make(state_dir=state)
    assert second.rehost_grace_ms == 30 * 60_000
    second.start()
    assert second.rehosting() == ["ses_tab"]
    frozen.tick(20 * 60)
    third = make(state_dir=state)
    third.start()
    assert third.rehosting() == ["ses_tab"]
    frozen.tick(10 * 60)
    assert third.hosted_sessions() == []


@pytest.mark.rules("R13")
def test_real_timer_runs_the_poller_until_dispose(store, cfg, tmp_path):
    """R13: real_timer=True arms the poller's daemon timer at start; dispose stops it."""
    rt = OpencodeRuntime(store, FakeClient(), directory=str(tmp_path), project="proj",
                         config_source=cfg(), pid=1, cmdline_reader=lambda pid: [],
                         log=lambda m: None, real_timer=True)
    rt.start()
    try:
        assert rt.poller.running
    finally:
        rt.dispose()
    assert not rt.poller.running


@pytest.mark.rules("R29")
def test_system_prompt_section_is_gated_at_init(make, cfg):
    """R29: the system prompt's chat section is there when chat was enabled at
    init and absent when it was disabled; like the poller, a later toggle
    needs a restart (the tools, by contrast, follow at once)."""
    on = make(config=cfg())
    assert on.system_prompt_section() == ""  # before start(): nothing advertised
    on.start()
    assert on.system_prompt_section().startswith("## Cross-Session Chat")
    cfg(enabled=False)
    assert on.system_prompt_section().startswith("## Cross-Session Chat")
    off = make(config=cfg(enabled=False))
    off.start()
    assert off.system_prompt_section() == ""
    cfg(enabled=True)
    assert off.system_prompt_section() == "" and off.poller is None


@pytest.mark.rules("R15")
def test_garbled_hosted_state_costs_only_the_garbled_entries(make, tmp_path):
    """R15: a state file with a broken entry re-hosts the good ones; an
    unreadable file re-hosts nothing and is logged, never raised."""
    state = tmp_path / "state"
    state.mkdir()
    (state / HOSTED_STATE_FILE).write_text(json.dumps({"version": 1, "sessions": {
        "ses_good": {"last_activity_ms": 1, "rehost_until_ms": None},
        "ses_bad": {"last_activity_ms": "soon", "rehost_until_ms": "never"},
        "ses_junk": 7,
    }}))
    rt = make(state_dir=state)
    rt.start()
    assert rt.hosted_sessions() == ["ses_good"] and rt.rehosting() == ["ses_good"]
    (state / HOSTED_STATE_FILE).write_text("{torn")
    logs = []
    again = make(state_dir=state, log=logs.append)
    again.start()
    assert again.hosted_sessions() == [] and any("hosted set" in m for m in logs)


@pytest.mark.rules("R13", "R25")
def test_events_without_a_usable_session_id_host_nothing(make, store):
    """R13, R25: host events carrying no usable session id (None, blank, not
    a string) are ignored, so the hosted set every poll cycle beats stays a
    list of real ids and delivery to the others goes on."""
    rt = make()
    rt.start()
    rt.on_session_status("ses_b", "idle")
    for bad in (None, "", "  ", 42, ["ses_x"]):
        rt.on_chat_message(bad, USER)
        rt.on_session_status(bad, "idle")
        rt.on_compacting(bad, True)
        rt.on_session_deleted(bad)
        rt.on_exit(bad)
        rt.on_chat_message("ses_b", bad)  # junk parts: not an echo, not a crash
    assert rt.hosted_sessions() == ["ses_b"]
    send(store, "ses_a", "ses_b")
    rt.poller.poll()
    assert len(rt.client.wakes("ses_b")) == 1
    assert store.conn.execute("SELECT COUNT(*) FROM chat_leave_tombstones").fetchone()[0] == 0
