"""The harness's OS-level command line, and the startup target it names.

opencode hosts its server (and so the plugin) in a worker thread whose argv is
just the worker script, so `sys.argv` says nothing about `-s`/`-c`. The worker
shares the process pid, so the plugin reads the command line the OS recorded
for that pid instead: `/proc/<pid>/cmdline` on Linux, `ps -o args=` elsewhere
(R5).
"""

from __future__ import annotations

import subprocess
from typing import Sequence

SESSION_FLAGS = ("-s", "--session")
CONTINUE_FLAGS = ("-c", "--continue")


def read_cmdline(pid: int) -> list[str]:
    """argv of process `pid`, or `[]` when neither source can tell.

    `/proc` keeps arguments NUL-separated, so ids survive exactly; the `ps`
    fallback loses quoting (it prints one space-joined string), which is fine
    for the flags and session ids this module looks for.
    """
    try:
        with open(f"/proc/{int(pid)}/cmdline", "rb") as fh:
            raw = fh.read()
        if raw:
            return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    except OSError:
        pass
    try:
        out = subprocess.run(
            ["ps", "-o", "args=", "-p", str(int(pid))],
            capture_output=True, text=True, timeout=5, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return out.stdout.split()


def parse_startup_target(argv: Sequence[str]) -> tuple[str, str | None] | None:
    """`("session", id)` for `-s <id>` / `--session <id>` / `--session=<id>`,
    `("continue", None)` for `-c` / `--continue`, else `None`.

    An explicit session id wins over `-c` wherever the flags appear, because
    it names the session directly. A `-s` with no value (last argument, or
    followed by another flag) names nothing and is ignored. Scanning stops at
    `--`: what follows is a message, not flags.
    """
    session: str | None = None
    cont = False
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        if arg in SESSION_FLAGS:
            nxt = args[i + 1] if i + 1 < len(args) else None
            if nxt and not nxt.startswith("-") and session is None:
                session = nxt
                i += 1
        elif arg.startswith("--session=") or arg.startswith("-s="):
            value = arg.split("=", 1)[1]
            if value and session is None:
                session = value
        elif arg in CONTINUE_FLAGS:
            cont = True
        i += 1
    if session is not None:
        return ("session", session)
    if cont:
        return ("continue", None)
    return None
