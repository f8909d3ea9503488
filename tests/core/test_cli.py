"""The CLI views: `chat list` roster and `chat tail` JSONL (R14, R16, R28)."""
from __future__ import annotations

import io
import json
import random
import subprocess
import sys

import pytest
from freezegun import freeze_time

from thatch_core import clock
from thatch_core.cli import (
    filter_tail_rows, format_roster, main, tail_backlog, tail_diff, tail_poll,
)
from thatch_core.db import open_db
from thatch_core.prompts import STALE_EXPLAINER, hidden_stale_note
from thatch_core.store import ChatStore
from thatch_core.types import FeedRow, SessionRow

NOW = clock.parse_iso_ms("2026-11-29T12:00:00Z")
T0 = "2026-11-29T12:00:00Z"


def row(name, *, ago_s, project=None, worktree=None, topic=None, kind="opencode"):
    seen = clock.iso(NOW - ago_s * 1000)
    return SessionRow(session_id=f"ses_{name}", name=name, topic=topic, project=project, host_kind=kind,
                      auto=True, worktree=worktree, registered_at=seen, last_seen=seen)


def feed_row(i, frm="a-1", to="b-2", *, body=None, read_at=None, broadcast=False, created=None):
    return FeedRow(id=i, from_=frm, to=to, from_session=f"s_{frm}", to_session=f"s_{to}",
                   via_broadcast=broadcast, body=body or f"msg {i}",
                   created_at=created or clock.iso(NOW + i * 1000), read_at=read_at)


# ---------------------------------------------------------------------------
# Roster
# ---------------------------------------------------------------------------

@pytest.mark.rules("R16", "R14")
def test_roster_sections_order_and_alignment():
    """R16, R14: one header row, Active then Stale (the 60 s rule), project
    alphabetical with no-project last, newest beat first within a project,
    aligned columns."""
    rows = [
        row("zeta-00001", ago_s=5, project="beta", worktree="root", topic="release QA"),
        row("alpha-00002", ago_s=30, project="alpha"),
        row("gamma-00003", ago_s=1, project="alpha", worktree="worktree"),
        row("delta-00004", ago_s=2),
        row("omega-00005", ago_s=61, project="alpha", kind="mcp"),
        row("sigma-00006", ago_s=7200, project="beta"),
    ]
    out = format_roster(rows, now_ms=NOW)
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "SEEN", "PROJECT", "LOC", "TOPIC"]
    assert lines[1] == "Active (4):"
    assert [ln.split()[0] for ln in lines[2:6]] == ["gamma-00003", "alpha-00002", "zeta-00001", "delta-00004"]
    assert lines[6:8] == ["Stale (2):", STALE_EXPLAINER]
    assert [ln.split()[0] for ln in lines[8:10]] == ["omega-00005", "sigma-00006"]
    assert len(lines) == 10
    # Every column starts at the same offset in every row.
    for col in ("SEEN", "PROJECT", "LOC", "TOPIC"):
        at = lines[0].index(col)
        for ln in lines[2:6] + lines[8:10]:
            assert ln[at - 2:at] == "  " and ln[at] != " "
    assert "1s ago" in lines[2] and "2h ago" in lines[9]
    assert lines[4].endswith("release QA") and lines[5].split()[3:] == ["-", "?", "-"]


@pytest.mark.rules("R16")
def test_stale_rows_older_than_the_bound_are_hidden_with_a_note():
    """R16: the CLI hides stale rows older than --stale N days (default 1)
    behind a count note; --stale all shows them."""
    rows = [row("fresh-00001", ago_s=3), row("stale-00002", ago_s=3600),
            row("old-00003", ago_s=2 * 86_400), row("older-00004", ago_s=9 * 86_400)]
    default = format_roster(rows, now_ms=NOW)
    assert "stale-00002" in default and "old-00003" not in default and "older-00004" not in default
    assert default.splitlines()[-1] == hidden_stale_note(2) == \
        "(2 older stale sessions hidden - --stale all to show)"
    week = format_roster(rows, now_ms=NOW, stale_days=7)
    assert "old-00003" in week and week.splitlines()[-1] == hidden_stale_note(1) == \
        "(1 older stale session hidden - --stale all to show)"
    everything = format_roster(rows, now_ms=NOW, stale_days=None)
    assert "older-00004" in everything and "hidden" not in everything
    # Only hidden stale rows: the Stale section still says what is hidden.
    only_old = format_roster([row("old-00003", ago_s=2 * 86_400)], now_ms=NOW)
    assert "Stale (0):" in only_old and only_old.endswith(hidden_stale_note(1))


