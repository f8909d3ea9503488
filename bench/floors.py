"""The bench's floors: the reference run's work without the simulator.

- `raw_sql`: the SQL statements thatch_core issues for a run's statement mix
  (the poll cycle's heartbeat and pending-notification query, the sends, the
  delivered stamps, the reads, each in the transaction the store wraps it
  in), issued straight through `sqlite3` in one process;
- `raw_sql_forked`: the same statements split over N forked processes that
  run free (no coordination) on the one WAL file: the multi-process floor;
- `core_alone`: thatch_core's own runtimes, pollers and stores for the same
  processes, sessions, polls and mail as the reference scenario, driven in
  one process under a patched clock (`time.time` returns the virtual time),
  with a minimal opencode client and no simulator: the code under test alone.
"""

from __future__ import annotations

import heapq
import random
import sqlite3
import tempfile
import time
from collections import Counter
from pathlib import Path

import multiprocess

SESSIONS_PER_PROC = 4
POLL_MS = 30_000
TURN_MS = 20_000
T0_MS = 1_767_603_600_000  # 2026-01-05T09:00:00Z, where a scenario's clock starts
CUTOFF = "2026-01-05T09:00:00Z"
RENUDGE_POLLS = 30  # the re-nudge cutoff (15 minutes) in poll rounds

_HEARTBEAT = "UPDATE chat_sessions SET last_seen = ? WHERE session_id IN ({})"
_PENDING = ("SELECT m.id, m.to_session, m.from_session, s.name FROM chat_messages m"
            " LEFT JOIN chat_sessions s ON s.session_id = m.from_session"
            " WHERE m.read_at IS NULL AND m.to_session IN ({})"
            " AND (m.delivered_at IS NULL OR m.delivered_at <= ?)"
            " AND EXISTS (SELECT 1 FROM chat_sessions cs WHERE cs.session_id = m.to_session)"
            " ORDER BY m.id")
_ROW = ("SELECT session_id, name, topic, project, host_kind, auto, worktree, registered_at, last_seen"
        " FROM chat_sessions WHERE session_id = ?")
_BY_NAME = ("SELECT session_id, name, topic, project, host_kind, auto, worktree, registered_at, last_seen"
            " FROM chat_sessions WHERE name = ? COLLATE NOCASE")
_STANDING = ("SELECT session_id, action, prompts, source, unregistered, interactive, expiry_ms"
             " FROM chat_inbound WHERE session_id = ?")
_INSERT = ("INSERT INTO chat_messages (from_session, to_session, body, created_at, via_broadcast)"
           " VALUES (?, ?, ?, ?, 0)")
_DELIVERED = "UPDATE chat_messages SET delivered_at = ? WHERE id IN (?)"
_INBOX = ("SELECT m.id, m.from_session, s.name, m.body, m.created_at FROM chat_messages m"
          " LEFT JOIN chat_sessions s ON s.session_id = m.from_session"
          " WHERE m.to_session = ? AND m.read_at IS NULL ORDER BY m.id")
_CLAIM = "UPDATE chat_messages SET read_at = ? WHERE id IN ({}) AND read_at IS NULL RETURNING id"


def _session_ids(procs: int) -> list[str]:
    return [f"ses_{n:024x}" for n in range(procs * SESSIONS_PER_PROC)]


def prepare_db(path: Path, procs: int) -> list[str]:
    """A migrated chat database with every reference session registered; their ids."""
    from thatch_core.db import open_db
    from thatch_core.store import ChatStore

    path.parent.mkdir(parents=True, exist_ok=True)
    conn = open_db(path)
    store = ChatStore(conn, rng=random.Random(0))
    ids = _session_ids(procs)
    for sid in ids:
        store.register(sid, project="proj", title=f"task {sid[-4:]}")
    conn.close()
    return ids


def _connect(path: Path) -> sqlite3.Connection:
    # A floor waits out a held lock however long a loaded machine holds it:
    # it measures the statements, not a give-up policy. It syncs as the store
    # does, so the ratios compare statements, not durability settings.
    from thatch_core.db import SYNCHRONOUS

    conn = sqlite3.connect(str(path), timeout=60.0, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 60000")
    conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS}")
    return conn


