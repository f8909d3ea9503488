"""Plumbing every harness kind shares: connections, stores, config, CLI text.

Kept apart from base.py so the forked children of a Claude Code host (which
never build a Harness) use the same few functions.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any, Optional

from simulator.protocol import HarnessContext

_REGISTERED = re.compile(r"You are registered as ([a-z0-9-]+)")


def registered_name(text: str) -> Optional[str]:
    """The name in chat_register's reply ("You are registered as NAME. ...")."""
    m = _REGISTERED.search(text or "")
    return m.group(1) if m else None


def open_connection(ctx: HarnessContext):
    """A connection to the run's database with the crash points installed.
    Only ever called inside the process that uses it (never before a fork)."""
    from simulator.faults import crash_points
    from thatch_core.db import open_db

    conn = open_db(ctx.db_path, busy_timeout_ms=ctx.busy_timeout_ms)
    crash_points().install(conn)
    return conn


def make_store(ctx: HarnessContext, conn, rng: random.Random):
    """The ChatStore (or the test's broken variant from ctx.overrides["store"])."""
    from thatch_core.store import ChatStore

    factory = (ctx.overrides or {}).get("store") or ChatStore
    return factory(conn, rng=rng)


def write_config(path, *, enabled: Optional[bool] = None, auto_register: Optional[bool] = None) -> dict:
    """Rewrite the thatch config file's chat switches, keeping everything else."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}
    chat = data.get("chat") if isinstance(data.get("chat"), dict) else {}
    if enabled is not None:
        chat["enabled"] = bool(enabled)
    if auto_register is not None:
        chat["autoRegister"] = bool(auto_register)
    data["chat"] = chat
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    return data


def cli_output(store, action: str, args: dict[str, Any]) -> str:
    """What `thatch chat list` / `thatch chat tail --once` print, over `store`."""
    from thatch_core import cli

    if action == "cli_list":
        stale = args.get("stale", None)
        stale_days = None if str(stale).lower() == "all" else (float(stale) if stale is not None else cli.CLI_STALE_DAYS_DEFAULT)
        return cli.format_roster(store.list_sessions(), stale_days=stale_days, color=False)
    grep = args.get("grep") or []
    who = args.get("who") or []
    filters = dict(
        body_patterns=[grep] if isinstance(grep, str) else list(grep),
        participants=[who] if isinstance(who, str) else list(who),
        since=args.get("since"), until=args.get("until"),
    )
    feed = store.message_feed()
    limit = args.get("limit", cli.TAIL_DEFAULT_LIMIT)
    events, _ = cli.tail_backlog(cli.filter_tail_rows(feed, **filters), limit, full_feed=feed)
    return "".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events)


def first_name(store, candidates) -> Optional[str]:
    """The name of the first of `candidates` (chat session ids) with a row."""
    for candidate in candidates:
        row = store.get(candidate)
        if row is not None:
            return row.name
    return None
