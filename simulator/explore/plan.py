"""The world a generated timeline is planned against: who runs, who hosts whom.

The generator draws a step only where it makes sense at that time, and the
shrinker keeps only reductions that still make sense, by replaying the same
model: `WorldPlan.problem(step)` says why a step does not fit the world as it
stands, `apply(step)` moves the world on. Both work on the scenario document
(plain data, as the YAML says it), so a reduced document is checked without
running anything.

What "makes sense" excludes is what the generator never produces, because
the design gives it no single right outcome or the world cannot do it:
- a `resume` or `restart` target is a `start: never` opencode process used
  once; a session is resumed only after its host was killed (a live host and
  a resumed one would both deliver to it);
- a `restart` only once every tab of the daemon had its start (the new
  daemon re-hosts a tab that never started, which then never gets its first
  message, so it is never idle and never woken);
- a crash point only in a running opencode or cursor process; a `fork` only
  of a Claude Code session whose host runs;
- nothing acts for a session after it was deleted or exited, nor before its
  own start; `delete` and `exit` only on opencode sessions;
- a `lock` only in a world of opencode processes (a Claude Code or Cursor
  hook meeting the held lock stops the harness with StoreBusy), never
  overlapping another lock (the second holder cannot take it), and no
  process starts (resume, restart) while one is held (opening the
  database fails under the short busy timeout lock runs use);
- no `delete` or `exit` of a session whose host has a crash point armed on
  the leave's own statements, nor while the lock is held: the leave does
  not commit, but the checkers count a delete/exit step as a leave (P6/P7
  would fail on correct code); nor at the time of another step for that
  session or of its start: the checkers place a step's leave before every
  event of its time, so a registration just before it looks like a return.
"""


from __future__ import annotations

from typing import Any, Optional

from simulator.scenario.kinds import CRASH_POINTS, DEFAULT_HOST, HOSTS, PROCESS_ARG_KEYS, SESSION_ARG_KEYS, STEPS

# Crash points that fire inside a leave (session.deleted, /thatch/exit): see the last rule above.
LEAVE_POINTS = tuple(c.key for c in CRASH_POINTS.values() if c.inside_leave)
LEAVE_SQL = ("delete from chat_sessions", "insert into chat_leave_tombstones")
LEAVE_CALLS = ("unregister",)   # a statement crash in the store call a leave runs
STEP_KEYS = ("at", "name", "expect")


def action_of(step: dict[str, Any]) -> str:
    """The step's one action or fault key."""
    return next(k for k in step if k not in STEP_KEYS)


def actor_of(step: dict[str, Any]) -> Optional[str]:
    """The session label acting in a step (the sender of a send), if any: its kind's actor key."""
    action = action_of(step)
    key, args = STEPS[action].actor_key, step[action]
    return args.get(key) if key is not None and isinstance(args, dict) else None


