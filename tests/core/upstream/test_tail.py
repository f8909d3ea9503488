"""The real suite's four ``chat tail`` blocks: diff, time bounds, row filter, backlog.

The diff and backlog cases drive the functions on hand-built feed rows, as
the real ones do. The time-bound and filter cases go through the command
itself (``thatch chat tail --once`` with the real flags ``--match``,
``--from``, ``--to``, ``--since``, ``--until``) on a real database whose rows
and stamps are written by hand, so a parse or filter is judged by the events
the user sees.
"""

from __future__ import annotations

import dataclasses
import io
import json
import time

import pytest

from thatch_core import clock
from thatch_core.cli import filter_tail_rows, main, tail_backlog, tail_diff
from thatch_core.db import open_db
from thatch_core.types import FeedRow


def tail_row(id, **over) -> FeedRow:
    """A direct message from alice to bob, every field overridable."""
    values = dict(id=id, from_="alice", to="bob", from_session="ses_alice", to_session="ses_bob",
                  via_broadcast=False, body="hello", created_at="2026-09-12T10:00:00Z", read_at=None,
                  from_topic=None, to_topic=None)
    values.update(over)
    declared = {f.name for f in dataclasses.fields(FeedRow)}
    for key in ("from_topic", "to_topic"):  # rows without topics need no topic fields
        if key not in declared and values[key] is None:
            del values[key]
    return FeedRow(**values)


def narrow(rows, matches=(), senders=()):
    return filter_tail_rows(rows, body_patterns=list(matches), participants=list(senders))


def backlog(feed, limit, *, matches=(), senders=()):
    """The backlog of ``feed`` narrowed by the filters: (events, state, shown, elided)."""
    result = tail_backlog(narrow(feed, matches, senders), limit, full_feed=feed)
    if hasattr(result, "events"):
        return result.events, result.state, result.shown, result.elided
    if isinstance(result, dict):
        return result["events"], result["state"], result["shown"], result["elided"]
    if len(result) == 2:  # no counts reported
        return result[0], result[1], None, None
    return tuple(result)


def five():
    return [tail_row(i + 1, body=b) for i, b in enumerate(("one", "two", "three", "four", "five"))]


def sent_bodies(events):
    return [e["body"] for e in events if e["event"] == "sent"]


def local_ms(y, mo, d, h=0, mi=0, s=0) -> int:
    """Epoch ms of a local wall-clock time (the bounds are local time)."""
    return int(time.mktime((y, mo, d, h, mi, s, 0, 0, -1)) * 1000)


