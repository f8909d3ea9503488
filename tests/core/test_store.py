"""ChatStore: registration, names, messages, broadcast, read stamps, upkeep.

Real SQLite files, real forked processes, real signals; time via freezegun.
"""

from __future__ import annotations

import collections
import os
import random
import re
import signal

import multiprocess
import pytest
from freezegun import freeze_time

from thatch_core.constants import MAX_BODY_LEN
from thatch_core.db import open_db
from thatch_core.names import NAME_POOL
from thatch_core.store import ChatStore
from thatch_core.types import PruneResult

CTX = multiprocess.get_context("fork")
T0 = "2026-11-29T13:45:07Z"
NAME_RE = re.compile(r"^([a-z]+(?:-[a-z]+)+)-(\d{5,})$")


def names_of(conn):
    return [r[0] for r in conn.execute("SELECT name FROM chat_sessions")]


def die_with_parent():
    """Child side: never outlive the pytest worker (pitfalls: xdist orphans)."""
    import ctypes
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def save_coverage():
    """Save coverage data before a planned self-kill (SIGKILL loses it)."""
    try:
        import coverage
    except ImportError:  # pragma: no cover
        return
    cov = coverage.Coverage.current()
    if cov is not None:
        cov.save()


def run_children(target, argsets, timeout=15):
    """Fork one child per argset, wait, return exit codes; never leaves orphans."""
    procs = [CTX.Process(target=target, args=a) for a in argsets]
    for p in procs:
        p.start()
    try:
        for p in procs:
            p.join(timeout)
        return [p.exitcode for p in procs]
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(2)


# ----------------------------------------------------------------------
# Registration and names
# ----------------------------------------------------------------------

@pytest.mark.rules("R1", "R2", "R3")
def test_register_draws_pool_name_with_counter(store):
    """R1, R2, R3: a first registration mints base-00001 from the pool, a real
    title becomes the cleaned topic, and the row is an auto row."""
    with freeze_time(T0):
        r = store.register("ses_a", project="thatch", title="  Fix   the\tlogin bug ")
    assert r.ok and r.drawn and not r.reclaimed
    base, num = NAME_RE.match(r.name).groups()
    assert base in NAME_POOL and num == "00001"
    assert r.topic == "Fix the login bug"
    row = store.get("ses_a")
    assert row.auto is True and row.host_kind == "opencode" and row.project == "thatch"
    assert row.registered_at == row.last_seen == T0


@pytest.mark.rules("R2")
def test_same_base_counts_up(conn):
    """R2: two draws of one base get consecutive counters, never the same name."""
    s = ChatStore(conn, rng=random.Random(3))
    s2 = ChatStore(conn, rng=random.Random(3))  # same draw sequence
    a, b = s.register("ses_a"), s2.register("ses_b")
    assert NAME_RE.match(a.name).group(1) == NAME_RE.match(b.name).group(1)
    assert (NAME_RE.match(a.name).group(2), NAME_RE.match(b.name).group(2)) == ("00001", "00002")


@pytest.mark.rules("R3", "R5", "R6")
def test_reclaim_keeps_name_touches_and_refreshes_topic(store):
    """R3, R5, R6: re-registering keeps the name, refreshes last_seen, and an
    auto row's topic follows a real title but never a placeholder."""
    with freeze_time(T0) as clock:
        first = store.register("ses_a", title="New session - 2026-11-29T13:45:07.000Z")
        assert first.topic is None
        clock.tick(90)
        again = store.register("ses_a", title="Payments refactor", explicit=True)
        assert again.ok and again.reclaimed and not again.drawn and again.name == first.name
        assert again.topic == "Payments refactor"
        assert store.get("ses_a").last_seen == "2026-11-29T13:46:37Z"
        store.register("ses_a", title="New session")
        assert store.get("ses_a").topic == "Payments refactor"
        store.refresh_topic("ses_a", "x" * 200)
        assert store.get("ses_a").topic == "x" * 80
        store.refresh_topic("ses_a", "")
        assert store.get("ses_a").topic == "x" * 80


@pytest.mark.rules("R4")
def test_worktree_kind_captured_at_registration(store, tmp_path):
    """R4: .git dir = root, .git file = worktree, none = undetected."""
    root, wt, plain = tmp_path / "root", tmp_path / "wt", tmp_path / "plain"
    for d in (root, wt, plain):
        d.mkdir()
    (root / ".git").mkdir()
    (wt / ".git").write_text("gitdir: /elsewhere/.git/worktrees/wt\n")
    store.register("ses_r", directory=str(root))
    store.register("ses_w", directory=str(wt))
    store.register("ses_p", directory=str(plain))
    store.register("ses_n")
    assert [store.get(s).worktree for s in ("ses_r", "ses_w", "ses_p", "ses_n")] == [
        "root", "worktree", None, None]


