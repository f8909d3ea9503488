"""Applying a scenario's fault steps (the orchestrator's side of faults.py).

Each fault step is recorded as `fault` when applied and `fault-fired` when it
took effect (docs/history.md); one that never takes effect is reported as
`fault-not-fired` at the end and fails its verdict as not reached.

- kill: SIGKILL now; the process's sessions are left unhosted.
- crash: OP_ARM_CRASH to the process; fired when it dies with a `crash` event.
- sleep: no dispatch in [t, t+for): polls and samples in the window are
  dropped, expectations in it are observed at once (the sleep-start state,
  recorded at their own t), everything else waits for the wake; every live
  poller beats once at the wake, before anything else due then, and goes on
  from there.
- resume: fork the named `start: never` process with `-s <id>` / `-c` (or
  the step's `argv`, `{id}` expanded) in the session's directory, listing
  the step's `listing` or every session that lived there; the session's
  hosting moves there.
- restart: SIGKILL the daemon, fork `into` with the same state dir, directory
  and open tabs (rehost grace).
- fork: OP_FORK to the Claude Code host with a fresh host id from the rng.
- lock: a holder process takes the write lock at t and releases it at t+for;
  fired if a store call failed (`store-error`) or had to wait meanwhile.
"""

from __future__ import annotations

from typing import Any, Optional

from simulator import clock as vclock
from simulator.child.lock_holder import LockHolder
from simulator.protocol import OP_ARM_CRASH, OP_FORK
from simulator.scenario.model import ARGV_PLACEHOLDER


def apply(orch: Any, t: int, idx: int, step: Any) -> None:
    action, args = step.action, step.args
    d = orch._next_dispatch()
    orch._record("fault", fault=action, step=idx, args=args.model_dump(mode="json", by_alias=True))
    handler = globals()[f"_{action}"]
    handler(orch, t, idx, d, args)


def _alive(orch: Any, label: str):
    live = orch.live.get(label)
    return live if live is not None and live.alive else None


def _kill(orch, t, idx, d, args) -> None:
    live = _alive(orch, args.process)
    if live is None:
        return
    orch._kill(live, "killed")
    orch._fired(idx, {"target": args.process})


def _crash(orch, t, idx, d, args) -> None:
    live = _alive(orch, args.process)
    if live is None:
        return
    nth = args.nth if "nth" in args.model_fields_set else None  # None: the named point's own default
    orch._exchange(t, d, [(live, OP_ARM_CRASH, None,
                           {"point": args.before, "sql": args.sql, "nth": nth, "step": idx})])


def _sleep(orch, t, idx, d, args) -> None:
    until = t + args.duration
    orch.sleep_until = until
    orch._record("sleep-start", until=until)
    orch._fired(idx, {"until": until})
    for live in orch.live.values():
        live.poll_gen += 1  # the timers in the window are lost; the wake restarts them
    orch._push(until, 0, ("sleep-end", idx))


def _resume(orch, t, idx, d, args) -> None:
    label = args.session
    sid = orch.world.session_id(label)
    directory = orch.session_dir.get(label) or orch.world.procs[orch.world.session_proc[label]].directory
    # The directory listing: the step's own `listing` (labels, any directory:
    # the author states what opencode finds), else every session that lived here.
    if args.listing is not None:
        listed = list(dict.fromkeys(args.listing))
    else:
        listed = [other for other, odir in orch.session_dir.items() if odir == directory]
    dir_sessions = []
    for other in listed:
        info = orch.world.session_info(other)
        dir_sessions.append({"id": info.session_id, "parent_id": info.parent_id, "label": other,
                             "updated_ms": vclock.epoch_ms(orch.last_activity.get(other, info.spec.start))})
    if args.argv is not None:
        # The author's whole command line; `{id}` is the resumed session's id.
        argv, how = [a.replace(ARGV_PLACEHOLDER, sid) for a in args.argv], "argv"
        startup = None
    else:
        argv, how = None, args.how
        startup = ("-s", sid) if args.how == "-s" else ("-c", None)
    cmdline = argv if argv is not None else (["opencode", "-s", sid] if args.how == "-s" else ["opencode", "-c"])
    opens = opened_session(cmdline, dir_sessions, orch.world.names_by_label())
    live = orch._start_process(t, args.process, extra=(label,), directory=directory, startup=startup,
                               directory_sessions=dir_sessions, resumed=label, how=how, argv=argv,
                               record={"opens": opens})
    if live.alive:
        detail = {"target": args.process, "session": label, "how": how}
        if argv is not None:
            detail["argv"] = argv
        orch._fired(idx, detail)


def opened_session(argv: list[str], listing: list[dict], ids: dict[str, str]) -> Optional[str]:
    """The label of the session opencode itself opens for `argv`, or None.

    The simulator's own model of opencode's command line, kept apart from
    thatch_core.osargs on purpose: the checkers judge a resume by it (a
    resumed session the command line does not open is hosted only once it is
    used, D-sim-22), so it must not come from the code under test. `-s ID` /
    `--session ID` / `--session=ID` / `-s=ID` open ID (the first one wins,
    over `-c` too); a flag with no value opens nothing; `-c` / `--continue`
    opens the newest top-level session of `listing`; `--` ends the flags.
    """
    by_id = {sid: label for label, sid in ids.items()}
    session, cont = None, False
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg in ("-s", "--session"):
            nxt = argv[i + 1] if i + 1 < len(argv) else ""
            if nxt and not nxt.startswith("-"):
                session = session or nxt
        elif arg.startswith(("--session=", "-s=")):
            session = session or arg.split("=", 1)[1] or None
        elif arg in ("-c", "--continue"):
            cont = True
    if session is not None:
        return by_id.get(session)
    if cont:
        top = [s for s in listing if not s.get("parent_id")]
        return max(top, key=lambda s: s.get("updated_ms") or 0)["label"] if top else None
    return None


def _restart(orch, t, idx, d, args) -> None:
    old = orch.live.get(args.process)
    if old is None:
        return
    tabs = [s for s, host in orch.hosting.items() if host == args.process]
    orch._kill(old, "restart")
    live = orch._start_process(t, args.into, extra=tuple(tabs), directory=old.ctx.directory,
                               state_dir=old.ctx.state_dir, rehost_grace_ms=args.grace, rehost_of=args.process)
    if live.alive:
        orch._fired(idx, {"target": args.into, "rehost_of": args.process, "sessions": tabs})


def _fork(orch, t, idx, d, args) -> None:
    host = orch.hosting.get(args.session)
    live = _alive(orch, host) if host else None
    if live is None:
        return
    new_id = orch.world.new_host_id(args.session)
    replies = orch._exchange(t, d, [(live, OP_FORK, args.session,
                                     {"session": args.session, "new_host_id": new_id, "step": idx})])
    if replies and replies[0] is not None and replies[0].ok:
        orch._fired(idx, {"session": args.session, "new_host_id": new_id})


def _lock(orch, t, idx, d, args) -> None:
    assert not orch._db_open
    others = [lv.conn for lv in orch.live.values() if lv.alive]
    holder = LockHolder(orch.world.db_path, orch.mp, close_in_child=others)
    holder.start()
    orch.locks[idx] = (holder, d)
    orch._push(t + args.duration, 0, ("lock-release", idx))
