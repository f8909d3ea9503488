"""ChatPoller against a real temp-dir SQLite store, time under freezegun."""

import threading

import pytest

from thatch_core.db import StoreBusy, open_db
from thatch_core.poller import ChatPoller
from thatch_core.store import ChatStore


@pytest.fixture
def store(tmp_path, frozen):
    conn = open_db(tmp_path / "thatch.db")
    yield ChatStore(conn)
    conn.close()


class Host:
    """The poller's collaborators: hosted set, gate and a recording deliver."""

    def __init__(self, hosted=(), idle=None):
        self.hosted = list(hosted)
        self.idle = set(self.hosted) if idle is None else set(idle)
        self.prompts = []  # (session_id, senders, count)
        self.fail = False
        self.logs = []

    def deliver(self, sid, senders, count):
        if self.fail:
            raise RuntimeError("promptAsync refused")
        self.prompts.append((sid, list(senders), count))

    def poller(self, store, **kw):
        return ChatPoller(
            store, hosted_sessions=lambda: self.hosted, deliver=self.deliver,
            can_deliver=lambda sid: sid in self.idle, log=self.logs.append, **kw,
        )


def reg(store, sid):
    return store.register(sid, project="p", directory=None).name


def delivered_at(store, mid):
    return store.conn.execute("SELECT delivered_at FROM chat_messages WHERE id = ?", (mid,)).fetchone()[0]


@pytest.mark.rules("R13", "R25")
def test_poll_heartbeats_hosted_then_delivers(store, frozen):
    """R13, R25: one cycle beats the hosted sessions and wakes them; a session
    registered elsewhere (not hosted) is neither beaten nor prompted."""
    a, b, c = "ses_a", "ses_b", "ses_c"
    for s in (a, b, c):
        reg(store, s)
    store.send(a, b, "hello b")
    store.send(a, c, "hello c")
    frozen.tick(45)
    host = Host(hosted=[b])
    host.poller(store).poll()
    assert store.get(b).last_seen == "2026-11-29T12:00:45Z"
    assert store.get(c).last_seen == "2026-11-29T12:00:00Z"
    assert [p[0] for p in host.prompts] == [b]


@pytest.mark.rules("R20", "R21")
def test_one_prompt_per_recipient_dedup_senders_then_stamp(store, frozen):
    """R20, R21: one wake per recipient covering all its pending mail, sender
    names deduplicated (first-seen order), count = messages; then stamped."""
    a, b, c = "ses_a", "ses_b", "ses_c"
    na, nb, _ = reg(store, a), reg(store, b), reg(store, c)
    ids = [store.send(a, c, "1").message_id, store.send(b, c, "2").message_id,
           store.send(a, c, "3").message_id]
    host = Host(hosted=[c])
    host.poller(store).deliver_pending()
    assert host.prompts == [(c, [na, nb], 3)]
    assert all(delivered_at(store, m) == "2026-11-29T12:00:00Z" for m in ids)
    host.poller(store).deliver_pending()
    assert len(host.prompts) == 1  # stamped: not due again yet


@pytest.mark.rules("R20", "R10")
def test_departed_sender_rendered(store):
    """R20, R10: a sender who left renders as unknown (<id[:12]>, departed)."""
    reg(store, "ses_0123456789abcdef")
    reg(store, "ses_b")
    store.send("ses_0123456789abcdef", "ses_b", "bye")
    store.unregister("ses_0123456789abcdef")
    host = Host(hosted=["ses_b"])
    host.poller(store).deliver_pending()
    assert host.prompts == [("ses_b", ["unknown (ses_01234567, departed)"], 1)]


@pytest.mark.rules("R18")
def test_renudge_after_15_minutes_and_restamp(store, frozen):
    """R18, R21: delivered-but-unread mail is due again after 15 min, and the
    re-stamp restarts the window; read mail never is."""
    reg(store, "ses_a"), reg(store, "ses_b")
    mid = store.send("ses_a", "ses_b", "ping").message_id
    host = Host(hosted=["ses_b"])
    p = host.poller(store)
    p.deliver_pending()
    frozen.tick(14 * 60 + 59)
    p.deliver_pending()
    assert len(host.prompts) == 1
    frozen.tick(1)
    p.deliver_pending()
    assert len(host.prompts) == 2
    assert delivered_at(store, mid) == "2026-11-29T12:15:00Z"
    store.read("ses_b")
    frozen.tick(3600)
    p.deliver_pending()
    assert len(host.prompts) == 2