@pytest.mark.rules("R7", "R6", "R2")
def test_tombstone_gate_and_explicit_rejoin(store):
    """R7, R6, R2: a leave sticks against auto-registration; an explicit
    register clears it and mints a fresh name (the old one is never reused)."""
    old = store.register("ses_a").name
    assert store.unregister("ses_a") is True
    assert store.has_tombstone("ses_a")
    refused = store.register("ses_a", title="Real work")
    assert not refused.ok and refused.tombstoned and refused.name is None
    assert store.get("ses_a") is None
    fresh = store.register("ses_a", explicit=True)
    assert fresh.ok and fresh.drawn and fresh.name != old
    assert not store.has_tombstone("ses_a")


@pytest.mark.rules("R7", "R17")
def test_leave_before_inflight_register_lands(store):
    """R7, R17: session.deleted overtaking an in-flight auto-register (no row
    yet) still writes the tombstone, so the late register cannot resurrect it
    (seed 000 closes that race; the real thatch writes nothing for an id
    without a row)."""
    assert store.unregister("ses_a") is False
    late = store.register("ses_a", title="Some title")
    assert late.tombstoned and store.get("ses_a") is None


def test_register_refuses_bad_arguments(store):
    assert store.register("", kind="opencode").error == "A session id is required to register."
    bad = store.register("ses_a", kind="vim")
    assert not bad.ok and bad.error == 'Unknown host kind "vim" (expected one of: opencode, mcp).'


def _register_many(path, barrier, prefix, n):
    die_with_parent()
    barrier.wait()  # both children create / open the fresh file at once too
    conn = open_db(path)
    store = ChatStore(conn, rng=random.Random(42))  # identical draws in both children
    for i in range(n):
        assert store.register(f"{prefix}_{i:03d}").ok
    conn.close()


@pytest.mark.rules("R2")
@pytest.mark.race
def test_two_processes_race_registrations_no_duplicate_names(db_path):
    """R2: two OS processes drawing the same base sequence at once (50 each)
    get 100 distinct names whose counters are exactly 1..counter per base;
    after a prune, new registrations never reissue a pruned name."""
    barrier = CTX.Barrier(2)
    codes = run_children(_register_many, [(str(db_path), barrier, p, 50) for p in ("ses_x", "ses_y")])
    assert codes == [0, 0]
    conn = open_db(db_path)
    names = names_of(conn)
    assert len(names) == 100 and len({n.casefold() for n in names}) == 100
    per_base = collections.defaultdict(set)
    for n in names:
        base, num = NAME_RE.match(n).groups()
        per_base[base].add(int(num))
    # `next` is each base's next unassigned number: exactly 1..next-1 were handed out.
    counters = dict(conn.execute("SELECT base, next FROM chat_name_counters"))
    assert {b: set(range(1, n)) for b, n in counters.items()} == per_base
    # Prune everything, register again with the same seed: all names new.
    with freeze_time("2099-01-01T00:00:00Z"):
        assert len(ChatStore(conn).prune().pruned) == 100
        again = ChatStore(conn, rng=random.Random(42))
        new = {again.register(f"ses_z_{i}").name for i in range(100)}
    assert not new & set(names)
    conn.close()


# ----------------------------------------------------------------------
# Send
# ----------------------------------------------------------------------

@pytest.mark.rules("R9", "R8")
def test_send_refusal_texts_exact(store):
    """R9, R8: validation order and the exact refusal texts."""
    store.register("ses_a")
    store.register("ses_b")
    assert store.send("ses_a", "ses_b", "  \n ").error == "Message body cannot be empty."
    assert store.send("ses_a", "ses_b", "x" * (MAX_BODY_LEN + 1)).error == \
        "Message too long (max 10000 characters)."
    assert store.send("ses_nobody", "ses_b", "hi").error == \
        "You are not registered - call thatch_chat_register first."
    assert store.send("ses_a", "ghost-00001", "hi").error == \
        'No registered session named "ghost-00001". Use thatch_chat_list to see who is available.'
    assert store.send("ses_a", "ses_a", "hi").error == "You cannot message yourself."
    store.unregister("ses_b")
    assert store.send("ses_a", "ses_b", "hi").error == \
        'No registered session named "ses_b". Use thatch_chat_list to see who is available.'
    assert store.conn.execute("SELECT COUNT(*) FROM chat_messages").fetchone()[0] == 0


