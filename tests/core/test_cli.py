"""The CLI views: `chat list` roster and `chat tail` JSONL (R14, R16, R28, R35)."""
from __future__ import annotations

import io
import json
import random
import re
import subprocess
import sys
import time

import pytest
from freezegun import freeze_time

from thatch_core import clock
from thatch_core.cli import (
    EMPTY_ROSTER, STALE_NOTE, default_db_path, filter_tail_rows, format_event, format_roster, main,
    parse_time_bound, tail_backlog, tail_diff, tail_poll, Refusal,
)
from thatch_core.db import open_db
from thatch_core.prompts import hidden_stale_note
from thatch_core.store import ChatStore
from thatch_core.types import FeedRow, SessionRow

NOW = clock.parse_iso_ms("2026-11-29T12:00:00Z")
T0 = "2026-11-29T12:00:00Z"


def row(name, *, ago_s, project=None, topic=None, kind="opencode", last_seen=None):
    seen = last_seen or clock.iso(NOW - ago_s * 1000)
    return SessionRow(session_id=f"ses_{name}", name=name, topic=topic, project=project, host_kind=kind,
                      auto=True, worktree=None, registered_at=seen, last_seen=seen)


def feed_row(i, frm="a-1", to="b-2", *, body=None, read_at=None, broadcast=False, created=None,
             from_topic=None, to_topic=None):
    return FeedRow(id=i, from_=frm, to=to, from_session=f"s_{frm}", to_session=f"s_{to}",
                   via_broadcast=broadcast, body=body or f"msg {i}",
                   created_at=created or clock.iso(NOW + i * 1000), read_at=read_at,
                   from_topic=from_topic, to_topic=to_topic)


# ---------------------------------------------------------------------------
# Roster
# ---------------------------------------------------------------------------

@pytest.mark.rules("R16", "R14", "R35")
def test_roster_sections_columns_and_order():
    """R16, R14, R35: `# Active Sessions` then `# Stale Sessions` (with the
    missed-heartbeat note), each its own table under NAME AGE STATUS PROJECT
    TOPIC; project alphabetical, no-project rows last, newest beat first; a
    stale mcp row stays Active as `idle`; no project reads `unknown`; a row
    with no topic carries no trailing blanks."""
    rows = [
        row("zeta-00001", ago_s=5, project="beta", topic="release QA"),
        row("alpha-00002", ago_s=30, project="alpha"),
        row("gamma-00003", ago_s=1, project="alpha"),
        row("delta-00004", ago_s=2),
        row("omega-00005", ago_s=61, project="alpha", kind="mcp"),
        row("sigma-00006", ago_s=7200, project="beta"),
    ]
    assert format_roster(rows, now_ms=NOW).splitlines() == [
        "# Active Sessions",
        "NAME         AGE      STATUS  PROJECT  TOPIC",
        "gamma-00003  1s ago   fresh   alpha",
        "alpha-00002  30s ago  fresh   alpha",
        "omega-00005  1m ago   idle    alpha",
        "zeta-00001   5s ago   fresh   beta     release QA",
        "delta-00004  2s ago   fresh   unknown",
        "",
        "# Stale Sessions",
        STALE_NOTE,
        "NAME         AGE     STATUS  PROJECT  TOPIC",
        "sigma-00006  2h ago  stale   beta",
    ]
    assert STALE_NOTE == ("These sessions have missed their heartbeat for over 60 seconds. Their harnesses may "
                          "no longer be running (stopped, or the machine slept); mail waits until they resume.")


@pytest.mark.rules("R16", "R35")
def test_a_fresh_mcp_row_is_active_and_no_stale_rows_means_no_stale_section():
    """R16, R35: an mcp row that beat within 60 s reads `active`; with no stale
    row at all the Stale section is left out."""
    text = format_roster([row("mc-00001", ago_s=10, project="p", kind="mcp")], now_ms=NOW)
    assert text.splitlines()[2].split() == ["mc-00001", "10s", "ago", "active", "p"]
    assert "# Stale Sessions" not in text