def run_tail(path, *flags):
    """``chat tail --once`` with ``flags``: (exit code, events)."""
    out = io.StringIO()
    try:
        code = main(["tail", "--db", str(path), "--once", *flags], out=out)
    except SystemExit as stop:
        code = stop.code
    return code, [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


class Board:
    """A real database whose sessions and messages are written by hand."""

    def __init__(self, path):
        self.path = path
        self.conn = open_db(path)
        self.next_id = 0

    def session(self, sid, name):
        self.conn.execute(
            "INSERT INTO chat_sessions (session_id, name, project, host_kind, auto, registered_at, last_seen)"
            " VALUES (?, ?, 'p', 'opencode', 0, '2026-09-12T08:00:00Z', '2026-09-12T08:00:00Z')", (sid, name))

    def message(self, frm, to, body="hello", at="2026-09-12T10:00:00Z", broadcast=False) -> int:
        cur = self.conn.execute(
            "INSERT INTO chat_messages (from_session, to_session, body, created_at, via_broadcast)"
            " VALUES (?, ?, ?, ?, ?)", (frm, to, body, at, 1 if broadcast else 0))
        return cur.lastrowid

    def tail(self, *flags):
        return run_tail(self.path, *flags)

    def sent_ids(self, *flags):
        code, events = self.tail(*flags)
        assert code == 0
        return [e["id"] for e in events if e["event"] == "sent"]


@pytest.fixture
def board(db_path):
    b = Board(db_path)
    yield b
    b.conn.close()


# -- chat tail diff ----------------------------------------------------------------


@pytest.mark.rules("R28")
def test_new_rows_emit_sent_broadcast_flagged():
    """
    "new rows emit sent events; broadcast rows keep their recipient and set the
    flag": every new row is a sent event; a direct one says ``broadcast:
    false``, a fan-out copy keeps its real recipient with ``broadcast: true``;
    a null sender renders ``unknown``; the state holds every id (R28).
    """
    events, state = tail_diff({}, [
        tail_row(1),
        tail_row(2, via_broadcast=True, to="carol", body="rise up"),
        tail_row(3, from_=None, body="from a departed sender"),
    ])
    assert [e["event"] for e in events] == ["sent", "sent", "sent"]
    assert {k: events[0][k] for k in ("id", "from", "to", "broadcast")} == \
        {"id": 1, "from": "alice", "to": "bob", "broadcast": False}
    assert {k: events[1][k] for k in ("id", "to", "broadcast")} == {"id": 2, "to": "carol", "broadcast": True}
    assert events[2]["from"] == "unknown"
    assert list(state) == [1, 2, 3]


@pytest.mark.rules("R28")
def test_topics_ride_through():
    """
    "topics ride through to sent and read events": a sent event carries
    ``from_topic`` and ``to_topic``; the read event of a row read later
    carries the reader and the sender with the sender's topic (R28).
    """
    events, state = tail_diff({}, [
        tail_row(1, from_topic="watching CI", to_topic="plotting rebase"),
        tail_row(2, from_topic="watching CI"),
    ])
    assert {k: events[0][k] for k in ("event", "from", "from_topic", "to", "to_topic")} == \
        {"event": "sent", "from": "alice", "from_topic": "watching CI", "to": "bob", "to_topic": "plotting rebase"}
    second, _ = tail_diff(state, [tail_row(2, from_topic="watching CI", read_at="2026-09-12T10:02:00Z")])
    assert len(second) == 1
    assert {k: second[0][k] for k in ("event", "id", "reader", "from", "from_topic")} == \
        {"event": "read", "id": 2, "reader": "bob", "from": "alice", "from_topic": "watching CI"}


@pytest.mark.rules("R28")
def test_read_event_exactly_once():
    """
    "a row's read_at appearing emits a read event exactly once": a known
    unread row whose read stamp appears yields exactly the read event
    ``{event, at, id, reader, reader_topic, from, from_topic}``; the next poll
    over the same rows is silent (R28).
    """
    at = "2026-09-12T10:01:00Z"
    events, state = tail_diff({7: None}, [tail_row(7, read_at=at)])
    assert events == [{"event": "read", "at": at, "id": 7, "reader": "bob", "reader_topic": None,
                       "from": "alice", "from_topic": None}]
    assert tail_diff(state, [tail_row(7, read_at=at)])[0] == []


@pytest.mark.rules("R28")
def test_sent_and_read_between_polls_only_sent():
    """
    "a message inserted and read between polls emits only its sent line": a
    row first seen already read yields its sent event alone (R28).
    """
    events, _ = tail_diff({}, [tail_row(5, read_at="2026-09-12T10:01:00Z")])
    assert [e["event"] for e in events] == ["sent"]


@pytest.mark.rules("R28")
def test_jsonl_one_object_per_event(store, reg, db_path):
    """
    "JSONL rendering: one JSON object per event, sent and read distinct,
    linked by id": ``chat tail`` prints each event as one line of JSON, the
    body verbatim (newlines, markdown and escape codes untouched); the sent
    object is ``{event, at, id, from, from_topic, to, to_topic, broadcast,
    body}`` and, once read, the same id's read object is ``{event, at, id,
    reader, reader_topic, from, from_topic}`` (R28).
    """
    alice = reg("ses_a", "a-corn").name
    bob = reg("ses_b", "ba-sil").name
    body = "multi\nline **markdown** \u001b[31mred\u001b[0m"
    sent = store.send("ses_a", bob, body)
    out = run_tail(db_path)[1]
    assert out == [{"event": "sent", "at": clock.iso(), "id": sent.message_id, "from": alice, "from_topic": None,
                    "to": bob, "to_topic": None, "broadcast": False, "body": body}]
    store.read("ses_b")
    read_at = store.conn.execute("SELECT read_at FROM chat_messages").fetchone()[0]
    assert run_tail(db_path)[1][-1] == {"event": "read", "at": read_at, "id": sent.message_id, "reader": bob,
                                   "reader_topic": None, "from": alice, "from_topic": None}


# -- chat tail time bounds -----------------------------------------------------------


@pytest.mark.rules("R28")
def test_bounds_parse_local_time(board):
    """
    "date-only parses as local midnight; HH:MM parses in local time": ``--since
    2026-09-13`` starts at local midnight, ``--until "2026-09-13 14:30"`` ends
    at 14:30 local, and the ``T`` separator works like the space (R28).
    """
    board.session("ses_a", "alice")
    board.session("ses_b", "bob")
    stamps = [local_ms(2026, 9, 12, 23, 59, 59), local_ms(2026, 9, 13), local_ms(2026, 9, 13, 9, 4, 59),
              local_ms(2026, 9, 13, 9, 5), local_ms(2026, 9, 13, 14, 29, 59), local_ms(2026, 9, 13, 14, 30)]
    ids = [board.message("ses_a", "ses_b", at=clock.iso(ms)) for ms in stamps]
    assert board.sent_ids("--since", "2026-09-13") == ids[1:]
    assert board.sent_ids("--until", "2026-09-13 14:30") == ids[:5]
    assert board.sent_ids("--since", "2026-09-13T09:05") == ids[3:]


@pytest.mark.rules("R28")
def test_bad_bounds_rejected(board):
    """
    "malformed and impossible values are rejected": an empty value, a
    non-date, unpadded or impossible dates (month 13, September 31, February
    29 of 2026), impossible times and a seconds field are refused: the
    command fails and prints no event (R28).
    """
    board.session("ses_a", "alice")
    board.session("ses_b", "bob")
    board.message("ses_a", "ses_b")
    for bad in ("", "not-a-date", "2026-9-13", "2026-13-01", "2026-09-31", "2026-02-29",
                "2026-09-13 25:99", "2026-09-13T10:70", "2026-09-13 10:00:00"):
        code, events = board.tail("--since", bad)
        assert code not in (0, None) and events == [], bad


# -- chat tail row filter ------------------------------------------------------------


@pytest.mark.rules("R28")
def test_match_patterns_and_together_on_body(board):
    """
    "match regexes AND together and test the body only": two ``--match``
    patterns must both hit the body; a word found only in a participant's
    name does not count (R28).
    """
    for sid, name in (("ses_al", "Al Go Rithm"), ("ses_bob", "Bob"), ("ses_pw", "payments-watcher")):
        board.session(sid, name)
    hit = board.message("ses_al", "ses_bob", "Rebase the payments module")
    board.message("ses_pw", "ses_bob", "rebasing the module")
    assert board.sent_ids("--match", "[Rr]ebase", "--match", "payments") == [hit]


@pytest.mark.rules("R28")
def test_from_to_substrings(board):
    """
    "from/to substrings match rendered names case-insensitively": ``--from``
    tests the sender and ``--to`` the recipient, each as a case-insensitive
    substring, and both must hold (R28).
    """
    for sid, name in (("ses_al", "Al Go Rithm"), ("ses_bob", "Bob"), ("ses_m", "Marlowe"), ("ses_c", "Carol")):
        board.session(sid, name)
    hit = board.message("ses_al", "ses_bob")
    board.message("ses_m", "ses_bob")
    board.message("ses_al", "ses_c")
    assert board.sent_ids("--from", "AL", "--to", "bo") == [hit]


@pytest.mark.rules("R28")
def test_half_open_window(board):
    """
    "since/until form a half-open window on created_at": a row one second
    before ``--since`` is out, one exactly on it in, one inside in, one
    exactly on ``--until`` out, one after it out (R28).
    """
    board.session("ses_a", "alice")
    board.session("ses_b", "bob")
    since, until = local_ms(2026, 9, 12, 9, 30), local_ms(2026, 9, 12, 10)
    ids = [board.message("ses_a", "ses_b", at=clock.iso(ms))
           for ms in (since - 1000, since, since + 60_000, until, until + 60_000)]
    assert board.sent_ids("--since", "2026-09-12 09:30", "--until", "2026-09-12 10:00") == ids[1:3]


@pytest.mark.rules("R28")
def test_absent_bounds_keep_rows(board):
    """
    "absent bounds keep every row that passes the other filters": with no
    filter at all the one message shows (R28).
    """
    board.session("ses_a", "alice")
    board.session("ses_b", "bob")
    only = board.message("ses_a", "ses_b")
    assert board.sent_ids() == [only]


@pytest.mark.rules("R28", "R10")
def test_broadcast_and_departed_filters(board):
    """
    "broadcast rows match their real recipient; departed participants match
    their rendered strings": ``--to beta`` finds a fan-out copy sent to beta,
    ``--to broadcast`` finds nothing, and ``--from departed`` finds mail whose
    sender left, rendered ``unknown (<id>, departed)`` (R28, R10).
    """
    for sid, name in (("ses_al", "alice"), ("ses_beta", "beta"), ("ses_bob", "bob")):
        board.session(sid, name)
    fan = board.message("ses_al", "ses_beta", broadcast=True)
    orphan = board.message("ses_mortal1", "ses_bob")
    assert board.sent_ids("--to", "beta") == [fan]
    assert board.sent_ids("--to", "broadcast") == []
    assert board.sent_ids("--from", "departed") == [orphan]


# -- chat tail backlog ---------------------------------------------------------------


@pytest.mark.rules("R28")
def test_limit_last_n_counts_elided():
    """
    "limit renders the last N rows and counts the elided rest": a limit of 2
    shows the last two messages, counts three elided, and seeds the state
    with every row (R28).
    """
    events, state, shown, elided = backlog(five(), 2)
    assert sent_bodies(events) == ["four", "five"]
    assert elided == 3
    assert list(state) == [1, 2, 3, 4, 5]


@pytest.mark.rules("R28")
def test_no_limit_keeps_all():
    """
    "a null limit keeps everything and elides nothing": no limit shows all
    five and elides none (R28).
    """
    events, _, _, elided = backlog(five(), None)
    assert len(events) == 5
    assert elided == 0


@pytest.mark.rules("R28")
def test_backlog_includes_read_events_in_time_order():
    """
    "already-read messages emit their read event in the snapshot, in time
    order": a message read before the tail started shows its sent and its read
    event, reads sorted by their own stamp among the sends; ``shown`` and
    ``elided`` count messages, not lines; a limit hides a message's read with
    it; in a same-second tie sends come before reads (R28).
    """
    rows = [
        tail_row(1, body="one", created_at="2026-09-12T10:00:00Z", read_at="2026-09-12T10:02:00Z"),
        tail_row(2, body="two", created_at="2026-09-12T10:01:00Z"),
        tail_row(3, body="three", created_at="2026-09-12T10:03:00Z", read_at="2026-09-12T10:03:30Z"),
    ]
    events, _, shown, elided = backlog(rows, None)
    assert [f"{e['event']}:{e['id']}" for e in events] == ["sent:1", "sent:2", "read:1", "sent:3", "read:3"]
    assert (shown, elided) == (3, 0)
    events, _, shown, elided = backlog(rows, 1)
    assert [f"{e['event']}:{e['id']}" for e in events] == ["sent:3", "read:3"]
    assert (shown, elided) == (1, 2)
    tied = [tail_row(1, created_at="2026-09-12T10:00:00Z", read_at="2026-09-12T10:00:00Z"),
            tail_row(2, created_at="2026-09-12T10:00:00Z")]
    events = backlog(tied, None)[0]
    assert [f"{e['event']}:{e['id']}" for e in events] == ["sent:1", "sent:2", "read:1"]


@pytest.mark.rules("R28")
def test_filters_before_limit():
    """
    "filters shrink the feed before the limit applies": with ``--match t`` and
    a limit of 1 the last matching message shows, and the elided count is
    relative to the two that matched (R28).
    """
    events, _, _, elided = backlog(five(), 1, matches=["t"])
    assert sent_bodies(events) == ["three"]
    assert elided == 1


@pytest.mark.rules("R28")
def test_state_seeds_from_every_row():
    """
    "state seeds from every feed row, matching or not": the state holds the
    non-matching rows too (R28).
    """
    assert list(backlog(five(), None, matches=["t"])[1]) == [1, 2, 3, 4, 5]


@pytest.mark.rules("R28")
def test_rendered_name_flip_resurfaces_nothing():
    """
    "a rendered-name flip in follow mode resurfaces no sent events": rows that
    did not match at backlog time but match once their sender renders as
    departed emit nothing, because the state already knows their ids (R28).
    """
    rows = [tail_row(1, from_="Brute", body="old one"), tail_row(2, from_="Brute", body="old two")]
    state = backlog(rows, None, senders=["unknown"])[1]
    assert list(state) == [1, 2]
    flipped = [dataclasses.replace(r, from_="unknown (ses_brute12, departed)") for r in rows]
    poll = narrow(flipped, senders=["unknown"])
    assert [r.id for r in poll] == [1, 2]
    assert tail_diff(state, poll)[0] == []


@pytest.mark.rules("R28")
def test_follow_over_seeded_state_no_sent():
    """
    "follow diffs over the seeded state re-emit no sent events": after a
    limited backlog, a poll where every message got read emits five read
    events and no sent event (R28).
    """
    rows = five()
    state = backlog(rows, 2)[1]
    events, _ = tail_diff(state, [dataclasses.replace(r, read_at="2026-09-12T11:00:00Z") for r in rows])
    assert [e["event"] for e in events] == ["read"] * 5


@pytest.mark.rules("R28")
def test_new_matching_row_emits():
    """
    "a new matching row in follow mode emits, a non-matching one does not": of
    two new rows polled through ``--match hit``, only the matching one emits
    (R28).
    """
    state = backlog(five(), None, matches=["hit"])[1]
    poll = narrow([tail_row(9, body="no match"), tail_row(10, body="direct hit")], matches=["hit"])
    assert sent_bodies(tail_diff(state, poll)[0]) == ["direct hit"]
