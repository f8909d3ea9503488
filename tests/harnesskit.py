"""Small helpers to drive a harness directly in a test process.

The engine forks a process per harness; a harness test drives the same
object in-process instead (opencode, cursor) with a real temp-dir database, a
real `Recorder` and one freezegun freezer moved per command, exactly as the
worker does. Claude Code tests run the host in a forked child (see
tests/sim/harness/test_claude_code.py) so its hooks and MCP server are real
grandchildren with real parent pids.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Optional

from simulator import clock
from simulator.harness import make_harness
from simulator.history import Recorder, read_events
from simulator.protocol import OP_ACT, Command, HarnessContext, SessionInfo, act_args
from simulator.scenario.kinds import STEPS
from simulator.scenario.model import Session


def session_info(label: str, session_id: str, **spec: Any) -> SessionInfo:
    """A SessionInfo from spec keyword args (`agent="ping-pong"`, `title=...`)."""
    parent = spec.pop("parent_id", None)
    return SessionInfo(label=label, session_id=session_id, spec=Session(id=label, **spec), parent_id=parent)


def make_ctx(root: Path, label: str, kind: str, sessions: list[SessionInfo], *,
             names_by_label: Optional[dict[str, str]] = None, seed: int = 7,
             db_path: Optional[Path] = None, **extra: Any) -> HarnessContext:
    """A HarnessContext under `root` (shared db and transcripts, own workdir)."""
    workdir = root / label
    directory = root / f"{label}-checkout"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".git").mkdir(exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    by_label = {s.label: s.session_id for s in sessions}
    by_label.update(names_by_label or {})
    return HarnessContext(
        label=label, kind=kind, incarnation=extra.pop("incarnation", 0),
        db_path=db_path or root / "thatch.db", workdir=workdir, project=extra.pop("project", "demo"),
        directory=directory, sessions={s.label: s for s in sessions}, seed=seed,
        poll_interval_ms=30_000, busy_timeout_ms=5_000,
        config_path=workdir / "config.json", state_dir=workdir / "state",
        transcripts_dir=root / "transcripts", names_by_label=by_label, **extra,
    )



def typed_act(action: str, session: Optional[str], *, step: Optional[int] = None, **args: Any) -> dict[str, Any]:
    """An OP_ACT command's arguments as the orchestrator sends them: the step's typed arguments model,
    with `session` as its acting session (an undeclared action goes as is, to be refused)."""
    kind = STEPS.get(action)
    if kind is None:
        return act_args(action, args, step=step)
    if kind.actor_key is not None and session is not None:
        args = {kind.target: session, **args}
    return act_args(action, kind.args.model_validate(args), step=step)

class Driver:
    """Drives one harness in this process: recorder, freezer, dispatch numbers.

    `send(op, t, session, **args)` moves the freezer to `t` and handles one
    command; follow-ups due at or before a later `run_until(t)` are run in
    time order like the orchestrator's agenda would.
    """

    _dispatch = itertools.count(1)

    def __init__(self, ctx: HarnessContext, run_dir: Path, frozen) -> None:
        self.ctx = ctx
        self.frozen = frozen
        self.recorder = Recorder.for_process(run_dir, ctx.label, ctx.incarnation)
        self.harness = make_harness(ctx, self.recorder)
        self.agenda: list[tuple[int, int, Any]] = []
        self._seq = itertools.count()
        self.replies = []

    def send(self, op: str, t: int, session: Optional[str] = None, **args: Any):
        """Run the follow-ups due before `t` (agenda order), then this command
        (the orchestrator runs a step before a follow-up of the same time)."""
        self.run_until(t - 1)
        return self._send(op, t, session, **args)

    def _send(self, op: str, t: int, session: Optional[str] = None, **args: Any):
        dispatch = next(self._dispatch)
        self.frozen.move_to(clock.instant(t))
        self.recorder.current(dispatch, t)
        reply = self.harness.handle(Command(dispatch=dispatch, t=t, op=op, session=session, args=args))
        self.replies.append(reply)
        for f in reply.followups:
            self.agenda.append((f.at, next(self._seq), f))
        return reply

    def act(self, t: int, action: str, session: Optional[str] = None, **args: Any):
        return self.send(OP_ACT, t, session, **typed_act(action, session, **args))

    def run_until(self, t: int) -> None:
        """Run every queued follow-up due at or before `t`, in agenda order."""
        while True:
            due = sorted(e for e in self.agenda if e[0] <= t)
            if not due:
                return
            entry = due[0]
            self.agenda.remove(entry)
            f = entry[2]
            self._send(f.op, f.at, f.session, **f.args)

    def events(self, kind: Optional[str] = None, session: Optional[str] = None) -> list[dict[str, Any]]:
        evs = read_events(self.recorder.path)
        return [e for e in evs if (kind is None or e["kind"] == kind) and (session is None or e["session"] == session)]

    def close(self) -> None:
        self.harness.close()
        self.recorder.close()

