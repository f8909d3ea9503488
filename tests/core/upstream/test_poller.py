"""The real suite's "ChatPoller" block: alice and bob registered, bob hosted."""

from __future__ import annotations

import pytest

from thatch_core import clock
from thatch_core.constants import AUTO_TTL_DAYS, DAY_MS
from thatch_core.names import render_participant
from thatch_core.policy import LATER
from thatch_core.poller import ChatPoller
from thatch_core.staleness import is_stale

OLD = "2020-01-01T00:00:00Z"
BOB = "ba-sil-00001"


class Host:
    """The poller's collaborators as the real block wires them: a hosted list,
    a gate that opens on demand, and a recording deliver."""

    def __init__(self):
        self.hosted = ["ses_b"]
        self.gate_open = False
        self.deliveries = []  # (session_id, senders, count)

    def deliver(self, sid, senders, count):
        self.deliveries.append((sid, list(senders), count))

    def poller(self, store, **kw):
        kw.setdefault("can_deliver", lambda sid: self.gate_open and sid in self.hosted)
        kw.setdefault("deliver", self.deliver)
        return ChatPoller(store, hosted_sessions=lambda: list(self.hosted), poll_interval_ms=60_000,
                          log=lambda message: None, **kw)


class FailingStamp:
    """A store whose delivered-stamp write fails; the rest is the real store."""

    def __init__(self, store):
        self.store = store

    def heartbeat(self, ids):
        pass

    def pending_notifications(self, ids, cutoff):
        return self.store.pending_notifications(ids, cutoff)

    def mark_delivered(self, ids):
        raise RuntimeError("db write failed")

    def prune(self):
        return self.store.prune()


class CountingPrune(FailingStamp):
    """The real store, with its prune calls counted."""

    def __init__(self, store):
        super().__init__(store)
        self.prunes = 0

    def mark_delivered(self, ids):
        self.store.mark_delivered(ids)

    def prune(self):
        self.prunes += 1
        return self.store.prune()


@pytest.fixture
def host(reg):
    reg("ses_a", "a-corn")
    reg("ses_b", "ba-sil")
    return Host()


@pytest.fixture
def poller(store, host):
    p = host.poller(store)
    yield p
    p.dispose()


def pending(store, sid="ses_b"):
    return store.pending_notifications([sid], clock.iso_minutes_ago(15))


@pytest.mark.rules("R13")
def test_poll_heartbeats_hosted(store, poller, raw):
    """
    "poll heartbeats hosted sessions": after every row is aged, one poll makes
    the hosted session fresh (R13).
    """
    raw.execute("UPDATE chat_sessions SET last_seen = ?", (OLD,))
    poller.poll()
    assert not is_stale(store.get("ses_b"))


@pytest.mark.rules("R19", "R20")
def test_gate_closed_then_idle_delivers(store, host, poller):
    """
    "messages wait while the gate is closed, then deliver when idle": with the
    gate closed a poll delivers nothing; opened, one wake covers both messages
    with the sender named once, and nothing is pending inside the re-nudge
    window (R19, R20).
    """
    store.send("ses_a", BOB, "hello")
    store.send("ses_a", BOB, "again")
    poller.poll()
    assert host.deliveries == []
    host.gate_open = True
    poller.deliver_pending()
    assert host.deliveries == [("ses_b", ["a-corn-00001"], 2)]
    assert pending(store) == []


@pytest.mark.rules("R19")
def test_delivery_failure_leaves_pending(store, host):
    """
    "delivery failure leaves messages pending": a deliver that raises leaves
    the message selectable for the next attempt (R19).
    """
    def refuse(sid, senders, count):
        raise RuntimeError("boom")

    failing = host.poller(store, deliver=refuse, can_deliver=lambda sid: True)
    store.send("ses_a", BOB, "hello")
    failing.deliver_pending()
    assert len(pending(store)) == 1
    failing.dispose()


@pytest.mark.rules("R25")
def test_unhosted_never_delivered(store, host, poller):
    """
    "unhosted sessions are never delivered to": mail for a session this poller
    does not host is left for its own host (R25).
    """
    store.send("ses_b", "a-corn-00001", "for the other process")
    host.gate_open = True
    poller.deliver_pending()
    assert host.deliveries == []
    assert len(pending(store, "ses_a")) == 1


@pytest.mark.rules("R22")
def test_rate_cap_stops_repeats(store, host, raw):
    """
    "the nudge rate cap stops repeated wake prompts": with a cap of one wake
    an hour, a re-opened re-nudge window brings no second wake (R22).
    """
    capped = host.poller(store, can_deliver=lambda sid: True, max_nudges_per_hour=1)
    store.send("ses_a", BOB, "first batch")
    capped.deliver_pending()
    assert len(host.deliveries) == 1
    raw.execute("UPDATE chat_messages SET delivered_at = ?", (OLD,))
    capped.deliver_pending()
    assert len(host.deliveries) == 1
    capped.dispose()


