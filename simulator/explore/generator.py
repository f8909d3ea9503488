"""One seed -> one valid scenario: the swarm first, then the world, then the timeline.

Everything is drawn from ONE `random.Random(seed)`; faker draws its words
through that same generator (`Faker.random`), so a seed names exactly one
scenario on every machine with the same faker. The result is a
`simulator.scenario.model.Scenario`, built from a plain document (what the
YAML would say) and validated like a loaded file: the writer turns it back
into YAML that `lint` accepts and that loads to an equal Scenario.

The order of draws: `draw_swarm` (which families are on), the scripted
length, the processes and their sessions (host kinds, agents, windows,
joins, poll intervals), then one step per drawn time, in time order, each
checked against the world as planned so far (plan.py): a fault with the
swarm's rate for it, else an action of an enabled family. A drawn step that
does not fit (a resume with no killed host yet) becomes a send.

Seed `S` of the exploration is also the scenario's `seed:`: names, session
ids and the harness's own faker bodies of a run come from it too.
"""

from __future__ import annotations

import heapq
import random
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional

from simulator.sut import sut_from_env
from simulator.sut.capabilities import capabilities_of
from simulator.explore import reach
from simulator.explore.interleave_draws import add_interleavings
from simulator.explore.later_draws import add_later_draws
from simulator.explore.plan import WorldPlan
from simulator.design import STALE_MS
from simulator.explore.swarm import DEFAULT, Size, Swarm, draw_swarm, without
from simulator.scenario.durations import parse_duration
from simulator.scenario.kinds import CRASH_POINTS, DEFAULT_HOST, HOSTS, STEPS, hosts_with
from simulator.scenario.model import Scenario

MINUTE = 60_000
DAY = 24 * 60 * MINUTE
TURNS = ("5s", "10s", "20s", "20s", "30s", "45s")
POLLS = ("10s", "15s", "20s", "30s")
SQL_POINTS = ("insert into chat_messages", "update chat_messages set", "delete from chat_sessions",
              "insert into chat_leave_tombstones", "insert into chat_name_counters")
# Every named statement point, the heartbeat's included (host steps are the scripted library's).
NAMED_POINTS = tuple(c.key for c in CRASH_POINTS.values() if not c.host_step)
HEARTBEAT_SQL = "update chat_sessions set"
# Statement crashes: the store calls drawn and how many statements one call runs at most (a longer
# count than a call has never fires: the fault is not reached).
CALL_STATEMENTS = {"send": 7, "broadcast": 8, "read": 4, "register": 7, "unregister": 4, "heartbeat": 3,
                   "mark_delivered": 3, "pending_notifications": 2, "refresh_topic": 3, "status": 3}
# Per drawn time, the chance of a boundary script or a same-instant race when that detail is on.
BOUNDARY_RATE, RACE_RATE = 0.15, 0.25
# Follow-ups a run may add beyond the size's step bound (boundary scripts, races).
EXTRA_STEPS = 12
# The kind of a new `start: never` process a resume or restart starts.
TARGET_KIND = next(key for key, h in HOSTS.items() if h.resumes and h.restarts)


@dataclass(frozen=True)
class Generated:
    """A generated scenario and the swarm it was drawn with."""

    seed: int
    swarm: Swarm
    spec: Scenario
    doc: dict[str, Any]
    forced: bool = False        # the swarm was given (a guided run's), not drawn


_FAKER = None


def _faker(rng: random.Random):
    """A Faker drawing through `rng` (built once per process: building one costs ~0.1 s)."""
    global _FAKER
    if _FAKER is None:
        from faker import Faker  # imported on first use: the module is cheap to import without it
        _FAKER = Faker()
    _FAKER.random = rng
    return _FAKER


