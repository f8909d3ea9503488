"""The user's terminal views of chat: ``chat list`` and ``chat tail`` (R16, R28).

The CLI takes no chat write actions (the wake machinery owns those paths).
Both views open a current database read-only (``db.open_db_readonly``), so
they work in a read-only directory or mount; the only write they can cause is
creating a missing file or the schema migration ``open_db`` runs on an old one.
The database is ``--db PATH``, else ``$THATCH_DB_PATH``, else
``$XDG_CONFIG_HOME/thatch/thatch.db`` (``~/.config`` by default).

``list`` prints the roster in two sections, ``# Active Sessions`` and
``# Stale Sessions``, each an aligned table under its own header row (NAME AGE
STATUS PROJECT TOPIC). The split and the age text are the chat_list tool's
too (``staleness.split_roster``, ``staleness.human_age``): every mcp row is
Active, its STATUS ``active`` or ``idle``; an opencode row is ``fresh`` or
``stale``. Stale rows last seen more than ``--stale N`` days ago (default 1)
collapse into a hidden-count note; ``--stale all`` shows every row.

``tail`` prints the message stream as compact JSONL, one event per line::

    {"event":"sent","at":"...","id":7,"from":"a-1","from_topic":null,"to":"b-2","to_topic":"x","broadcast":false,"body":"hi"}
    {"event":"read","at":"<read_at>","id":7,"reader":"b-2","reader_topic":"x","from":"a-1","from_topic":null}

The backlog is the last ``--limit`` (20, or ``all``) matching messages, each
with its read event when already read, in time order; how many were left out
goes to stderr. A follow poll (every 2 s) filters the feed, then diffs it, so
new matching sends and newly read matching messages appear. The diff state is
seeded from the FULL feed, so neither the limit, a filter, nor a mid-follow
rename/unregister can resurface an old row as a sent event.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple

from thatch_core import clock, staleness
from thatch_core.constants import CLI_STALE_DAYS_DEFAULT, STALE_MS, TAIL_DEFAULT_LIMIT
from thatch_core.db import StoreError, open_db, open_db_readonly
from thatch_core.prompts import hidden_stale_note
from thatch_core.store import ChatStore

DAY_MS = 86_400_000
FOLLOW_POLL_S = 2.0
HEADER = ("NAME", "AGE", "STATUS", "PROJECT", "TOPIC")
ACTIVE_TITLE = "# Active Sessions"
STALE_TITLE = "# Stale Sessions"
STALE_NOTE = (
    f"These sessions have missed their heartbeat for over {round(STALE_MS / 1000)} seconds. "
    "Their harnesses may no longer be running (stopped, or the machine slept); mail waits until they resume."
)
EMPTY_ROSTER = ("No sessions registered. Sessions join the directory automatically on their first idle "
                "(opencode), or via chat_register.")
USAGE = """usage:
  thatch chat list [--stale [N|all]] [--db PATH]
  thatch chat tail [--once] [--limit N|all] [--match RE]... [--from NAME] [--to NAME]
                   [--since DT] [--until DT] [--db PATH]