@pytest.mark.rules("R16")
def test_stale_rows_older_than_the_bound_are_hidden_with_a_note():
    """R16: the CLI hides stale rows older than --stale N days (default 1)
    behind a count note; None (`--stale all`) shows them; a section whose
    rows are all hidden still says what is hidden."""
    rows = [row("fresh-00001", ago_s=3), row("stale-00002", ago_s=3600),
            row("old-00003", ago_s=2 * 86_400), row("older-00004", ago_s=9 * 86_400)]
    default = format_roster(rows, now_ms=NOW)
    assert "stale-00002" in default and "old-00003" not in default and "older-00004" not in default
    assert default.splitlines()[-1] == hidden_stale_note(2) == \
        "(2 older stale sessions hidden - --stale all to show)"
    week = format_roster(rows, now_ms=NOW, stale_days=7)
    assert "old-00003" in week and week.splitlines()[-1] == hidden_stale_note(1)
    everything = format_roster(rows, now_ms=NOW, stale_days=None)
    assert "older-00004" in everything and "hidden" not in everything
    only_old = format_roster([row("old-00003", ago_s=2 * 86_400)], now_ms=NOW)
    assert only_old.splitlines() == ["# Stale Sessions", STALE_NOTE, hidden_stale_note(1)]


@pytest.mark.rules("R16")
def test_an_unreadable_last_seen_reads_unknown_age_and_is_never_hidden():
    """R16: a garbled last_seen prints `unknown age`, counts as stale, and has
    no age for the one-day bound to hide it by."""
    text = format_roster([row("odd-00001", ago_s=0, last_seen="last tuesday")], now_ms=NOW)
    assert text.splitlines()[-1].split() == ["odd-00001", "unknown", "age", "stale", "unknown"]


@pytest.mark.rules("R16")
def test_roster_color_and_empty():
    """ANSI color only when asked (bold headers, green names, red stale); the
    plain text is the colored text without its escapes; the empty roster's text."""
    rows = [row("me-00001", ago_s=1, topic="t"), row("you-00002", ago_s=100)]
    plain = format_roster(rows, now_ms=NOW)
    assert "\x1b[" not in plain
    colored = format_roster(rows, now_ms=NOW, color=True)
    assert "\x1b[32mme-00001\x1b[0m" in colored and "\x1b[31mstale \x1b[0m" in colored
    assert "\x1b[1m# Active Sessions\x1b[0m" in colored and "\x1b[3;90mt\x1b[0m" in colored
    assert re.sub(r"\x1b\[[0-9;]*m", "", colored) == plain
    assert format_roster([], now_ms=NOW) == EMPTY_ROSTER == (
        "No sessions registered. Sessions join the directory automatically on their first idle (opencode), "
        "or via chat_register.")


@pytest.mark.rules("R16")
def test_list_command_on_a_real_database(db_path, capsys):
    """R16: `list` reads the real store and honours --stale N, bare --stale and --stale all."""
    with freeze_time(T0) as frozen:
        conn = open_db(db_path)
        store = ChatStore(conn, rng=random.Random(1))
        store.register("ses_old", project="p")
        old = store.get("ses_old").name
        frozen.tick(3 * 86_400)
        store.register("ses_new", project="p")
        new = store.get("ses_new").name
        conn.close()
        for argv, shows_old in ((["list"], False), (["list", "--stale"], False), (["list", "--stale", "all"], True),
                                (["list", "--stale=4"], True), (["list", "--stale", "2.5"], False)):
            out = io.StringIO()
            assert main([*argv, "--db", str(db_path)], out=out) == 0
            assert new in out.getvalue() and (old in out.getvalue()) == shows_old, argv
            assert ("(1 older stale session hidden" in out.getvalue()) != shows_old, argv
    assert capsys.readouterr().err == ""


@pytest.mark.rules("R16")
@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_list_refuses_a_bad_stale_value(db_path, capsys, value):
    """R16: --stale takes a number of days 0 or more, or `all`; anything else is
    one line on stderr, exit 1, before the database is touched."""
    assert main(["list", "--db", str(db_path), "--stale", value]) == 1
    assert capsys.readouterr().err == f'error: --stale expects a number of days or "all", got "{value}"\n'
    assert not db_path.exists()