def generate(seed: int, size: Size = DEFAULT, *, dispatch: Optional[str] = None,
             swarm: Optional[Swarm] = None, include: tuple[str, ...] = (), interleave: bool = False,
             design: Optional[str] = None) -> Generated:
    """The scenario seed `seed` names (`dispatch` forces serial or concurrent).

    `swarm` (a guided run's feature set) replaces the drawn one; the feature draws are made all
    the same, so the rest of the world comes from the same point of the seed's stream. `include`:
    properties judged on any design, with the later design's incidents drawn in when it names theirs;
    `interleave`: interleavings drawn in (interleave_draws.py).
    `design`: a named set of options every world runs under (its later options' faults and features drawn in).
    """
    rng = random.Random(seed)
    draw = _Draw(rng, _faker(rng), size)
    # On a checkout, families that exercise what it lacks are dropped after the draw, so thatch_core's
    # worlds are the ones they always were (simulator/sut/capabilities.py).
    drawn = without(draw_swarm(rng, dispatch=dispatch), capabilities_of(sut_from_env()).unexplorable())
    if swarm is not None and dispatch is not None:
        swarm = replace(swarm, dispatch=dispatch)
    doc = draw.document(seed, swarm or drawn)
    if include or design is not None:
        doc = add_later_draws(doc, seed, include, design=design)
    if interleave:
        doc = add_interleavings(doc, seed)
    return Generated(seed=seed, swarm=swarm or drawn, spec=Scenario.model_validate(doc), doc=doc,
                     forced=swarm is not None)


