"""A thatch checkout's ChatStore and ChatPoller behind thatch_core's store and poller interface.

When a run's system under test is a checkout (simulator/sut), every harness
process (and every hook and MCP child of a Claude Code or Cursor host) that
opens the store starts one bun sidecar (simulator/sut/sidecar.ts) serving the
checkout's own `ChatStore` and `ChatPoller`. `SidecarStore` and
`SidecarPoller` speak thatch_core's interface to the host layers above them
(runtime, tools, doors), so the real code's refusals, rows and wake calls
reach the model's replies and the judges unchanged, and the host never
knows which system it drives.

Two eras of the real API are served, told apart by what the checkout
exports (`Description`): 0.1.41 (seed 002: `assign` draws a pool name, `register`
claims one, no tombstones, prune or anchors) and the later one
(`register(id, project, topic, kind, nameBase, worktree)`, tombstones,
`pruneStaleAuto`, `continueSession`, host-pid anchors, de-duplication).
A method a checkout lacks is a capability it lacks (simulator/sut/
capabilities.py), answered as the design's "nothing there" (no tombstone,
nothing pruned), never a traceback.

Failures: a thrown store error (SQLITE_BUSY...) is a `StoreError` carrying
the real error's name and message, as thatch_core's own store would raise,
so the tool layer refuses with it. A sidecar that dies is `SidecarDied`, an
engine error naming the call it was serving and its last stderr lines.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from thatch_core import clock
from thatch_core.db import StoreError
from thatch_core.git import detect_worktree_kind
from thatch_core.names import is_placeholder_title, render_participant
from thatch_core.types import (
    BroadcastResult, FeedRow, InboxItem, NotificationRow, PruneResult, RegisterResult, SendResult,
    SessionRow, StatusResult,
)

from simulator.child.crash_points import crash_points
from simulator.child.hygiene import die_with_parent
from simulator.sut.bun import sidecar_argv
from simulator.sut.capabilities import Description

STDERR_TAIL_LINES = 12
HOST_PID_MAX_AGE_S = 600        # R32: the MCP server's own parent pid counts while fresh within 600 s
# The real ThatchDB's connection settings (busy_timeout 5000 unless the run says otherwise).
FOREIGN_KEYS = True


class SidecarDied(RuntimeError):
    """The sidecar ended while serving a call: an engine error, never a store refusal."""


class _Lines:
    """Whole lines from a pipe, read unbuffered so `select` on its fd never misses one held in a buffer."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = b""

    def next_line(self) -> Optional[bytes]:
        head, sep, rest = self.buf.partition(b"\n")
        if not sep:
            return None
        self.buf = rest
        return head

    def fill(self) -> bool:
        """Read what the pipe holds; False at its end."""
        data = os.read(self.fd, 1 << 16)
        self.buf += data
        return bool(data)


