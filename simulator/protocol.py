"""What crosses the pipe between the orchestrator and a harness process.

The orchestrator owns virtual time and the agenda; a harness process only
ever does work when it receives a `Command`, at the command's virtual time
(its freezer is moved there first), and answers with one `Reply` that may ask
for more agenda entries (`FollowUp`: a turn ending, a busy window closing).
Who schedules what: the orchestrator puts scripted steps, poll timers,
samples and faults on the agenda; the harness asks (through the followups of
its OP_START reply and of later replies) for everything that follows from
its sessions' specs: each session's first user message at `Session.start`,
busy/compacting windows, turn ends. The worker (simulator/child/worker.py) answers
OP_ARM_CRASH and OP_STOP itself and emits `ready` after a successful OP_START
if the harness did not. A harness is built by
`simulator.harness.make_harness(ctx, recorder)` (or `ctx.overrides["harness"]`
in tests) and receives OP_START through `handle` like any other command.

Commands and replies are plain dataclasses of JSON-able values so they pickle
cheaply and can be logged.
"""

from __future__ import annotations

import os
import pickle
import random
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

# Operations a harness understands. Each harness kind handles the ones that
# make sense for it and answers others with Reply(ok=False, error=...).
OP_START = "start"          # first command after the fork: open the db, start the runtime
OP_POLL = "poll"            # the poll timer fired (opencode)
OP_ACT = "act"              # an action: args = act_args(kind, its arguments model, step index)
OP_TURN_END = "turn-end"    # an agent turn scheduled earlier ends: args = {"cause": ...}
OP_WINDOW = "window"        # a busy/compacting window opens or closes: args = {"what": "busy"|"compacting", "on": bool}
OP_ARM_CRASH = "arm-crash"  # args = {"point": name|None, "sql": substring|None, "nth": int, "step": index,
                            #         "when": "before"|"after", "call": store call|None, "statement": int|None,
                            #         "pause": bool (an interleaving's pause, not a crash), "actor": session id|None}
# worker-only: a process that sent `Held` (stopped inside a store call) goes on; no reply of its own, its
# events from now on carry this command's dispatch number and the reply to the held command follows
OP_RESUME = "resume"
# An arg any command may carry (the worker takes it off): a paused call in another process holds the
# write lock while this command runs (who, for the `blocked` event)
LOCK_HELD_BY = "lock_held_by"
OP_FORK = "fork"            # Claude Code session-id fork: args = {"session": label, "new_host_id": str, "step": index}
OP_RETRY = "retry"          # the host retries a committed tool call: args = {"session", "tool"|None, "times", "step"}
OP_RELOAD = "reload"        # the plugin reloads in the same process (a fresh runtime): args = {"step": index}
OP_STOP = "stop"            # graceful end of the run: flush, close, exit 0
OP_SAVE_COVERAGE = "save-coverage"  # worker-only, just before a kill fault: save coverage data, record nothing
# worker-only, windowed engine: run this process's own timers up to a horizon in one round trip.
# args = {"entries": [[t, priority, op, session, args], ...], "until": [t, priority], "followup_priority": p};
# the reply's result is {"ran": [[t, priority, provisional dispatch, session], ...]} (simulator/child/window.py)
OP_RUN_WINDOW = "run-window"


def act_args(action: str, args: Any, *, step: Optional[int] = None) -> dict[str, Any]:
    """The arguments of an OP_ACT command: the action's kind (simulator/scenario/kinds.py), its typed
    arguments model (one field per argument, the model the scenario was validated into), and the
    index of the scripted step it carries out (None: asked for by a harness or an observation)."""
    return {"action": action, "args": args, "step": step}


@dataclass(frozen=True)
class Command:
    """One unit of work for a harness process, at virtual time `t`, in dispatch `dispatch`."""

    dispatch: int
    t: int
    op: str
    session: Optional[str] = None
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FollowUp:
    """An agenda entry the harness asks for, at absolute virtual time `at`: the
    command it becomes then (`Harness.later` states every field)."""

    at: int
    op: str
    session: Optional[str]
    args: dict[str, Any]


@dataclass(frozen=True)
class Reply:
    dispatch: int
    ok: bool = True
    followups: tuple[FollowUp, ...] = ()
    result: Any = None
    error: Optional[str] = None
    # True when the harness raised (the worker caught it): the run stops with
    # `error`. ok=False alone is a refusal (an op this harness kind ignores).
    fatal: bool = False
    # Set by the worker, not the harness: crash events recorded while serving
    # this command by a child of the harness (a hook or MCP server child hit
    # a crash point) while the harness itself lives on.
    crashes: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Held:
    """Sent instead of a reply, before it: the process stopped inside a store call while serving
    command `dispatch` (`kind` "paused": an interleaving's pause; "blocked": its statement needs the
    write lock a paused call holds) and waits for OP_RESUME (simulator/child/crash_points.py)."""

    dispatch: int
    kind: str
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SessionInfo:
    """A session hosted by a harness: the author's label and the run's ids."""

    label: str
    session_id: str                 # opencode: ses_...; claude-code/cursor: the HOST session id
    spec: Any                       # simulator.scenario.model.Session
    parent_id: Optional[str] = None