DT is "YYYY-MM-DD" or "YYYY-MM-DD HH:MM", local time."""

_BOLD, _DIM, _GREEN, _RED, _MUTED = "1", "2", "32", "31", "3;90"


class Refusal(Exception):
    """A bad command line: its one-line message goes to stderr and the exit status is 1."""


# ---------------------------------------------------------------------------
# Roster
# ---------------------------------------------------------------------------

def _width(text: str) -> int:
    # Terminal columns as the real CLI counts them: UTF-16 code units.
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def _table(rows, now_ms: int, paint: Callable[[str, str], str]) -> str:
    cells = [(r.name, staleness.human_age(r.last_seen, now_ms), staleness.liveness(r, now_ms),
              "unknown" if r.project is None else r.project, r.topic or "") for r in rows]
    widths = [max([_width(h)] + [_width(c[i]) for c in cells]) for i, h in enumerate(HEADER)]

    def align(line) -> list[str]:
        # The last column is free text: never padded. Widths come from plain text; color goes on after.
        return [c if i == len(line) - 1 else c + " " * (widths[i] - _width(c)) for i, c in enumerate(line)]

    out = ["  ".join(paint(_BOLD, h) for h in align(HEADER))]
    for plain in cells:
        name, age, status, project, topic = align(plain)
        status_color = _RED if plain[2] == "stale" else _GREEN  # judged on the unpadded word
        out.append("  ".join([paint(_GREEN, name), paint(_DIM, age), paint(status_color, status), project,
                              paint(_MUTED, topic) if topic else ""]).rstrip())
    return "\n".join(out)


def format_roster(rows, *, now_ms: int | None = None, stale_days: float | None = CLI_STALE_DAYS_DEFAULT,
                  color: bool = False) -> str:
    """The ``chat list`` text (R14, R16, R35). ``stale_days=None`` shows every
    stale row; otherwise stale rows last seen more than that many days ago are
    counted in a hidden-count note instead."""
    now_ms = clock.now_ms() if now_ms is None else now_ms

    def paint(code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if color else text

    split = staleness.split_roster(rows, now_ms, stale_cap_ms=None if stale_days is None else stale_days * DAY_MS)
    if not (split.active or split.stale or split.hidden):
        return EMPTY_ROSTER
    parts = []
    if split.active:
        parts.append(f"{paint(_BOLD, ACTIVE_TITLE)}\n{_table(split.active, now_ms, paint)}")
    if split.stale or split.hidden:
        lines = [paint(_BOLD, STALE_TITLE), paint(_MUTED, STALE_NOTE)]
        if split.stale:
            lines.append(_table(split.stale, now_ms, paint))
        if split.hidden:
            lines.append(hidden_stale_note(split.hidden))
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


# ---------------------------------------------------------------------------
# Tail events
# ---------------------------------------------------------------------------

def _name(rendered: str | None) -> str:
    return "unknown" if rendered is None else rendered


def sent_event(r) -> dict:
    """The sent event of a feed row (keys in the order the real tail prints them)."""
    return {"event": "sent", "at": r.created_at, "id": r.id, "from": _name(r.from_), "from_topic": r.from_topic,
            "to": _name(r.to), "to_topic": r.to_topic, "broadcast": bool(r.via_broadcast), "body": r.body}


def read_event(r) -> dict:
    """The read event of a feed row: stamped with read_at, the recipient as reader."""
    return {"event": "read", "at": r.read_at, "id": r.id, "reader": _name(r.to), "reader_topic": r.to_topic,
            "from": _name(r.from_), "from_topic": r.from_topic}


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def format_event(event: dict) -> str:
    """One JSONL line: compact JSON, non-ASCII text as is, a lone surrogate escaped."""
    text = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def tail_diff(prev_state: dict[int, str | None], rows) -> tuple[list[dict], dict[int, str | None]]:
    """Diff one feed snapshot against the previous state (message id ->
    read_at). New ids emit a sent event; known ids whose read_at appeared emit
    a read event. A message sent and read between two polls emits only its
    sent event (the sent event is the primary record). Pure: ``prev_state``
    is not modified; ids absent from ``rows`` stay in the returned state."""
    state = dict(prev_state)
    events = []
    for r in rows:
        if r.id not in state:
            events.append(sent_event(r))
        elif r.read_at is not None and state[r.id] is None:
            events.append(read_event(r))
        state[r.id] = r.read_at
    return events, state


def _to_ms(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return clock.parse_iso_ms(value)


def _stamp_ms(text) -> int | None:
    try:
        return clock.parse_iso_ms(text)
    except (ValueError, TypeError, OverflowError):
        return None


def filter_tail_rows(rows, *, matches: Iterable = (), from_substr: Iterable[str] = (),
                     to_substr: Iterable[str] = (), since=None, until=None) -> list:
    """Narrow a feed snapshot; every given filter must pass (AND), several
    ``matches`` included. Bodies match a regex (``re.search``); ``from_substr``
    / ``to_substr`` are case-insensitive substrings of the rendered sender /
    recipient; the window is half-open on created_at: since <= t < until
    (epoch ms, ISO text or datetime). A created_at that cannot be read has no
    time to fall outside the window."""
    regexes = [p if isinstance(p, re.Pattern) else re.compile(p) for p in matches]
    froms, tos = [s.lower() for s in from_substr], [s.lower() for s in to_substr]
    lo, hi = _to_ms(since), _to_ms(until)
    out = []
    for r in rows:
        t = _stamp_ms(r.created_at) if lo is not None or hi is not None else None
        if t is not None and ((lo is not None and t < lo) or (hi is not None and t >= hi)):
            continue
        if not all(rx.search(r.body) for rx in regexes):
            continue
        if any(s not in (r.from_ or "").lower() for s in froms) or any(s not in (r.to or "").lower() for s in tos):
            continue
        out.append(r)
    return out


class Backlog(NamedTuple):
    """The tail's first render: events, the diff state, messages shown and left out."""

    events: list
    state: dict
    shown: int
    elided: int