class WorldPlan:
    """Processes running, sessions' hosts, closed sessions: as the timeline unfolds."""

    def __init__(self, processes: list[dict[str, Any]]) -> None:
        self.kind = {p["id"]: p.get("kind", DEFAULT_HOST) for p in processes}
        self.never = {p["id"] for p in processes if p.get("start") == "never"}
        self.used: set[str] = set()
        self.alive = {p["id"] for p in processes if p.get("start") != "never"}
        self.dead: set[str] = set()       # killed for sure (kill, restart)
        self.doomed: set[str] = set()     # an armed crash point may have killed it
        self.host = {s["id"]: p["id"] for p in processes for s in p.get("sessions", ())}
        self.parent = {s["id"]: s.get("parent") for p in processes for s in p.get("sessions", ())}
        self.start = {s["id"]: s.get("start", 0) for p in processes for s in p.get("sessions", ())}
        self.closed: set[str] = set()
        self.touched: dict[str, int] = {}                  # session -> time of the last step naming it
        self.sleeps: list[tuple[int, int]] = []            # [from, until) of each machine sleep
        self.leave_armed: set[str] = set()                 # processes a leave would crash
        self.locks: list[tuple[int, int]] = []             # [from, until] of each lock step
        self.lock_unsafe_world = not all(HOSTS[k].lock_safe for k in self.kind.values())

    # -- questions -------------------------------------------------------------

    def free_targets(self) -> list[str]:
        """`start: never` processes no resume or restart has used yet."""
        return sorted(self.never - self.used)

    def runs(self, proc: Optional[str]) -> bool:
        return proc in self.alive

    def host_kind(self, session: str) -> str:
        return self.kind[self.host[session]]

    def usable(self, session: str, t: int) -> bool:
        """The session exists by `t` and was not closed. An MCP session acts only after its
        first prompt (strictly after its start): before its SessionStart hook a tool call
        mints a second, hookless identity for the same conversation, which no real host does."""
        if session not in self.host or session in self.closed:
            return False
        start = self.start.get(session, 0)
        if HOSTS[self.host_kind(session)].mcp:
            return t > max(start, self.effective(start))  # a first prompt inside a sleep waits for the wake
        return t >= start

    def resumable(self, session: str, t: int) -> bool:
        return (self.usable(session, t) and self.parent.get(session) is None
                and STEPS["resume"].accepts(self.host_kind(session)) and self.host[session] in self.dead)

    def problem(self, step: dict[str, Any]) -> Optional[str]:
        """Why `step` does not fit the world now, or None."""
        action, args, t = action_of(step), step[action_of(step)], self.effective(step.get("at", 0))
        missing = self._undeclared(args)
        if missing:
            return f"names undeclared {missing}"
        if action == "lock":
            return self._lock_problem(t, args["for"])
        if action in ("resume", "restart") and self.locked(t):
            return f"{action} while the database lock is held"
        if action == "resume":
            if args["process"] not in self.free_targets() or not STEPS["resume"].accepts(self.kind[args["process"]]):
                return f"resume into {args['process']}, not a free start: never process that resumes"
            return None if self.resumable(args["session"], t) else f"{args['session']} cannot be resumed here"
        if action == "restart":
            if args["into"] not in self.free_targets() or not STEPS["restart"].accepts(self.kind[args["into"]]):
                return f"restart into {args['into']}, not a free start: never daemon"
            ok = self.runs(args["process"]) and STEPS["restart"].accepts(self.kind[args["process"]])
            unstarted = [s for s, h in self.host.items() if h == args["process"] and self.effective(self.start[s]) > t]
            if ok and unstarted:
                return f"restart of {args['process']} before one of its tabs started"
            return None if ok else f"restart of {args['process']}, not a running daemon"
        if action == "crash":
            ok = self.runs(args["process"]) and STEPS["crash"].accepts(self.kind[args["process"]])
            return None if ok else f"crash in {args['process']}, not a running process that takes crash points"
        if action == "kill":
            return None if args["process"] in self.kind else f"kill of unknown {args['process']}"
        if action == "stall":
            ok = self.runs(args["process"]) and STEPS["stall"].accepts(self.kind[args["process"]])
            return None if ok else f"stall of {args['process']}, not a running process that polls"
        if action in ("retry", "reload"):
            return self._later_problem(action, args, t)
        if action == "interleave":
            return self._interleave_problem(args)
        return self._session_problem(action, args, t)

    def _interleave_problem(self, args: dict[str, Any]) -> Optional[str]:
        """An interleaving names declared labels, and its pause a running process that takes crash points."""
        missing = next((m for m in map(self._undeclared, [args["pause"], *(v for c in args["run"]
                                                                            for v in c.values())]) if m), None)
        if missing:
            return f"names undeclared {missing}"
        pause = args["pause"]
        owner = pause.get("process") or self.host[pause["session"]]
        ok = self.runs(owner) and owner not in self.doomed and STEPS["crash"].accepts(self.kind[owner])
        return None if ok else f"a pause in {owner}, not a process running for sure that takes crash points"

    def _later_problem(self, action: str, args: Any, t: int) -> Optional[str]:
        """A retry or a reload (the later design's incidents) needs its host running for sure, and no held lock."""
        proc = args["process"] if action == "reload" else self.host.get(args["session"])
        if not self.runs(proc) or proc in self.doomed or not STEPS[action].accepts(self.kind[proc]):
            return f"{action} in {proc}, not a process running for sure that can take it"
        if self.locked(t):
            return f"{action} while the database lock is held"
        return None if action == "reload" else self._session_problem(action, args, t)

    def effective(self, t: int) -> int:
        """When a step scripted at `t` runs: a step inside a machine sleep waits for the wake,
        where a sleep step scripted before it and deferred to the same wake may defer it again
        (every sleep recorded here was scripted before the step asking)."""
        moved = True
        while moved:
            moved = False
            for a, b in self.sleeps:
                if a <= t < b:
                    t, moved = b, True
        return t

    def locked(self, t: int) -> bool:
        return any(a <= t <= b + 1000 for a, b in self.locks)

    def _lock_problem(self, t: int, length: int) -> Optional[str]:
        if self.lock_unsafe_world:
            return "a lock in a world with hosts a held lock stops"
        if self.locked(t):
            return "a lock while another is held"
        return None

    def _sessions_named(self, action: str, args: Any) -> list[str]:
        """The sessions a step acts on or moves (a restart moves every tab of its daemon)."""
        if action == "restart":
            return [s for s, host in self.host.items() if host == args["process"]]
        if not isinstance(args, dict):
            return []
        return [args[k] for k in SESSION_ARG_KEYS if args.get(k) in self.host]

    def _undeclared(self, args: Any) -> Optional[str]:
        if not isinstance(args, dict):
            return None
        for key in SESSION_ARG_KEYS:
            if args.get(key) is not None and args[key] not in self.host:
                return args[key]
        for key in PROCESS_ARG_KEYS:
            if args.get(key) is not None and args[key] not in self.kind:
                return args[key]
        return next((s for s in args.get("listing") or () if s not in self.host), None)

    def _session_problem(self, action: str, args: Any, t: int) -> Optional[str]:
        key = STEPS[action].actor_key
        actor = args.get(key) if key is not None and isinstance(args, dict) else None
        if actor is None:
            return None
        if not self.usable(actor, t):
            return f"{actor} is closed or not started at {t}"
        if not STEPS[action].accepts(self.host_kind(actor)):
            return f"{action} of {actor}, a session of a {self.host_kind(actor)} process"
        if action in ("delete", "exit") and self.host[actor] in self.leave_armed:
            return f"{action} of {actor}, whose host has a crash point armed inside a leave"
        if action in ("delete", "exit") and self.locked(t):
            return f"{action} of {actor} while the database lock is held"
        last = max(self.touched.get(actor, -1), self.effective(self.start.get(actor, 0)))
        if action in ("delete", "exit") and t <= last:
            return f"{action} of {actor} at the time of another step for it (or of its start)"
        if action == "fork" and not self.runs(self.host[actor]):
            return f"fork of {actor}, whose host is not running"
        return None

    # -- moving on ---------------------------------------------------------------

    def apply(self, step: dict[str, Any]) -> None:
        action = action_of(step)
        args = step[action]
        for session in self._sessions_named(action, args):
            self.touched[session] = self.effective(step.get("at", 0))
        if action == "kill":
            self.alive.discard(args["process"])
            self.dead.add(args["process"])
        elif action == "crash":
            self.doomed.add(args["process"])
            if (args.get("before") in LEAVE_POINTS or any(q in (args.get("sql") or "") for q in LEAVE_SQL)
                    or args.get("call") in LEAVE_CALLS):
                self.leave_armed.add(args["process"])
        elif action == "lock":
            at = self.effective(step.get("at", 0))
            self.locks.append((at, at + args["for"]))
        elif action == "sleep":
            at = self.effective(step.get("at", 0))
            self.sleeps.append((at, at + args["for"]))
        elif action == "restart":
            old, new = args["process"], args["into"]
            self.alive.discard(old)
            self.dead.add(old)
            self.used.add(new)
            self.alive.add(new)
            for session, host in list(self.host.items()):
                if host == old:
                    self.host[session] = new
        elif action == "resume":
            self.used.add(args["process"])
            self.alive.add(args["process"])
            self.host[args["session"]] = args["process"]
        elif action in ("delete", "exit"):
            self.closed.add(args["session"])


def replay_problems(doc: dict[str, Any]) -> list[str]:
    """Every step of a scenario document that does not fit the world where it stands."""
    plan = WorldPlan(doc["processes"])
    out = []
    for i, step in enumerate(doc.get("steps", ())):
        why = plan.problem(step)
        if why:
            out.append(f"steps[{i}]: {why}")
        else:
            plan.apply(step)
    return out


def keep_fitting(doc: dict[str, Any]) -> dict[str, Any]:
    """The document with every step that no longer fits dropped (in one replay:
    a dropped step changes nothing in the world)."""
    plan = WorldPlan(doc["processes"])
    steps = []
    for step in doc.get("steps", ()):
        if plan.problem(step) is None:
            plan.apply(step)
            steps.append(step)
    return {**doc, "steps": steps}