@dataclass
class HarnessContext:
    """Everything a harness process needs, built by the orchestrator before the fork."""

    label: str
    kind: str                                   # opencode | claude-code | cursor
    incarnation: int                            # 0 for the first process with this label
    db_path: Path
    workdir: Path                               # this process's own dir (config.json, state/, transcripts/)
    project: Optional[str]
    directory: Path                             # the serving directory (with .git dir/file per checkout)
    sessions: dict[str, SessionInfo]            # label -> info, hosted from the start
    seed: int                                   # this process's own derived seed
    poll_interval_ms: int
    busy_timeout_ms: int
    config_path: Path
    state_dir: Path                             # shared by a daemon and its restart (rehost grace)
    transcripts_dir: Path                       # Claude Code transcripts (shared by the whole run)
    startup: Optional[tuple[str, Optional[str]]] = None   # ("-s", session_id) | ("-c", None) | None
    directory_sessions: list[dict[str, Any]] = field(default_factory=list)  # for -c: {id, parent_id, updated_ms}
    # resume `argv`: the whole command line the harness reports for its own pid
    # (ids expanded), instead of the one built from `startup`
    argv: Optional[list[str]] = None
    rehost_grace_ms: Optional[int] = None
    # "store", "poller", "runtime", "harness" factories (tests)
    overrides: dict[str, Callable[..., Any]] = field(default_factory=dict)
    names_by_label: dict[str, str] = field(default_factory=dict)  # label -> session id for EVERY session in the run
    # restart `into`: labels in `sessions` that were the dead daemon's (open tabs it re-hosts under grace)
    rehosted: list[str] = field(default_factory=list)
    # resume: the label of the session named by the resume step (also in `sessions`)
    resumed: Optional[str] = None
    # opencode: how the fake server hands host events to the runtime, "queued" | "synchronous"
    events: str = "queued"
    # A host that clips every tool output at this many characters (None: no clip)
    clip: Optional[int] = None
    # label -> the title a `title` step gave it earlier in the run: the host's own store keeps a
    # session's title, so a restarted daemon or a resume shows the retitled session as retitled
    titles: dict[str, str] = field(default_factory=dict)
    # The system under test: None for thatch_core, else a thatch checkout served by a bun sidecar
    checkout: Optional[Path] = None

    def rng(self) -> random.Random:
        return random.Random(self.seed)


# The pipe carries plain pickles (send_bytes/recv_bytes), not multiprocess's
# dill: ~10x cheaper per message, and everything above is plain data.
# Commands travel as a tagged tuple of their fields: unpickling a dataclass
# looks its class up and rebuilds it through copyreg, which right after a
# process switch (cold caches) cost the child ~25 us per command. Replies stay
# pickled dataclasses: tests drive `worker.child_main` over a plain
# multiprocess pipe and read them with `conn.recv()`. `decode(encode(m)) == m`
# for every message, and a child also accepts a pickled Command.
_CMD = "\x00cmd"


def encode(msg: Any) -> bytes:
    if type(msg) is Command:
        msg = (_CMD, msg.dispatch, msg.t, msg.op, msg.session, msg.args)
    return pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)


def decode(data: bytes) -> Any:
    msg = pickle.loads(data)
    if type(msg) is tuple and len(msg) == 6 and msg[0] == _CMD:
        return Command(*msg[1:])
    return msg


# The same frames as multiprocess's Connection.send_bytes/recv_bytes (a 4-byte
# big-endian length, then the bytes), written and read straight on the pipe's
# descriptor: one command and one reply per dispatch crossed five Python layers
# (checks, memoryview, BytesIO) each way. Errors keep their types: a closed
# handle or a broken pipe is OSError, the peer gone before a message EOFError.
_LEN = struct.Struct("!i")
_SMALL = 16384  # multiprocess sends larger payloads in two writes; so do we (via it)


def send_msg(conn, msg: Any) -> None:
    """`conn.send_bytes(encode(msg))`, same bytes on the wire."""
    send_frame(conn, encode(msg))


def send_frame(conn, data: bytes) -> None:
    """`conn.send_bytes(data)`, same bytes on the wire."""
    if len(data) > _SMALL:
        conn.send_bytes(data)
        return
    buf = _LEN.pack(len(data)) + data
    fd = conn.fileno()
    while buf:
        buf = buf[os.write(fd, buf):]


def recv_msg(conn) -> Any:
    """`decode(conn.recv_bytes())`: blocks until one whole message is in."""
    fd = conn.fileno()
    head = _read_exact(fd, 4, eof_ok=True)
    size, = _LEN.unpack(head)
    if size == -1:  # a > 2 GiB frame (never sent here, kept for wire compatibility)
        size, = struct.unpack("!Q", _read_exact(fd, 8))
    return decode(_read_exact(fd, size))


def _read_exact(fd: int, size: int, eof_ok: bool = False) -> bytes:
    data = os.read(fd, size)
    if len(data) == size:
        return data
    if not data and eof_ok:
        raise EOFError
    parts = [data]
    got = len(data)
    while got < size:
        chunk = os.read(fd, size - got)
        if not chunk:
            if got == 0 and eof_ok:
                raise EOFError
            raise OSError("got end of file during message")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)