class Sidecar:
    """One bun process serving a checkout over JSON lines (see simulator/sut/sidecar.ts), with a second
    channel on which it reports statement boundaries and waits for a go (simulator/sut/preload.ts)."""

    def __init__(self, checkout: Path, stderr_path: Path) -> None:
        self.checkout = Path(checkout)
        self.stderr_path = Path(stderr_path)
        self.stderr_path.parent.mkdir(parents=True, exist_ok=True)
        report_r, report_w = os.pipe()
        go_r, go_w = os.pipe()
        env = dict(os.environ, THATCH_SIM_HOOK_FDS=f"{report_w},{go_r}")
        harness = os.getpid()
        with open(self.stderr_path, "wb") as err:
            # The sidecar gets SIGKILL when its harness dies (a crash fault), so none outlives its run.
            self.proc = subprocess.Popen(
                sidecar_argv(self.checkout), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, bufsize=0,
                preexec_fn=lambda: die_with_parent(harness), cwd=str(self.checkout), close_fds=True,
                pass_fds=(report_w, go_r), env=env)
        os.close(report_w)
        os.close(go_r)
        self.out = _Lines(self.proc.stdout.fileno())
        self.reports = _Lines(report_r)
        # poll, not select: a harness forked from a process holding many descriptors (a long pytest
        # worker) gets pipes numbered past select's 1024, which select refuses.
        self._readable = select.poll()
        for fd in (self.out.fd, self.reports.fd):
            self._readable.register(fd, select.POLLIN)
        self.go_w = go_w
        self._next = 0
        self.callbacks: dict[str, Callable[..., Any]] = {}
        self.on_log: Callable[[str], None] = lambda line: None
        # Each statement boundary the sidecar reports: (call, statement from 1, sql, before/after, in transaction)
        self.on_statement: Callable[[str, int, str, str, bool], None] = lambda *boundary: None

    def stderr_tail(self) -> str:
        try:
            lines = self.stderr_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-STDERR_TAIL_LINES:])

    def _died(self, serving: str) -> SidecarDied:
        code = self.proc.poll()
        if code is None:
            self.proc.kill()
            code = self.proc.wait()
        tail = self.stderr_tail()
        return SidecarDied(f"the bun sidecar serving {self.checkout} died (exit {code}) while serving {serving}"
                           + (f"; its last stderr lines:\n{tail}" if tail else "; it wrote nothing to stderr"))

    def _write(self, msg: dict, serving: str) -> None:
        try:
            self.proc.stdin.write(json.dumps(msg).encode("utf-8") + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died(serving) from None

    def _next_message(self, serving: str) -> dict:
        """The next reply or callback, handing every statement report on the way to `on_statement`."""
        while True:
            report = self.reports.next_line()
            if report is not None:
                self._boundary(json.loads(report), serving)
                continue
            line = self.out.next_line()
            if line is not None:
                return json.loads(line)
            for fd, _ in self._readable.poll():
                if not (self.out if fd == self.out.fd else self.reports).fill() and fd == self.out.fd:
                    raise self._died(serving)

    def _boundary(self, report: dict, serving: str) -> None:
        self.on_statement(report["call"], int(report["n"]), report["sql"], report["when"], bool(report["inTx"]))
        try:
            os.write(self.go_w, b"go\n")
        except OSError:
            raise self._died(serving) from None

    def request(self, op: str, serving: str, **fields: Any) -> Any:
        """Send one request and wait for its reply, answering the sidecar's callbacks meanwhile."""
        self._next += 1
        rid = self._next
        self._write({"id": rid, "op": op, "now": clock.now_ms(), **fields}, serving)
        while True:
            msg = self._next_message(serving)
            if "cb" in msg:
                self._answer(msg, serving)
                continue
            if msg.get("re") != rid:
                raise self._died(f"{serving} (it answered request {msg.get('re')!r}, not {rid})")
            for logged in msg.get("log") or ():
                self.on_log(logged)
            if "error" in msg:
                raise _store_error(msg["error"])
            return msg.get("ok")

    def _answer(self, msg: dict, serving: str) -> None:
        fn = self.callbacks.get(msg.get("fn"))
        try:
            if fn is None:
                raise RuntimeError(f"the harness serves no callback {msg.get('fn')!r}")
            reply = {"cb_re": msg["cb"], "ok": fn(*msg.get("args", []))}
        except Exception as exc:  # noqa: BLE001 - the real poller catches and logs a failed delivery
            reply = {"cb_re": msg["cb"], "error": f"{type(exc).__name__}: {exc}"}
        self._write(reply, serving)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            self.proc.wait()
        for fd in (self.reports.fd, self.go_w):
            try:
                os.close(fd)
            except OSError:
                pass


def _store_error(error: dict) -> StoreError:
    """A thrown error of the real code as thatch_core's store raises one: `SQLiteError: database is locked`."""
    name, message = error.get("name") or "Error", error.get("message") or ""
    code = error.get("code")
    suffix = f" ({code})" if code and str(code) not in message else ""
    return StoreError(f"{name}: {message}{suffix}")


# The checkout's ChatStore methods by thatch_core's names, which crash points and pauses name (`call:`);
# any other method's name is its snake_case spelling (markDelivered -> mark_delivered).
CORE_CALLS = {"assign": "register", "list": "list_sessions", "pruneStaleAuto": "prune",
              "findSessionByHostPid": "resolve_host_pid", "refreshAutoTopic": "refresh_topic",
              "hasLeaveTombstone": "has_tombstone"}
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def core_call(method: str) -> str:
    return CORE_CALLS.get(method) or _CAMEL.sub("_", method).lower()


def _strings(args: Iterable[Any]) -> frozenset:
    """The session ids a call names: its string arguments, lists flattened one level."""
    out: set[str] = set()
    for value in args:
        if isinstance(value, str):
            out.add(value)
        elif isinstance(value, (list, tuple)):
            out.update(v for v in value if isinstance(v, str))
    return frozenset(out)


def _watched() -> bool:
    """Whether statements must be reported: a crash or pause armed, or a paused call elsewhere holds the lock."""
    points = crash_points()
    return points.armed or bool(points.lock_held_by)


def _row(r: Optional[dict]) -> Optional[SessionRow]:
    if not r:
        return None
    return SessionRow(
        session_id=r["session_id"], name=r["name"], topic=r.get("topic"), project=r.get("project"),
        host_kind=r.get("host_kind") or "opencode", auto=bool(r.get("auto", False)),
        worktree=r.get("worktree"), registered_at=r.get("registered_at") or "", last_seen=r.get("last_seen") or "")


def _str_id(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


class SidecarStore:
    """thatch_core's ChatStore interface over a checkout's ChatStore (module docstring)."""

    def __init__(self, checkout: Path, db_path: Path, *, busy_timeout_ms: int, seed: int, stderr_path: Path,
                 log: Optional[Callable[[str], None]] = None) -> None:
        self.sidecar = Sidecar(checkout, stderr_path)
        self.sidecar.on_log = log or (lambda line: None)
        self._actors: frozenset = frozenset()
        self.sidecar.on_statement = self._statement
        got = self.sidecar.request("describe", "describe")
        self.era = Description(store=frozenset(got["store"]), functions=frozenset(got["functions"]),
                               constants=dict(got["constants"]), source="")
        self.sidecar.request("open", "open", db=str(db_path), busyTimeout=busy_timeout_ms,
                             seed=seed & 0xFFFFFFFF, foreignKeys=FOREIGN_KEYS)

    def _call(self, method: str, *args: Any, rowid: bool = False) -> Any:
        self._actors = _strings(args)
        return self.sidecar.request("call", f"ChatStore.{method}", method=method, args=list(args), rowid=rowid,
                                    hooks=_watched())

    def _statement(self, call: str, statement: int, sql: str, when: str, in_transaction: bool) -> None:
        """A statement boundary of the checkout's code: crash points and pauses decide there, as for
        thatch_core's statements (simulator/child/crash_points.py)."""
        crash_points().reported(core_call(call), statement, sql, when, in_transaction, actors=self._actors)

    def _stale(self, row: SessionRow) -> bool:
        minutes = self._stale_minutes()
        args = [_raw(row)] if minutes is None else [_raw(row), minutes]
        return bool(self.sidecar.request("fn", "isStale", name="isStale", args=args))

    def _stale_minutes(self) -> Optional[int]:
        # 0.1.41's isStale takes its threshold in minutes; the later one knows its own (CHAT_STALE_MS).
        return None if "CHAT_STALE_MS" in self.era.constants else self.era.stale_ms // 60_000

    def close(self) -> None:
        self.sidecar.close()

    # -- directory ---------------------------------------------------------------

    def get(self, session_id: str) -> Optional[SessionRow]:
        if not _str_id(session_id):
            return None
        row = _row(self._call("find", session_id))
        return row if row is not None and row.session_id == session_id else None

    def find(self, name_or_id: str) -> Optional[SessionRow]:
        return _row(self._call("find", name_or_id)) if _str_id(name_or_id) else None

    def list_sessions(self) -> list[SessionRow]:
        return [_row(r) for r in self._call("list")]

    def has_tombstone(self, session_id: str) -> bool:
        if not self.era.has("hasLeaveTombstone") or not _str_id(session_id):
            return False
        return bool(self._call("hasLeaveTombstone", session_id))

    def register(self, session_id: str, *, kind: str = "opencode", project: Optional[str] = None,
                 directory: Optional[str] = None, title: Optional[str] = None, auto: bool = True,
                 explicit: bool = False, policy: Any = None) -> RegisterResult:
        if not _str_id(session_id):
            return RegisterResult(ok=False, session_id=session_id, error="A session id is required to register.")
        topic = None if title is None or is_placeholder_title(title) else title
        rejoined = False
        if self.era.assigns:
            got = self._call("assign", session_id, project, topic, kind)
        else:
            # An explicit join is the way back after a leave: the host clears the tombstone first.
            if explicit and self.has_tombstone(session_id):
                self._call("clearLeaveTombstone", session_id)
                rejoined = True
            got = self._call("register", session_id, project, topic, kind, None, detect_worktree_kind(directory))
        if not got.get("ok"):
            error = got.get("error") or ""
            return RegisterResult(ok=False, session_id=session_id, error=error,
                                  tombstoned="tombstone" in error.lower())
        drawn = bool(got.get("drawn", got.get("created")))
        return RegisterResult(ok=True, session_id=session_id, name=got.get("name"), drawn=drawn,
                              reclaimed=not drawn, topic=got.get("topic"), rejoined=rejoined)

    def unregister(self, session_id: str) -> bool:
        return bool(self._call("unregister", session_id)) if _str_id(session_id) else False

    def refresh_topic(self, session_id: str, title: Optional[str]) -> None:
        if title is None or is_placeholder_title(title) or not self.era.has("refreshAutoTopic"):
            return
        self._call("refreshAutoTopic", session_id, title)

    def heartbeat(self, session_ids: Iterable[str]) -> None:
        ids = [s for s in ([session_ids] if isinstance(session_ids, str) else session_ids) if _str_id(s)]
        if ids:
            self._call("heartbeat", ids)

    # -- messages ----------------------------------------------------------------

    def send(self, from_session: str, to_name_or_id: str, body: str, *, policy: Any = None) -> SendResult:
        got = self._call("send", from_session, to_name_or_id, body, rowid=True)
        value = got["value"]
        if not value.get("ok"):
            return SendResult(ok=False, error=value.get("error"))
        target = value.get("recipient") or {}
        recipient = self.get(target.get("session_id")) or SessionRow(
            session_id=target.get("session_id", ""), name=target.get("name", ""), topic=None, project=None,
            host_kind="opencode", auto=False, worktree=None, registered_at="", last_seen="")
        suppressed = bool(value.get("deduped"))
        # A later checkout splits a long body in its store: its parts are inserted in one transaction,
        # under the write lock, so they hold consecutive ids ending at the last insert. The echo stays
        # the host's (thatch_core's, under seed 000's design), so only the first id is reported.
        parts = int(value.get("parts") or 1)
        first = None if suppressed else got["rowid"] - parts + 1
        return SendResult(ok=True, message_id=first, recipient=recipient,
                          recipient_stale=bool(recipient.last_seen) and self._stale(recipient),
                          suppressed=suppressed)

    def broadcast(self, from_session: str, body: str, *, policy: Any = None) -> BroadcastResult:
        value = self._call("broadcast", from_session, body)
        if not value.get("ok"):
            return BroadcastResult(ok=False, error=value.get("error"))
        # The later era counts suppressed recipients without naming them.
        return BroadcastResult(ok=True, recipients=tuple(value.get("recipients") or ()),
                               skipped=tuple(value.get("skipped") or ()), parts=int(value.get("parts") or 1))

    def read(self, session_id: str) -> list[InboxItem]:
        if not _str_id(session_id):
            return []
        return [InboxItem(id=m["id"], from_session=m["from_session"],
                          from_name=render_participant(m.get("from_name"), m["from_session"]),
                          body=m["body"], created_at=m["created_at"]) for m in self._call("read", session_id)]

    def unread_count(self, session_id: str) -> int:
        return int(self._call("unreadCount", session_id)) if _str_id(session_id) else 0

    def status(self, session_id: str) -> StatusResult:
        if not _str_id(session_id):
            return StatusResult(registered=False)
        got = self._call("status", session_id)
        if not got.get("registered"):
            return StatusResult(registered=False)
        return StatusResult(registered=True, name=got["name"], pending=int(got.get("pending") or 0),
                            total=int(got.get("total") or 0))

    def pending_by_project(self, project: str) -> list[tuple[str, int]]:
        if not _str_id(project):
            return []
        return [(r["name"], int(r["pending"])) for r in self._call("pendingByProject", project)]

    def message_feed(self) -> list[FeedRow]:
        return [FeedRow(id=r["id"], from_=r.get("from") or "", to=r.get("to") or "",
                        from_session=r.get("from_session") or "", to_session=r.get("to_session") or "",
                        via_broadcast=bool(r.get("viaBroadcast")), body=r["body"], created_at=r["created_at"],
                        read_at=r.get("read_at")) for r in self._call("messageFeed")]

    def pending_notifications(self, session_ids: Iterable[str], renudge_cutoff_iso: str) -> list[NotificationRow]:
        ids = [s for s in session_ids if _str_id(s)]
        if not ids:
            return []
        return [NotificationRow(id=r["id"], to_session=r["to_session"], from_session=r["from_session"],
                                from_name=r.get("from_name"))
                for r in self._call("pendingNotifications", ids, renudge_cutoff_iso)]

    def mark_delivered(self, ids: Iterable[int]) -> None:
        ids = [i for i in ids if isinstance(i, int) and not isinstance(i, bool) and i > 0]
        if ids:
            self._call("markDelivered", ids)

    # -- upkeep: what the checkout has of it ---------------------------------------

    def prune(self) -> PruneResult:
        """The checkout's own poller prunes in its cycle; a direct call sweeps with its TTL."""
        if not self.era.has("pruneStaleAuto"):
            return PruneResult()
        ttl_days = int(self.era.constants.get("CHAT_AUTO_TTL_DAYS", 7))
        self._call("pruneStaleAuto", clock.iso(clock.now_ms() - ttl_days * 86_400_000))
        return PruneResult()

    def continue_session(self, old_id: str, new_id: str) -> bool:
        if not self.era.has("continueSession") or self.get(old_id) is None or old_id == new_id:
            return False
        self._call("continueSession", old_id, new_id)
        return True

    def record_host_pid(self, pid: int, session_id: str) -> bool:
        if not self.era.has("recordHostPid"):
            return False
        self._call("recordHostPid", pid, session_id)
        return True

    def resolve_host_pid(self, pid: int) -> Optional[str]:
        if not self.era.has("findSessionByHostPid"):
            return None
        return self._call("findSessionByHostPid", pid, HOST_PID_MAX_AGE_S)


def _raw(row: SessionRow) -> dict:
    return {"session_id": row.session_id, "name": row.name, "topic": row.topic, "project": row.project,
            "host_kind": row.host_kind, "registered_at": row.registered_at, "last_seen": row.last_seen,
            "worktree": row.worktree}


class SidecarPoller:
    """thatch_core's ChatPoller interface over the checkout's ChatPoller (one per sidecar).

    Cycles are the harness's to drive (`poll`, `deliver_pending`); the real
    poller's own timer is never started. The gate's answers travel with each
    request; `deliver` is called back over the pipe; what the real poller logs
    goes to the runtime's log."""

    def __init__(self, store: SidecarStore, *, hosted_sessions: Callable[[], Iterable[str]],
                 deliver: Callable[[str, list[str], int], None], can_deliver: Callable[[str], bool],
                 log: Optional[Callable[[str], None]] = None, **_ignored: Any) -> None:
        self.store = store
        self._hosted = hosted_sessions
        self._can_deliver = can_deliver
        self._log = log or (lambda line: None)
        store.sidecar.callbacks["deliver"] = lambda sid, senders, count: deliver(sid, list(senders), int(count))
        store.sidecar.on_log = self._log
        self.running = False

    def _cycle(self, op: str) -> None:
        hosted = [s for s in self._hosted()]
        gate = {s: bool(self._can_deliver(s)) for s in hosted}
        self.store._actors = frozenset(hosted)
        self.store.sidecar.request(op, f"ChatPoller.{op}", hosted=hosted, gate=gate, hooks=_watched())

    def poll(self) -> None:
        self._cycle("poll")

    def deliver_pending(self) -> None:
        self._cycle("deliverPending")

    def start(self) -> None:
        """No timer: the harness's agenda drives every cycle."""

    def stop(self) -> None:
        """Nothing runs between cycles."""

    def dispose(self) -> None:
        """The nudge counters live in the sidecar and end with it."""


def sidecar_stderr_path(workdir: Path) -> Path:
    return Path(workdir) / "sidecars" / f"sidecar-{os.getpid()}.stderr"
