"""The user's terminal views of chat: ``chat list`` and ``chat tail`` (R16, R28).

The CLI takes no chat write actions (the wake machinery owns those paths).
Both views open a current database read-only (``db.open_db_readonly``), so
they work in a read-only directory or mount; the only write they can cause is
creating a missing file or the schema migration ``open_db`` runs on an old one.

``list`` renders the roster as aligned columns under one header row, Active
then Stale, ordered like the tool surface (``staleness.sort_roster``) and
worded like it: the section headers, the stale explainer and the checkout
mark come from ``thatch_core.prompts``, which the chat_list tool uses too. Stale
rows older than ``--stale N`` days (default 1) collapse into a hidden-count
note; ``--stale all`` shows every row. The tool surface stays unbounded.

``tail`` prints the message stream as JSONL, one event per line::

    {"event": "sent", "id": 7, "ts": "...", "from": "a-1", "to": "b-2", "body": "hi"}
    {"event": "sent", ..., "broadcast": true}      # a fan-out copy
    {"event": "read", "id": 7, "ts": "<read_at>", "from": "a-1", "to": "b-2", "body": "hi"}

The backlog shows the last ``--limit`` (20) messages as sent events; a follow
poll emits new sends and newly read messages. The diff state is always
seeded from the FULL feed (before limit and filters), so neither the limit,
a filter, nor a mid-follow rename/unregister can resurface old rows as sent
events.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from datetime import datetime

from thatch_core import clock, staleness
from thatch_core.constants import CLI_STALE_DAYS_DEFAULT, TAIL_DEFAULT_LIMIT
from thatch_core.db import StoreError, open_db, open_db_readonly
from thatch_core.prompts import STALE_EXPLAINER, checkout_mark, hidden_stale_note, roster_section
from thatch_core.store import ChatStore

DAY_MS = 86_400_000
HEADER = ("NAME", "SEEN", "PROJECT", "LOC", "TOPIC")

_BOLD, _DIM, _GREEN, _RESET = "\x1b[1m", "\x1b[2m", "\x1b[32m", "\x1b[0m"


# ---------------------------------------------------------------------------
# Roster
# ---------------------------------------------------------------------------

def format_age(age_ms: int) -> str:
    """Compact how-long-ago: 12s, 5m, 3h, 2d (clock skew reads as 0s)."""
    secs = max(0, age_ms) // 1000
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit} ago"
    return f"{secs}s ago"


def _cells(row, now_ms: int, self_session: str | None) -> tuple[str, ...]:
    name = row.name + (" (you)" if self_session and row.session_id == self_session else "")
    seen = staleness.last_seen_ms(row)
    age = "?" if seen is None else format_age(now_ms - seen)
    return (name, age, row.project or "-", checkout_mark(row.worktree), row.topic or "-")


def format_roster(rows, *, now_ms: int | None = None, stale_days: float | None = CLI_STALE_DAYS_DEFAULT,
                  color: bool = False, self_session: str | None = None) -> str:
    """The ``chat list`` roster text (R14, R16). ``stale_days=None`` shows every
    stale row; otherwise stale rows last seen more than that many days ago are
    counted in a hidden-count note instead."""
    now_ms = clock.now_ms() if now_ms is None else now_ms
    active, stale = staleness.group_roster(rows, now_ms)  # each in roster order
    hidden = 0
    if stale_days is not None:
        cutoff = now_ms - stale_days * DAY_MS
        # An unreadable last_seen counts as old: nothing shows it recent.
        shown = [r for r in stale if (staleness.last_seen_ms(r) or 0) >= cutoff]
        hidden = len(stale) - len(shown)
        stale = shown
    if not active and not stale and not hidden:
        return "No registered sessions."

    sections = [("Active", [_cells(r, now_ms, self_session) for r in active], active)]
    if stale or hidden:
        sections.append(("Stale", [_cells(r, now_ms, self_session) for r in stale], stale))
    all_cells = [HEADER] + [c for _, cells, _ in sections for c in cells]
    widths = [max(len(c[i]) for c in all_cells) for i in range(len(HEADER) - 1)]

    def line(cells) -> str:
        # The last column (topic) is free text: never padded, so no trailing blanks.
        return "  ".join([c.ljust(w) for c, w in zip(cells, widths)] + [cells[-1]])

    def paint(text: str, code: str) -> str:
        return f"{code}{text}{_RESET}" if color else text

    out = [paint(line(HEADER), _BOLD)]
    for title, cells, srows in sections:
        is_stale = title == "Stale"
        out.append(paint(roster_section(title, len(srows)), _BOLD))
        if is_stale:
            out.append(paint(STALE_EXPLAINER, _DIM))
        for c, r in zip(cells, srows):
            text = line(c)
            if self_session and r.session_id == self_session:
                text = paint(text, _GREEN)
            elif is_stale:
                text = paint(text, _DIM)
            out.append(text)
    if hidden:
        out.append(hidden_stale_note(hidden))
    return "\n".join(out)


# ---------------------------------------------------------------------------
# Tail
# ---------------------------------------------------------------------------

def _sent(r) -> dict:
    event = {"event": "sent", "id": r.id, "ts": r.created_at, "from": r.from_, "to": r.to, "body": r.body}
    if r.via_broadcast:
        event["broadcast"] = True
    return event


def _read(r) -> dict:
    return {"event": "read", "id": r.id, "ts": r.read_at, "from": r.from_, "to": r.to, "body": r.body}


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
            events.append(_sent(r))
        elif r.read_at is not None and state[r.id] is None:
            events.append(_read(r))
        state[r.id] = r.read_at
    return events, state


def tail_backlog(rows, limit: int | None = TAIL_DEFAULT_LIMIT, *, full_feed=None):
    """First view: sent events for the last ``limit`` of ``rows`` (None = all,
    0 = none), and the diff state seeded from ``full_feed`` (default ``rows``)
    so rows outside the limit or the filters never come back as sent."""
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise ValueError(f"limit must be a whole number of messages, 0 or more, or None; not {limit!r}")
    rows = list(rows)
    shown = rows if limit is None else (rows[-limit:] if limit > 0 else [])
    events, _ = tail_diff({}, shown)
    _, state = tail_diff({}, rows if full_feed is None else full_feed)
    return events, state


def tail_poll(feed, state: dict[int, str | None], **filters) -> tuple[list[dict], dict[int, str | None]]:
    """One follow poll: diff the FULL feed (so the state tracks every row),
    then keep only the events of rows that pass ``filters``."""
    keep = {r.id for r in filter_tail_rows(feed, **filters)}
    events, state = tail_diff(state, feed)
    return [e for e in events if e["id"] in keep], state


def _to_ms(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)
    return clock.parse_iso_ms(value)


def filter_tail_rows(rows, *, body_patterns=(), participants=(), since=None, until=None) -> list:
    """Narrow a feed snapshot. Within one filter kind any match passes (OR);
    across kinds every given filter must pass (AND). Bodies match a regex
    (``re.search``, case-sensitive unless the pattern says ``(?i)``);
    participants match a case-insensitive substring of either endpoint's
    rendered name; the time window is half-open on created_at: since <= t < until."""
    regexes = [p if isinstance(p, re.Pattern) else re.compile(p) for p in body_patterns]
    needles = [p.lower() for p in participants if p]
    lo, hi = _to_ms(since), _to_ms(until)
    out = []
    for r in rows:
        if regexes and not any(rx.search(r.body) for rx in regexes):
            continue
        if needles:
            ends = f"{r.from_ or ''}\n{r.to or ''}".lower()
            if not any(n in ends for n in needles):
                continue
        if lo is not None or hi is not None:
            t = clock.parse_iso_ms(r.created_at)
            if (lo is not None and t < lo) or (hi is not None and t >= hi):
                continue
        out.append(r)
    return out


# ---------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------

def _stale_arg(value: str) -> float | None:
    if value.lower() == "all":
        return None
    try:
        days = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f'--stale takes a number of days or "all", not {value!r}') from None
    if not math.isfinite(days):  # nan hides nothing and everything at once; inf is what "all" says
        raise argparse.ArgumentTypeError(f'--stale takes a finite number of days or "all", not {value!r}')
    if days < 0:
        raise argparse.ArgumentTypeError("--stale takes a non-negative number of days")
    return days


def _limit_arg(value: str) -> int:
    try:
        limit = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--limit takes a whole number of messages, not {value!r}") from None
    if limit < 0:
        raise argparse.ArgumentTypeError("--limit takes 0 or more messages")
    return limit


def _interval_arg(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--interval takes a number of seconds, not {value!r}") from None
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError("--interval takes a number of seconds above 0")
    return seconds


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="thatch chat", description="Watch cross-session chat.")
    sub = p.add_subparsers(dest="command", required=True)
    ls = sub.add_parser("list", help="the roster of registered sessions")
    ls.add_argument("--db", required=True)
    ls.add_argument("--stale", type=_stale_arg, default=CLI_STALE_DAYS_DEFAULT,
                    help='hide stale rows older than N days (default 1); "all" shows every row')
    ls.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    tl = sub.add_parser("tail", help="the message stream as JSONL")
    tl.add_argument("--db", required=True)
    tl.add_argument("--limit", type=_limit_arg, default=TAIL_DEFAULT_LIMIT)
    tl.add_argument("--grep", action="append", default=[], help="body regex (repeatable, any matches)")
    tl.add_argument("--who", action="append", default=[], help="participant name substring (repeatable)")
    tl.add_argument("--since", help="ISO time, inclusive")
    tl.add_argument("--until", help="ISO time, exclusive")
    tl.add_argument("--once", action="store_true", help="print the backlog and exit")
    tl.add_argument("--interval", type=_interval_arg, default=1.0, help="follow poll interval in seconds")
    return p


def _open_store(path: str):
    # Both views only read: a read-only open serves a read-only file, directory
    # or mount; a missing or old-schema file takes open_db (create, migrate).
    conn = open_db_readonly(path) or open_db(path)
    return conn, ChatStore(conn)


def _emit(events, out) -> None:
    for e in events:
        out.write(json.dumps(e, ensure_ascii=False) + "\n")
    out.flush()


def main(argv=None, *, out=None) -> int:
    out = out or sys.stdout
    p = _parser()
    args = p.parse_args(argv)
    if args.command == "tail":
        try:
            filters = dict(body_patterns=[re.compile(g) for g in args.grep], participants=args.who,
                           since=args.since, until=args.until)
            filter_tail_rows([], **filters)
        except (re.error, ValueError) as exc:
            p.error(f"tail: bad filter: {exc}")
    try:
        conn, store = _open_store(args.db)
    except StoreError as exc:
        # An unopenable or too-new database is a user-facing condition, not a crash.
        print(f"thatch chat: cannot open {args.db}: {exc}", file=sys.stderr)
        return 1
    try:
        if args.command == "list":
            color = args.color == "always" or (args.color == "auto" and out.isatty())
            out.write(format_roster(store.list_sessions(), stale_days=args.stale, color=color) + "\n")
            out.flush()
            return 0
        feed = store.message_feed()
        events, state = tail_backlog(filter_tail_rows(feed, **filters), args.limit, full_feed=feed)
        _emit(events, out)
        while not args.once:
            time.sleep(args.interval)
            events, state = tail_poll(store.message_feed(), state, **filters)
            _emit(events, out)
    except KeyboardInterrupt:
        pass
    except StoreError as exc:  # the database stayed locked past the retries
        print(f"thatch chat: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # `thatch chat tail | head`
        pass
    finally:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