@pytest.mark.rules("R9", "R14")
def test_send_by_name_case_insensitive_trims_and_states_liveness(store):
    """R9, R14: name lookup ignores case, body is trimmed, exactly 10000 chars
    is accepted, and recipient_stale follows the single staleness rule."""
    with freeze_time(T0) as clock:
        store.register("ses_a")
        b = store.register("ses_b").name
        r = store.send("ses_a", b.upper(), "  hello  ")
        assert r.ok and r.recipient.session_id == "ses_b" and r.recipient_stale is False
        assert store.conn.execute("SELECT body, created_at FROM chat_messages").fetchone() == \
            ("hello", T0)
        assert store.send("ses_a", "ses_b", "y" * MAX_BODY_LEN).ok
        clock.tick(60)
        assert store.send("ses_a", b, "edge").recipient_stale is False
        clock.tick(1)
        assert store.send("ses_a", b, "ghost").recipient_stale is True


# ----------------------------------------------------------------------
# Broadcast
# ----------------------------------------------------------------------

@pytest.mark.rules("R12", "R35")
def test_broadcast_skips_stale_opencode_but_not_mcp(store):
    """R12, R35: one row per other live session, via_broadcast=1, sender
    excluded, stale opencode rows skipped and reported, mcp rows always receive."""
    with freeze_time(T0) as clock:
        names = {s: store.register(s, kind=k).name for s, k in
                 [("ses_old", "opencode"), ("mcp_old", "mcp")]}
        clock.tick(120)
        names.update({s: store.register(s).name for s in ("ses_a", "ses_b")})
        r = store.broadcast("ses_a", " all hands ")
    assert r.ok
    assert set(r.recipients) == {names["ses_b"], names["mcp_old"]}
    assert r.skipped == (names["ses_old"],)
    rows = store.conn.execute("SELECT id, from_session, to_session, body, via_broadcast"
                              " FROM chat_messages ORDER BY id").fetchall()
    assert {r_[2] for r_ in rows} == {"ses_b", "mcp_old"}
    assert all(r_[1] == "ses_a" and r_[3] == "all hands" and r_[4] == 1 for r_ in rows)
    assert r.message_ids == tuple(r_[0] for r_ in rows)
    assert store.broadcast("ses_zz", "x").error == "You are not registered - call thatch_chat_register first."
    assert store.broadcast("ses_a", "").error == "Message body cannot be empty."


def _broadcast_and_die(path):
    die_with_parent()
    conn = open_db(path)
    store = ChatStore(conn)
    inserts = []

    def trace(sql):
        if sql.lstrip().upper().startswith("INSERT INTO CHAT_MESSAGES"):
            inserts.append(sql)
            if len(inserts) == 3:
                save_coverage()
                os.kill(os.getpid(), signal.SIGKILL)

    conn.set_trace_callback(trace)
    store.broadcast("ses_0", "fan-out")
    os._exit(3)  # not reached: the kill lands on the 3rd insert


