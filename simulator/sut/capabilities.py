"""What a thatch checkout can do, detected once from the checkout and read by every phase.

`describe(checkout)` asks bun to load the checkout's `src/chat.ts` once and
report its exports (ChatStore's methods, exported functions and constants);
`Capabilities` turns that into the behaviours this project knows
(`CAPABILITIES`, declared once). Validation refuses a scenario whose rules
need a behaviour the checkout lacks ("not applicable on this SUT: no
tombstones in this checkout"); the judges mark a property that needs one as
not applicable; exploration draws no world that needs one. thatch_core has
every capability (`CORE_CAPABILITIES`).

Options that exist only in thatch_core (seed 003's messaging policies, the
later design's switches, `policy:` in a scenario) are never applicable on a
checkout: a checkout has its own design, whatever its era.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from simulator.sut import CHAT_TS, SUT_ENV, THATCH_CORE, Sut, SutError, sut_from_env
from simulator.sut.bun import sidecar_argv

DESCRIBE_TIMEOUT_S = 60


@dataclass(frozen=True)
class Description:
    """What bun saw in a checkout's chat.ts."""

    store: frozenset
    functions: frozenset
    constants: dict
    source: str

    @property
    def assigns(self) -> bool:
        """0.1.41: `assign` draws a pool name and `register` claims one."""
        return "assign" in self.store

    def has(self, method: str) -> bool:
        return method in self.store

    @property
    def stale_ms(self) -> int:
        if "CHAT_STALE_MS" in self.constants:
            return int(self.constants["CHAT_STALE_MS"])
        return int(self.constants.get("CHAT_STALE_MINUTES", 10)) * 60_000


@dataclass(frozen=True)
class Capability:
    key: str
    lacking: str                                  # "no tombstones": what a checkout without it lacks
    present: Callable[[Description], bool]
    rules: tuple[str, ...] = ()                   # design rules that need it
    properties: tuple[str, ...] = ()              # properties that judge it
    explore: tuple[str, ...] = ()                 # exploration's families that exercise it (not drawn without it)


# The behaviours a checkout may or may not have, each with the rules and properties that need it. P11's
# reference model states seed 000's directory (assigned names, tombstones, two-beat staleness), so a
# checkout without one of those is not judged by it.
CAPABILITIES: tuple[Capability, ...] = (
    Capability("assigned-names", "no assigned counter names (it claims names from its pool)",
               lambda d: "assign" not in d.store and "CHAT_NAME_POOL" in d.source, ("R2",), ("P6", "P11")),
    Capability("tombstones", "no leave tombstones", lambda d: "hasLeaveTombstone" in d.store, ("R7",), ("P7", "P11"),
               ("churn", "unread-leaves")),
    Capability("prune", "no prune of silent sessions", lambda d: "pruneStaleAuto" in d.store, ("R26",), (),
               ("prune",)),
    Capability("two-beat-staleness", "no staleness at two missed beats (60 s)",
               lambda d: d.stale_ms == 60_000, ("R14", "R15", "R35"), ("P4", "P8", "P11")),
    Capability("continuation", "no continuation adoption", lambda d: "continueSession" in d.store,
               ("R33",), ("P9",), ("fork",)),
    Capability("host-pid-anchors", "no host-pid anchors", lambda d: "recordHostPid" in d.store, ("R32",)),
    Capability("topic-refresh", "no topic refresh of auto rows", lambda d: "refreshAutoTopic" in d.store, ("R3",)),
    Capability("worktree-kind", "no checkout kind on rows", lambda d: "worktree" in d.source, ("R4",)),
    Capability("retry-dedup", "no retry de-duplication", lambda d: "CHAT_DEDUPE_WINDOW_MS" in d.constants,
               (), ("P12",)),
    Capability("split-bodies", "no split bodies", lambda d: "splitChatBody" in d.functions, (), ("P13",)),
    Capability("paging", "no paged reads", lambda d: "chatReadPage" in d.functions),
    Capability("machinery-markers", "no machinery markers", lambda d: "markMachinery" in d.store, (), ("P14",)),
    Capability("name-claims", "no name claims", lambda d: "chat_name_claims" in d.source),
)
BY_KEY = {c.key: c for c in CAPABILITIES}


