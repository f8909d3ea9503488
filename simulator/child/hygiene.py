"""What every forked child of the simulator does first and last.

Harness workers, the lock holder and the Claude Code hook and MCP children
all run the same protocol around their own work (the stack's traps are in
docs/pitfalls.md):

- `enter(parent_pid, inherited)`: ask the kernel to SIGKILL us when the
  parent dies (and exit at once if it already did: the fork raced its
  death), ignore Ctrl-C (the orchestrator decides), and close the pipe ends
  inherited from the parent that belong to other children. Without this a
  child outlives a killed runner as an orphan, or keeps a sibling's pipe
  open so the parent never sees its EOF.
- `save_coverage()`: flush this process's coverage data before a planned
  SIGKILL (a killed process loses it).
- `leave(code)`: save coverage and `os._exit`, skipping the atexit handlers
  and buffers inherited from the parent, which are not ours to run.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from typing import Iterable, NoReturn

PR_SET_PDEATHSIG = 1


def _find_prctl():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:  # pragma: no cover - non-Linux: the orchestrator's finally still reaps
        return None


# Looked up once, in the parent, and inherited by every fork: a child loading the C library
# handle and the function pointer itself wrote ~100 pages it shares with its parent (measured).
_PRCTL = _find_prctl()


def die_with_parent(parent_pid: int) -> None:
    """Ask the kernel for SIGKILL when the parent dies; exit if it already did."""
    if _PRCTL is not None:
        try:
            _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except Exception:  # pragma: no cover - the orchestrator's finally still reaps
            pass
    if os.getppid() != parent_pid:
        os._exit(1)
    # Ctrl-C reaches the whole process group: let the orchestrator decide.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def close_inherited(ends: Iterable) -> None:
    """Close pipe ends the fork copied from the parent (other children's, or the parent's own)."""
    for end in ends:
        try:
            end.close()
        except Exception:
            pass


def enter(parent_pid: int, inherited: Iterable = ()) -> None:
    """The first thing a forked child does."""
    die_with_parent(parent_pid)
    close_inherited(inherited)


def save_coverage() -> None:
    """Flush this process's coverage data (a SIGKILL would lose it)."""
    # Only when coverage is already loaded: a process it measures has it in
    # sys.modules (inherited through the fork), and importing the package
    # just to learn that nothing measures us cost every child ~30 ms at stop.
    coverage = sys.modules.get("coverage")
    if coverage is None:
        return
    cov = coverage.Coverage.current()
    if cov is not None:
        try:
            cov.save()  # keeps measuring: a kill fault saves, then the process may run on briefly
        except Exception:  # pragma: no cover - coverage must never change a run
            pass


def leave(code: int = 0) -> NoReturn:
    """The last thing a forked child does."""
    save_coverage()
    os._exit(code)
