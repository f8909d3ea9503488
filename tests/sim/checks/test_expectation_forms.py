"""The point-expectation forms over a stretch of time (`between`, `per_hour`), over the
database at a time (`counter`, `tombstones`, `messages`, `registered.row`, `same_name`),
`store_errors`, and `before_catch_up`: judged from hand-built histories and databases."""

from __future__ import annotations

import pytest

from historykit import ALICE, BOB, N_ALICE, N_BOB, RUN_INFO, H, base_world, make_db, make_spec
from simulator.checks.expectations import check_expectations
from simulator.checks.view import RunView
from simulator.checks.window_expectations import rolling_extremes

HOUR = 3_600_000
MIN = 60_000


def judge(expect, h, db, **spec):
    spec = make_spec(expect=expect, **spec)
    return check_expectations(spec, RunView(spec, h.done(), db, RUN_INFO))


def statuses(vs):
    return [v.status for v in vs if v.check.startswith("expect#")]


@pytest.fixture
def db(tmp_path):
    return make_db(tmp_path / "thatch.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                   messages=((ALICE, BOB, "one", 10 * MIN, 40 * MIN, 0), (ALICE, BOB, "two", 50 * MIN, None, 1)))


def bursts(h, starts, n=6, gap=20_000, who="bob"):
    """n wakes `gap` apart from each start."""
    for start in starts:
        for k in range(n):
            h.wake(start + k * gap, "h1", who)


@pytest.mark.rules("R22")
def test_between_counts_only_what_falls_in_the_half_open_window(db):
    """R22: `between: [from, until]` counts wakes with from <= t < until."""
    h = H(); base_world(h)
    for t in (30 * MIN, HOUR, 90 * MIN, 2 * HOUR):
        h.wake(t, "h1", "bob")
    vs = judge([{"wakes": {"session": "bob", "between": ["30m", "1h"], "count": 1}},
                {"wakes": {"session": "bob", "between": ["1h", "2h"], "count": 2}},
                {"wakes": {"session": "bob", "between": [0, "2h"], "count": 4}}], h, db)
    assert statuses(vs) == ["pass", "pass", "fail"]
    assert vs[2].message == "bob got 3 wakes between 0 and 2h, want exactly 4"
    assert vs[1].title == "wakes of bob between 1h and 2h"


@pytest.mark.rules("R27")
def test_between_selects_the_echoes_of_the_window(db):
    """R27: `echoes` with `between` counts (and looks in) only the bubbles of the window."""
    h = H(); base_world(h)
    h.ev(2 * MIN, "echo", "h1", "alice", text=f"[chat] to {N_BOB}: one")
    h.ev(9 * MIN, "echo", "h1", "alice", text=f"[chat] to {N_BOB}: two")
    vs = judge([{"echoes": {"session": "alice", "between": ["5m", "10m"], "contains": "two", "count": 1}},
                {"echoes": {"session": "alice", "between": ["5m", "10m"], "not_contains": "one"}},
                {"echoes": {"session": "alice", "between": ["1m", "10m"], "not_contains": "one"}}], h, db)
    assert statuses(vs) == ["pass", "pass", "fail"]
    assert vs[2].message.startswith("alice got an echo containing 'one' between 1m and 10m")


def test_rolling_extremes_try_every_hour_not_only_the_clock_hours():
    """Seven wakes astride the 1h mark: each clock hour holds at most 6, one rolling hour holds 7."""
    times = [50 * MIN + k * MIN for k in range(4)] + [HOUR + k * MIN for k in range(3)]
    (fewest, _), (most, start) = rolling_extremes(times, (0, 2 * HOUR))
    assert (fewest, most) == (3, 7) and start <= 50 * MIN


@pytest.mark.rules("R22")
def test_per_hour_bounds_every_rolling_hour_of_the_window(db):
    """R22: `per_hour` judges every rolling hour inside `between`, so a seventh wake in a
    rolling hour fails even when no clock hour holds more than six."""
    h = H(); base_world(h)
    bursts(h, [MIN, 61 * MIN, 121 * MIN])  # the cap's rhythm: six wakes per rolling hour
    ok = judge([{"wakes": {"session": "bob", "between": [0, "3h"], "per_hour": {"min": 5, "max": 6}}},
                {"wakes": {"session": "bob", "between": [0, "3h"], "per_hour": {"count": 6}}}], h, db)
    assert statuses(ok) == ["pass", "pass"]
    h = H(); base_world(h)
    bursts(h, [55 * MIN], n=4, gap=MIN)   # 55m, 56m, 57m, 58m
    bursts(h, [HOUR + MIN], n=3, gap=MIN)  # 1h1m, 1h2m, 1h3m: seven in [55m, 1h55m)
    bad = judge([{"wakes": {"session": "bob", "between": [0, "2h"], "per_hour": {"max": 6}}},
                 {"wakes": {"session": "bob", "between": ["1h", "2h"], "max": 6}}], h, db)
    assert statuses(bad) == ["fail", "pass"]
    assert ("bob's wakes: 7 in the hour from 55m," in bad[0].message
            and "want at most 6 in every rolling hour between 0 and 2h" in bad[0].message)
    thin = judge([{"wakes": {"session": "bob", "between": [0, "2h"], "per_hour": {"min": 4}}}], h, db)
    assert (statuses(thin) == ["fail"]
            and "bob's wakes: 3 in the hour just after 58m, want at least 4" in thin[0].message)


@pytest.mark.rules("R9")
def test_unread_between_holds_at_every_instant_of_the_window(db):
    """R9: bob's first message is unread from 10m to 40m, the second from 50m on."""
    h = H(); base_world(h)
    vs = judge([{"unread": {"session": "bob", "between": ["40m", "50m"], "count": 0}},
                {"unread": {"session": "bob", "between": ["20m", "45m"], "max": 0}},
                {"unread": {"session": "bob", "between": ["10m", "2h"], "max": 1}},
                {"unread": {"session": "bob", "between": ["55m", "2h"], "min": 1}}], h, db)
    assert statuses(vs) == ["pass", "fail", "pass", "pass"]
    assert vs[1].message == "bob has 1 unread at 20m, want at most 0 throughout 20m .. 45m"


@pytest.mark.rules("R14", "R16")
def test_roster_between_holds_at_every_sample_and_reply_of_the_window(db):
    """R14, R16: every sample in the window shows bob active; one stale sample fails it."""
    h = H(); base_world(h)
    for t in (MIN, 2 * MIN, 3 * MIN):
        h.sample(t, {"alice": (N_ALICE, False, t), "bob": (N_BOB, t == 3 * MIN, t)})
    h.call(90_000, "h1", "alice", "list", {}, True, f"Active (2):\n- {N_ALICE} (you)\n- {N_BOB}")
    vs = judge([{"roster": {"session": "alice", "active": ["bob"], "between": ["1m", "3m"]}},
                {"roster": {"session": "alice", "active": ["bob"], "between": ["1m", "4m"]}},
                {"roster": {"session": "alice", "contains": "{bob}", "between": ["1m", "2m"]}},
                {"roster": {"session": "alice", "contains": "{bob}", "between": ["2m", "4m"]}}], h, db)
    assert statuses(vs) == ["pass", "fail", "pass", "fail"]
    assert vs[1].message == "bob is not in alice's active section at 3m"
    assert vs[3].message == "alice got no chat_list reply between 2m and 4m to look in"


@pytest.mark.rules("R24")
def test_store_errors_counts_failed_store_calls(db):
    """R24: `store_errors` counts `store-error` events, of one process or of all, in a window or by a time."""
    h = H(); base_world(h)
    h.ev(5 * MIN, "store-error", "h1", None, where="heartbeat", error="database is locked")
    vs = judge([{"store_errors": {"count": 0}, "at": "4m"}, {"store_errors": {"count": 1}},
                {"store_errors": {"process": "h1", "between": ["1m", "5m"], "count": 0}},
                {"store_errors": {"count": 0}}], h, db)
    assert statuses(vs) == ["pass", "pass", "pass", "fail"]
    assert vs[3].message == "1 store errors by end, want exactly 0"


def observe(h, t, index, detail, **extra):
    """The observer's record for expectation `index` at t."""
    return h.ev(t, "expectation", index=index, ok=None, detail=detail, **extra)


@pytest.mark.rules("R2", "R7", "R11", "R12")
def test_store_kinds_are_judged_from_what_the_observer_read(db):
    """R2 counter, R7 tombstones, R11/R12 message rows: judged from the observation at their time."""
    h = H(); base_world(h)
    observe(h, 5 * MIN, 0, {"name": N_BOB, "counters": {"e-cho": 3, "ba-sil": 1}})
    observe(h, 5 * MIN, 1, {"name": None, "counters": {"e-cho": 3}})
    observe(h, 5 * MIN, 2, {"name": None, "counters": {}})
    observe(h, 5 * MIN, 3, {"tombstones": 1, "ids": [BOB]})
    observe(h, 5 * MIN, 4, {"messages": 2})
    observe(h, 5 * MIN, 5, {"error": "OperationalError: no such table: chat_name_counters"})
    vs = judge([{"counter": {"session": "bob", "count": 3}, "at": "5m"},
                {"counter": {"session": "bob", "min": 3}, "at": "5m"},  # bob left: the base of his last name
                {"counter": {"base": "o-pal", "count": 0}, "at": "5m"},
                {"tombstones": {"session": "bob", "count": 0}, "at": "5m"},
                {"messages": {"to": "bob", "via_broadcast": True, "max": 1}, "at": "5m"},
                {"counter": {"base": "e-cho", "count": 3}, "at": "5m"},
                {"messages": {"from": "alice", "count": 2}, "at": "9m"}], h, db)
    assert statuses(vs) == ["pass", "pass", "pass", "fail", "fail", "fail", "fail"]
    assert vs[3].message == "bob has 1 leave tombstones at 5m, want exactly 0"
    assert vs[4].message == "2 message rows to bob stored by a broadcast at 5m, want at most 1"
    assert "could not be read at 5m: OperationalError" in vs[5].message
    assert vs[6].message == "nothing was observed at 9m (the run ended before it?)"


@pytest.mark.rules("R33")
def test_registered_row_names_the_id_the_session_holds(db):
    """R33: `row: latest` after a fork means the row moved to the newest id (adoption)."""
    h = H(); base_world(h)
    observe(h, 5 * MIN, 0,
            {"registered": True, "name": N_BOB, "unread": 0, "ids": ["mcp_a", "mcp_b"], "rows": ["mcp_b"]})
    for index in (1, 2, 3):
        observe(h, 5 * MIN, index,
                {"registered": True, "name": N_BOB, "unread": 0, "ids": ["mcp_a", "mcp_b"], "rows": ["mcp_b"]})
    vs = judge([{"registered": {"session": "bob", "row": "latest"}, "at": "5m"},
                {"registered": {"session": "bob", "row": 2}, "at": "5m"},
                {"registered": {"session": "bob", "row": "first"}, "at": "5m"},
                {"registered": {"session": "bob", "row": 3}, "at": "5m"}], h, db)
    assert statuses(vs) == ["pass", "pass", "fail", "fail"]
    assert vs[2].message == "bob is registered under id 2 of 2 (mcp_b) at 5m, want its first id (mcp_a)"
    assert vs[3].message == "bob has 2 ids by 5m, so no id number 3"


@pytest.mark.rules("R5", "R6")
def test_same_name_compares_two_observations_not_the_first_name_minted(db):
    """R5, R6: the name at 1h against the name at 3h, whatever bob was called before 1h."""
    h = H(); base_world(h)
    for index, (first, second) in enumerate([(N_BOB, N_BOB), (N_BOB, "e-cho-00002"), (N_BOB, None),
                                             (N_BOB, "E-CHO-00001")]):
        observe(h, HOUR, index, {"registered": True, "name": first, "unread": 0}, moment=0)
        observe(h, 3 * HOUR, index, {"registered": second is not None, "name": second, "unread": 0}, moment=1)
    body = {"session": "bob", "at": ["1h", "3h"]}
    vs = judge([{"same_name": body}, {"same_name": body}, {"same_name": body}, {"same_name": body},
                {"same_name": {**body, "is": False}}, {"same_name": {**body, "at": ["1h", "4h"]}}],
               h, db, duration="5h")
    assert statuses(vs) == ["pass", "fail", "fail", "pass", "fail", "fail"]
    assert vs[1].message == f"bob was {N_BOB} at 1h and e-cho-00002 at 3h, want the same name"
    assert vs[2].message == f"bob was {N_BOB} at 1h and not registered at 3h: no name to compare"
    assert vs[1].title == "same_name of bob at 1h and 3h"


@pytest.mark.rules("R14", "R19")
def test_before_catch_up_sees_the_instant_before_the_wake_work(db):
    """R14, R19: an expectation observed first at a sleep's end sees the snapshot it took
    (everyone stale) and none of the catch-up's wakes at the same instant."""
    h = H(); base_world(h)
    h.ev(5 * MIN, "sleep-start"); h.ev(125 * MIN, "sleep-end")
    stale = {"alice": {"registered": True, "name": N_ALICE, "stale": True},
             "bob": {"registered": True, "name": N_BOB, "stale": True}}
    h.sample(4 * MIN, {"alice": (N_ALICE, False, 4 * MIN), "bob": (N_BOB, False, 4 * MIN)})
    observe(h, 125 * MIN, 0, {"sessions": stale})
    observe(h, 125 * MIN, 1, {"sessions": stale})
    h.wake(125 * MIN, "h1", "bob")  # the catch-up, after the observation at the same instant
    h.sample(125 * MIN, {"alice": (N_ALICE, False, 125 * MIN), "bob": (N_BOB, False, 125 * MIN)})
    wake_end = {"at": "125m", "before_catch_up": True}
    steps = [{"at": "5m", "sleep": {"for": "2h"}}]
    vs = judge([{**wake_end, "roster": {"session": "alice", "stale": ["alice", "bob"]}},
                {**wake_end, "wakes": {"session": "bob", "count": 0}},
                {"at": "125m", "wakes": {"session": "bob", "count": 1}},
                {"at": "125m", "roster": {"session": "alice", "active": ["bob"]}}], h, db, steps=steps, duration="3h")
    assert statuses(vs) == ["pass", "pass", "pass", "pass"]
    assert vs[0].title == "roster of alice at 2h5m before the catch-up"