@pytest.mark.rules("R21", "R22")
def test_cap_counts_before_failed_stamp(store, host):
    """
    "the cap counts a nudge even when the delivered_at stamp fails": the wake
    succeeds, the stamp write fails, the mail stays pending, and still the
    next cycle sends no second wake: the nudge was counted before the stamp
    (R21, R22).
    """
    stamp_fails = host.poller(FailingStamp(store), can_deliver=lambda sid: True, max_nudges_per_hour=1)
    store.send("ses_a", BOB, "counted even if the stamp fails")
    stamp_fails.deliver_pending()
    assert len(host.deliveries) == 1
    stamp_fails.deliver_pending()
    assert len(host.deliveries) == 1
    assert len(pending(store)) == 1
    stamp_fails.dispose()


@pytest.mark.rules("R18", "R21")
def test_renudge_after_window(store, host, poller, raw):
    """
    "re-nudges fire after the renudge window passes": once the delivery stamp
    is older than the window, the same unread mail wakes again (R18, R21).
    """
    store.send("ses_a", BOB, "hello")
    host.gate_open = True
    poller.deliver_pending()
    assert len(host.deliveries) == 1
    raw.execute("UPDATE chat_messages SET delivered_at = ?", (OLD,))
    poller.deliver_pending()
    assert len(host.deliveries) == 2


@pytest.mark.rules("R20")
def test_senders_deduplicate(store, host, poller, reg):
    """
    "senders deduplicate across a batch": three messages from two senders make
    one wake naming each sender once, with a count of three (R20).
    """
    reg("ses_c", "ca-ra-mel")
    store.send("ses_a", BOB, "one")
    store.send("ses_c", BOB, "two")
    store.send("ses_a", BOB, "three")
    host.gate_open = True
    poller.deliver_pending()
    sid, senders, count = host.deliveries[0]
    assert sorted(senders) == ["a-corn-00001", "ca-ra-mel-00001"] and count == 3


@pytest.mark.rules("R10", "R20")
def test_departed_sender_in_wake(store, host, poller):
    """
    "a departed sender renders as unknown in the wake prompt": mail from a
    sender that has since left names it ``unknown (ses_a, departed)``, the
    convention the inbox uses (R10, R20).
    """
    store.send("ses_a", BOB, "from a sender about to leave")
    store.unregister("ses_a")
    host.gate_open = True
    poller.deliver_pending()
    assert host.deliveries[-1][1] == [render_participant(None, "ses_a")] == ["unknown (ses_a, departed)"]


@pytest.mark.rules("R26")
def test_hourly_sweep_prunes(store, host, raw, frozen):
    """
    "the poller's hourly sweep prunes stale auto rows": the first poll sweeps
    at once with the 7-day TTL (a row silent a little longer is pruned, one
    silent a little less kept); a poll seconds later does not sweep again (R26).
    """
    now = clock.now_ms()
    raw.execute("UPDATE chat_sessions SET last_seen = ? WHERE session_id = 'ses_a'",
                (clock.iso(now - AUTO_TTL_DAYS * DAY_MS - 60_000),))
    raw.execute("UPDATE chat_sessions SET last_seen = ? WHERE session_id = 'ses_b'",
                (clock.iso(now - int(6.9 * DAY_MS)),))
    counting = CountingPrune(store)
    host.hosted = []
    sweeper = host.poller(counting, can_deliver=lambda sid: True)
    sweeper.poll()
    assert counting.prunes == 1
    assert store.get("ses_a") is None and store.get("ses_b") is not None
    frozen.tick(5)
    sweeper.poll()
    assert counting.prunes == 1
    sweeper.dispose()


@pytest.mark.rules("R13")
def test_start_stop_dispose_timer(poller):
    """
    "start/stop/dispose manage the timer": the poller runs only between start
    and stop; a second start is harmless; dispose leaves it stopped.
    """
    assert poller.running is False
    poller.start()
    assert poller.running is True
    poller.start()
    poller.stop()
    assert poller.running is False
    poller.dispose()
    assert poller.running is False


@pytest.mark.rules("R20")
def test_split_parts_one_nudge(store, host, poller):
    """
    "split parts arrive as ONE grouped nudge, not one per part": under the
    later design a three-part body is three rows, and one poll wakes its
    recipient once, naming the sender once and counting 3 (R20).
    """
    body = "\n\n".join(c * 1_900 for c in "ABC")
    assert len(store.send("ses_a", BOB, body, policy=LATER).message_ids) == 3
    host.gate_open = True
    poller.poll()
    assert host.deliveries == [("ses_b", ["a-corn-00001"], 3)]
