"""The harness's OS-level command line, and the startup target it names.

opencode hosts its server (and so the plugin) in a worker thread whose argv is
just the worker script, so `sys.argv` says nothing about `-s`/`-c`. The worker
shares the process pid, so the plugin reads the command line the OS recorded
for that pid instead: `/proc/<pid>/cmdline` on Linux, `ps -o args=` elsewhere
(R5).

The flags are read the way the real thatch reads them (src/os-args.ts,
D-real-host-3): the first `-s`/`--session`/`--session=` decides, and
whatever argument follows `-s` is the id, even one that looks like a flag.
"""

from __future__ import annotations

import subprocess
from typing import Sequence

SESSION_FLAGS = ("-s", "--session")
CONTINUE_FLAGS = ("-c", "--continue")
_SESSION_EQ = "--session="
_CONTINUE_EQ = "--continue="


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


def startup_session_id(argv: Sequence[str]) -> str | None:
    """The id `-s <id>` / `--session <id>` / `--session=<id>` names, or None.

    The first session flag decides: `-s` takes the next argument whatever it
    is, and names nothing when it is the last one; an empty `--session=`
    names nothing either. Nothing is skipped or stops the scan (`--` included).
    """
    args = list(argv)
    for i, arg in enumerate(args):
        if arg in SESSION_FLAGS:
            return (args[i + 1] if i + 1 < len(args) else None) or None
        if arg.startswith(_SESSION_EQ):
            return arg[len(_SESSION_EQ):] or None
    return None


def continues_last_session(argv: Sequence[str]) -> bool:
    """Whether the harness was started with `-c` / `--continue` (a boolean
    switch: the first one decides, and only `--continue=false` negates it)."""
    for arg in argv:
        if arg in CONTINUE_FLAGS:
            return True
        if arg.startswith(_CONTINUE_EQ):
            return arg[len(_CONTINUE_EQ):] != "false"
    return False


def parse_startup_target(argv: Sequence[str]) -> tuple[str, str | None] | None:
    """`("session", id)` when a session flag names an id, else `("continue",
    None)` for `-c` / `--continue`, else `None`: an explicit id wins over `-c`
    wherever the flags appear, because it names the session directly."""
    sid = startup_session_id(argv)
    if sid is not None:
        return ("session", sid)
    if continues_last_session(argv):
        return ("continue", None)
    return None