@pytest.mark.rules("R12")
def test_broadcast_all_or_nothing_across_sigkill(db_path):
    """R12 (P8): a process SIGKILLed on the 3rd INSERT of a 5-recipient
    broadcast leaves zero broadcast rows; the next broadcast lands whole."""
    conn = open_db(db_path)
    store = ChatStore(conn)
    for i in range(6):
        store.register(f"ses_{i}")
    conn.close()  # no connection open across the fork
    assert run_children(_broadcast_and_die, [(str(db_path),)]) == [-signal.SIGKILL]
    conn = open_db(db_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT COUNT(*) FROM chat_messages").fetchone()[0] == 0
    r = ChatStore(conn).broadcast("ses_0", "again")
    assert len(r.recipients) == 5
    assert conn.execute("SELECT COUNT(*) FROM chat_messages WHERE via_broadcast = 1").fetchone()[0] == 5
    conn.close()


# ----------------------------------------------------------------------
# Read, status, notifications, feed
# ----------------------------------------------------------------------

@pytest.mark.rules("R10", "R11")
def test_read_oldest_first_and_departed_sender(store):
    """R10, R11: oldest first, stamped once, a departed sender renders as
    unknown (<id[:12]>, departed), history survives the sender's leave."""
    with freeze_time(T0):
        store.register("ses_reader")
        a = store.register("ses_aaaaaaaaaaaaaaaa").name
        store.send("ses_aaaaaaaaaaaaaaaa", "ses_reader", "first")
        store.send("ses_aaaaaaaaaaaaaaaa", "ses_reader", "second")
        store.unregister("ses_aaaaaaaaaaaaaaaa")
        items = store.read("ses_reader")
    assert [i.body for i in items] == ["first", "second"]
    assert [i.id for i in items] == sorted(i.id for i in items)
    assert items[0].from_name == "unknown (ses_aaaaaaaa, departed)" != a
    assert items[0].created_at == T0
    assert store.read("ses_reader") == []
    assert store.conn.execute("SELECT COUNT(*), MIN(read_at) FROM chat_messages").fetchone() == (2, T0)


@pytest.mark.rules("R10")
def test_read_stamps_only_selected_rows(db_path):
    """R10: a message inserted by another connection between read's SELECT and
    its stamp stays unread (and is returned by the next read)."""
    conn, other = open_db(db_path), open_db(db_path)
    reader, sender = ChatStore(conn), ChatStore(other, rng=random.Random(5))
    reader.register("ses_r")
    sender.register("ses_s")
    sender.send("ses_s", "ses_r", "before")
    seen = {"select": False, "fired": False}

    def trace(sql):
        if sql.startswith("SELECT m.id"):
            seen["select"] = True
        elif seen["select"] and sql.startswith("BEGIN IMMEDIATE") and not seen["fired"]:
            seen["fired"] = True
            assert sender.send("ses_s", "ses_r", "between").ok

    conn.set_trace_callback(trace)
    first = reader.read("ses_r")
    conn.set_trace_callback(None)
    assert seen["fired"], "the race window was never reached"
    assert [i.body for i in first] == ["before"]
    assert reader.unread_count("ses_r") == 1
    assert [i.body for i in reader.read("ses_r")] == ["between"]
    conn.close()
    other.close()


@pytest.mark.rules("R10")
def test_concurrent_readers_never_return_one_message_twice(db_path):
    """R10 (P5): if another reader stamps a selected row first, this read
    does not return it again."""
    conn, other = open_db(db_path), open_db(db_path)
    s1, s2 = ChatStore(conn), ChatStore(other)
    s1.register("ses_r")
    s1.register("ses_s")
    for body in ("one", "two"):
        s1.send("ses_s", "ses_r", body)
    stolen = []

    def trace(sql):
        if sql.startswith("BEGIN IMMEDIATE") and not stolen:
            stolen.extend(s2.read("ses_r"))

    conn.set_trace_callback(trace)
    mine = s1.read("ses_r")
    conn.set_trace_callback(None)
    assert [i.body for i in stolen] == ["one", "two"] and mine == []
    conn.close()
    other.close()


@pytest.mark.rules("R34")
def test_status_touches_and_counts(store):
    """R34: registered flag, pending and total; last_seen touched."""
    with freeze_time(T0) as clock:
        assert store.status("ses_r").registered is False
        store.register("ses_r")
        store.register("ses_s")
        for body in ("a", "b", "c"):
            store.send("ses_s", "ses_r", body)
        store.read("ses_r")
        store.send("ses_s", "ses_r", "d")
        clock.tick(300)
        st = store.status("ses_r")
        assert (st.registered, st.pending, st.total) == (True, 1, 4)
        assert st.name == store.get("ses_r").name
        assert store.get("ses_r").last_seen == "2026-11-29T13:50:07Z"


@pytest.mark.rules("R13", "R14")
def test_heartbeat_refreshes_only_registered(store):
    """R13, R14: heartbeat stamps last_seen; unknown ids are a no-op."""
    with freeze_time(T0) as clock:
        store.register("ses_a")
        store.register("ses_b")
        clock.tick(100)
        store.heartbeat(["ses_a", "ses_unknown", "ses_a"])
        store.heartbeat([])
        assert store.get("ses_a").last_seen == "2026-11-29T13:46:47Z"
        assert store.get("ses_b").last_seen == T0
        assert store.get("ses_unknown") is None


@pytest.mark.rules("R18", "R21")
def test_pending_notifications_and_renudge(store):
    """R18, R21: unread and never delivered or delivered at/before the cutoff;
    registered recipients only; a re-stamp resets the timer."""
    from thatch_core.clock import iso_minutes_ago
    with freeze_time(T0) as clock:
        store.register("ses_r")
        store.register("ses_s")
        store.register("ses_gone")
        m1 = store.send("ses_s", "ses_r", "one").message_id
        store.send("ses_s", "ses_gone", "lost")
        store.unregister("ses_gone")
        rows = store.pending_notifications(["ses_r", "ses_gone"], iso_minutes_ago(15))
        assert [(r.id, r.to_session, r.from_session) for r in rows] == [(m1, "ses_r", "ses_s")]
        assert rows[0].from_name == store.get("ses_s").name
        store.mark_delivered([m1])
        assert store.pending_notifications(["ses_r"], iso_minutes_ago(15)) == []
        clock.tick(15 * 60)
        assert [r.id for r in store.pending_notifications(["ses_r"], iso_minutes_ago(15))] == [m1]
        store.mark_delivered([m1])
        assert store.pending_notifications(["ses_r"], iso_minutes_ago(15)) == []
        store.unregister("ses_s")
        clock.tick(15 * 60)
        assert store.pending_notifications(["ses_r"], iso_minutes_ago(15))[0].from_name is None
        store.read("ses_r")
        assert store.pending_notifications(["ses_r"], iso_minutes_ago(15)) == []
        assert store.pending_notifications([], iso_minutes_ago(15)) == []


@pytest.mark.rules("R28", "R12")
def test_message_feed_and_pending_by_project(store):
    """R28, R12: feed rows oldest first with rendered names and the broadcast flag."""
    with freeze_time(T0):
        a = store.register("ses_a", project="p").name
        b = store.register("ses_b", project="p").name
        store.register("ses_c", project="q")
        store.send("ses_a", "ses_b", "direct")
        store.broadcast("ses_c", "fan")
        store.unregister("ses_c")
        feed = store.message_feed()
    assert [(f.from_, f.to, f.via_broadcast, f.body) for f in feed] == [
        (a, b, False, "direct"),
        ("unknown (ses_c, departed)", a, True, "fan"),
        ("unknown (ses_c, departed)", b, True, "fan"),
    ]
    assert store.pending_by_project("p") == sorted([(a, 1), (b, 2)], key=lambda t: t[0])
    assert store.pending_by_project("q") == []


# ----------------------------------------------------------------------
# Prune, continuation, host pids
# ----------------------------------------------------------------------

@pytest.mark.rules("R26", "R2", "R11")
def test_prune_auto_rows_tombstones_and_same_pass_sweep(store):
    """R26, R2, R11: auto rows silent 7 days go (names never reissued, counters
    kept), legacy rows stay, tombstones age out; in the same pass, unread mail
    older than the cutoff to any recipient not in the directory (pruned now, or
    gone by a leave) is swept, as the real thatch does. Read mail and mail to a
    registered recipient stay."""
    with freeze_time(T0) as clock:
        old = store.register("ses_old").name
        store.register("ses_legacy", auto=False)
        store.register("ses_leaver")
        store.register("ses_live")
        store.send("ses_live", "ses_old", "unread to pruned")
        store.send("ses_live", "ses_leaver", "unread to leaver")
        store.send("ses_live", "ses_old", "read to pruned")
        store.send("ses_old", "ses_live", "unread to the living")
        store.conn.execute("UPDATE chat_messages SET read_at = ? WHERE body = 'read to pruned'", (T0,))
        store.unregister("ses_leaver")
        counters_before = dict(store.conn.execute("SELECT base, next FROM chat_name_counters"))
        clock.tick(7 * 86400)
        store.heartbeat(["ses_live"])
        assert store.prune() == PruneResult(pruned=(), expired_tombstones=(), swept_messages=0)  # exactly 7 days
        clock.tick(1)
        first = store.prune()
        assert first.pruned == ("ses_old",) and first.swept_messages == 2
        assert first.expired_tombstones == ("ses_leaver",)
        assert store.get("ses_legacy") is not None and store.get("ses_old") is None
        bodies = {r[0] for r in store.conn.execute("SELECT body FROM chat_messages")}
        assert bodies == {"read to pruned", "unread to the living"}
        assert store.prune().swept_messages == 0
        assert dict(store.conn.execute("SELECT base, next FROM chat_name_counters")) == counters_before
        newcomers = {ChatStore(store.conn, rng=random.Random(0)).register(f"n{i}").name
                     for i in range(20)}
        assert old not in newcomers


@pytest.mark.rules("R26", "R11")
def test_young_mail_to_an_absent_recipient_waits_for_the_moving_cutoff(store):
    """R26, R11: unread mail to a session that left is kept while it is younger
    than the 7-day cutoff and swept by the first pass after it ages past it."""
    with freeze_time(T0) as clock:
        store.register("ses_a")
        store.register("ses_b")
        store.send("ses_a", "ses_b", "while you were out")
        store.unregister("ses_b")
        clock.tick(7 * 86400)
        store.heartbeat(["ses_a"])
        assert store.prune().swept_messages == 0  # exactly 7 days old: not older than the cutoff
        clock.tick(1)
        assert store.prune().swept_messages == 1
        assert store.conn.execute("SELECT COUNT(*) FROM chat_messages").fetchone()[0] == 0


@pytest.mark.rules("R26", "R5", "R6")
def test_pruned_session_that_returns_gets_a_fresh_name(store):
    """R26, R5, R6: a pruned session that comes back registers under a fresh
    name (seed 001; never a name claim); its mail older than the cutoff went in
    the pruning pass, younger mail is addressed to a registered session again
    and stays."""
    with freeze_time(T0) as clock:
        old = store.register("ses_p").name
        store.register("ses_s")
        store.send("ses_s", "ses_p", "long ago")
        clock.tick(7 * 86400 + 3600)
        store.heartbeat(["ses_s"])
        store.send("ses_s", "ses_p", "recent")
        clock.tick(3600)
        pass_ = store.prune()
        assert pass_.pruned == ("ses_p",) and pass_.swept_messages == 1
        back = store.register("ses_p")
        assert back.drawn and back.name != old
        clock.tick(3600)
        assert store.prune().swept_messages == 0
        assert [i.body for i in store.read("ses_p")] == ["recent"]


@pytest.mark.rules("R3", "R26")
def test_legacy_rows_after_upgrade_kept_and_topic_frozen(db_path):
    """R3, R26: rows from the old schema are legacy: prune keeps them and a
    title never replaces their topic; reclaim keeps the old name."""
    import sqlite3
    c = sqlite3.connect(db_path)
    c.executescript(
        "CREATE TABLE chat_sessions (session_id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
        " topic TEXT, project TEXT, host_kind TEXT NOT NULL DEFAULT 'opencode',"
        " registered_at TEXT NOT NULL, last_seen TEXT NOT NULL);"
        "INSERT INTO chat_sessions VALUES ('ses_l', 'Landru', 'old topic', NULL, 'opencode',"
        " '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z');")
    c.close()
    conn = open_db(db_path)
    store = ChatStore(conn)
    with freeze_time(T0):
        assert store.prune().pruned == ()
        r = store.register("ses_l", title="A brand new title")
        assert r.reclaimed and r.name == "Landru" and r.topic == "old topic"
        store.refresh_topic("ses_l", "Another title")
    assert store.get("ses_l").topic == "old topic" and store.get("ses_l").auto is False
    conn.close()


@pytest.mark.rules("R33")
def test_continue_session_moves_identity_mail_pids_tombstones(store):
    """R33 (P9): name, mail in both columns, host-pid anchors and tombstones
    follow the new id in one transaction; refusals change nothing."""
    with freeze_time(T0):
        name = store.register("old").name
        store.register("peer")
        store.send("peer", "old", "to old")
        store.send("old", "peer", "from old")
        store.record_host_pid(4242, "old")
        store.conn.execute("INSERT INTO chat_leave_tombstones VALUES ('old', ?)", (T0,))
        assert store.continue_session("nobody", "new") is False
        assert store.continue_session("old", "peer") is False
        assert store.continue_session("old", "old") is False
        assert store.continue_session("old", "new") is True
        assert store.get("old") is None and store.get("new").name == name
        assert store.resolve_host_pid(4242) == "new"
        assert store.has_tombstone("new") and not store.has_tombstone("old")
        assert [i.body for i in store.read("new")] == ["to old"]
        assert store.conn.execute(
            "SELECT COUNT(*) FROM chat_messages WHERE 'old' IN (from_session, to_session)").fetchone()[0] == 0
        assert store.send("new", "peer", "hi").ok


@pytest.mark.rules("R32")
def test_host_pid_upsert_and_freshness(store):
    """R32: the ppid mapping is upserted and trusted only within 600 s, and only
    while its session has a directory row (the lookup joins chat_sessions)."""
    with freeze_time(T0) as clock:
        store.register("ses_a")
        store.register("ses_b")
        store.record_host_pid(100, "ses_a")
        clock.tick(300)
        store.record_host_pid(100, "ses_b")
        assert store.conn.execute("SELECT ppid, session_id, seen_at FROM chat_host_pids").fetchall() == [
            (100, "ses_b", "2026-11-29T13:50:07Z")]
        clock.tick(600)
        assert store.resolve_host_pid(100) == "ses_b"
        clock.tick(1)
        assert store.resolve_host_pid(100) is None
        assert store.resolve_host_pid(999) is None


@pytest.mark.rules("R32", "R7")
def test_host_pid_anchor_to_a_session_without_a_row_resolves_to_nothing(store):
    """R32, R7: an anchor whose session left (or never registered) resolves to
    nothing, as in the real thatch; the anchor row itself is kept."""
    with freeze_time(T0):
        store.register("ses_a")
        store.record_host_pid(100, "ses_a")
        store.record_host_pid(200, "ses_never")
        assert store.resolve_host_pid(100) == "ses_a" and store.resolve_host_pid(200) is None
        store.unregister("ses_a")
        assert store.resolve_host_pid(100) is None
        assert store.conn.execute("SELECT COUNT(*) FROM chat_host_pids").fetchone()[0] == 2


@pytest.mark.rules("R16")
def test_list_sessions_and_find(store):
    """R16: every registered row is listed; find takes an id or a name in any case."""
    a = store.register("ses_a").name
    store.register("mcp_b", kind="mcp")
    assert {r.session_id for r in store.list_sessions()} == {"ses_a", "mcp_b"}
    assert store.find(a.upper()).session_id == "ses_a"
    assert store.find("mcp_b").host_kind == "mcp"
    assert store.find("nobody") is None


@pytest.mark.rules("R9", "R16")
def test_find_resolves_the_name_before_the_id(store):
    """R9, R16: find tries the display name first, then the session id, as the
    real thatch does. Assigned names never contain `_` and ids do, so the order
    only shows with a legacy free-text name spelled like another session's id:
    the name wins."""
    store.register("ses_x")
    store.conn.execute(
        "INSERT INTO chat_sessions (session_id, name, auto, registered_at, last_seen)"
        " VALUES ('ses_legacy', 'SES_X', 0, ?, ?)", (T0, T0))
    assert store.find("ses_x").session_id == "ses_legacy"
    assert store.find("ses_legacy").session_id == "ses_legacy"
    assert store.find(store.get("ses_x").name).session_id == "ses_x"


@pytest.mark.rules("R2")
def test_minted_name_colliding_with_legacy_name_is_skipped(store):
    """R2: if a draw lands on a name a legacy row already holds (any case),
    that number is burned and another draw is made; nothing is reissued."""
    first_base = random.Random(0).choice(NAME_POOL)
    store.conn.execute(
        "INSERT INTO chat_sessions (session_id, name, auto, registered_at, last_seen)"
        " VALUES ('ses_legacy', ?, 0, ?, ?)", (f"{first_base.upper()}-00001", T0, T0))
    r = store.register("ses_new")
    assert r.ok and r.name.casefold() != f"{first_base}-00001"
    assert store.conn.execute("SELECT next FROM chat_name_counters WHERE base = ?",
                              (first_base,)).fetchone()[0] >= 2  # number 1 was burned
    assert store.get("ses_legacy").name == f"{first_base.upper()}-00001"


@pytest.mark.rules("R33", "R7", "R11")
def test_continue_session_carries_a_left_session(store):
    """R33, R7, R11: an ancestor that LEFT (tombstone, no row) still moves in
    one transaction: the tombstone, mail in both columns and host-pid anchors
    follow the new id, and both ids leave chat_pruned; nothing is registered."""
    with freeze_time(T0):
        store.register("old")
        store.register("peer")
        store.send("peer", "old", "to old")
        store.send("old", "peer", "from old")
        store.record_host_pid(777, "old")
        assert store.unregister("old") is True
        store.conn.execute("INSERT INTO chat_pruned VALUES ('old', ?)", (T0,))
        assert store.continue_session("old", "new") is True
    assert store.get("new") is None and store.get("old") is None
    assert store.has_tombstone("new") and not store.has_tombstone("old")
    assert store.register("new").tombstoned  # the leave sticks across the fork
    pairs = {(f.from_session, f.to_session) for f in store.message_feed()}
    assert pairs == {("peer", "new"), ("new", "peer")}
    assert store.conn.execute("SELECT session_id FROM chat_host_pids WHERE ppid = 777").fetchall() == [("new",)]
    with freeze_time(T0):
        assert store.resolve_host_pid(777) is None  # no directory row behind the anchor
    assert store.conn.execute("SELECT COUNT(*) FROM chat_pruned").fetchone()[0] == 0


@pytest.mark.rules("R33")
def test_continue_session_never_overwrites_a_known_identity(store):
    """R33: False, changing nothing, when the new id is registered or left,
    when the old id is unknown, or when the ids are unusable."""
    store.register("old")
    store.register("taken")
    store.unregister("gone_old")
    store.unregister("left_new")
    before = store.conn.execute("SELECT * FROM chat_sessions ORDER BY session_id").fetchall()
    for old, new in [("old", "taken"), ("old", "left_new"), ("gone_old", "taken"),
                     ("nobody", "fresh"), ("old", "old"), (None, "fresh"), ("old", 42), ("", "x")]:
        assert store.continue_session(old, new) is False, (old, new)
    assert store.conn.execute("SELECT * FROM chat_sessions ORDER BY session_id").fetchall() == before
    assert store.has_tombstone("gone_old") and store.has_tombstone("left_new")
    assert not store.has_tombstone("fresh")


@pytest.mark.rules("R9", "R8")
def test_bad_argument_types_get_refusals_not_type_errors(store):
    """R9, R8: None or non-text bodies, non-str names and ids, negative or
    non-int ids are refused (or answered as "no such session") with the
    design's texts; nothing raises and nothing is written."""
    store.register("ses_a")
    b = store.register("ses_b").name
    assert store.send("ses_a", b, None).error == "Message body cannot be empty."
    assert store.send("ses_a", b, 42).error == "Message body must be text."
    assert store.broadcast("ses_a", ["x"]).error == "Message body must be text."
    assert store.send(None, b, "hi").error == "You are not registered - call thatch_chat_register first."
    assert store.send(7, b, "hi").error == "You are not registered - call thatch_chat_register first."
    assert store.send("ses_a", None, "hi").error == \
        'No registered session named "". Use thatch_chat_list to see who is available.'
    assert store.send("ses_a", 12, "hi").error == \
        'No registered session named "12". Use thatch_chat_list to see who is available.'
    assert store.broadcast(None, "hi").error == "You are not registered - call thatch_chat_register first."
    for bad in (None, 5, "", "   ", ["ses_a"]):
        assert store.register(bad).error == "A session id is required to register."
        assert store.get(bad) is None and store.find(bad) is None
        assert store.has_tombstone(bad) is False and store.unregister(bad) is False
        assert store.read(bad) == [] and store.unread_count(bad) == 0
        assert store.status(bad).registered is False
    assert store.register("ses_c", kind=None).error == 'Unknown host kind "None" (expected one of: opencode, mcp).'
    odd = store.register("ses_d", title=123, project=["p"], directory=object())
    assert odd.ok and odd.topic is None and store.get("ses_d").project is None
    store.refresh_topic("ses_d", 99)
    store.refresh_topic(None, "A title")
    assert store.record_host_pid(-1, "ses_a") is False
    assert store.record_host_pid(True, "ses_a") is False
    assert store.record_host_pid("12", "ses_a") is False
    assert store.record_host_pid(12, None) is False
    assert store.resolve_host_pid(-1) is None and store.resolve_host_pid("x") is None
    store.mark_delivered([-1, None, "x", 0])
    store.mark_delivered(5)
    store.heartbeat(None)
    store.heartbeat(42)
    assert store.pending_notifications(None, "x") == []
    assert store.pending_by_project(None) == []
    assert store.conn.execute("SELECT COUNT(*) FROM chat_messages").fetchone()[0] == 0
    assert store.conn.execute("SELECT COUNT(*) FROM chat_leave_tombstones").fetchone()[0] == 0
    assert store.conn.execute("SELECT COUNT(*) FROM chat_host_pids").fetchone()[0] == 0


@pytest.mark.rules("R13", "R18")
def test_bare_string_ids_are_one_id(store):
    """R13, R18: heartbeat and pending_notifications take a bare session id as
    one id (not its characters); a non-string cutoff selects only mail that
    was never delivered."""
    with freeze_time(T0) as clock:
        store.register("ses_a")
        store.register("ses_b")
        clock.tick(100)
        store.heartbeat("ses_a")
        assert store.get("ses_a").last_seen == "2026-11-29T13:46:47Z"
        m = store.send("ses_b", "ses_a", "x").message_id
        assert [r.id for r in store.pending_notifications("ses_a", None)] == [m]
        store.mark_delivered(m)
        clock.tick(3600)
        assert store.pending_notifications("ses_a", None) == []


ODD_ARGS = (None, 5, -1, 0, "", "  ", [], {}, object(), b"bytes", 1.5, True, ["ses_a"],
            "ses_a", ("x",), "\0")


def test_no_argument_makes_a_store_method_raise(store):
    """Every public ChatStore method, fed every combination of odd positional
    arguments (and each odd keyword value), answers instead of raising:
    refusals and "no such session", never a TypeError or a sqlite3 error."""
    import inspect
    import itertools
    store.register("ses_a")
    store.register("ses_b")
    calls = 0
    for name, fn in inspect.getmembers(ChatStore, inspect.isfunction):
        if name.startswith("_"):
            continue
        params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
        pos = [p for p in params if p.default is p.empty]
        for combo in itertools.product(ODD_ARGS, repeat=len(pos)):
            getattr(store, name)(*combo)
            calls += 1
        for p in params:
            if p.default is not p.empty:
                for value in ODD_ARGS:
                    getattr(store, name)(*["ses_new"] * len(pos), **{p.name: value})
                    calls += 1
    assert calls > 5000
    assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