def test_roster_self_marker_color_and_empty():
    """The caller's row is marked; ANSI color only when asked; empty roster."""
    rows = [row("me-00001", ago_s=1), row("you-00002", ago_s=100)]
    plain = format_roster(rows, now_ms=NOW, self_session="ses_me-00001")
    assert "me-00001 (you)" in plain and "\x1b[" not in plain
    colored = format_roster(rows, now_ms=NOW, color=True, self_session="ses_me-00001")
    assert "\x1b[32m" in colored and "\x1b[2m" in colored
    assert [line for line in colored.replace("\x1b[0m", "").replace("\x1b[1m", "").replace("\x1b[2m", "")
            .replace("\x1b[32m", "").splitlines()] == plain.splitlines()
    assert format_roster([], now_ms=NOW) == "No registered sessions."


@pytest.mark.rules("R16")
def test_list_command_on_a_real_database(db_path):
    """R16: `list` reads the real store and honours --stale."""
    with freeze_time(T0) as frozen:
        conn = open_db(db_path)
        store = ChatStore(conn, rng=random.Random(1))
        store.register("ses_old", project="p")
        old = store.get("ses_old").name
        frozen.tick(3 * 86_400)
        store.register("ses_new", project="p")
        new = store.get("ses_new").name
        conn.close()
        out = io.StringIO()
        assert main(["list", "--db", str(db_path)], out=out) == 0
        text = out.getvalue()
        assert new in text and old not in text and "(1 older stale session hidden" in text
        out = io.StringIO()
        main(["list", "--db", str(db_path), "--stale", "all"], out=out)
        assert old in out.getvalue()


def test_list_rejects_a_bad_stale_value(db_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["list", "--db", str(db_path), "--stale", "soon"])
    assert exc.value.code == 2 and '--stale takes a number of days or "all"' in capsys.readouterr().err


# ---------------------------------------------------------------------------
# Tail diff, backlog, filters
# ---------------------------------------------------------------------------

@pytest.mark.rules("R28")
def test_tail_diff_emits_sent_then_read_linked_by_id():
    """R28: sent on first sight, read when read_at appears, linked by id;
    broadcast: true only on fan-out rows; a row sent and read between two
    polls emits only its sent event; the previous state is not modified."""
    events, state = tail_diff({}, [feed_row(1), feed_row(2, to="c-3", broadcast=True)])
    assert events == [
        {"event": "sent", "id": 1, "ts": feed_row(1).created_at, "from": "a-1", "to": "b-2", "body": "msg 1"},
        {"event": "sent", "id": 2, "ts": feed_row(2).created_at, "from": "a-1", "to": "c-3", "body": "msg 2",
         "broadcast": True},
    ]
    snapshot = dict(state)
    rows = [feed_row(1, read_at="2026-11-29T12:05:00Z"), feed_row(2, to="c-3", broadcast=True),
            feed_row(3, read_at="2026-11-29T12:06:00Z")]
    events, state2 = tail_diff(state, rows)
    assert state == snapshot
    assert events == [
        {"event": "read", "id": 1, "ts": "2026-11-29T12:05:00Z", "from": "a-1", "to": "b-2", "body": "msg 1"},
        {"event": "sent", "id": 3, "ts": feed_row(3).created_at, "from": "a-1", "to": "b-2", "body": "msg 3"},
    ]
    assert tail_diff(state2, rows)[0] == []


@pytest.mark.rules("R28")
def test_backlog_is_the_last_twenty_with_state_from_the_full_feed():
    """R28: the backlog shows the last 20 messages; the state covers the full
    feed, so older rows never resurface as sent events later - not even when
    a mid-follow unregister re-renders their participants."""
    feed = [feed_row(i) for i in range(1, 31)]
    events, state = tail_backlog(feed)
    assert [e["id"] for e in events] == list(range(11, 31))
    assert set(state) == set(range(1, 31))
    renamed = [feed_row(i, frm="unknown (s_a-1, departed)") for i in range(1, 31)]
    assert tail_diff(state, renamed)[0] == []
    assert tail_backlog(feed, 0)[0] == [] and len(tail_backlog(feed, None)[0]) == 30