# ---------------------------------------------------------------------------
# Tail events, backlog, filters
# ---------------------------------------------------------------------------

@pytest.mark.rules("R28", "R12")
def test_tail_diff_emits_sent_then_read_with_the_real_keys():
    """R28, R12: sent on first sight (at = created_at, both topics, broadcast
    false or true), read when read_at appears (at = read_at, the recipient as
    reader), linked by id, keys in the real order; a row sent and read between
    two polls emits only its sent event; the previous state is not modified."""
    first = feed_row(1, from_topic="ci", to_topic=None)
    events, state = tail_diff({}, [first, feed_row(2, to="c-3", broadcast=True)])
    assert [list(e) for e in events] == [
        ["event", "at", "id", "from", "from_topic", "to", "to_topic", "broadcast", "body"]] * 2
    assert events[0] == {"event": "sent", "at": first.created_at, "id": 1, "from": "a-1", "from_topic": "ci",
                         "to": "b-2", "to_topic": None, "broadcast": False, "body": "msg 1"}
    assert events[1]["broadcast"] is True and events[1]["to"] == "c-3"
    snapshot = dict(state)
    rows = [feed_row(1, read_at="2026-11-29T12:05:00Z", from_topic="ci", to_topic="qa"),
            feed_row(2, to="c-3", broadcast=True), feed_row(3, read_at="2026-11-29T12:06:00Z")]
    events, state2 = tail_diff(state, rows)
    assert state == snapshot
    assert events[0] == {"event": "read", "at": "2026-11-29T12:05:00Z", "id": 1, "reader": "b-2",
                         "reader_topic": "qa", "from": "a-1", "from_topic": "ci"}
    assert list(events[0]) == ["event", "at", "id", "reader", "reader_topic", "from", "from_topic"]
    assert [(e["event"], e["id"]) for e in events] == [("read", 1), ("sent", 3)]
    assert tail_diff(state2, rows)[0] == []


@pytest.mark.rules("R28")
def test_a_null_participant_renders_unknown_and_lines_are_compact_json():
    """R28: a feed row with no rendered sender or recipient prints `unknown`;
    a line is compact JSON with non-ASCII as is and a lone surrogate escaped."""
    (sent,), _ = tail_diff({}, [feed_row(1, frm=None, to=None, body="héllo \udc80")])
    assert sent["from"] == "unknown" and sent["to"] == "unknown"
    assert format_event(sent) == ('{"event":"sent","at":"%s","id":1,"from":"unknown","from_topic":null,'
                                  '"to":"unknown","to_topic":null,"broadcast":false,"body":"héllo \\udc80"}'
                                  % sent["at"])


@pytest.mark.rules("R28")
def test_backlog_is_the_last_twenty_with_reads_in_time_order_and_counts():
    """R28: the backlog is the last 20 matching messages, each with its read
    event when already read, ordered by time (a read after a send of the
    same second); shown/elided count messages; the state covers the full
    feed, so older rows never resurface - not even re-rendered after an unregister."""
    feed = [feed_row(i) for i in range(1, 31)]
    feed[24] = feed_row(25, read_at=clock.iso(NOW + 40_000))
    feed[26] = feed_row(27, read_at=clock.iso(NOW + 27_000))
    backlog = tail_backlog(feed)
    order = [(e["event"], e["id"]) for e in backlog.events]
    assert [i for kind, i in order if kind == "sent"] == list(range(11, 31))
    assert order.index(("read", 27)) == order.index(("sent", 27)) + 1
    assert order.index(("read", 25)) == order.index(("sent", 30)) + 1
    assert (backlog.shown, backlog.elided) == (20, 10)
    assert set(backlog.state) == set(range(1, 31))
    renamed = [feed_row(i, frm="unknown (s_a-1, departed)") for i in range(1, 31)]
    assert tail_poll(renamed, backlog.state)[0] == []
    assert (tail_backlog(feed, None).shown, tail_backlog(feed, None).elided) == (30, 0)
    matching = tail_backlog(feed, 5, matches=["msg 1"])
    assert [e["id"] for e in matching.events if e["event"] == "sent"] == [15, 16, 17, 18, 19]
    assert (matching.shown, matching.elided) == (5, 6)  # msg 1, 10..19 match