def tail_backlog(feed, limit: int | None = TAIL_DEFAULT_LIMIT, **filters) -> Backlog:
    """The last ``limit`` (None = all) messages of ``feed`` that pass ``filters``:
    each one's sent event, plus its read event when already read, in time order
    (a sent event before a read at the same second). The diff state holds every
    feed row, filtered or not, so the limit hides lines, not history."""
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValueError(f"limit must be a whole number of messages, 1 or more, or None; not {limit!r}")
    feed = list(feed)
    matching = filter_tail_rows(feed, **filters)
    shown = matching if limit is None else matching[-limit:]
    timed = []
    for r in shown:
        sent_at = _stamp_ms(r.created_at) or 0
        timed.append(((sent_at, 0), sent_event(r)))
        if r.read_at is not None:
            timed.append(((_stamp_ms(r.read_at) or sent_at, 1), read_event(r)))
    events = [e for _, e in sorted(timed, key=lambda pair: pair[0])]
    return Backlog(events, {r.id: r.read_at for r in feed}, len(shown), len(matching) - len(shown))


def tail_poll(feed, state: dict[int, str | None], **filters) -> tuple[list[dict], dict[int, str | None]]:
    """One follow poll: filter the feed, then diff what passed against ``state``."""
    return tail_diff(state, filter_tail_rows(feed, **filters))


# ---------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------

_BOUND = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[ T]([0-9]{2}):([0-9]{2}))?")


def parse_time_bound(value: str, flag: str) -> int:
    """Epoch ms of ``YYYY-MM-DD`` (midnight) or ``YYYY-MM-DD HH:MM`` (a space or
    a T between) in the local timezone; an impossible date or time is refused."""
    m = _BOUND.fullmatch(value.strip())
    if not m:
        raise Refusal(f'error: {flag} expects "YYYY-MM-DD" or "YYYY-MM-DD HH:MM", got "{value}"')
    parts = tuple(int(g or 0) for g in m.groups())
    try:
        # Years below 100 are refused like the real CLI's (its Date maps them onto the 1900s).
        secs = time.mktime(parts + (0, 0, 0, -1)) if parts[0] >= 100 else None
        back = time.localtime(secs) if secs is not None else None
    except (OverflowError, ValueError, OSError):
        back = None
    if back is None or tuple(back)[:5] != parts:
        raise Refusal(f'error: {flag} is not a real date or time: "{value}"')
    return int(secs * 1000)


def _parse_flags(argv: list[str], *, values: set[str], repeats: set[str] = frozenset(),
                 switches: set[str] = frozenset(), optional: set[str] = frozenset()) -> dict[str, Any]:
    """``--flag value`` / ``--flag=value`` options. A single-valued flag keeps
    its first value, a repeatable one every value; a value flag with nothing
    after it is refused unless ``optional`` (then it reads as True)."""
    got: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if name in switches and not eq:
            got[name] = True
        elif name in values | repeats | optional:
            if eq:
                value = inline
            elif i + 1 < len(argv) and not (name in optional and argv[i + 1].startswith("--")):
                i += 1
                value = argv[i]
            elif name in optional:
                value = True
            else:
                raise Refusal(f"error: {name} expects a value")
            if name in repeats:
                got.setdefault(name, []).append(value)
            else:
                got.setdefault(name, value)
        else:
            raise Refusal(f'error: unknown argument "{arg}"\n{USAGE}')
        i += 1
    return got


def _stale_days(value) -> float | None:
    if value is None or value is True:
        return CLI_STALE_DAYS_DEFAULT
    if value == "all":
        return None
    try:
        days = float(value)
    except ValueError:
        days = math.nan
    if not (math.isfinite(days) and days >= 0):
        raise Refusal(f'error: --stale expects a number of days or "all", got "{value}"')
    return days


def _limit(value) -> int | None:
    if value is None:
        return TAIL_DEFAULT_LIMIT
    if value == "all":
        return None
    if not re.fullmatch(r"[0-9]+", value) or int(value) < 1:
        raise Refusal(f'error: --limit expects a positive integer or "all", got "{value}"')
    return int(value)


