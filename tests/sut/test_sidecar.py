"""The sidecar: a thatch checkout's own ChatStore and ChatPoller, run by bun, behind thatch_core's interface.

Every test here drives the real code (the seed-002 checkout, or $THATCH_SRC) in a real bun process
on a real WAL file that thatch_core created, and reads back with thatch_core's own store.
"""

from __future__ import annotations

import os
import random
import signal

import pytest
from freezegun import freeze_time

from thatch_core.db import StoreError, open_db
from thatch_core.store import ChatStore

from simulator.harness.sidecar import SidecarDied, SidecarPoller, SidecarStore

T0 = "2026-01-05 09:00:00"


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "thatch.db"
    open_db(path).close()
    return path


def sidecar_store(checkout, db, tmp_path, seed=7) -> SidecarStore:
    return SidecarStore(checkout.checkout, db, busy_timeout_ms=5000, seed=seed,
                        stderr_path=tmp_path / f"sidecar-{seed}.stderr")


@pytest.mark.rules("R9", "R10")
def test_what_the_real_code_writes_thatch_core_reads_and_back(checkout, db, tmp_path):
    """R9/R10 across implementations: the real store registers and sends, thatch_core reads the
    mail; thatch_core sends back and the real store drains it, stamping exactly what it returned."""
    real = sidecar_store(checkout, db, tmp_path)
    core = ChatStore(open_db(db), rng=random.Random(1))
    with freeze_time(T0):
        alice = real.register("ses_alice", kind="opencode", project="p")
        bob = core.register("ses_bob", kind="opencode", project="p")
        sent = real.send("ses_alice", bob.name, "  hello bob  ")
        assert sent.ok and sent.recipient.session_id == "ses_bob" and sent.message_id is not None
        [item] = core.read("ses_bob")
        assert (item.body, item.from_name, item.id) == ("hello bob", alice.name, sent.message_id)
        assert core.send("ses_bob", alice.name, "hi alice").ok
        [back] = real.read("ses_alice")
        assert (back.body, back.from_name) == ("hi alice", bob.name)
        assert real.read("ses_alice") == [] and real.unread_count("ses_alice") == 0
    real.close()


@pytest.mark.rules("R9")
def test_refusals_come_from_the_real_code(checkout, db, tmp_path):
    """R9's refusals: the checkout's own refusal texts reach the caller unchanged, never a traceback."""
    real = sidecar_store(checkout, db, tmp_path)
    with freeze_time(T0):
        real.register("ses_a", kind="opencode")
        assert real.send("ses_a", "nobody-here", "x").error.startswith('No registered session named "nobody-here"')
        assert real.send("ses_a", "ses_a", "x").error == "You cannot message yourself."
        assert real.send("ses_unknown", "ses_a", "x").error.startswith("You are not registered")
        assert real.send("ses_a", "ses_a", "   ").error.startswith("Message body cannot be empty")
    real.close()


def test_virtual_time_and_seeded_randomness(checkout, db, tmp_path):
    """Rows carry the frozen clock, not the wall clock; the same seed draws the same names."""
    names = []
    for run in range(2):
        path = tmp_path / f"run{run}.db"
        open_db(path).close()
        real = sidecar_store(checkout, path, tmp_path, seed=1234)
        with freeze_time(T0):
            names.append([real.register(f"ses_{i}", kind="opencode").name for i in range(5)])
            row = real.get("ses_0")
        assert row.registered_at == "2026-01-05T09:00:00Z" and row.last_seen == "2026-01-05T09:00:00Z"
        real.close()
    assert names[0] == names[1] and len(set(names[0])) == 5


@pytest.mark.rules("R13", "R20", "R21")
def test_the_real_poller_beats_and_wakes_through_the_harness(checkout, db, tmp_path):
    """R13/R20/R21: one real poll cycle heartbeats the hosted session, calls the harness back with one
    wake (senders, count) for its pending mail, and stamps it delivered; a shut gate wakes nobody."""
    real = sidecar_store(checkout, db, tmp_path)
    woken, gate = [], {"ses_b": False}
    poller = SidecarPoller(real, hosted_sessions=lambda: ["ses_b"], can_deliver=lambda s: gate[s],
                           deliver=lambda s, senders, n: woken.append((s, senders, n)))
    with freeze_time(T0) as clock:
        a = real.register("ses_a", kind="opencode")
        real.register("ses_b", kind="opencode")
        real.send("ses_a", "ses_b", "one")
        real.send("ses_a", "ses_b", "two")
        clock.tick(30)
        poller.poll()
        assert woken == [] and real.get("ses_b").last_seen == "2026-01-05T09:00:30Z"
        gate["ses_b"] = True
        poller.poll()
        assert woken == [("ses_b", [a.name], 2)]
        assert real.pending_notifications(["ses_b"], "2000-01-01T00:00:00Z") == []
    real.close()


@pytest.mark.rules("R19", "R24")
def test_a_failed_delivery_is_logged_and_stays_pending(checkout, db, tmp_path):
    """R19/R24: what the real poller writes to its console reaches the runtime's log; the mail stays pending."""
    real = sidecar_store(checkout, db, tmp_path)
    logged = []

    def refuse(session, senders, count):
        raise RuntimeError("session not found")

    poller = SidecarPoller(real, hosted_sessions=lambda: ["ses_b"], can_deliver=lambda s: True, deliver=refuse,
                           log=logged.append)
    with freeze_time(T0):
        real.register("ses_a", kind="opencode")
        real.register("ses_b", kind="opencode")
        real.send("ses_a", "ses_b", "one")
        poller.deliver_pending()
    assert any("delivery to ses_b failed" in line and "session not found" in line for line in logged)
    assert len(real.pending_notifications(["ses_b"], "2000-01-01T00:00:00Z")) == 1
    real.close()


def test_a_dead_sidecar_names_its_call_and_last_stderr(checkout, db, tmp_path):
    """A sidecar killed mid-run is an engine error naming the call it was serving, never a hang."""
    real = sidecar_store(checkout, db, tmp_path)
    real.sidecar.stderr_path.write_text("bun: something broke\n")
    os.kill(real.sidecar.proc.pid, signal.SIGKILL)
    real.sidecar.proc.wait()
    with pytest.raises(SidecarDied, match=r"(?s)while serving ChatStore\.unreadCount.*something broke"):
        real.unread_count("ses_a")
    assert real.sidecar.proc.poll() is not None


def test_a_thrown_store_error_is_a_store_error(checkout, db, tmp_path):
    """A SQLite error thrown by the real code is thatch_core's StoreError with the real name and text."""
    real = sidecar_store(checkout, db, tmp_path)
    with open_db(db) as conn:
        conn.execute("DROP TABLE chat_messages")
    with freeze_time(T0), pytest.raises(StoreError, match=r"SQLiteError: no such table: chat_messages"):
        real.unread_count("ses_a")
    real.close()