@pytest.mark.rules("R28")
@pytest.mark.parametrize("limit", [0, -1, 2.5, "3", True])
def test_backlog_refuses_a_limit_that_is_no_count(limit):
    """R28: the backlog's limit is a whole number of messages, 1 or more, or all; anything else is refused."""
    with pytest.raises(ValueError, match=r"^limit must be a whole number of messages, 1 or more, or None"):
        tail_backlog([], limit)


@pytest.mark.rules("R28")
def test_filters_and_together_with_separate_from_and_to():
    """R28: every --match must match the body; --from tests the sender and
    --to the recipient (case-insensitive substrings); the window is half-open
    [since, until) on created_at; every filter given must pass."""
    rows = [feed_row(1, "Alpha-1", "beta-2", body="release is green"),
            feed_row(2, "beta-2", "gamma-3", body="rebase please"),
            feed_row(3, "gamma-3", "alpha-1", body="RELEASE blocked"),
            feed_row(4, "delta-4", "beta-2", body="release lunch?")]
    ids = lambda rs: [r.id for r in rs]  # noqa: E731
    assert ids(filter_tail_rows(rows, matches=["release"])) == [1, 4]
    assert ids(filter_tail_rows(rows, matches=["(?i)release", "lunch"])) == [4]
    assert ids(filter_tail_rows(rows, from_substr=["ALPHA"])) == [1]
    assert ids(filter_tail_rows(rows, to_substr=["alpha"])) == [3]
    assert ids(filter_tail_rows(rows, from_substr=["a"], to_substr=["beta"])) == [1, 4]
    t2, t4 = feed_row(2).created_at, feed_row(4).created_at
    assert ids(filter_tail_rows(rows, since=t2, until=t4)) == [2, 3]
    assert ids(filter_tail_rows(rows, since=clock.parse_iso_ms(t2))) == [2, 3, 4]
    assert ids(filter_tail_rows(rows, to_substr=["beta"], matches=["e"], until=t4)) == [1]


@pytest.mark.rules("R28")
def test_follow_poll_filters_the_feed_then_diffs_it():
    """R28: a follow poll shows only matching rows; a row that did not match
    when it arrived shows as sent once it comes to match (its participant
    re-rendered), while a backlog row never resurfaces."""
    feed = [feed_row(1, body="alpha"), feed_row(2, body="beta")]
    backlog = tail_backlog(feed, to_substr=["b-2"])
    assert [e["id"] for e in backlog.events] == [1, 2]
    feed2 = [feed_row(1, body="alpha", read_at=T0), feed_row(2, body="beta", read_at=T0),
             feed_row(3, to="c-3", body="alpha 3")]
    events, state = tail_poll(feed2, backlog.state, to_substr=["b-2"])
    assert [(e["event"], e["id"]) for e in events] == [("read", 1), ("read", 2)]
    assert 3 not in state
    feed3 = [*feed2[:2], feed_row(3, to="b-2 renamed", body="alpha 3")]
    events, _ = tail_poll(feed3, state, to_substr=["b-2"])
    assert [(e["event"], e["id"]) for e in events] == [("sent", 3)]


# ---------------------------------------------------------------------------
# Tail command line
# ---------------------------------------------------------------------------

