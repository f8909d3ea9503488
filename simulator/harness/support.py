"""Plumbing every harness kind shares: connections, stores, config, CLI text.

Kept apart from base.py so the forked children of a Claude Code host (which
never build a Harness) use the same few functions.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import time
from typing import Any, Optional

from thatch_core import cli, clock
from thatch_core.db import open_db
from thatch_core.store import ChatStore

from simulator.child.crash_points import crash_points
from simulator.harness.sidecar import SidecarStore, sidecar_stderr_path
from simulator.protocol import HarnessContext
from simulator.replies import decode_reply
from simulator.scenario.durations import parse_duration

def registered_name(text: str) -> Optional[str]:
    """The name in chat_register's reply (`[registered] NAME`)."""
    return decode_reply("register", True, text).name


def create_database(path) -> None:
    """Create the run's database as thatch_core creates it (schema and migration), then close it."""
    open_db(path).close()


def open_connection(ctx: HarnessContext):
    """A connection to the run's database with the crash points installed.
    Only ever called inside the process that uses it (never before a fork)."""
    conn = open_db(ctx.db_path, busy_timeout_ms=ctx.busy_timeout_ms)
    crash_points().install(conn)
    return conn


def make_store(ctx: HarnessContext, conn, rng: random.Random):
    """The ChatStore (or the test's broken variant from ctx.overrides["store"]); on a checkout,
    the checkout's own ChatStore in a bun sidecar of this process (simulator/harness/sidecar.py)."""
    if ctx.checkout is not None:
        return SidecarStore(ctx.checkout, ctx.db_path, busy_timeout_ms=ctx.busy_timeout_ms,
                            seed=rng.getrandbits(32), stderr_path=sidecar_stderr_path(ctx.workdir))
    factory = (ctx.overrides or {}).get("store") or ChatStore
    return factory(conn, rng=rng)


def close_store(store) -> None:
    """End what the store holds besides its connection (a checkout's sidecar)."""
    closer = getattr(store, "close", None)
    if callable(closer):
        closer()


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


def cli_argv(action: str, args: dict[str, Any], db_path, *, t_ms: int = 0) -> list[str]:
    """The command line of a `cli_list` / `cli_tail` step, as a user types it.
    `since` / `until` given as a duration mean scenario start + it, written the
    way the CLI reads a bound ("YYYY-MM-DD HH:MM" in the local timezone; the
    step model holds them to whole minutes); anything else passes through."""
    def when(value) -> str:
        try:
            ms = parse_duration(value)
        except ValueError:
            return str(value)
        return time.strftime("%Y-%m-%d %H:%M", time.localtime((clock.now_ms() - t_ms + ms) // 1000))

    if action == "cli_list":
        argv = ["list", "--db", str(db_path)]
        if args.get("stale") is not None:
            stale = args["stale"]
            argv += ["--stale", "all" if str(stale).lower() == "all" else f"{float(stale):g}"]
        return argv
    argv = ["tail", "--once", "--db", str(db_path)]
    if args.get("limit") is not None:
        argv += ["--limit", str(args["limit"])]
    match = args.get("match")
    for item in ([match] if isinstance(match, str) else list(match or [])):
        argv += ["--match", str(item)]
    for flag in ("from", "to"):
        if args.get(flag) is not None:
            argv += [f"--{flag}", str(args[flag])]
    for flag in ("since", "until"):
        if args.get(flag) is not None:
            argv += [f"--{flag}", when(args[flag])]
    return argv


def cli_run(argv: list[str]) -> tuple[int, str]:
    """Run `thatch chat ARGV` through the real entry point (cli.main): the exit
    status and what it printed (stdout, then stderr). A refused command line
    exits 1 with its message on stderr, as in a terminal."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            rc = cli.main(argv, out=out)
        except SystemExit as exc:  # no refusal should exit this way; kept so a regression reads as a failure
            rc = exc.code if isinstance(exc.code, int) else 2
    return int(rc or 0), out.getvalue() + err.getvalue()


def cli_output(db_path, action: str, args: dict[str, Any], *, t_ms: int = 0) -> tuple[bool, str]:
    """What `thatch chat list` / `thatch chat tail --once` print over the run's
    database, run as the user runs them: (exit status 0, the text)."""
    rc, text = cli_run(cli_argv(action, args, db_path, t_ms=t_ms))
    return rc == 0, text


def first_name(store, candidates) -> Optional[str]:
    """The name of the first of `candidates` (chat session ids) with a row."""
    for candidate in candidates:
        row = store.get(candidate)
        if row is not None:
            return row.name
    return None
