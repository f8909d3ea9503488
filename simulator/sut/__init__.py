"""The system under test: thatch_core (embedded) or a thatch checkout run by bun.

A run drives one system. `thatch-core` (the default) is the Python reference
implementation, in the harness process itself. A checkout is a directory
holding thatch's own `src/chat.ts` (and the `src/chat-names.ts` it imports):
its ChatStore and ChatPoller run in a bun sidecar of each harness process
(`sidecar.ts`, `preload.ts` beside this file), behind thatch_core's store
and poller interface (simulator/harness/sidecar.py), so the hosts, doors and
judges stay the same. Scenario files never name the system: the same file
runs on either.

This package is the parent's side: naming the system (`parse_sut`), finding
bun, describing a checkout once (its exports, hence its capabilities:
capabilities.py) and extracting the seed-002 checkout (seed_checkout.py).
It imports nothing of thatch_core.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

THATCH_CORE = "thatch-core"
SUT_ENV = "THATCH_SIM_SUT"
CHAT_TS = Path("src") / "chat.ts"
CHAT_NAMES_TS = Path("src") / "chat-names.ts"


class SutError(ValueError):
    """A system under test that cannot be used, with what to do about it."""


@dataclass(frozen=True)
class Sut:
    """One system under test: thatch_core, or the checkout at `checkout`."""

    checkout: Optional[Path] = None

    @property
    def name(self) -> str:
        """How reports, junit cases and summaries name it: `thatch-core` or the checkout's path."""
        return THATCH_CORE if self.checkout is None else str(self.checkout)

    @property
    def is_core(self) -> bool:
        return self.checkout is None


CORE = Sut()


def parse_sut(text: Optional[str]) -> Sut:
    """`thatch-core` (or nothing) or a checkout path; a path that is no checkout names what is missing."""
    if text is None or not str(text).strip() or str(text).strip() == THATCH_CORE:
        return CORE
    root = Path(str(text).strip()).expanduser().resolve()
    if not root.is_dir():
        raise SutError(f"{text}: not a directory (a thatch checkout holds src/chat.ts; or write {THATCH_CORE})")
    for need in (CHAT_TS, CHAT_NAMES_TS):
        if not (root / need).is_file():
            raise SutError(f"{root / need} not found: --sut names a thatch checkout (its src/chat.ts "
                           f"and src/chat-names.ts), or {THATCH_CORE}")
    return Sut(checkout=root)


def sut_from_env(explicit: Optional[str] = None) -> Sut:
    """The option given, else $THATCH_SIM_SUT, else thatch_core."""
    return parse_sut(explicit if explicit is not None else os.environ.get(SUT_ENV))


def parse_sut_list(text: str) -> list[Sut]:
    """`compare --sut A,B`: each named system, in order, at least two, no repeats."""
    suts = [parse_sut(part) for part in str(text).split(",") if part.strip()]
    if len(suts) < 2:
        raise SutError(f"--sut {text!r}: name two systems or more, comma-separated (e.g. {THATCH_CORE},PATH)")
    if len({s.name for s in suts}) != len(suts):
        raise SutError(f"--sut {text!r}: a system is named twice")
    return suts