@pytest.mark.rules("R28", "R12")
def test_tail_command_on_a_real_database(db_path, capsys):
    """R28, R12: `tail --once` prints the backlog as compact JSONL from the real
    store (topics from the directory, broadcast copies flagged with their real
    recipients, a read event for each read message) and the elision note on stderr."""
    with freeze_time(T0) as frozen:
        conn = open_db(db_path)
        store = ChatStore(conn, rng=random.Random(2))
        store.register("s1", title="watching CI")
        store.register("s2")
        store.register("s3")
        n1, n2, n3 = (store.get(s).name for s in ("s1", "s2", "s3"))
        store.send("s1", n2, "hello two")
        frozen.tick(10)
        store.broadcast("s2", "all hands")
        store.read("s3")
        conn.close()
        out = io.StringIO()
        assert main(["tail", "--db", str(db_path), "--once"], out=out) == 0
        lines = out.getvalue().splitlines()
        assert lines[0] == (f'{{"event":"sent","at":"{T0}","id":1,"from":"{n1}","from_topic":"watching CI",'
                            f'"to":"{n2}","to_topic":null,"broadcast":false,"body":"hello two"}}')
        events = [json.loads(line) for line in lines]
        assert [(e["event"], e["from"], e.get("to", e.get("reader")), e.get("broadcast")) for e in events] == [
            ("sent", n1, n2, False), ("sent", n2, n1, True), ("sent", n2, n3, True), ("read", n2, n3, None)]
        assert capsys.readouterr().err == ""
        out = io.StringIO()
        assert main(["tail", "--db", str(db_path), "--once", "--to", n3.upper(), "--limit", "all"], out=out) == 0
        assert [json.loads(line)["event"] for line in out.getvalue().splitlines()] == ["sent", "read"]
        out = io.StringIO()
        assert main(["tail", "--db", str(db_path), "--once", "--limit=1"], out=out) == 0
        assert len(out.getvalue().splitlines()) == 2  # the last message and its read
        assert capsys.readouterr().err == \
            "[thatch chat tail] showing last 1 of 3 messages (--limit N, --limit all)\n"


@pytest.mark.rules("R28")
@pytest.mark.parametrize("argv,message", [
    (["--limit", "0"], 'error: --limit expects a positive integer or "all", got "0"'),
    (["--limit", "2.5"], 'error: --limit expects a positive integer or "all", got "2.5"'),
    (["--limit", "-3"], 'error: --limit expects a positive integer or "all", got "-3"'),
    (["--match", "("], 'error: --match is not a valid regular expression: "("'),
    (["--since", "2026-11-29T12:00:00Z"],
     'error: --since expects "YYYY-MM-DD" or "YYYY-MM-DD HH:MM", got "2026-11-29T12:00:00Z"'),
    (["--until", "2026-02-30"], 'error: --until is not a real date or time: "2026-02-30"'),
    (["--until", "2026-01-01 24:00"], 'error: --until is not a real date or time: "2026-01-01 24:00"'),
    (["--since", "2026-01-02", "--until", "2026-01-01 23:59"],
     "error: --since is not before --until; the window is empty"),
    (["--to"], "error: --to expects a value"),
])
def test_tail_refuses_bad_arguments_with_the_real_texts(db_path, capsys, argv, message):
    """R28: a bad argument is one line on stderr and exit 1, before any line
    prints and before the database is touched."""
    out = io.StringIO()
    assert main(["tail", "--db", str(db_path), "--once", *argv], out=out) == 1
    assert capsys.readouterr().err == message + "\n" and out.getvalue() == ""
    assert not db_path.exists()


@pytest.mark.rules("R28")
def test_unknown_options_and_commands_are_refused_with_the_usage(db_path, capsys):
    """An option the CLI does not know (an old `--grep`) is refused rather than
    ignored: ignoring a filter would print mail the user meant to leave out."""
    assert main(["tail", "--db", str(db_path), "--grep", "x"]) == 1
    err = capsys.readouterr().err
    assert err.startswith('error: unknown argument "--grep"\nusage:') and "thatch chat tail" in err
    assert main(["watch"]) == 1 and capsys.readouterr().err.startswith("usage:")
    assert not db_path.exists()


