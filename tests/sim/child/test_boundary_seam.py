"""The statement-boundary seam (`CrashPoints.boundary`): the one decision that thatch_core's trace
callback and a system under test in another runtime (a sidecar reporting its statements) share."""

from __future__ import annotations

from simulator.child.crash_points import CrashPoints

SEND = [("begin immediate", True), ("select 1 from chat_sessions", True),
        ("insert into chat_messages values (1)", True), ("commit", False)]


class Notes:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def emit(self, kind: str, session=None, **data) -> None:
        self.events.append((kind, data))


def reported(points: CrashPoints, statements=SEND, actors=frozenset()) -> None:
    """A sidecar's report of one call: each statement before it runs and after it returned."""
    for n, (sql, in_tx_after) in enumerate(statements, start=1):
        points.boundary("send", n, sql, "before", n > 1, actors=actors)
        points.boundary("send", n, sql, "after", in_tx_after, actors=actors)


def registry() -> tuple[CrashPoints, Notes, list, list]:
    points, notes, killed, held = CrashPoints(), Notes(), [], []
    points._kill = lambda: killed.append(True)
    points.bind(notes, lambda kind, detail: held.append((kind, detail)))
    return points, notes, killed, held


def test_a_crash_after_a_statement_inside_the_transaction_waits_for_its_commit():
    points, notes, killed, _ = registry()
    points.arm(call="send", statement=3, when="after", step=4)
    for n, (sql, in_tx) in enumerate(SEND[:3], start=1):
        points.boundary("send", n, sql, "before", n > 1)
        points.boundary("send", n, sql, "after", in_tx)
    assert not killed  # the insert is not durable until the commit
    points.boundary("send", 4, "commit", "before", True)
    points.boundary("send", 4, "commit", "after", False)
    assert killed == [True]
    assert notes.events[-1] == ("crash", {"point": "sql", "sql": "insert into chat_messages values (1)", "step": 4,
                                          "when": "after", "call": "send", "statement": 3})


def test_a_pause_holds_at_its_boundary_and_says_whether_it_holds_the_write_lock():
    points, notes, killed, held = registry()
    points.arm(call="send", statement=2, when="before", pause=True, step=1)
    points.arm(call="send", statement=1, when="after", pause=True, step=2, nth=2)
    reported(points)
    reported(points)
    assert not killed
    assert [(k, d["statement"], d["when"], d["holds_lock"]) for k, d in held] == [
        ("paused", 2, "before", True), ("paused", 1, "after", True)]
    assert [k for k, _ in notes.events] == ["paused", "resumed", "paused", "resumed"]


def test_a_pause_for_one_session_lets_other_sessions_calls_pass():
    points, _, _, held = registry()
    points.arm(call="send", statement=1, pause=True, step=0, actor="ses_bob")
    reported(points, actors=frozenset({"ses_alice"}))
    assert not held
    reported(points, actors=frozenset({"ses_bob", "carol"}))
    assert len(held) == 1


def test_a_statement_needing_the_lock_a_paused_call_holds_stops_as_blocked():
    points, notes, _, held = registry()
    points.lock_held("h1 broadcast statement 1 (after)")
    points.boundary("send", 1, "SELECT 1", "before", False)
    assert not held
    points.boundary("send", 2, "BEGIN IMMEDIATE", "before", False)
    assert held == [("blocked", {"sql": "begin immediate", "by": "h1 broadcast statement 1 (after)"})]
    points.boundary("send", 3, "INSERT INTO chat_messages VALUES (1)", "before", True)
    assert len(held) == 1  # once unblocked it goes on


def test_a_pause_never_reached_is_recorded_with_the_longest_call():
    points, notes, _, _ = registry()
    points.arm(call="send", statement=7, pause=True, step=3)
    reported(points)
    points.missed_pauses()
    assert notes.events == [("pause-missed", {"call": "send", "statement": 7, "step": 3, "calls": 1, "longest": 4})]