def _begin(conn: sqlite3.Connection) -> None:
    """BEGIN IMMEDIATE, retried when SQLite's unfair busy handler gives up early (as the store's is)."""
    for attempt in range(100):
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 99:
                raise
            time.sleep(0.001 * (attempt + 1))


def _tx(conn: sqlite3.Connection, sql: str, args: tuple) -> list:
    _begin(conn)
    rows = conn.execute(sql, args).fetchall()
    conn.execute("COMMIT")
    return rows


def _send(conn, frm: str, to: str, name: str, body: str) -> None:
    _begin(conn)
    conn.execute(_ROW, (frm,)).fetchone()
    conn.execute(_BY_NAME, (name,)).fetchone()
    conn.execute(_STANDING, (to,)).fetchone()
    conn.execute(_INSERT, (frm, to, body, CUTOFF))
    conn.execute("COMMIT")


def _read(conn, sid: str) -> None:
    conn.execute(_ROW, (sid,)).fetchone()
    rows = conn.execute(_INBOX, (sid,)).fetchall()
    if rows:
        _tx(conn, _CLAIM.format(",".join("?" * len(rows))), (CUTOFF, *(r[0] for r in rows)))


def poll_stamps(mix: Counter, procs: int) -> list[str]:
    """The ISO second of each poll round (formatted before the clock starts)."""
    rounds = mix["pending_notifications"] // max(procs, 1) + 1
    return [time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(T0_MS // 1000 + (r + 1) * POLL_MS // 1000))
            for r in range(rounds)]


def issue(path: Path, mix: Counter, ids: list[str], stamps: list[str], share: tuple[int, int] = (0, 1)) -> None:
    """Issue share `p` of `n` of the statement mix (every statement when n is 1).

    Each simulated process has its own connection, as each opencode process
    has: a commit on one connection makes the others re-read what changed
    (SQLite's per-connection page cache), a cost the code under test pays too.
    """
    p, n = share
    procs = len(ids) // SESSIONS_PER_PROC
    groups = [ids[g * SESSIONS_PER_PROC:(g + 1) * SESSIONS_PER_PROC] for g in range(procs)]
    beat = _HEARTBEAT.format(",".join("?" * SESSIONS_PER_PROC))
    pending = _PENDING.format(",".join("?" * SESSIONS_PER_PROC))
    conns = {g: _connect(path) for g in range(procs) if g % n == p}
    names = dict(conns[p].execute("SELECT session_id, name FROM chat_sessions"))

    def conn_of(sid: str) -> sqlite3.Connection:
        return conns[ids.index(sid) // SESSIONS_PER_PROC] if n == 1 else conns[p]

    for k in range(mix["pending_notifications"]):
        g = k % procs
        if g % n != p:
            continue
        # Each poll beats at its own second and asks with its own cutoff, as a
        # run does: SQLite skips writing a row updated to the value it holds.
        at = k // procs
        if k < mix["heartbeat"]:
            _tx(conns[g], beat, (stamps[at], *groups[g]))
        conns[g].execute(pending, (*groups[g], stamps[max(at - RENUDGE_POLLS, 0)])).fetchall()
    for k in range(p, mix["send"], n):
        frm, to = ids[k % len(ids)], ids[(k + 1) % len(ids)]
        _send(conn_of(frm), frm, to, names[to], f"status {k}")
    for k in range(p, mix["mark_delivered"], n):
        _tx(conns[p] if n > 1 else conns[k % procs], _DELIVERED, (CUTOFF, k + 1))
    for k in range(p, mix["read"], n):
        sid = ids[(k + 1) % len(ids)]
        _read(conn_of(sid), sid)
    for conn in conns.values():
        conn.close()


def raw_sql(mix: Counter, procs: int, root: Path) -> float:
    """Seconds for the statement mix in one process, straight through sqlite3."""
    path = root / "raw-one.db"
    ids = prepare_db(path, procs)
    stamps = poll_stamps(mix, procs)
    t0 = time.perf_counter()
    issue(path, mix, ids, stamps)
    return time.perf_counter() - t0


def _forked_worker(path, mix, ids, stamps, share, ready, go) -> None:
    ready.release()
    go.wait()
    issue(path, mix, ids, stamps, share)


def raw_sql_forked(mix: Counter, procs: int, root: Path) -> float:
    """Seconds for the statement mix split over `procs` free-running forked processes on one WAL file."""
    path = root / "raw-forked.db"
    ids = prepare_db(path, procs)
    stamps = poll_stamps(mix, procs)
    ctx = multiprocess.get_context("fork")
    ready, go = ctx.Semaphore(0), ctx.Event()
    workers = [ctx.Process(target=_forked_worker, args=(path, mix, ids, stamps, (p, procs), ready, go))
               for p in range(procs)]
    for w in workers:
        w.start()
    for _ in workers:
        ready.acquire()
    t0 = time.perf_counter()
    go.set()
    for w in workers:
        w.join()
    wall = time.perf_counter() - t0
    # A worker that failed leaves its share undone: no figure, rather than a low one.
    return wall if all(w.exitcode == 0 for w in workers) else float("nan")


# ----------------------------------------------------------------------
# The code under test alone
# ----------------------------------------------------------------------

class _Client:
    """The runtime's opencode client: a wake prompt queues a turn, an echo is dropped."""

    def __init__(self, world: "_World", titles: dict[str, str]) -> None:
        self.world = world
        self.titles = titles

    def prompt_async(self, session_id, parts, *, no_reply=False) -> None:
        if not no_reply:
            self.world.wakes.append((session_id, parts))

    def session_title(self, session_id):
        return self.titles.get(session_id)

    def session_parent(self, session_id):
        return None

    def list_sessions(self, directory):
        return []


class _World:
    """The reference scenario's processes and mail, as thatch_core sees them."""

    def __init__(self, procs: int, root: Path, seed: int):
        from thatch_core.config import ConfigSource
        from thatch_core.db import open_db
        from thatch_core.runtime import OpencodeRuntime
        from thatch_core.store import ChatStore

        self.wakes: list[tuple[str, list]] = []
        self.counts: Counter = Counter()
        self.seq = 0  # turn ends at one instant, in the order their turns began
        self.runtimes, self.owner, self.conns = [], {}, []
        for p in range(procs):
            conn = open_db(root / "core.db")
            self.conns.append(conn)
            sids = [f"ses_{p:02d}{k:022x}" for k in range(SESSIONS_PER_PROC)]
            client = _Client(self, {sid: f"task {p}.{k}" for k, sid in enumerate(sids)})
            rt = OpencodeRuntime(ChatStore(conn, rng=random.Random(seed + p)), client,
                                 directory=str(root / f"proj{p % 4}"), project=f"proj{p % 4}",
                                 config_source=ConfigSource(root / "absent.json", log=self._log),
                                 state_dir=root / f"state{p}", cmdline_reader=lambda pid: ["opencode"],
                                 log=self._log)
            rt.start()
            self.runtimes.append(rt)
            for sid in sids:
                self.owner[sid] = rt
                rt.on_session_status(sid, "idle")
        self.labels = list(self.owner)

    def _log(self, message: str) -> None:
        self.counts["log"] += 1

    def close(self) -> None:
        for rt in self.runtimes:
            rt.dispose()
        for conn in self.conns:
            conn.close()


def core_alone(procs: int, virtual_ms: int, *, mail_every_ms: int = 600_000, seed: int = 1) -> tuple[float, Counter]:
    """Seconds of wall time for thatch_core alone to run the reference scenario's work, and what it did."""
    now = [T0_MS / 1000.0]
    real_time = time.time
    with tempfile.TemporaryDirectory(prefix="thatch-core-alone-") as tmp:
        time.time = lambda: now[0]
        try:
            world = _World(procs, Path(tmp), seed)
            agenda = _agenda(world, procs, virtual_ms, mail_every_ms, seed)
            t0 = time.perf_counter()
            _drive(world, agenda, now)
            wall = time.perf_counter() - t0
            world.close()
        finally:
            time.time = real_time
    return wall, world.counts


def _agenda(world: _World, procs: int, virtual_ms: int, mail_every_ms: int, seed: int) -> tuple[list, list]:
    """The poll instants, and a heap of the rest (at, order, seq, what, args): the sends of the
    reference scenario, later the turn ends. At one instant the simulator's agenda order holds:
    scripted sends, then the turn ends (harness follow-ups), then the polls."""
    polls = list(range(POLL_MS, virtual_ms + 1, POLL_MS))
    rng = random.Random(seed)
    names = {sid: rt.store.get(sid).name for sid, rt in world.owner.items()}
    events = []
    for k, at in enumerate(range(60_000, virtual_ms, mail_every_ms)):
        a, b = rng.sample(world.labels, 2)
        events.append((at, -2, k, "send", (a, names[b])))
    heapq.heapify(events)
    return polls, events


def _drive(world: _World, agenda: tuple[list, list], now: list) -> None:
    polls, events = agenda
    pollers = [rt.poller for rt in world.runtimes]
    for at in polls:
        while events and events[0][:2] < (at, 0):
            _event(world, events, now, *heapq.heappop(events))
        now[0] = (T0_MS + at) / 1000.0
        for poller in pollers:
            poller.poll()
            if world.wakes:
                _turns(world, events, at)
    world.counts["poll"] += len(polls) * len(pollers)
    while events:
        _event(world, events, now, *heapq.heappop(events))


def _event(world: _World, events: list, now: list, at: int, order: int, seq: int, what: str, arg) -> None:
    now[0] = (T0_MS + at) / 1000.0
    if what == "send":
        frm, to = arg
        world.counts["send"] += world.owner[frm].call_tool(frm, "thatch_chat_send", {"to": to, "body": "status"}).ok
    else:
        world.owner[arg].on_session_status(arg, "idle")
    _turns(world, events, at)


def _turns(world: _World, events: list, at: int) -> None:
    """The wake prompts just sent: each starts a reader's turn (read now, idle a turn later)."""
    while world.wakes:
        sid, parts = world.wakes.pop(0)
        world.counts["wake"] += 1
        rt = world.owner[sid]
        rt.on_chat_message(sid, parts)
        rt.on_session_status(sid, "busy")
        world.counts["read"] += rt.call_tool(sid, "thatch_chat_read", {}).ok
        world.seq += 1
        heapq.heappush(events, (at + TURN_MS, -1, world.seq, "idle", sid))


# The connection settings the real ThatchDB chooses (D-store-23), each beside the one thatch_core used before.
SETTINGS = (("synchronous", "NORMAL"), ("synchronous", "FULL"), ("foreign_keys", "OFF"), ("foreign_keys", "ON"))


def settings_cost(root: Path, sends: int = 1000) -> list[tuple[str, float]]:
    """(setting, sends per second) through thatch_core's store in one process, one setting changed from
    `open_db`'s at a time (the foreign-key rows under `open_db`'s synchronous), on a file under `root`.
    The busy timeout has no cost without a competing writer: it only bounds how long a call waits for
    one (D-store-18)."""
    from thatch_core.db import open_db
    from thatch_core.store import ChatStore

    out = []
    for pragma, value in SETTINGS:
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            conn = open_db(Path(tmp) / "settings.db")
            conn.execute(f"PRAGMA {pragma} = {value}")
            store = ChatStore(conn, rng=random.Random(0))
            store.register("ses_a", project="p")
            store.register("ses_b", project="p")
            t0 = time.perf_counter()
            for n in range(sends):
                store.send("ses_a", "ses_b", f"message {n}")
            out.append((f"{pragma} {value}", sends / (time.perf_counter() - t0)))
            conn.close()
    return out