def _regex(pattern: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except (re.error, OverflowError, RecursionError):
        raise Refusal(f'error: --match is not a valid regular expression: "{pattern}"') from None


def tail_options(argv: list[str]) -> dict[str, Any]:
    """The tail's command line, checked before any line prints: limit, filters, once, db."""
    got = _parse_flags(argv, values={"--limit", "--from", "--to", "--since", "--until", "--db"},
                       repeats={"--match"}, switches={"--once"})
    matches = [_regex(p) for p in got.get("--match", [])]
    limit = _limit(got.get("--limit"))
    since, until = (parse_time_bound(got[f], f) if f in got else None for f in ("--since", "--until"))
    if since is not None and until is not None and since >= until:
        raise Refusal("error: --since is not before --until; the window is empty")
    filters = {"matches": matches, "from_substr": [got["--from"]] if "--from" in got else [],
               "to_substr": [got["--to"]] if "--to" in got else [], "since": since, "until": until}
    return {"limit": limit, "filters": filters, "once": bool(got.get("--once")), "db": got.get("--db")}


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------

def default_db_path(env=None) -> str:
    """``$THATCH_DB_PATH``, else ``thatch/thatch.db`` under ``$XDG_CONFIG_HOME`` (``~/.config``)."""
    env = os.environ if env is None else env
    if env.get("THATCH_DB_PATH"):
        return env["THATCH_DB_PATH"]
    return str(Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "thatch" / "thatch.db")


def _open_store(path: str):
    # Both views only read: a read-only open serves a read-only file, directory
    # or mount; a missing or old-schema file takes open_db (create, migrate).
    conn = open_db_readonly(path) or open_db(path)
    return conn, ChatStore(conn)


def _emit(events, out) -> None:
    for e in events:
        out.write(format_event(e) + "\n")
    out.flush()


def _feed_failed(exc: Exception) -> int:
    print(f"[thatch chat tail] feed query failed: {exc}", file=sys.stderr)
    print("The database may be locked or missing; exiting.", file=sys.stderr)
    return 1


def _tail(store, opts: dict, out, sleep: Callable[[float], None]) -> int:
    filters = opts["filters"]
    try:
        backlog = tail_backlog(store.message_feed(), opts["limit"], **filters)
    except StoreError as exc:
        return _feed_failed(exc)
    if backlog.elided:
        # stderr, so stdout stays pure JSONL for a pipe.
        print(f"[thatch chat tail] showing last {backlog.shown} of {backlog.shown + backlog.elided} messages "
              "(--limit N, --limit all)", file=sys.stderr)
    _emit(backlog.events, out)
    until, state = filters["until"], backlog.state
    if opts["once"] or (until is not None and until <= clock.now_ms()):
        return 0  # a closed window has nothing left to follow
    while True:
        sleep(FOLLOW_POLL_S)
        try:
            events, state = tail_poll(store.message_feed(), state, **filters)
        except StoreError as exc:
            return _feed_failed(exc)
        _emit(events, out)
        # After the poll: a message sent inside the window during the last sleep still shows.
        if until is not None and clock.now_ms() >= until:
            return 0


def _command(argv: list[str]) -> tuple[str, dict[str, Any]]:
    if not argv or argv[0] not in ("list", "tail"):
        raise Refusal(USAGE)
    if argv[0] == "tail":
        return "tail", tail_options(argv[1:])
    got = _parse_flags(argv[1:], values={"--db"}, optional={"--stale"})
    return "list", {"stale_days": _stale_days(got.get("--stale")), "db": got.get("--db")}


def main(argv=None, *, out=None, sleep: Callable[[float], None] = time.sleep) -> int:
    """``thatch chat list|tail ...``: the exit status (1 for a refused command line,
    an unopenable database or a failed feed read)."""
    out = out or sys.stdout
    try:
        command, opts = _command(list(sys.argv[1:] if argv is None else argv))
    except Refusal as exc:
        print(exc, file=sys.stderr)
        return 1
    path = opts["db"] or default_db_path()
    try:
        conn, store = _open_store(path)
    except StoreError as exc:
        # An unopenable or too-new database is a user-facing condition, not a crash.
        print(f"thatch chat: cannot open {path}: {exc}", file=sys.stderr)
        return 1
    try:
        if command == "list":
            color = out.isatty() and not os.environ.get("NO_COLOR")
            out.write(format_roster(store.list_sessions(), stale_days=opts["stale_days"], color=color) + "\n")
            out.flush()
            return 0
        return _tail(store, opts, out, sleep)
    except KeyboardInterrupt:
        return 0
    except StoreError as exc:  # the roster read stayed locked past the retries
        print(f"thatch chat: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `thatch chat tail | head`
        return 0
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