@pytest.mark.rules("R18")
def test_unregistered_recipient_gets_no_wake(store):
    """R18: only registered recipients are woken (unregister stops wakes for kept mail)."""
    reg(store, "ses_a"), reg(store, "ses_b")
    store.send("ses_a", "ses_b", "x")
    store.unregister("ses_b")
    host = Host(hosted=["ses_b"])
    host.poller(store).poll()
    assert host.prompts == []


@pytest.mark.rules("R19")
def test_gate_and_failed_delivery_stay_pending(store):
    """R19: busy/compacting recipients and failed deliveries stay pending and retry."""
    reg(store, "ses_a"), reg(store, "ses_b")
    mid = store.send("ses_a", "ses_b", "x").message_id
    host = Host(hosted=["ses_b"], idle=[])
    p = host.poller(store)
    p.deliver_pending()
    assert host.prompts == [] and delivered_at(store, mid) is None
    host.idle.add("ses_b")
    host.fail = True
    p.deliver_pending()
    assert delivered_at(store, mid) is None
    assert any("delivery to ses_b failed" in m for m in host.logs)
    assert p.nudge_count("ses_b") == 0  # a failed prompt is not counted
    host.fail = False
    p.deliver_pending()
    assert host.prompts == [("ses_b", [store.get("ses_a").name], 1)]


@pytest.mark.rules("R22")
def test_rate_cap_per_recipient_and_in_memory(store, frozen):
    """R22: the cap counts per recipient (one capped recipient does not block
    another) and lives in memory (a restarted process starts a fresh count)."""
    for s in ("ses_a", "ses_b", "ses_c"):
        reg(store, s)
    store.send("ses_a", "ses_b", "x")
    host = Host(hosted=["ses_b", "ses_c"])
    p = host.poller(store, renudge_minutes=0)
    for _ in range(8):
        p.deliver_pending()
        frozen.tick(60)
    assert [x[0] for x in host.prompts] == ["ses_b"] * 6
    store.send("ses_a", "ses_c", "y")
    p.deliver_pending()
    assert host.prompts[-1][0] == "ses_c"
    fresh = Host(hosted=["ses_b"])
    fresh.poller(store, renudge_minutes=0).deliver_pending()
    assert [x[0] for x in fresh.prompts] == ["ses_b"]


@pytest.mark.rules("R22")
def test_rate_cap_exact_window(store, frozen):
    """R22: the 7th wake inside one hour is refused; it goes out once the
    first wake is an hour old."""
    reg(store, "ses_a"), reg(store, "ses_b")
    host = Host(hosted=["ses_b"])
    p = host.poller(store, renudge_minutes=0)
    store.send("ses_a", "ses_b", "x")
    for _ in range(7):
        p.deliver_pending()
        frozen.tick(60)
    assert len(host.prompts) == 6
    frozen.move_to("2026-11-29 12:59:59")
    p.deliver_pending()
    assert len(host.prompts) == 6
    frozen.move_to("2026-11-29 13:00:00")
    p.deliver_pending()
    assert len(host.prompts) == 7


class FlakyStampStore(ChatStore):
    """A real store whose next mark_delivered raises (a crash point before the stamp)."""

    fail_stamps = 0

    def mark_delivered(self, ids):
        if self.fail_stamps:
            self.fail_stamps -= 1
            raise StoreBusy("database stayed locked during mark_delivered")
        return super().mark_delivered(ids)


@pytest.mark.rules("R23", "R21", "R24")
def test_stamp_failure_renudges_same_batch_and_counts(tmp_path, frozen):
    """R23, R21, R24: a deliver that succeeds then a mark_delivered that raises:
    the failure is logged, the nudge was counted, the same batch is re-nudged
    on the next cycle."""
    store = FlakyStampStore(open_db(tmp_path / "thatch.db"))
    reg(store, "ses_a"), reg(store, "ses_b")
    store.send("ses_a", "ses_b", "1"), store.send("ses_a", "ses_b", "2")
    store.fail_stamps = 1
    host = Host(hosted=["ses_b"])
    p = host.poller(store)
    p.poll()
    assert len(host.prompts) == 1 and p.nudge_count("ses_b") == 1
    assert any("delivered-stamp" in m for m in host.logs)
    frozen.tick(30)
    p.poll()
    assert host.prompts[1] == host.prompts[0]  # same batch, again
    assert p.nudge_count("ses_b") == 2
    frozen.tick(30)
    p.poll()
    assert len(host.prompts) == 2  # stamped now
    store.conn.close()


