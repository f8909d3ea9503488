"""The fake opencode server's synchronous event stream (simulator/harness/events.py, R24)."""

from __future__ import annotations

import pytest

from simulator.harness.events import HostEventStream
from simulator.protocol import OP_ACT, OP_TURN_END, OP_WINDOW, Command, FollowUp


@pytest.mark.rules("R24")
def test_a_prompt_call_delivers_the_host_events_due_once_and_the_orchestrator_skips_them():
    """R24: a prompt call at 45s hands over dave's turn end due then (not the
    user's prompt, not bob's window at 60s); the orchestrator's own dispatch of
    that turn end then finds it delivered, once; an event the orchestrator
    runs first leaves the stream."""
    ran, emitted = [], []
    stream = HostEventStream(ran.append, lambda kind, session, **data: emitted.append((kind, session, data)))
    stream.scheduled(FollowUp(45_000, OP_TURN_END, "dave", {"cause": "user"}))
    stream.scheduled(FollowUp(45_000, OP_ACT, "erin", {"action": "prompt"}))
    stream.scheduled(FollowUp(60_000, OP_WINDOW, "bob", {"what": "busy", "on": True}))
    stream.deliver_due(45_000, 15, inside="wake", prompted="bob")
    assert [(c.dispatch, c.t, c.op, c.session, c.args) for c in ran] == [
        (15, 45_000, OP_TURN_END, "dave", {"cause": "user"})]
    assert emitted == [("stream-event", "dave", {"op": OP_TURN_END, "inside": "wake", "prompted": "bob"})]
    assert stream.already_delivered(Command(16, 45_000, OP_TURN_END, "dave", {"cause": "user"}))
    assert not stream.already_delivered(Command(17, 45_000, OP_TURN_END, "dave", {"cause": "user"}))
    assert not stream.already_delivered(Command(20, 60_000, OP_WINDOW, "bob", {"what": "busy", "on": True}))
    stream.deliver_due(70_000, 21, inside="echo", prompted="bob")
    assert len(ran) == 1


def test_events_deferred_past_their_time_are_delivered_oldest_first():
    """A machine sleep defers events: the next prompt call hands them over in time order."""
    ran = []
    stream = HostEventStream(ran.append, lambda *a, **k: None)
    stream.scheduled(FollowUp(50_000, OP_WINDOW, "bob", {"what": "compacting", "on": False}))
    stream.scheduled(FollowUp(40_000, OP_TURN_END, "carol", {"cause": "wake"}))
    stream.deliver_due(90_000, 30, inside="wake", prompted="dave")
    assert [(c.session, c.t) for c in ran] == [("carol", 90_000), ("bob", 90_000)]
