"""The fake harnesses: one class per host kind, built by `make_harness`.

The engine's worker calls `make_harness(ctx, recorder)` inside the forked
harness process on OP_START, then `handle(cmd)` per command and `close()` at
the end. See base.py for what the kinds share.
"""

from __future__ import annotations

from simulator.protocol import HarnessContext


def make_harness(ctx: HarnessContext, recorder):
    """The harness for `ctx.kind` (opencode, claude-code, cursor)."""
    if ctx.kind == "opencode":
        from simulator.harness.opencode import OpencodeHarness as cls
    elif ctx.kind == "claude-code":
        from simulator.harness.claude_code import ClaudeCodeHarness as cls
    elif ctx.kind == "cursor":
        from simulator.harness.cursor import CursorHarness as cls
    else:
        raise ValueError(f"unknown harness kind {ctx.kind!r}: expected opencode, claude-code or cursor")
    return cls(ctx, recorder)


__all__ = ["make_harness"]