@pytest.mark.rules("R28")
def test_time_bounds_are_local_time(monkeypatch):
    """R28: `YYYY-MM-DD [HH:MM]` (space or T) reads in the local timezone, and a
    wall time that does not exist there (a DST gap) is not a real time."""
    monkeypatch.setenv("TZ", "EST5EDT,M3.2.0,M11.1.0")
    time.tzset()
    try:
        assert parse_time_bound("2026-01-05 09:00", "--since") == clock.parse_iso_ms("2026-01-05T14:00:00Z")
        assert parse_time_bound(" 2026-01-05T09:00 ", "--since") == clock.parse_iso_ms("2026-01-05T14:00:00Z")
        assert parse_time_bound("2026-07-01", "--until") == clock.parse_iso_ms("2026-07-01T04:00:00Z")
        with pytest.raises(Refusal, match="is not a real date or time"):
            parse_time_bound("2026-03-08 02:30", "--since")
        with pytest.raises(Refusal, match="is not a real date or time"):
            parse_time_bound("0099-01-01", "--since")
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


@pytest.mark.rules("R28")
def test_follow_mode_prints_new_sends_and_reads_until_the_window_closes(db_path):
    """R28: after the backlog, each poll prints new matching sends and newly
    read messages; an --until that has passed ends the follow after a poll,
    and one already past ends the tail after the backlog."""
    with freeze_time(T0) as frozen:
        conn = open_db(db_path)
        store = ChatStore(conn, rng=random.Random(3))
        store.register("s1")
        store.register("s2")
        n2 = store.get("s2").name
        store.send("s1", n2, "before")
        polls = []

        def sleep(seconds):
            polls.append(seconds)
            frozen.tick(seconds)
            if len(polls) == 1:
                store.send("s1", n2, "during")
            else:
                store.read("s2")
                frozen.tick(120)

        local_until = time.strftime("%Y-%m-%d %H:%M", time.localtime(clock.now_ms() // 1000 + 60))
        out = io.StringIO()
        assert main(["tail", "--db", str(db_path), "--until", local_until], out=out, sleep=sleep) == 0
        got = [(e["event"], e["id"]) for e in map(json.loads, out.getvalue().splitlines())]
        assert got == [("sent", 1), ("sent", 2), ("read", 1), ("read", 2)] and polls == [2.0, 2.0]
        past = time.strftime("%Y-%m-%d", time.localtime(clock.now_ms() // 1000 - 86_400))
        assert main(["tail", "--db", str(db_path), "--until", past], out=io.StringIO(), sleep=sleep) == 0
        assert len(polls) == 2
        conn.close()


def test_the_database_defaults_to_the_real_paths(tmp_path):
    """--db, else $THATCH_DB_PATH, else thatch/thatch.db under $XDG_CONFIG_HOME."""
    assert default_db_path({"THATCH_DB_PATH": "/x/t.db", "XDG_CONFIG_HOME": "/c"}) == "/x/t.db"
    assert default_db_path({"XDG_CONFIG_HOME": str(tmp_path)}) == str(tmp_path / "thatch" / "thatch.db")
    assert default_db_path({}).endswith("/.config/thatch/thatch.db")


@pytest.mark.rules("R28")
def test_runs_as_a_module(db_path):
    """R28: `python -m thatch_core.cli tail --once` prints JSONL, the database from $THATCH_DB_PATH."""
    conn = open_db(db_path)
    store = ChatStore(conn)
    store.register("s1")
    store.register("s2")
    store.send("s1", "s2", "via the module")
    conn.close()
    proc = subprocess.run([sys.executable, "-m", "thatch_core.cli", "tail", "--once"], capture_output=True,
                          text=True, timeout=30, env={"THATCH_DB_PATH": str(db_path), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    (event,) = [json.loads(line) for line in proc.stdout.splitlines()]
    assert event["event"] == "sent" and event["body"] == "via the module"


def test_unopenable_database_is_a_message_not_a_traceback(tmp_path, capsys):
    """A database path that cannot be opened exits 1 with one line on stderr."""
    (tmp_path / "adir").mkdir()
    assert main(["list", "--db", str(tmp_path / "adir")]) == 1
    assert capsys.readouterr().err.startswith("thatch chat: cannot open ")