@dataclass(frozen=True)
class Capabilities:
    """The capabilities of one system under test."""

    sut: str
    present: frozenset
    stale_ms: int = 60_000
    core: bool = False

    def lacks(self, key: str) -> bool:
        return key not in self.present

    def missing_for_rules(self, rules: Iterable[str]) -> list[Capability]:
        wanted = set(rules)
        return [c for c in CAPABILITIES if self.lacks(c.key) and wanted & set(c.rules)]

    def missing_for_property(self, pid: str) -> Optional[Capability]:
        return next((c for c in CAPABILITIES if self.lacks(c.key) and pid in c.properties), None)

    def unexplorable(self) -> frozenset:
        """Exploration's families that exercise a behaviour this system lacks."""
        return frozenset(f for c in CAPABILITIES if self.lacks(c.key) for f in c.explore)

    def summary(self) -> str:
        have = ", ".join(c.key for c in CAPABILITIES if not self.lacks(c.key)) or "none"
        return f"{self.sut}: {have}; stale after {self.stale_ms // 1000} s"


CORE_CAPABILITIES = Capabilities(sut="thatch-core", present=frozenset(BY_KEY), core=True)


def not_applicable(what: str, capability: Capability) -> str:
    return f"not applicable on this SUT: {capability.lacking} in this checkout ({what})"


@functools.lru_cache(maxsize=8)
def _describe(checkout: Path, mtime_ns: int) -> Description:
    chat_ts = checkout / CHAT_TS
    request = json.dumps({"id": 1, "op": "describe"}) + "\n"
    try:
        done = subprocess.run(sidecar_argv(checkout), input=request.encode(), capture_output=True,
                              cwd=str(checkout), timeout=DESCRIBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise SutError(f"{chat_ts}: bun did not load it within {DESCRIBE_TIMEOUT_S} s") from None
    reply = _first_reply(done.stdout)
    if reply is None or "ok" not in reply:
        err = done.stderr.decode("utf-8", "replace").strip() or (reply or {}).get("error", {}).get("message", "")
        raise SutError(f"{chat_ts} does not load under bun (exit {done.returncode}):\n{err}")
    got: dict[str, Any] = reply["ok"]
    return Description(store=frozenset(got["store"]), functions=frozenset(got["functions"]),
                       constants=dict(got["constants"]), source=chat_ts.read_text(encoding="utf-8"))


def _first_reply(out: bytes) -> Optional[dict]:
    for line in out.decode("utf-8", "replace").splitlines():
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None


def describe(checkout: Path) -> Description:
    """The checkout's exports as bun loads them (once per checkout and chat.ts version)."""
    checkout = Path(checkout)
    return _describe(checkout, (checkout / CHAT_TS).stat().st_mtime_ns)


def capabilities_of(sut: Sut) -> Capabilities:
    if sut.is_core:
        return CORE_CAPABILITIES
    d = describe(sut.checkout)
    return Capabilities(sut=sut.name, present=frozenset(c.key for c in CAPABILITIES if c.present(d)),
                        stale_ms=d.stale_ms)


def scenario_not_applicable(rules: Iterable[str], uses_policies: bool, caps: Capabilities) -> Optional[str]:
    """Why a scenario cannot be judged on `caps`'s system (None when it can): its rules need what the
    checkout lacks, or it turns on options that only thatch_core has."""
    if caps.core:
        return None
    if uses_policies:
        return ("not applicable on this SUT: the scenario turns on `policy:` options, which exist only in "
                "thatch_core (a checkout runs its own design)")
    missing = caps.missing_for_rules(rules)
    if missing:
        needs = "; ".join(f"{c.lacking} in this checkout (its rules {', '.join(r for r in c.rules if r in set(rules))})"
                          for c in missing)
        return f"not applicable on this SUT: {needs}"
    return None


def choose_sut(given: Optional[str]) -> Sut:
    """The system a command drives: `given` (else $THATCH_SIM_SUT, else thatch_core), checked now (a
    checkout that does not load under bun says so before anything runs) and made the environment's
    choice, so every process the command starts (forks, pytest-xdist workers) drives the same one."""
    sut = sut_from_env(given)
    capabilities_of(sut)
    os.environ[SUT_ENV] = sut.name
    return sut


def sut_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sut", default=None, metavar="PATH",
                        help=f"the system under test: {THATCH_CORE} (the default) or a thatch checkout PATH "
                             f"(its src/chat.ts, run by bun); default ${SUT_ENV}, else {THATCH_CORE}")
