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
- resume: fork the named `start: never` process with `-s <id>` / `-c` in the
  session's directory; the session's hosting moves there.
- restart: SIGKILL the daemon, fork `into` with the same state dir, directory
  and open tabs (rehost grace).
- fork: OP_FORK to the Claude Code host with a fresh host id from the rng.
- lock: a holder process takes the write lock at t and releases it at t+for;
  fired if a store call failed (`store-error`) or had to wait meanwhile.
"""

from __future__ import annotations

from typing import Any

from simulator import clock as vclock
from simulator.faults import LockHolder
from simulator.protocol import OP_ARM_CRASH, OP_FORK


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
    dir_sessions = []
    for other, odir in orch.session_dir.items():
        if odir == directory:
            info = orch.world.session_info(other)
            dir_sessions.append({"id": info.session_id, "parent_id": info.parent_id, "label": other,
                                 "updated_ms": vclock.epoch_ms(orch.last_activity.get(other, info.spec.start))})
    startup = ("-s", sid) if args.how == "-s" else ("-c", None)
    live = orch._start_process(t, args.process, extra=(label,), directory=directory, startup=startup,
                               directory_sessions=dir_sessions, resumed=label, how=args.how)
    if live.alive:
        orch._fired(idx, {"target": args.process, "session": label, "how": args.how})


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
