"""The sampler judges staleness by the design's rule (R14), not by the code under test.

Stale = more than 60 s since the last beat; exactly 60 s is fresh; a
`last_seen` nothing can read counts as stale.
"""

from __future__ import annotations

import sqlite3
from types import SimpleNamespace

import multiprocess
import pytest
from thatch_core.db import open_db

from simulator import clock
from simulator.checks.view import RunView
from simulator.engine.dispatch_log import DispatchLog
from simulator.engine.observer import Observer
from simulator.engine import processes
from simulator.engine.processes import ForkGuard, Processes
from simulator.engine.world import DB_NAME, World
from simulator.history import read_events
from simulator.scenario.model import Scenario

T = 600_000  # the sample's virtual time


def iso(t: int) -> str:
    """The stored timestamp of virtual time t."""
    return clock.instant(t).strftime(clock.ISO_FORMAT)


LAST_SEEN = {
    "fresh": iso(T - 60_000),                                 # exactly 60 s ago: still fresh
    "stale": iso(T - 61_000),                                 # more than 60 s ago
    "naive": "2026-01-05 09:09:30",                           # hand-edited, naive = UTC: 30 s ago
    "garbled": "last tuesday",                                # unreadable: nothing proves it alive
}


def sample_events(tmp_path, last_seen: dict[str, str], guard: ForkGuard | None = None) -> list[dict]:
    """The history of one sample at T of sessions whose rows hold these last_seen texts."""
    spec = Scenario.model_validate({"name": "obs", "duration": "20m", "processes": [
        {"id": "h1", "sessions": [{"id": label} for label in last_seen]}]})
    world = World(spec, tmp_path, 3)
    world.build()
    conn = open_db(world.db_path)
    for label, seen in last_seen.items():
        conn.execute("INSERT INTO chat_sessions (session_id, name, host_kind, registered_at, last_seen)"
                     " VALUES (?, ?, 'opencode', ?, ?)", (world.session_id(label), label, seen, seen))
    conn.close()
    log = DispatchLog(clock.VirtualClock(T))
    log.open(tmp_path)
    Observer(spec, world, log, exchange=lambda t, d, wave: [], host_of=lambda s: None,
             guard=guard or ForkGuard()).sample(T)
    log.close()
    return read_events(tmp_path / "history" / "orchestrator.0.jsonl")


def sample(tmp_path, last_seen: dict[str, str], guard: ForkGuard | None = None) -> dict:
    return sample_events(tmp_path, last_seen, guard)[-1]["data"]["sessions"]


@pytest.mark.rules("R14")
def test_samples_mark_stale_after_more_than_sixty_seconds_and_when_unreadable(tmp_path):
    sessions = sample(tmp_path, LAST_SEEN)
    assert {label: s["stale"] for label, s in sessions.items()} == {
        "fresh": False, "stale": True, "naive": False, "garbled": True}
    assert sessions["garbled"]["last_seen"] == "last tuesday" and sessions["fresh"]["registered"]


@pytest.mark.rules("R14")
def test_stored_timestamps_read_back_in_both_spellings():
    assert clock.parse_iso_ms("2026-01-05T09:00:00Z") == clock.START_EPOCH_MS
    assert clock.parse_iso_ms("2026-01-05 10:00:00+01:00") == clock.START_EPOCH_MS
    assert [clock.parse_iso_ms(v) for v in (None, "", "last tuesday", 17)] == [None, None, None, None]


@pytest.mark.rules("R14")
def test_the_sampler_and_the_judges_date_a_legacy_stamp_alike(tmp_path):
    """R14 (D-props-8): a hand-made legacy `last_seen` (`2026-01-05 09:09:30`, naive = UTC) is one
    instant to the engine's sampler and to the judges reading that sample: 30 s before it, so fresh."""
    events = sample_events(tmp_path, {"legacy": LAST_SEEN["naive"], "garbled": LAST_SEEN["garbled"]})
    rows = events[-1]["data"]["sessions"]
    assert rows["legacy"]["stale"] is False and rows["garbled"]["stale"] is True
    view = RunView(None, events, None, {"epoch_ms": clock.START_EPOCH_MS})
    assert view.vt(rows["legacy"]["last_seen"]) == T - 30_000
    assert view.vt(rows["garbled"]["last_seen"]) is None


def test_the_observer_reads_through_the_guards_one_connection_and_a_fork_closes_it(tmp_path, monkeypatch):
    """Samples share the guard's one read connection; `Processes` closes it before it forks (a
    lock holder here, a real fork), so no connection of the orchestrator crosses into a child."""
    guard, opened = ForkGuard(), []

    def counted(*args, **kwargs):
        conn = sqlite3.connect(*args, **kwargs)
        opened.append(conn)
        return conn

    monkeypatch.setattr(processes, "sqlite3", SimpleNamespace(connect=counted, Connection=sqlite3.Connection))
    sessions = sample(tmp_path / "one", {"fresh": LAST_SEEN["fresh"]}, guard)
    assert sessions["fresh"]["registered"] and len(opened) == 1 and guard.open
    db_path, = (tmp_path / "one").rglob(DB_NAME)
    assert guard.read(db_path, "SELECT count(*) FROM chat_sessions") == [(1,)] and len(opened) == 1
    world = World(Scenario.model_validate({"name": "fork", "duration": "1m",
                                           "processes": [{"id": "h1", "sessions": [{"id": "a"}]}]}),
                  tmp_path / "two", 3)
    world.build()
    procs = Processes(multiprocess.get_context("fork"), world, DispatchLog(clock.VirtualClock(0)),
                      clock.VirtualClock(0), make_harness=None, stop_grace_s=5.0)
    procs.guard = guard
    procs.hold_lock(step=0, dispatch=1)
    try:
        assert not guard.open
    finally:
        procs.release_lock(0)