class _Draw:
    """The drawing of one scenario document."""

    def __init__(self, rng: random.Random, fake: Any, size: Size) -> None:
        self.rng, self.fake, self.size = rng, fake, size
        self.swarm: Swarm
        self.labels: set[str] = set()
        self.processes: list[dict[str, Any]] = []
        self.minutes = 1
        self.bodies: dict[str, list[str]] = {}   # sender -> texts it sent
        self.broadcasts = 0
        self.jumped = False
        self.min_length = 0                        # a boundary script runs the story at least this long
        self.shifting: set[int] = set()            # sleeps after which the rest of the story moves on
        # Follow-ups: (at, order, push count, step). Two scripts can give one instant the same
        # order; the push count breaks that tie (a heap never compares two steps).
        self.pending: list[tuple[int, int, int, dict[str, Any]]] = []
        self.pushes = 0
        self.recipients: list[str] = []            # who was last sent mail (unread-leaves)

    # -- the document ------------------------------------------------------------

    def document(self, seed: int, swarm: Swarm) -> dict[str, Any]:
        self.swarm = swarm
        self.minutes = self.rng.randint(2, self.size.max_minutes)
        self._processes()
        steps, length = self._timeline()
        doc: dict[str, Any] = {
            "name": f"explore-{seed}",
            "story": f"Generated from seed {seed}: {swarm.describe()}.",
            "seed": seed,
            "duration": length,
            "drain": self.rng.choice((3, 5, 5, 10)) * MINUTE,
        }
        if swarm.dispatch == "concurrent":
            doc["dispatch"] = "concurrent"
            doc["markers"] = ["race"]
        legacy = self._legacy()
        if legacy:
            doc["legacy"] = legacy
        doc["processes"] = self.processes
        doc["steps"] = steps
        return doc

    def _legacy(self) -> list[dict[str, Any]]:
        """002-era rows (R3, R26): claimed names of declared sessions or of orphans, some
        differing only in case, with topics, ages on both sides of the TTL, and unread mail."""
        if not self.swarm.on("legacy"):
            return []
        rows, names = [], set()
        for _ in range(self.rng.randint(1, 3)):
            sessions = [s for p in self.processes if p.get("start") != "never" for s in p["sessions"]]
            owner = self.rng.choice(sessions)["id"] if sessions and self.rng.random() < 0.7 else None
            if owner is not None and any(r.get("session") == owner for r in rows):
                owner = None
            name = self._word()
            if names and self.rng.random() < 0.3:
                name = self.rng.choice(sorted(names)).capitalize()
            if name in names:
                continue
            names.add(name)
            row: dict[str, Any] = {"name": name}
            if owner is not None:
                row["session"] = owner
            if self.rng.random() < 0.6:
                row["topic"] = self.fake.sentence(nb_words=3).rstrip(".")
            row["last_seen_ago"] = self.rng.choice((0, MINUTE, 3 * DAY, 7 * DAY - 60 * MINUTE, 7 * DAY + 60 * MINUTE))
            if self.rng.random() < 0.5:
                row["mail"] = [self.fake.sentence(nb_words=4) for _ in range(self.rng.randint(1, 2))]
            rows.append(row)
        return rows

    # -- the world -----------------------------------------------------------------

    def _count(self) -> int:
        r, top = self.rng.random(), self.size.max_processes
        n = self.rng.randint(1, 3) if r < 0.6 else self.rng.randint(4, 8) if r < 0.88 else self.rng.randint(9, 32)
        return max(1, min(n, top))

    def _processes(self) -> None:
        kinds = [k for k in self.swarm.hosts for _ in range(HOSTS[k].explore_copies)]
        projects = [self._word() for _ in range(self.rng.randint(1, 3))] + [None]
        for i in range(self._count()):
            kind = self.rng.choice(kinds)
            self.processes.append(self._process(f"{HOSTS[kind].explore_prefix}{i + 1}", kind,
                                                self.rng.choice(projects)))
        if sum(len(p["sessions"]) for p in self.processes) < 2:  # someone to write to
            label = f"{HOSTS[DEFAULT_HOST].explore_prefix}{len(self.processes) + 1}"
            self.processes.append(self._process(label, DEFAULT_HOST, projects[0]))

    def _process(self, label: str, kind: str, project: Optional[str]) -> dict[str, Any]:
        proc: dict[str, Any] = {"id": label, "kind": kind}
        if project:
            proc["project"] = project
        if self.swarm.on("checkouts") and self.rng.random() < 0.4:
            proc["checkout"] = self.rng.choice(("worktree", "none"))
        host = HOSTS[kind]
        if self.swarm.on("fast-polls") and host.polls and self.rng.random() < 0.5:
            proc["poll_interval"] = parse_duration(self.rng.choice(POLLS))
        if self.swarm.on("sync-events") and host.event_stream and self.rng.random() < 0.5:
            proc["events"] = "synchronous"
        most = host.explore_max_sessions
        top = self.size.max_sessions if most is None else min(most, self.size.max_sessions)
        proc["sessions"] = [self._session(kind) for _ in range(self.rng.randint(1, top))]
        if (host.explore_children and self.swarm.on("children") and len(proc["sessions"]) > 1
                and self.rng.random() < 0.4):
            proc["sessions"][-1]["parent"] = proc["sessions"][0]["id"]
        return proc

    def _session(self, kind: str) -> dict[str, Any]:
        session: dict[str, Any] = {"id": self._label(), "agent": self._agent(kind)}
        if self.rng.random() < 0.5:
            session["title"] = self.fake.sentence(nb_words=self.rng.randint(2, 6)).rstrip(".")
        joins = self.rng.choice(("idle", "explicit"))
        if self.swarm.on("join-kinds") and self.rng.random() < 0.4 and HOSTS[kind].explore_join_kinds:
            session["joins"] = joins  # an MCP session joins at its SessionStart hook: see plan.py
        if self.swarm.on("late-sessions") and self.rng.random() < 0.3:
            session["start"] = self.rng.randint(1, self.minutes * 30) * 1000
        return session

    def _agent(self, kind: str) -> dict[str, Any]:
        agent: dict[str, Any] = {"kind": self.rng.choice(self.swarm.agents)}
        if self.rng.random() < 0.5:
            agent["turn"] = parse_duration(self.rng.choice(TURNS))
        if agent["kind"] == "ping-pong" and self.rng.random() < 0.5:
            agent["reply_limit"] = self.rng.randint(1, 5)
        for window in self.swarm.windows:
            if window == "aborted" and not HOSTS[kind].aborts:
                continue
            if self.rng.random() < 0.35:
                agent[window] = [self._window()]
        return agent

    def _window(self) -> dict[str, int]:
        start = self.rng.randint(0, self.minutes * 60 - 10) * 1000
        return {"from": start, "until": start + self.rng.randint(10, 300) * 1000}

    def _label(self) -> str:
        while True:
            base = re.sub(r"[^a-z]", "", self.fake.first_name().lower()) or "s"
            label = base if base not in self.labels else f"{base}{len(self.labels)}"
            if label not in self.labels:
                self.labels.add(label)
                return label

    def _word(self) -> str:
        return re.sub(r"[^a-z]", "", self.fake.word().lower()) or "demo"

    def sessions(self) -> list[str]:
        return [s["id"] for p in self.processes for s in p["sessions"]]

    # -- the timeline ---------------------------------------------------------------

    def _timeline(self) -> tuple[list[dict[str, Any]], int]:
        length = self.minutes * MINUTE
        rate = self.rng.uniform(0.3, 3.0)
        count = max(1, min(self.size.max_steps, round(self.minutes * rate)))
        grain = self.rng.choice((1000, 5000, 30_000))
        times = sorted(self.rng.randint(0, length // grain) * grain for _ in range(count))
        plan = WorldPlan(self.processes)
        steps: list[dict[str, Any]] = []
        self.offset = 0
        for t in times:
            at = t + self.offset
            self._flush(plan, steps, at)
            script = self._reach(plan, at) or [self._step(plan, at) or self._send(plan, at)]
            for step in script:
                if step is not None and step["at"] > at:
                    self.pushes += 1
                    heapq.heappush(self.pending, (step["at"], len(self.pending) + len(steps), self.pushes, step))
                elif step is not None:
                    self._take(plan, steps, step)
        self._flush(plan, steps, None)
        last = max((st["at"] for st in steps), default=0)
        return steps, max(length + self.offset, self.min_length, -(-(last + 1) // MINUTE) * MINUTE)

    def _take(self, plan: WorldPlan, steps: list[dict[str, Any]], step: dict[str, Any]) -> None:
        """Add `step` when it fits the world now (and the run has room for it)."""
        if plan.problem(step) is not None or len(steps) >= self.size.max_steps + EXTRA_STEPS:
            return
        plan.apply(step)
        steps.append(step)
        if "sleep" in step and (step["sleep"]["for"] >= 7 * DAY or id(step) in self.shifting):
            self.offset += step["sleep"]["for"]  # the rest of the story happens after the jump

    def _flush(self, plan: WorldPlan, steps: list[dict[str, Any]], until: Optional[int]) -> None:
        """Take the follow-ups due by `until` (all when None), in time order."""
        while self.pending and (until is None or self.pending[0][0] <= until):
            self._take(plan, steps, heapq.heappop(self.pending)[-1])

    def _reach(self, plan: WorldPlan, t: int) -> Optional[list[dict[str, Any]]]:
        """A boundary script or a same-instant race (reach.py), when those details are on."""
        if self.swarm.on("boundaries") and self.rng.random() < BOUNDARY_RATE:
            return reach.boundary(self, plan, t)
        if self.swarm.on("races") and self.rng.random() < RACE_RATE:
            return reach.race(self, plan, t)
        return None

    def _step(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        faults = self.swarm.faults
        if faults and self.rng.random() < min(0.6, sum(faults.values())):
            kind = self.rng.choices(list(faults), weights=list(faults.values()))[0]
            step = FAULT_DRAWS[kind](self, plan, t)
            if step is not None and plan.problem(step) is None:
                return step
        families = self.swarm.actions
        family = self.rng.choices(list(families), weights=list(families.values()))[0]
        step = ACTION_DRAWS[family](self, plan, t)
        return step if step is not None and plan.problem(step) is None else None

    def _usable(self, plan: WorldPlan, t: int, *, running: bool = True) -> list[str]:
        return [s for s in self.sessions() if plan.usable(s, t) and (not running or plan.runs(plan.host[s]))]

    # -- actions ------------------------------------------------------------------

    def _send(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        senders = self._usable(plan, t)
        if not senders:
            return None
        sender = self.rng.choice(senders)
        args: dict[str, Any] = {"from": sender}
        others = [s for s in self.sessions() if s != sender]
        if not others or self.rng.random() < 0.04:
            # R9's refusals: a name nobody has, or the sender's own session (named by its label, so
            # it resolves to whatever name the sender was assigned).
            target = self.rng.choice(("nobody", "ghost-00001", sender))
            args["to" if target == sender else "to_raw"] = target
        else:
            args["to"] = self.rng.choice(others)
            self.recipients.append(args["to"])
        self._spoof(plan, args, sender)
        self._body(args)
        return {"at": t, "send": args}

    def _spoof(self, plan: WorldPlan, args: dict[str, Any], session: str) -> None:
        """R32: an MCP session's model claims another session's name (`as`), or a name nobody has."""
        if not (self.swarm.on("spoofing") and HOSTS[plan.host_kind(session)].mcp and self.rng.random() < 0.4):
            return
        others = [s for s in self.sessions() if s != session]
        args["as"] = "{%s}" % self.rng.choice(others) if others and self.rng.random() < 0.8 else "nobody-00001"

    def _body(self, args: dict[str, Any]) -> None:
        """A body for `args` (a send). A text is reused only by its own sender: P5 matches what a
        read returned by time and body, so one text from two senders in one second is ambiguous."""
        sender, r = args["from"], self.rng.random()
        own = self.bodies.setdefault(sender, [])
        if r < 0.15:
            return  # the harness's faker writes one from the run seed
        if self.swarm.on("odd-bodies") and r < 0.45:
            args["body"] = self._odd_body(sender)
        elif own and r < 0.55:
            args["body"] = self.rng.choice(own)  # the same text twice (P5 counts rows per text)
        else:
            args["body"] = self.fake.sentence(nb_words=self.rng.randint(3, 10))
        if isinstance(args["body"], str):
            own.append(args["body"])

    def _odd_body(self, sender: str) -> Any:
        """Bodies at the edges: blanks around, blank only, several lines, non-ASCII, and the
        10,000-character cap (one under, at, one over), the sender's label inside each."""
        choice = self.rng.randrange(6)
        if choice == 0:
            return f"  {self.fake.sentence(nb_words=4)} {sender}\n\n"
        if choice == 1:
            return "   "  # blank once trimmed: refused
        if choice == 2:
            return "\n".join([sender] + [self.fake.sentence(nb_words=3) for _ in range(2)])
        if choice == 3:
            return f"caf\u00e9 \u2713 \u00fcber \u65e5\u672c {sender}"
        length = self.rng.choice((9_999, 10_000, 10_001))
        times, rest = divmod(length, len(sender))
        if choice == 4:
            return {"prefix": "x" * rest, "repeat": sender, "times": times}
        return {"prefix": "  " + "x" * rest, "repeat": sender, "times": times, "suffix": "  "}

    def _broadcast(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        senders = self._usable(plan, t)
        if not senders:
            return None
        args: dict[str, Any] = {"from": self.rng.choice(senders)}
        if self.rng.random() < 0.8:  # never a repeated text: P8 tells broadcasts apart by sender and body
            self.broadcasts += 1
            args["body"] = f"{self.fake.sentence(nb_words=self.rng.randint(3, 8))} (#{self.broadcasts})"
        return {"at": t, "broadcast": args}

    def _by_session(self, plan: WorldPlan, t: int, actions: tuple[str, ...],
                    where: Callable[[str], bool] = lambda s: True) -> Optional[dict[str, Any]]:
        who = [s for s in self._usable(plan, t) if where(s)]
        if not who:
            return None
        return {"at": t, self.rng.choice(actions): {"session": self.rng.choice(who)}}

    def _read(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        step = self._by_session(plan, t, ("read",))
        if step is not None:
            self._spoof(plan, step["read"], step["read"]["session"])
        return step

    def _query(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        return self._by_session(plan, t, ("list", "status"))

    def _prompt(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        step = self._by_session(plan, t, ("prompt",))
        if step is not None and self.rng.random() < 0.7:
            step["prompt"]["text"] = self.fake.sentence(nb_words=self.rng.randint(2, 8))
        return step

    def _title(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        step = self._by_session(plan, t, ("title",))
        if step is not None:
            step["title"]["title"] = self.fake.sentence(nb_words=self.rng.randint(1, 6)).rstrip(".")
        return step

    def _churn(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        step = self._by_session(plan, t, ("unregister", "register", "register", "delete", "exit"))
        mailed = [s for s in self.recipients[-3:] if s in self._usable(plan, t)]
        if step is not None and self.swarm.on("unread-leaves") and mailed and self.rng.random() < 0.7:
            key = next(k for k in step if k != "at")
            step[key] = {"session": self.rng.choice(mailed)}  # a leave with mail still unread (R7, R11)
        if step is not None and plan.problem(step) is not None:  # delete/exit of an MCP session
            key = next(k for k in step if k != "at")
            step = {"at": t, "unregister": step[key]}
        return step

    def _config(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        """R29, R30: chat.enabled or chat.autoRegister edited while the process runs."""
        procs = [p["id"] for p in self.processes if p.get("start") != "never" or p["id"] in plan.used]
        if not procs:
            return None
        args: dict[str, Any] = {"process": self.rng.choice(procs)}
        for key in ("enabled", "autoRegister"):
            if self.rng.random() < 0.6:
                args[key] = self.rng.random() < 0.4
        if len(args) == 1:
            args["autoRegister"] = False
        return {"at": t, "config": args}

    def _cli(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        if self.rng.random() < 0.5:
            stale = self.rng.choice(("all", 1, 7, None))  # None: the CLI's default bound (one day, R16)
            return {"at": t, "cli_list": {} if stale is None else {"stale": stale}}
        limit = self.rng.randint(0, 30)  # 0 draws `all` (the CLI's limit is 1 or more)
        return {"at": t, "cli_tail": {"limit": limit or "all"}}

    # -- faults ---------------------------------------------------------------------

    def _running(self, plan: WorldPlan, kinds: tuple[str, ...]) -> list[str]:
        return [p["id"] for p in self.processes if plan.runs(p["id"]) and p["kind"] in kinds]

    def _kill(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        running = self._running(plan, tuple(HOSTS))
        return {"at": t, "kill": {"process": self.rng.choice(running)}} if running else None

    def _crash(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        running = self._running(plan, hosts_with(STEPS["crash"].needs))
        if not running:
            return None
        args: dict[str, Any] = {"process": self.rng.choice(running)}
        r = self.rng.random()
        if r < 0.4:  # any statement boundary of a store call, not only the named ones
            args["call"] = self.rng.choice(sorted(CALL_STATEMENTS))
            args["statement"] = self.rng.randint(1, CALL_STATEMENTS[args["call"]])
            if self.rng.random() < 0.3:
                args["when"] = "after"
        else:
            key = "before" if r < 0.85 else "sql"
            points = NAMED_POINTS if key == "before" else SQL_POINTS + (HEARTBEAT_SQL,)
            args[key] = self.rng.choice(points)
        if self.rng.random() < 0.3:
            args["nth"] = self.rng.randint(1, 3)
        return {"at": t, "crash": args}

    def _sleep(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        return {"at": t, "sleep": {"for": self.rng.randint(1, 120) * MINUTE}}

    def _prune(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        if self.jumped:
            return None  # one jump a run: a second week adds nothing the first did not
        self.jumped = True
        # Around the 7-day TTLs (auto rows, tombstones), on both sides: a day early or late
        # is the bug a jump past them only would never show.
        return {"at": t, "sleep": {"for": 6 * DAY + self.rng.randint(60, 48 * 60) * MINUTE}}

    def _stall(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        """Poll jitter (R13, R14): a polling process's timer lost for a while, its cycles skipped
        and the next one late, never so long that a beat gap passes the 60 s staleness bound."""
        running = self._running(plan, hosts_with(STEPS["stall"].needs))
        if not running:
            return None
        label = self.rng.choice(running)
        proc = next(p for p in self.processes if p["id"] == label)
        room = (STALE_MS - reach.interval(proc)) // 1000
        if room < 1:
            return None
        return {"at": t, "stall": {"process": proc["id"], "for": self.rng.randint(1, room) * 1000}}

    def _lock(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        # Short: every store call meeting the lock backs off in real time (a minute-long lock
        # costs half a minute of wall clock), and a few seconds already fail polls and tools.
        return {"at": t, "lock": {"for": self.rng.randint(2, 15) * 1000}}

    def _target(self, plan: WorldPlan, like: str) -> Optional[str]:
        """A new `start: never` opencode process in the directory of `like` (None: the world is full)."""
        if len(self.processes) >= self.size.max_processes:
            return None
        label = f"{HOSTS[TARGET_KIND].explore_prefix}{len(self.processes) + 1}"
        proc: dict[str, Any] = {"id": label, "kind": TARGET_KIND, "start": "never", "sessions": []}
        model = next(p for p in self.processes if p["id"] == like)
        for key in ("project", "checkout", "poll_interval"):
            if key in model:
                proc[key] = model[key]
        self.processes.append(proc)
        plan.kind[label] = TARGET_KIND
        plan.never.add(label)
        return label

    def _resume(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        ready = [s for s in self.sessions() if plan.resumable(s, t)]
        if not ready:
            return self._kill(plan, t)  # a killed host is what a later resume needs
        how_c = self.rng.random() < 0.3
        parents = [s for s in ready if s in plan.parent.values()]
        if how_c and parents and self.rng.random() < 0.5:
            ready = parents  # R5 and R1 meet only where `-c` finds a sub-agent child in the directory
        session = self.rng.choice(ready)
        target = self._target(plan, plan.host[session])
        if target is None:
            return None
        args: dict[str, Any] = {"session": session, "process": target}
        if how_c:
            args["how"] = "-c"
            children = [s for s, parent in plan.parent.items() if parent == session]
            if children and self.rng.random() < 0.5:
                # R5: a directory whose listing holds only a sub-agent child: `-c` continues the
                # newest top-level session, so here none.
                args["listing"] = [self.rng.choice(children)]
        return {"at": t, "resume": args}

    def _restart(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        running = self._running(plan, hosts_with(STEPS["restart"].needs))
        if not running:
            return None
        old = self.rng.choice(running)
        target = self._target(plan, old)
        if target is None:
            return None
        args: dict[str, Any] = {"process": old, "into": target}
        grace = self.rng.randint(2, 30) * MINUTE
        if self.rng.random() < 0.6:
            args["grace"] = grace
        return {"at": t, "restart": args}

    def _fork(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        return self._by_session(plan, t, ("fork",), lambda s: STEPS["fork"].accepts(plan.host_kind(s)))


ACTION_DRAWS: dict[str, Callable[[_Draw, WorldPlan, int], Optional[dict[str, Any]]]] = {
    "send": _Draw._send, "broadcast": _Draw._broadcast, "read": _Draw._read, "query": _Draw._query,
    "prompt": _Draw._prompt, "title": _Draw._title, "churn": _Draw._churn, "cli": _Draw._cli,
    "config": _Draw._config,
}
FAULT_DRAWS: dict[str, Callable[[_Draw, WorldPlan, int], Optional[dict[str, Any]]]] = {
    "kill": _Draw._kill, "crash": _Draw._crash, "sleep": _Draw._sleep, "resume": _Draw._resume,
    "restart": _Draw._restart, "fork": _Draw._fork, "lock": _Draw._lock, "prune": _Draw._prune,
    "jitter": _Draw._stall,
}

__all__ = ["Generated", "generate"]