@pytest.mark.rules("R24")
def test_reentrant_calls_are_dropped(store):
    """R24: a deliver_pending re-entered from inside a delivery (the host's idle
    event) and a poll re-entered from inside a poll are dropped."""
    reg(store, "ses_a"), reg(store, "ses_b"), reg(store, "ses_c")
    store.send("ses_a", "ses_b", "x")
    store.send("ses_a", "ses_c", "y")
    host = Host(hosted=["ses_b", "ses_c"])
    p = host.poller(store)
    inner = []

    def deliver(sid, senders, count):
        host.prompts.append((sid, senders, count))
        p.deliver_pending()  # re-entrant: dropped
        p.poll()             # poll re-entered while its own cycle runs: dropped
        inner.append(sid)

    p._deliver = deliver
    p.poll()
    assert [x[0] for x in host.prompts] == ["ses_b", "ses_c"]
    assert inner == ["ses_b", "ses_c"]


@pytest.mark.rules("R24")
def test_overlapping_cycle_from_another_thread_dropped(store):
    """R24: a cycle started while another thread's cycle is mid-delivery is dropped."""
    reg(store, "ses_a"), reg(store, "ses_b")
    store.send("ses_a", "ses_b", "x")
    host = Host(hosted=["ses_b"])
    entered, release = threading.Event(), threading.Event()

    def slow(sid, senders, count):
        host.prompts.append(sid)
        entered.set()
        release.wait(5)

    p = host.poller(store)
    p._deliver = slow
    t = threading.Thread(target=p.poll)
    t.start()
    assert entered.wait(5)
    p.poll()
    p.deliver_pending()
    release.set()
    t.join(5)
    assert host.prompts == ["ses_b"]


class BrokenStore:
    """Every call raises like a locked database."""

    def __getattr__(self, name):
        def boom(*a, **k):
            raise StoreBusy(f"database stayed locked during {name}")
        return boom


@pytest.mark.rules("R24", "R26")
def test_store_failures_are_logged_and_next_cycle_retries(store, frozen):
    """R24, R26: heartbeat, query and prune failures are logged, never raised;
    a failed prune is retried on the next cycle."""
    host = Host(hosted=["ses_b"])
    p = host.poller(BrokenStore())
    p.poll()
    assert any("heartbeat failed" in m for m in host.logs)
    assert any("query failed" in m for m in host.logs)
    assert any("prune failed" in m for m in host.logs)
    p.store = store
    reg(store, "ses_a"), reg(store, "ses_b")
    store.send("ses_a", "ses_b", "x")
    p.poll()
    assert len(host.prompts) == 1


class CountingPrune(ChatStore):
    prunes = 0

    def prune(self):
        self.prunes += 1
        return super().prune()


@pytest.mark.rules("R26")
def test_prune_sweep_first_poll_then_hourly(tmp_path, frozen):
    """R26: prune runs on the first poll, then once PRUNE_INTERVAL_MS has passed."""
    store = CountingPrune(open_db(tmp_path / "thatch.db"))
    p = Host().poller(store)
    p.poll()
    assert store.prunes == 1
    frozen.tick(59 * 60)
    p.poll()
    assert store.prunes == 1
    frozen.tick(60)
    p.poll()
    assert store.prunes == 2
    store.conn.close()


@pytest.mark.rules("R13")
def test_real_timer_start_stop():
    """R13: start() arms a daemon repeating timer that runs poll(); stop() disarms it."""
    ticks = threading.Semaphore(0)

    class Beats:
        def heartbeat(self, ids):
            ticks.release()

        def pending_notifications(self, ids, cutoff):
            return []

        def prune(self):
            return None

    p = ChatPoller(Beats(), hosted_sessions=lambda: ["s"], deliver=lambda *a: None,
                   can_deliver=lambda s: True, poll_interval_ms=10)
    p.start()
    assert p.running
    assert ticks.acquire(timeout=2) and ticks.acquire(timeout=2)
    p.dispose()
    assert not p.running
