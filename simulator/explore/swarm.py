"""Which features a generated run turns on: the first thing a seed decides.

Swarm testing (Groce et al.; TigerBeetle's VOPR): instead of every run mixing
a little of everything, each run switches whole feature families on or off
and then draws the details. A run without any broadcast, or with only silent
agents, or with kills at a high rate, pushes the system into corners a
uniform mix reaches rarely. `draw_swarm` makes those choices from the run's
one random generator; `Size` bounds the world it may build.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from simulator.scenario.kinds import EXPLORE_ACTIONS, EXPLORE_ALWAYS_ACTIONS, EXPLORE_FAULTS, HOSTS, STEPS

ALWAYS_ON_HOSTS = tuple(key for key, h in HOSTS.items() if h.explore_always)
AGENT_KINDS = ("reader", "silent", "ping-pong")
WINDOW_KINDS = ("busy", "compacting", "aborted")

# Features left to the details once their family is on (a child session, a
# session that starts late, a process with a short poll interval).
DETAIL_FEATURES = ("children", "late-sessions", "join-kinds", "fast-polls", "odd-bodies", "checkouts")
# Reach (worlds and instants uniform draws miss): scripts aimed at the design's boundaries and
# same-instant races (reach.py), 002-era rows, synchronous host events, `as` claims, leaves with
# unread mail. Drawn after the details above, so a seed's older features stay as they were drawn.
REACH_FEATURES = ("boundaries", "races", "legacy", "sync-events", "spoofing", "unread-leaves")


@dataclass(frozen=True)
class Size:
    """Bounds on one generated world (the swarm draws inside them)."""

    max_processes: int = 32
    max_sessions: int = 3            # per process
    max_steps: int = 40
    max_minutes: int = 30            # the scripted phase, before any long sleep


SMALL = Size(max_processes=4, max_sessions=2, max_steps=14, max_minutes=10)
DEFAULT = Size()
SIZES = {"small": SMALL, "default": DEFAULT}


@dataclass(frozen=True)
class Swarm:
    """The features one run turns on, and their rates."""

    hosts: tuple[str, ...]
    agents: tuple[str, ...]
    windows: tuple[str, ...]
    actions: dict[str, int] = field(default_factory=dict)    # family -> weight
    faults: dict[str, float] = field(default_factory=dict)   # kind -> rate per step
    details: tuple[str, ...] = ()
    dispatch: str = "serial"
    # The dispatch the seed itself drew. Forcing one (determinism checks, shrinking) replaces
    # `dispatch` only: what is drawn for overlapping calls (read storms) follows this one, so a
    # forced world stays the world it was.
    drawn_dispatch: str = "serial"

    def on(self, feature: str) -> bool:
        return (feature in self.hosts or feature in self.agents or feature in self.windows
                or feature in self.actions or feature in self.faults or feature in self.details)

    def describe(self) -> str:
        """One line for stories and reports: what this run turned on."""
        faults = ", ".join(f"{k} {v:.0%}" for k, v in self.faults.items()) or "none"
        return (f"hosts {'+'.join(self.hosts)}; agents {'+'.join(self.agents)}; "
                f"actions {'+'.join(self.actions)}; faults {faults}; {self.dispatch} dispatch")


def _some(rng: random.Random, options: tuple[str, ...], always: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Each option on with probability 1/2 (the `always` ones always), in the given order."""
    return tuple(o for o in options if o in always or rng.random() < 0.5)


def draw_swarm(rng: random.Random, *, dispatch: str | None = None) -> Swarm:
    """The features of one run. `dispatch` forces serial or concurrent."""
    hosts = _some(rng, tuple(HOSTS), always=ALWAYS_ON_HOSTS)
    agents = _some(rng, AGENT_KINDS) or (rng.choice(AGENT_KINDS),)
    windows = _some(rng, WINDOW_KINDS)
    # Action families and their weights, fault families and their rate ranges: simulator/scenario/kinds.py.
    # (the membership draw runs once per family, as it always has: a seed names the same world)
    actions = {a: w for a, w in EXPLORE_ACTIONS.items()
               if a in _some(rng, tuple(EXPLORE_ACTIONS), EXPLORE_ALWAYS_ACTIONS)}
    faults = {k: round(rng.uniform(lo, hi), 3) for k, (_, (lo, hi)) in EXPLORE_FAULTS.items() if rng.random() < 0.4}
    for family in list(faults):  # a fault no drawn host can take (a fork without Claude Code) is off
        needs = STEPS[EXPLORE_FAULTS[family][0]].needs
        if not any(HOSTS[h].has(needs) for h in hosts):
            del faults[family]
    details = _some(rng, DETAIL_FEATURES) + _some(rng, REACH_FEATURES)
    drawn = "concurrent" if rng.random() < 0.2 else "serial"  # drawn always: forcing keeps the rest of the world
    dispatch = dispatch or drawn
    return Swarm(hosts=hosts, agents=agents, windows=windows, actions=actions, faults=faults,
                 details=details, dispatch=dispatch, drawn_dispatch=drawn)


def without(swarm: Swarm, families: frozenset) -> Swarm:
    """`swarm` with the named families (actions, faults, details) off."""
    if not families:
        return swarm
    return replace(swarm, actions={k: v for k, v in swarm.actions.items() if k not in families},
                   faults={k: v for k, v in swarm.faults.items() if k not in families},
                   details=tuple(d for d in swarm.details if d not in families))
