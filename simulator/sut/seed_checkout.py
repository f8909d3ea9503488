"""The seed-002 checkout: thatch 0.1.41's `src/chat.ts`, extracted at run time.

`../shared/seeds/002_*.txt` (beside the repository, on every developer
machine and in CI) holds the whole 0.1.41 `src/chat.ts` as a new-file diff.
`extract_checkout` writes it into a directory as a checkout's `src/chat.ts`,
with a `src/chat-names.ts` of the project's own: 0.1.41 imports
`CHAT_NAME_POOL` from it and claims display names from the pool, so the pool
below holds plain names its `NAME_CHARSET` accepts. Nothing of the real code
is kept in the repository; tests and `thatch-sim checkout` extract it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Optional

from simulator.sut import CHAT_NAMES_TS, CHAT_TS, SutError

SEED_GLOB = "002_*.txt"
SRC_ENV = "THATCH_SRC"
_HUNK = re.compile(r"^@@ -0,0 \+1,(?P<count>\d+) @@")

# The project's own pool for the seed-002 checkout: one word each, letters only.
SEED_NAME_POOL = (
    "Alder", "Aspen", "Birch", "Bramble", "Cedar", "Clover", "Cypress", "Dahlia", "Elm", "Fennel",
    "Fern", "Garnet", "Hazel", "Heather", "Holly", "Indigo", "Ivy", "Jasper", "Juniper", "Kestrel",
    "Larch", "Laurel", "Linden", "Maple", "Marigold", "Myrtle", "Nettle", "Oak", "Olive", "Opal",
    "Orchid", "Pine", "Poppy", "Quartz", "Rowan", "Saffron", "Sage", "Sorrel", "Spruce", "Tansy",
    "Thistle", "Topaz", "Umber", "Violet", "Walnut", "Willow", "Yarrow", "Yew", "Zephyr", "Zinnia",
)


def repo_root() -> Path:
    return Path(__file__).resolve().parents[2]


def find_seed(root: Optional[Path] = None) -> Optional[Path]:
    """The seed-002 file in `../shared/seeds` beside the repository, or None."""
    seeds = (root or repo_root()).parent / "shared" / "seeds"
    found = sorted(seeds.glob(SEED_GLOB)) if seeds.is_dir() else []
    return found[0] if found else None


def chat_ts_of_seed(seed: Path) -> str:
    """The new file the seed's diff adds, as text."""
    lines = seed.read_text(encoding="utf-8").splitlines()
    for at, line in enumerate(lines):
        m = _HUNK.match(line)
        if m is None:
            continue
        count = int(m.group("count"))
        body = lines[at + 1: at + 1 + count]
        if len(body) != count or not all(b.startswith("+") for b in body):
            raise SutError(f"{seed}: the hunk at line {at + 1} promises {count} added lines, "
                           f"and {sum(b.startswith('+') for b in body)} follow")
        return "\n".join(b[1:] for b in body) + "\n"
    raise SutError(f"{seed}: no new-file hunk (@@ -0,0 +1,N @@) to extract src/chat.ts from")


def names_module(pool=SEED_NAME_POOL) -> str:
    return "export const CHAT_NAME_POOL: readonly string[] = " + json.dumps(list(pool), indent=1) + ";\n"


def extract_checkout(seed: Path, dest: Path) -> Path:
    """Write the seed's `src/chat.ts` and the project's `src/chat-names.ts` under `dest`."""
    dest = Path(dest)
    (dest / "src").mkdir(parents=True, exist_ok=True)
    (dest / CHAT_TS).write_text(chat_ts_of_seed(seed), encoding="utf-8")
    (dest / CHAT_NAMES_TS).write_text(names_module(), encoding="utf-8")
    return dest


def checkout_for_tests(tmp: Path) -> Optional[Path]:
    """A checkout for tests: $THATCH_SRC when set, else the seed extracted under `tmp`, else None."""
    explicit = os.environ.get(SRC_ENV)
    if explicit:
        return Path(explicit).resolve()
    seed = find_seed()
    return extract_checkout(seed, tmp) if seed is not None else None
