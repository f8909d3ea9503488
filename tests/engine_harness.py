"""A tiny harness for the engine's own tests (not a fake opencode: just enough world).

It registers its sessions on start, heartbeats them on every poll and serves
`send`/`read`/`status` actions straight through `ChatStore`, recording what
it sees (including the frozen `time.time()`, so tests can check the clock).
Injected with `overrides={"harness": TinyHarness}`.
"""

from __future__ import annotations

import os
import time

from thatch_core.db import open_db
from thatch_core.store import ChatStore

from simulator.child.crash_points import crash_points
from simulator.protocol import OP_ACT, OP_FORK, OP_POLL, OP_START, FollowUp, Reply


class TinyHarness:
    def __init__(self, ctx, recorder):
        self.ctx = ctx
        self.rec = recorder
        recorder.strict = False  # it records a kind (`clock`) and fields (`poll.now`) no real harness has
        self.conn = None
        self.store = None

    def handle(self, cmd):
        op = cmd.op
        if op == OP_START:
            self.conn = crash_points().install(open_db(self.ctx.db_path, busy_timeout_ms=self.ctx.busy_timeout_ms))
            self.store = ChatStore(self.conn, rng=self.ctx.rng())
            for label, info in sorted(self.ctx.sessions.items()):
                res = self.store.register(info.session_id, kind="opencode", project=self.ctx.project,
                                          directory=str(self.ctx.directory), title=f"work of {label}")
                self.rec.emit("registered", label, session_id=info.session_id, name=res.name, how="auto")
            self.rec.emit("clock", now=time.time(), startup=list(self.ctx.startup or []) or None,
                          rehosted=self.ctx.rehosted, resumed=self.ctx.resumed)
            ups = self.ctx.overrides.get("followups")
            return Reply(cmd.dispatch, followups=tuple(ups(cmd.t)) if ups else ())
        if op == OP_POLL:
            try:
                self.store.heartbeat([i.session_id for i in self.ctx.sessions.values()])
            except Exception as err:  # the store's own error type: what a poller catches
                self.rec.emit("store-error", where="heartbeat", error=type(err).__name__)
            self.rec.emit("poll", hosted=sorted(self.ctx.sessions), now=time.time())
            return Reply(cmd.dispatch)
        if op == OP_ACT:
            return self._act(cmd)
        if op == OP_FORK:
            self.rec.emit("fork", cmd.session, old_host_id=self.ctx.sessions[cmd.session].session_id,
                          new_host_id=cmd.args["new_host_id"])
            return Reply(cmd.dispatch)
        if op == "turn-end":
            self.rec.emit("turn-end", cmd.session, **cmd.args)
            return Reply(cmd.dispatch)
        if op == "boom":
            raise RuntimeError("the tiny harness was told to fail")
        if op == "die":
            os._exit(3)
        if op == "hang":
            while True:
                time.sleep(0.05)
        return Reply(cmd.dispatch, ok=False, error=f"unsupported {op}")

    def _act(self, cmd):
        a = cmd.args
        action, args = a["action"], a["args"]  # the step's typed arguments model (simulator/protocol.py act_args)
        me = self.ctx.sessions[cmd.session].session_id if cmd.session in self.ctx.sessions else None
        self.rec.emit("tool-call", cmd.session, tool=action, args=args.model_dump(mode="json", by_alias=True))
        if action == "send":
            to = self.ctx.names_by_label.get(args.to, args.to)
            res = self.store.send(me, to, args.body or "hello")
            text, ok = ("sent" if res.ok else res.error), res.ok
        elif action == "read":
            items = self.store.read(me)
            text, ok = " | ".join(i.body for i in items), True
        elif action == "status":
            st = self.store.status(me)
            text, ok = f"pending={st.pending}", True
        else:
            text, ok = f"unsupported {action}", False
        self.rec.emit("tool-result", cmd.session, tool=action, ok=ok, text=text, step=a.get("step"))
        ups = ()
        if action == "send" and self.ctx.overrides.get("turns"):
            ups = (FollowUp(cmd.t + 1000, "turn-end", cmd.session, {"cause": "user"}),)
        return Reply(cmd.dispatch, ok=ok, followups=ups, result=text)

    def close(self):
        if self.conn is not None:
            self.conn.close()
