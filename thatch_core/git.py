"""Checkout kind of a session's serving directory (R4).

Captured once at registration and shown in the roster as a ``loc:`` token,
so sessions coordinating on one tree can tell who sits where.
"""

from __future__ import annotations

import os
from typing import Literal

WorktreeKind = Literal["worktree", "root"]


def detect_worktree_kind(directory: "str | os.PathLike[str] | None") -> WorktreeKind | None:
    """Classify ``directory`` by its own ``.git`` entry.

    A ``.git`` file is a linked worktree (git writes ``gitdir: ...`` there),
    a ``.git`` directory is the project root, anything else (no entry, no
    directory, unreadable) is undetected: ``None``. Only the directory itself
    is inspected, never its parents: a session serving a subdirectory of a
    checkout is neither at the root nor in a worktree root.
    """
    if directory is None or directory == "":
        return None
    try:
        entry = os.path.join(os.fspath(directory), ".git")
        if os.path.isdir(entry):
            return "root"
        if os.path.isfile(entry):
            return "worktree"
    except (OSError, ValueError, TypeError):
        # ValueError: embedded NUL in a path; TypeError: not a path at all.
        # Either reads like an unreadable path: undetected.
        return None
    return None
