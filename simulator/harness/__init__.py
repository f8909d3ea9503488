"""The fake harnesses: one class per host kind, built by `make_harness`.

The engine's worker calls `make_harness(ctx, recorder)` inside the forked
harness process on OP_START, then `handle(cmd)` per command and `close()` at
the end. See base.py for what the kinds share.
"""

from __future__ import annotations

from simulator.harness.base import Harness
from simulator.harness.claude_code import ClaudeCodeHarness
from simulator.harness.cursor import CursorHarness
from simulator.harness.opencode import OpencodeHarness
from simulator.history import Recorder
from simulator.protocol import HarnessContext
from simulator.scenario.kinds import CLAUDE_CODE, CURSOR, HOSTS, OPENCODE

# One fake host per declared host kind (simulator/scenario/kinds.py; a layout test holds them equal).
HARNESSES: dict[str, type[Harness]] = {OPENCODE: OpencodeHarness, CLAUDE_CODE: ClaudeCodeHarness, CURSOR: CursorHarness}


def make_harness(ctx: HarnessContext, recorder: Recorder) -> Harness:
    """The harness for `ctx.kind` (opencode, claude-code, cursor)."""
    try:
        cls = HARNESSES[ctx.kind]
    except KeyError:
        raise ValueError(f"unknown harness kind {ctx.kind!r}: expected {', '.join(HOSTS)}") from None
    return cls(ctx, recorder)


__all__ = ["make_harness"]
