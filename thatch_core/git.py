"""The git facts chat records: a session's checkout kind (R4) and its project name.

Checkout kind of a session's serving directory (R4).

Captured once at registration and shown in the roster as a ``loc:`` token,
so sessions coordinating on one tree can tell who sits where.
"""

from __future__ import annotations

import os
import re
import subprocess
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


# Remote URL shapes a project name is read from (owner/repo), as the real thatch reads them.
_REMOTE_SHAPES = (
    re.compile(r"^git@[^:]+:(?P<owner>.+)/(?P<repo>.+)$"),
    re.compile(r"^https?://[^/]+/(?P<owner>.+)/(?P<repo>.+)$"),
    re.compile(r"^ssh://git@[^/]+/(?P<owner>.+)/(?P<repo>.+)$"),
    re.compile(r"^git://[^/]+/(?P<owner>.+)/(?P<repo>.+)$"),
)

# A hook runs on every prompt: a git that hangs must not hold the host's turn.
_GIT_TIMEOUT_S = 5.0


def project_from_remote(url: str) -> str | None:
    """``owner/repo`` from a git remote URL (SSH shorthand, HTTPS, ssh://, git://), or None."""
    cleaned = re.sub(r"\.git$", "", url.strip().rstrip("/"))
    for shape in _REMOTE_SHAPES:
        m = shape.match(cleaned)
        if m:
            return f"{m['owner']}/{m['repo']}"
    return None


def _git(directory: str, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=directory, capture_output=True, text=True,
                              timeout=_GIT_TIMEOUT_S, check=False)
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def detect_project(directory: "str | os.PathLike[str]") -> str:
    """The project a session in ``directory`` belongs to, as the real thatch
    names it: the origin remote's ``owner/repo``, else the name of the
    repository's directory (worktree-safe: the common git dir's parent), else
    the directory's own name, else ``unknown``."""
    directory = os.fspath(directory)
    remote = _git(directory, "remote", "get-url", "origin")
    if remote and project_from_remote(remote):
        return project_from_remote(remote)
    common = _git(directory, "rev-parse", "--path-format=absolute", "--git-common-dir")
    if common:
        parent = common[:-len("/.git")] if common.endswith("/.git") else common
        if os.path.basename(parent):
            return os.path.basename(parent)
    return os.path.basename(os.path.abspath(directory).rstrip("/")) or "unknown"
