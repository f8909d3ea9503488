"""The world a scenario runs in: files on disk, ids, seeds, harness contexts.

Built once by the orchestrator before the first fork, from ONE
`random.Random(seed)`: session ids first (processes and their sessions in
declaration order), then one derived seed per process. Later draws (the host
id of a Claude Code session fork) continue from the same generator in agenda
order, so a seed pins every id of the run.

Run directory layout::

    <run_dir>/thatch.db                 the one WAL database
    <run_dir>/history/<proc>.<inc>.jsonl per-process event files (history.py)
    <run_dir>/history.jsonl             the merged history
    <run_dir>/procs/<label>/config.json the process's thatch config (from the spec)
    <run_dir>/procs/<label>/state/      runtime state (a restart reuses the old one's)
    <run_dir>/transcripts/              Claude Code transcripts, shared by the run
    <run_dir>/dirs/<label>/<project>/   the serving directory (.git dir / file / none)
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from simulator.design import OPENCODE_ID_PREFIX, mcp_session_id
from simulator.engine.legacy import write_legacy_db
from simulator.history import HISTORY_DIR
from simulator.protocol import HarnessContext, SessionInfo
from simulator.scenario.kinds import HOSTS
from simulator.scenario.model import Process, Scenario, Session
from simulator.scenario.policies import process_options

DB_NAME = "thatch.db"


def opencode_session_id(rng: random.Random) -> str:
    return OPENCODE_ID_PREFIX + format(rng.getrandbits(96), "024x")


def host_session_id(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


@dataclass
class ProcWorld:
    """What the world knows about one declared process label."""

    label: str
    spec: Process
    index: int
    seed: int
    workdir: Path
    config_path: Path
    state_dir: Path
    directory: Path
    incarnations: int = 0


# The real ThatchDB's busy timeout, every process's unless a lock fault asks for less (orchestrator.py).
DESIGN_BUSY_TIMEOUT_MS = 5000


@dataclass
class World:
    spec: Scenario
    run_dir: Path
    seed: int
    overrides: dict[str, Any] = field(default_factory=dict)
    busy_timeout_ms: int = DESIGN_BUSY_TIMEOUT_MS
    checkout: Optional[Path] = None     # the system under test: None for thatch_core

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir)
        self.rng = random.Random(self.seed)
        self.db_path = self.run_dir / DB_NAME
        self.history_dir = self.run_dir / HISTORY_DIR
        self.transcripts_dir = self.run_dir / "transcripts"
        self.sessions: dict[str, Session] = {}
        self.session_proc: dict[str, str] = {}       # declared home process
        self.session_ids: dict[str, list[str]] = {}  # label -> ids, newest last (forks append)
        self.procs: dict[str, ProcWorld] = {}
        for proc in self.spec.processes:
            for sess in proc.sessions:
                self.sessions[sess.id] = sess
                self.session_proc[sess.id] = proc.id
                gen = host_session_id if HOSTS[proc.kind].mcp else opencode_session_id
                drawn = gen(self.rng)  # drawn even when given, so a host_id changes no other session's id
                self.session_ids[sess.id] = [sess.host_id if sess.host_id and HOSTS[proc.kind].mcp else drawn]
        # A fork's older id that keeps running (`fork.older_as`): a session of the forked one's process,
        # with its settings, whose id is known only once the fork happens (keep_older).
        for older, forked in self.spec.older_labels().items():
            if forked in self.sessions and older not in self.sessions:
                self.sessions[older] = self.sessions[forked].model_copy(update={"id": older})
                self.session_proc[older] = self.session_proc[forked]
        for index, proc in enumerate(self.spec.processes):
            workdir = self.run_dir / "procs" / proc.id
            self.procs[proc.id] = ProcWorld(
                label=proc.id, spec=proc, index=index, seed=self.rng.getrandbits(63),
                workdir=workdir, config_path=workdir / "config.json", state_dir=workdir / "state",
                directory=self.run_dir / "dirs" / proc.id / (proc.project or "workspace"))

    # -- disk ---------------------------------------------------------------

    def build(self) -> None:
        for d in (self.history_dir, self.transcripts_dir):
            d.mkdir(parents=True, exist_ok=True)
        for pw in self.procs.values():
            pw.state_dir.mkdir(parents=True, exist_ok=True)
            cfg = pw.spec.config
            chat: dict[str, Any] = {"enabled": cfg.enabled, "autoRegister": cfg.auto_register}
            options = process_options(self.spec, pw.spec)
            if not options.is_thatch:  # thatch's design writes no `chat.policy` at all
                chat["policy"] = options.to_config()
            pw.config_path.write_text(json.dumps({"chat": chat}, indent=2) + "\n")
            pw.directory.mkdir(parents=True, exist_ok=True)
            if pw.spec.checkout == "root":
                (pw.directory / ".git").mkdir(exist_ok=True)
            elif pw.spec.checkout == "worktree":
                main = self.run_dir / "dirs" / ".main-checkout" / ".git" / "worktrees" / pw.label
                main.mkdir(parents=True, exist_ok=True)
                (pw.directory / ".git").write_text(f"gitdir: {main}\n")
        # `legacy:` rows: a 002-era database, before any process opens (and migrates) it.
        write_legacy_db(self)

    # -- ids ----------------------------------------------------------------

    def proc_order(self) -> list[str]:
        return [p.id for p in self.spec.processes]

    def session_id(self, label: str) -> str:
        return self.session_ids[label][-1]

    def names_by_label(self) -> dict[str, str]:
        return {label: ids[-1] for label, ids in self.session_ids.items()}

    def new_host_id(self, label: str, given: Optional[str] = None) -> str:
        """A Claude Code session-id fork: `given` (the fork's `host_id`), else a fresh host id from the
        run's generator (drawn either way, so the ids of later forks do not depend on it)."""
        drawn = host_session_id(self.rng)
        new = given or drawn
        self.session_ids[label].append(new)
        return new

    def keep_older(self, forked: str, older: str, host_id: str) -> None:
        """The older id of `forked`'s fork goes on as the session `older` (its only id); `forked` is the
        new id alone from now on, so its rows are never the older conversation's."""
        if host_id in self.session_ids[forked]:
            self.session_ids[forked].remove(host_id)
        self.session_ids[older] = [host_id]

    def row_ids(self, label: str) -> list[str]:
        """The `chat_sessions.session_id` values this label may appear under, newest last."""
        kind = self.procs[self.session_proc[label]].spec.kind
        if not HOSTS[kind].mcp:
            return list(self.session_ids[label])
        return [mcp_session_id(h) for h in self.session_ids[label]]

    # -- contexts -------------------------------------------------------------

    def session_info(self, label: str) -> SessionInfo:
        sess = self.sessions[label]
        parent = self.session_id(sess.parent) if sess.parent and sess.parent in self.session_ids else None
        return SessionInfo(label=label, session_id=self.session_id(label), spec=sess, parent_id=parent)

    def context(self, label: str, sessions: list[str], *, poll_interval_ms: Optional[int] = None,
                startup: Optional[tuple[str, Optional[str]]] = None, directory: Optional[Path] = None,
                state_dir: Optional[Path] = None, directory_sessions: Optional[list[dict[str, Any]]] = None,
                rehost_grace_ms: Optional[int] = None) -> HarnessContext:
        pw = self.procs[label]
        ctx = HarnessContext(
            label=label, kind=pw.spec.kind, incarnation=pw.incarnations, db_path=self.db_path,
            workdir=pw.workdir, project=pw.spec.project, directory=directory or pw.directory,
            sessions={s: self.session_info(s) for s in sessions},
            # A second incarnation of a label must not replay the first one's draws.
            seed=pw.seed + pw.incarnations,
            poll_interval_ms=poll_interval_ms or pw.spec.poll_interval, busy_timeout_ms=self.busy_timeout_ms,
            config_path=pw.config_path, state_dir=state_dir or pw.state_dir,
            transcripts_dir=self.transcripts_dir, startup=startup,
            directory_sessions=list(directory_sessions or []), rehost_grace_ms=rehost_grace_ms,
            overrides=dict(self.overrides), names_by_label=self.names_by_label(),
            events=pw.spec.events, clip=pw.spec.clip, checkout=self.checkout)
        pw.incarnations += 1
        return ctx