@pytest.mark.rules("R28")
def test_filters_regex_participant_and_half_open_window():
    """R28: body regexes, case-insensitive participant substrings on either
    endpoint, half-open [since, until) on created_at; AND across kinds, OR
    within one."""
    rows = [feed_row(1, "Alpha-1", "beta-2", body="release is green"),
            feed_row(2, "beta-2", "gamma-3", body="rebase please"),
            feed_row(3, "gamma-3", "alpha-1", body="RELEASE blocked"),
            feed_row(4, "delta-4", "beta-2", body="lunch?")]
    ids = lambda rs: [r.id for r in rs]  # noqa: E731
    assert ids(filter_tail_rows(rows, body_patterns=["release"])) == [1]
    assert ids(filter_tail_rows(rows, body_patterns=["(?i)release", "lunch"])) == [1, 3, 4]
    assert ids(filter_tail_rows(rows, participants=["ALPHA"])) == [1, 3]
    assert ids(filter_tail_rows(rows, participants=["alpha", "delta"])) == [1, 3, 4]
    t2, t4 = feed_row(2).created_at, feed_row(4).created_at
    assert ids(filter_tail_rows(rows, since=t2, until=t4)) == [2, 3]
    assert ids(filter_tail_rows(rows, since=clock.parse_iso_ms(t2))) == [2, 3, 4]
    assert ids(filter_tail_rows(rows, participants=["beta"], body_patterns=["e"], until=t4)) == [1, 2]


@pytest.mark.rules("R28")
def test_follow_poll_filters_events_but_tracks_every_row():
    """R28: a follow poll reports only matching rows, while its state tracks
    the whole feed (a row that starts matching later is not resurfaced)."""
    feed = [feed_row(1, body="alpha"), feed_row(2, body="beta")]
    events, state = tail_backlog(filter_tail_rows(feed, body_patterns=["alpha"]), full_feed=feed)
    assert [e["id"] for e in events] == [1]
    feed2 = [feed_row(1, body="alpha", read_at=T0), feed_row(2, body="beta", read_at=T0), feed_row(3, body="alpha 3")]
    events, state = tail_poll(feed2, state, body_patterns=["alpha"])
    assert [(e["event"], e["id"]) for e in events] == [("read", 1), ("sent", 3)]
    assert set(state) == {1, 2, 3}


@pytest.mark.rules("R28", "R12")
def test_tail_command_on_a_real_database(db_path):
    """R28, R12: `tail --once` prints the backlog as JSONL from the real
    store, broadcast copies flagged with their real recipients."""
    with freeze_time(T0) as frozen:
        conn = open_db(db_path)
        store = ChatStore(conn, rng=random.Random(2))
        for sid in ("s1", "s2", "s3"):
            store.register(sid)
        n1, n2, n3 = (store.get(s).name for s in ("s1", "s2", "s3"))
        store.send("s1", n2, "hello two")
        frozen.tick(10)
        store.broadcast("s2", "all hands")
        store.read("s3")
        conn.close()
        out = io.StringIO()
        assert main(["tail", "--db", str(db_path), "--once"], out=out) == 0
        events = [json.loads(line) for line in out.getvalue().splitlines()]
        assert [(e["event"], e["from"], e["to"], e.get("broadcast", False)) for e in events] == [
            ("sent", n1, n2, False), ("sent", n2, n1, True), ("sent", n2, n3, True)]
        out = io.StringIO()
        main(["tail", "--db", str(db_path), "--once", "--who", n3.upper(), "--since", "2026-11-29T12:00:05Z"],
             out=out)
        assert [json.loads(line)["to"] for line in out.getvalue().splitlines()] == [n3]


def test_tail_rejects_a_bad_regex(db_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["tail", "--db", str(db_path), "--grep", "(", "--once"])
    assert exc.value.code == 2 and "bad filter" in capsys.readouterr().err
    assert not db_path.exists()  # refused before touching the database


@pytest.mark.rules("R28")
def test_runs_as_a_module(db_path):
    """R28: `python -m thatch_core.cli tail --once` prints JSONL."""
    conn = open_db(db_path)
    store = ChatStore(conn)
    store.register("s1")
    store.register("s2")
    store.send("s1", "s2", "via the module")
    conn.close()
    proc = subprocess.run([sys.executable, "-m", "thatch_core.cli", "tail", "--db", str(db_path), "--once"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    (event,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert event["event"] == "sent" and event["body"] == "via the module"


def test_unopenable_database_is_a_message_not_a_traceback(tmp_path, capsys):
    """A database path that cannot be opened exits 1 with one line on stderr."""
    (tmp_path / "adir").mkdir()
    assert main(["list", "--db", str(tmp_path / "adir")]) == 1
    assert capsys.readouterr().err.startswith("thatch chat: cannot open ")
