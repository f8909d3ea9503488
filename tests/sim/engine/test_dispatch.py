"""The dispatcher on its own: what a wave's replies put on the agenda, what it fires, what its errors say.

A real pipe stands in for a harness process: the test writes the replies
on the child's end before the dispatcher collects them.
"""

from __future__ import annotations

from types import SimpleNamespace

import multiprocess
import pytest

from simulator.clock import VirtualClock
from simulator.engine.agenda import Agenda, HarnessFollowUp
from simulator.engine.dispatch import Dispatcher, SimulationError, SimulationTimeout
from simulator.engine.dispatch_log import DispatchLog
from simulator.engine.orchestrator import FaultState
from simulator.engine.processes import Live, ProcessCommand
from simulator.protocol import OP_ACT, OP_POLL, OP_RUN_WINDOW, Command, FollowUp, Reply, send_msg


@pytest.fixture
def rig(tmp_path):
    """(dispatcher, the child's end of h1's pipe, h1, the agenda, the fault steps fired)."""
    clock = VirtualClock(10_000)
    log = DispatchLog(clock)
    log.open(tmp_path)
    agenda, fired = Agenda(), []
    faults = {2: FaultState(2, "crash", "h1")}
    dispatcher = Dispatcher(SimpleNamespace(locks={}), agenda, log, clock, faults=faults,
                            fired=lambda idx, detail: fired.append((idx, detail)),
                            busy_timeout_ms=5000, scenario="dispatch", seed=7, wall_timeout_s=30.0)
    ours, theirs = multiprocess.Pipe()
    live = Live("h1", "opencode", 0, None, ours, None)
    dispatcher.start_wall_guard()
    yield dispatcher, theirs, live, agenda, fired
    log.close()
    ours.close()
    theirs.close()


def test_a_wave_puts_its_followups_on_the_agenda_and_fires_a_childs_crash(rig):
    dispatcher, child, live, agenda, fired = rig
    early = FollowUp(4_000, "turn_end", "alice", {})      # asked for before the wave's time
    send_msg(child, Reply(0))                                # a stale answer of an aborted wave: skipped
    send_msg(child, Reply(5, followups=(early,), crashes=({"step": 2, "point": "before_stamp", "sql": None},)))
    replies = dispatcher.exchange(10_000, 5, [ProcessCommand(live, OP_ACT, "alice", {"action": "read"})])
    assert [r.dispatch for r in replies] == [5]
    assert agenda.pop() == (10_000, HarnessFollowUp("h1", 0, early))  # no earlier than the wave
    assert fired == [(2, {"point": "before_stamp", "sql": None, "child": True})]
    assert dispatcher.last_activity == {"alice": 10_000}


def test_a_fatal_reply_stops_the_run_naming_what_the_process_was_doing(rig):
    dispatcher, child, live, _agenda, _fired = rig
    send_msg(child, Reply(1, ok=False, fatal=True))
    with pytest.raises(SimulationError, match="^h1 failed on poll$"):
        dispatcher.exchange(10_000, 1, [ProcessCommand(live, OP_POLL, None, {})])
    send_msg(child, Reply(-1, ok=False, fatal=True))
    with pytest.raises(SimulationError, match="^h1 failed in a window$"):
        dispatcher.collect(live, Command(-1, 10_000, OP_RUN_WINDOW), doing="in a window")
    send_msg(child, Reply(2, ok=False, fatal=True, error="the harness raised"))
    with pytest.raises(SimulationError, match="^the harness raised$"):
        dispatcher.exchange(10_000, 2, [ProcessCommand(live, OP_POLL, None, {})])


def test_the_wall_guard_names_the_last_command_sent(rig):
    dispatcher, child, live, _agenda, _fired = rig
    assert dispatcher.last_desc == "none yet"
    send_msg(child, Reply(3))
    dispatcher.exchange(10_000, 3, [ProcessCommand(live, OP_ACT, "alice", {"action": "read"})])
    dispatcher.deadline = 0.0  # the budget ran out
    with pytest.raises(SimulationTimeout) as info:
        dispatcher.check_wall()
    assert str(info.value) == ("scenario 'dispatch' (seed 7) exceeded its wall-clock budget of 30s at virtual time "
                               "10s (10000 ms); last dispatch #0: act to h1 for alice at t=10000")
    dispatcher.last_desc = "a window of 3 entries to h1 from t=10000"
    with pytest.raises(SimulationTimeout, match="last dispatch #0: a window of 3 entries to h1 from t=10000$"):
        dispatcher.check_wall()
