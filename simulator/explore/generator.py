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

import random
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from simulator.explore.later_draws import add_later_draws
from simulator.explore.plan import WorldPlan
from simulator.explore.swarm import DEFAULT, Size, Swarm, draw_swarm
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
# The kind of a new `start: never` process a resume or restart starts.
TARGET_KIND = next(key for key, h in HOSTS.items() if h.resumes and h.restarts)


@dataclass(frozen=True)
class Generated:
    """A generated scenario and the swarm it was drawn with."""

    seed: int
    swarm: Swarm
    spec: Scenario
    doc: dict[str, Any]


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
             include: tuple[str, ...] = ()) -> Generated:
    """The scenario seed `seed` names (`dispatch` forces serial or concurrent; `include`: properties judged on
    any design, with the later design's incidents drawn in when it names theirs)."""
    rng = random.Random(seed)
    draw = _Draw(rng, _faker(rng), size)
    swarm = draw_swarm(rng, dispatch=dispatch)
    doc = draw.document(seed, swarm)
    if include:
        doc = add_later_draws(doc, seed, include)
    return Generated(seed=seed, swarm=swarm, spec=Scenario.model_validate(doc), doc=doc)


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
        doc["processes"] = self.processes
        doc["steps"] = steps
        return doc

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
        offset = 0
        for t in times:
            step = self._step(plan, t + offset) or self._send(plan, t + offset)
            if step is None:
                continue
            plan.apply(step)
            steps.append(step)
            if "sleep" in step and step["sleep"]["for"] >= 7 * DAY:
                offset += step["sleep"]["for"]  # the rest of the story happens after the jump
        return steps, length + offset

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
            args["to_raw"] = self.rng.choice(("nobody", "ghost-00001", sender))
        else:
            args["to"] = self.rng.choice(others)
        self._body(args)
        return {"at": t, "send": args}

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
        return self._by_session(plan, t, ("read",))

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
        if step is not None and plan.problem(step) is not None:  # delete/exit of an MCP session
            key = next(k for k in step if k != "at")
            step = {"at": t, "unregister": step[key]}
        return step

    def _cli(self, plan: WorldPlan, t: int) -> Optional[dict[str, Any]]:
        if self.rng.random() < 0.5:
            return {"at": t, "cli_list": {"stale": self.rng.choice(("all", 1, 7))}}
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
        key = "before" if self.rng.random() < 0.75 else "sql"
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
        session = self.rng.choice(ready)
        target = self._target(plan, plan.host[session])
        if target is None:
            return None
        args = {"session": session, "process": target}
        if self.rng.random() < 0.3:
            args["how"] = "-c"
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
}
FAULT_DRAWS: dict[str, Callable[[_Draw, WorldPlan, int], Optional[dict[str, Any]]]] = {
    "kill": _Draw._kill, "crash": _Draw._crash, "sleep": _Draw._sleep, "resume": _Draw._resume,
    "restart": _Draw._restart, "fork": _Draw._fork, "lock": _Draw._lock, "prune": _Draw._prune,
}

__all__ = ["Generated", "generate"]
