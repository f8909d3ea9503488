"""Every property can fail: a deliberately broken store or poller, run through the real simulator.

Each test builds a small Python-level scenario (tests/scenario_builders.py)
and runs it twice through `run_scenario` (real forked harnesses, the real
WAL database, the real checkers): once with the real thatch_core classes,
where the property must pass and the whole run must be clean, and once with
a broken subclass injected through `overrides`, where that property, by
name, must fail with a witness. The pair is the proof: the same world, the
same seed, and the only difference is the break.

The broken classes live here on purpose: each is the smallest believable bug
that the property exists to catch, named after what it does wrong.
"""

from __future__ import annotations

import pytest

import repo
from explorekit import DeferredBroadcastStore
from simulator.api import run_scenario
from simulator.scenario.loader import load_file

from scenario_builders import (assert_break, act, claude_code, crash_at_stamp_then_resume, crash_at_wake_prompt,
                               crash_between_two_batches, cursor, explain, idle_inside_wake_prompt,
                               leave_then_crash_after_commit, opencode, run, scenario, send, session, two_tabs)
from simulator.scenario.model import PROPERTY_IDS
from thatch_core import clock
from thatch_core.db import immediate
from thatch_core.names import NAME_POOL, format_name, render_participant
from thatch_core.poller import ChatPoller
from thatch_core.staleness import is_stale
from thatch_core.store import ChatStore
from thatch_core.store_guard import marks
from thatch_core.types import BroadcastResult, InboxItem

PROVEN: dict[str, str] = {}  # P-id -> the test that breaks it (checked by test_every_property_is_broken_once)


def proves(pid: str):
    def deco(fn):
        PROVEN.setdefault(pid, fn.__name__)
        return fn
    return deco



# ---------------------------------------------------------------------------
# Broken pollers
# ---------------------------------------------------------------------------

class EveryoneHostedPoller(ChatPoller):
    """Delivers to every registered session, hosted here or not, gate always open (breaks R25)."""

    def __init__(self, store, **kw):
        kw["hosted_sessions"] = lambda: [row.session_id for row in store.list_sessions()]
        kw["can_deliver"] = lambda session_id: True
        super().__init__(store, **kw)


class UncappedPoller(ChatPoller):
    """Ignores the rate cap (breaks R22)."""

    def __init__(self, store, **kw):
        super().__init__(store, **{**kw, "max_nudges_per_hour": 10**6})


class StampFirstPoller(ChatPoller):
    """Stamps every batch delivered, then prompts (breaks R21/R23: a crash
    after the stamps and before the prompts loses the wake for 15 minutes)."""

    def deliver_pending(self):
        hosted = list(self._hosted())
        if not hosted:
            return
        pending = self.store.pending_notifications(hosted, clock.iso_minutes_ago(self.renudge_minutes))
        batches: dict[str, list] = {}
        for row in pending:
            if row.to_session in hosted:
                batches.setdefault(row.to_session, []).append(row)
        batches = {r: rows for r, rows in batches.items() if self._can_deliver(r) and self._nudge_budget(r) > 0}
        for rows in batches.values():
            self.store.mark_delivered([x.id for x in rows])
        for recipient, rows in batches.items():
            senders = list(dict.fromkeys(render_participant(x.from_name, x.from_session) for x in rows))
            self._deliver(recipient, senders, len(rows))
            self._record_nudge(recipient)


# ---------------------------------------------------------------------------
# Broken stores
# ---------------------------------------------------------------------------

class DeadHeartbeatStore(ChatStore):
    """The poller's heartbeat writes nothing (breaks R13/R14)."""

    def heartbeat(self, session_ids):
        return None


class DoubleSendStore(ChatStore):
    """Every accepted send is inserted twice (breaks R9's one row per send)."""

    def send(self, from_session, to_name_or_id, body):
        res = super().send(from_session, to_name_or_id, body)
        if res.ok:
            super().send(from_session, to_name_or_id, body)
        return res


class UnstampedReadStore(ChatStore):
    """chat_read returns the mail but leaves it unread (breaks R10)."""

    def read(self, session_id):
        items = super().read(session_id)
        if items:
            with immediate(self.conn):
                self.conn.execute(f"UPDATE chat_messages SET read_at = NULL WHERE id IN ({marks(len(items))})",
                                  [i.id for i in items])
        return items


class ReusedNamesStore(ChatStore):
    """Mints the lowest free number of one base: a leaver's name is reissued (breaks R2)."""

    def _draw(self):
        taken = {r[0].lower() for r in self.conn.execute("SELECT name FROM chat_sessions")}
        n = 1
        while format_name(NAME_POOL[0], n).lower() in taken:
            n += 1
        return format_name(NAME_POOL[0], n)


class NoTombstoneStore(ChatStore):
    """A leave deletes the row but writes no tombstone (breaks R7)."""

    def unregister(self, session_id):
        with immediate(self.conn):
            return self.conn.execute("DELETE FROM chat_sessions WHERE session_id = ?", (session_id,)).rowcount > 0


class StaleBroadcastStore(ChatStore):
    """A broadcast that also mails the stale opencode rows it should skip (breaks R12/R35)."""

    def broadcast(self, from_session, body):
        res = super().broadcast(from_session, body)
        if not res.ok or not res.skipped:
            return res
        recipients, ids = list(res.recipients), list(res.message_ids)
        with immediate(self.conn):
            for name in res.skipped:
                row = self._by_name(name)
                cur = self.conn.execute(
                    "INSERT INTO chat_messages (from_session, to_session, body, created_at, via_broadcast)"
                    " VALUES (?, ?, ?, ?, 1)", (from_session, row.session_id, body.strip(), clock.iso()))
                recipients.append(name)
                ids.append(cur.lastrowid)
        return BroadcastResult(ok=True, recipients=tuple(recipients), message_ids=tuple(ids))


class PiecemealBroadcastStore(ChatStore):
    """A broadcast that commits one row at a time: not all-or-nothing (breaks R12)."""

    def broadcast(self, from_session, body):
        recipients, ids = [], []
        for row in self.list_sessions():
            if row.session_id == from_session or (row.host_kind == "opencode" and is_stale(row)):
                continue
            with immediate(self.conn):
                cur = self.conn.execute(
                    "INSERT INTO chat_messages (from_session, to_session, body, created_at, via_broadcast)"
                    " VALUES (?, ?, ?, ?, 1)", (from_session, row.session_id, body.strip(), clock.iso()))
            recipients.append(row.name)
            ids.append(cur.lastrowid)
        return BroadcastResult(ok=True, recipients=tuple(recipients), message_ids=tuple(ids))


class MailDroppingContinuationStore(ChatStore):
    """Continuation moves the name and the pid anchors but leaves the mail behind (breaks R33)."""

    def continue_session(self, old_id, new_id):
        if not (old_id and new_id) or old_id == new_id:
            return False
        c = self.conn
        with immediate(c):
            if c.execute("SELECT 1 FROM chat_sessions WHERE session_id = ?", (old_id,)).fetchone() is None \
                    or c.execute("SELECT 1 FROM chat_sessions WHERE session_id = ?", (new_id,)).fetchone():
                return False
            c.execute("UPDATE chat_sessions SET session_id = ?, last_seen = ? WHERE session_id = ?",
                      (new_id, clock.iso(), old_id))
            c.execute("UPDATE chat_host_pids SET session_id = ? WHERE session_id = ?", (new_id, old_id))
        return True


# ---------------------------------------------------------------------------
# One test (or more) per property
# ---------------------------------------------------------------------------

@proves("P1")
@pytest.mark.rules("R25", "R18", "R15")
def test_p1_fails_when_a_poller_prompts_sessions_it_does_not_host(tmp_path):
    """P1 single-deliverer (R25, R18, R15): bob's daemon restarts with a 1-minute
    rehost grace and bob stays silent, so the new daemon stops hosting him while
    its server still has his tab. A poller that delivers to every registered
    session wakes him anyway: a wake with hosted=false."""
    spec = scenario("p1-non-host-wake", [
        opencode("h1", session("alice")),
        opencode("h2", session("bob", "silent")),
        opencode("h2b", start="never"),
    ], [
        send("30s", "alice", "bob", "before the restart"),
        act("1m", "restart", process="h2", into="h2b", grace="1m"),
        send("4m", "alice", "bob", "after the grace"),
    ], duration="6m", drain="1m")
    good, bad = assert_break("P1", spec, tmp_path, "non-host", poller=EveryoneHostedPoller)
    assert [w["proc"] for w in good.events("wake", session="bob")] == ["h2"]
    assert any(w["proc"] == "h2b" and not w["data"]["hosted"] for w in bad.events("wake", session="bob"))


@proves("P2")
@pytest.mark.rules("R22")
def test_p2_fails_when_the_poller_ignores_the_rate_cap(tmp_path):
    """P2 rate-cap (R22): alice mails silent bob every minute for 8 minutes; the
    real poller stops at 6 wakes in the hour, an uncapped one sends a 7th."""
    spec = two_tabs("p2-uncapped", [send(f"{k}m", "alice", "bob", f"note {k}") for k in range(1, 9)],
                    bob_agent="silent", duration="10m", drain="1m")
    good, bad = assert_break("P2", spec, tmp_path, "cap 6", poller=UncappedPoller)
    assert len(good.events("wake", session="bob")) == 6
    assert len(bad.events("wake", session="bob")) == 8


@proves("P3")
@pytest.mark.rules("R18", "R21", "R23", "R5")
def test_p3_fails_when_the_poller_stamps_before_prompting(tmp_path):
    """P3 at-least-once (R18, R21, R23, R5): h2 hosts bob and carol and dies just
    before its second delivered stamp; both are resumed with `-s`. The real
    poller woke both before the crash and carol (unstamped) is re-nudged by her
    new process. A stamp-before-prompt poller stamped bob's batch and died
    before prompting anyone: bob's mail waits past the end with no wake."""
    spec = crash_between_two_batches()
    good, bad = assert_break("P3", spec, tmp_path, "no wake came after it", poller=StampFirstPoller)
    carol = [w["proc"] for w in good.events("wake", session="carol")]
    assert carol == ["h2", "h2-carol"], carol  # woken, crash before the stamp, re-nudged
    assert good.verdict("reach:re-nudge").status == "pass"
    assert not bad.events("wake", session="bob")


@pytest.mark.rules("R5", "R21", "R23")
def test_p3_crash_between_wake_and_stamp_then_resume_renudges(tmp_path):
    """P3 at-least-once (R5, R21, R23): the Python twin of
    scenarios/delivery/crash-between-wake-and-stamp.yaml (two opencode
    harnesses, a crash between wake and stamp, a `-s` resume). bob's history
    shows the wake by the dead process and the re-nudge by the resumed one."""
    r = run(crash_at_stamp_then_resume(), tmp_path)
    assert r.ok, explain(r, "P3")
    assert r.verdict("P3").status == "pass"
    wakes = r.events("wake", session="bob")
    assert [w["proc"] for w in wakes] == ["h2", "h2-resumed"]
    crash = r.events("crash")[0]
    assert crash["data"]["point"] == "delivered-stamp" and wakes[0]["i"] < crash["i"] < wakes[1]["i"]
    assert wakes[1]["data"]["count"] == 1  # the same batch, woken again


@pytest.mark.rules("R21", "R23")
def test_p3_one_recipient_stamp_first_is_caught_by_the_reach_claim(tmp_path):
    """P3 at-least-once (R21, R23), why the P3 pair above needs two recipients:
    with one batch, a kill just before the stamp statement lands before both
    acts of a stamp-before-prompt poller, so nothing is lost and P3 has nothing
    to object to. The scenario's `reaches: [re-nudge]` claim is what fails there."""
    r = run(crash_at_stamp_then_resume(), tmp_path, poller=StampFirstPoller)
    assert not r.ok
    assert r.verdict("reach:re-nudge").status == "not-reached", explain(r, "reach:re-nudge")
    assert [w["proc"] for w in r.events("wake", session="bob")] == ["h2-resumed"]


@proves("P4")
@pytest.mark.rules("R13", "R14")
def test_p4_fails_when_the_heartbeat_writes_nothing(tmp_path):
    """P4 liveness (R13, R14): two live harnesses and no steps; with a heartbeat
    that writes nothing, their sessions sample stale a minute after joining."""
    assert_break("P4", two_tabs("p4-dead-heartbeat", duration="3m"), tmp_path,
                             "stale", store=DeadHeartbeatStore)


@proves("P5")
@pytest.mark.rules("R9", "R10")
def test_p5_fails_when_a_send_is_stored_twice(tmp_path):
    """P5 no-loss (R9, R10): one accepted chat_send must be one row; a store
    that inserts it twice fails P5."""
    spec = two_tabs("p5-double-send", [send("30s", "alice", "bob", "one"), act("1m", "read", session="bob")],
                    drain="1m")
    assert_break("P5", spec, tmp_path, "stored 2 times", store=DoubleSendStore)


@pytest.mark.rules("R10")
def test_p5_fails_when_a_read_does_not_stamp(tmp_path):
    """P5 no-loss (R10): chat_read stamps exactly what it returned; a read that
    leaves the mail unread hands bob the same message twice."""
    spec = two_tabs("p5-unstamped-read", [send("30s", "alice", "bob", "one"), act("1m", "read", session="bob")],
                    drain="1m")
    assert_break("P5", spec, tmp_path, "read 2 times", store=UnstampedReadStore)


@proves("P6")
@pytest.mark.rules("R2", "R6")
def test_p6_fails_when_a_leavers_name_is_reissued(tmp_path):
    """P6 names (R2, R6): alice leaves and registers again explicitly; she must
    get a fresh name. A store minting the lowest free number gives hers back."""
    spec = two_tabs("p6-reissued-name", [act("30s", "unregister", session="alice"),
                                         act("1m", "register", session="alice")])
    good, bad = assert_break("P6", spec, tmp_path, "came back under its old name", store=ReusedNamesStore)
    names = [e["data"]["name"] for e in good.events("registered", session="alice")]
    assert len(names) == 2 and names[0] != names[1]


@proves("P7")
@pytest.mark.rules("R7", "R1")
def test_p7_fails_when_a_leave_writes_no_tombstone(tmp_path):
    """P7 tombstones (R7, R1): alice leaves, then the user types into her tab;
    auto-registration must not bring her back. Without a tombstone it does."""
    spec = two_tabs("p7-no-tombstone", [act("30s", "unregister", session="alice"),
                                        act("1m", "prompt", session="alice", text="carry on")])
    assert_break("P7", spec, tmp_path, "without an explicit chat_register", store=NoTombstoneStore)


@proves("P8")
@pytest.mark.rules("R12", "R35", "R14")
def test_p8_fails_when_a_broadcast_mails_stale_sessions(tmp_path):
    """P8 broadcast (R12, R35, R14): carol's harness is killed, so her opencode
    row is stale when alice broadcasts; she must be skipped. A broadcast that
    mails her anyway fails P8."""
    spec = scenario("p8-stale-recipient", [
        opencode("h1", session("alice")), opencode("h2", session("bob")), opencode("h3", session("carol")),
    ], [act("20s", "kill", process="h3"), {"at": "150s", "broadcast": {"from": "alice", "body": "all hands"}}],
        duration="3m")
    good, bad = assert_break("P8", spec, tmp_path, "stale opencode session carol", store=StaleBroadcastStore)
    assert "\nskipped stale: " in next(e for e in good.events("tool-result", session="alice"))["data"]["text"]


@pytest.mark.rules("R12")
def test_p8_fails_when_a_broadcast_is_not_atomic(tmp_path):
    """P8 broadcast (R12): alice's harness dies at the second insert of her
    broadcast; all-or-nothing leaves zero rows, a row-by-row commit leaves one."""
    spec = scenario("p8-piecemeal", [
        opencode("h1", session("alice")), opencode("h2", session("bob")), opencode("h3", session("carol")),
    ], [act("30s", "crash", process="h1", before="broadcast-insert"),
        {"at": "40s", "broadcast": {"from": "alice", "body": "all hands"}}])
    assert_break("P8", spec, tmp_path, "cut by a crash left 1 rows", store=PiecemealBroadcastStore)


@proves("P9")
@pytest.mark.rules("R33")
def test_p9_fails_when_continuation_leaves_the_mail_behind(tmp_path):
    """P9 continuation (R33): carol (Claude Code) has mail, then her session id
    forks; the adoption must carry her name and her mail to the new id. One
    that moves only the name leaves the mail addressed to the old id."""
    spec = scenario("p9-mail-left-behind", [
        opencode("h1", session("alice")), claude_code("c1", session("carol")),
    ], [send("20s", "alice", "carol", "before the fork"), act("40s", "fork", session="carol"),
        act("1m", "prompt", session="carol", text="where were we?")])
    assert_break("P9", spec, tmp_path, "pre-fork id", store=MailDroppingContinuationStore)


@proves("P10")
@pytest.mark.rules("R22")
def test_p10_fails_when_ping_pong_is_uncapped(tmp_path):
    """P10 ping-pong-bounded (R22): two ping-pong agents answer every message;
    the cap stops them at 6 wakes each per hour, an uncapped poller lets them
    loop (7 wakes within seconds of virtual time)."""
    pp = {"kind": "ping-pong", "turn": "2s"}
    spec = scenario("p10-uncapped", [
        opencode("h1", session("alice", pp), poll_interval="10s"),
        opencode("h2", session("bob", pp), poll_interval="10s"),
    ], [send("10s", "alice", "bob", "serve")], duration="1m", drain="10s")
    good, bad = assert_break("P10", spec, tmp_path, "ping-pong", poller=UncappedPoller)
    assert len(good.events("wake")) <= 12


def _incident_fails(name: str, pid: str, tmp_path) -> None:
    """The incident story under seed 000's design, the later design's properties included: `pid` fails by name."""
    spec = load_file(repo.ROOT / "scenarios" / "incidents" / f"{name}.yaml").spec
    spec = spec.model_copy(update={"expect_outcome": None})  # the raw verdict, not the gate's reading of it
    v = run_scenario(spec, run_dir=tmp_path / "run").verdict(pid)
    assert v.status == "fail" and v.witness, (pid, v.status, v.message)


@proves("P12")
def test_p12_a_host_retry_lands_twice_on_seed_000s_design(tmp_path):
    """The 2026-10-07 incident: a retried committed send stores the body twice (no de-duplication)."""
    _incident_fails("retry-duplicate", "P12", tmp_path)


@proves("P13")
def test_p13_a_clipping_host_hides_the_end_of_a_message_on_seed_000s_design(tmp_path):
    """The 2000-character clip: one unsplit body, a read whose output the host cut."""
    _incident_fails("clipped-read", "P13", tmp_path)


@proves("P14")
def test_p14_the_machinery_child_joins_the_directory_on_seed_000s_design(tmp_path):
    """The corpse rows: the plugin's extraction child, with no marker, auto-registers after a reload."""
    _incident_fails("machinery-corpse", "P14", tmp_path)


@proves("P15")
def test_p15_a_broadcast_that_reads_before_it_locks_fails_on_a_write_in_between(tmp_path):
    """The real broadcast's shape: a deferred transaction's first insert after another process's commit
    fails at once (SQLITE_BUSY_SNAPSHOT); thatch_core's BEGIN IMMEDIATE serialises the two calls."""
    spec = load_file(repo.ROOT / "scenarios" / "races" / "broadcast-while-another-writes.yaml").spec
    assert run_scenario(spec, run_dir=tmp_path / "real").ok
    v = run_scenario(spec, run_dir=tmp_path / "broken", overrides={"store": DeferredBroadcastStore}).verdict("P15")
    assert v.status == "fail" and "database is locked" in v.message and v.witness[0]["kind"] == "paused"


def test_every_property_is_broken_once():
    """Every P-id has a failure test here (the issue's "prove each property can fail")."""
    assert sorted(PROVEN, key=lambda p: int(p[1:])) == list(PROPERTY_IDS)


# ---------------------------------------------------------------------------
# The faults and host modes that stage the design's own comments: a crash after
# a commit, at the wake prompt, and host events handed over inside a prompt call
# ---------------------------------------------------------------------------

class TwoStepLeaveStore(ChatStore):
    """A leave that commits the row's removal, then writes its tombstone in a
    second transaction (breaks R7: one transaction for both)."""

    def unregister(self, session_id):
        with immediate(self.conn):
            deleted = self.conn.execute("DELETE FROM chat_sessions WHERE session_id = ?", (session_id,)).rowcount > 0
        with immediate(self.conn):
            self.conn.execute("INSERT OR REPLACE INTO chat_leave_tombstones (session_id, left_at) VALUES (?, ?)",
                              (session_id, clock.iso()))
        return deleted


class _OpenGate:
    """A lock that never refuses: the guard is there, and guards nothing."""

    def acquire(self, blocking=True):
        return True

    def release(self):
        return None


class UnguardedPoller(ChatPoller):
    """A delivery pass that does not drop a re-entrant call (breaks R24): an idle
    event handed over inside a wake prompt runs a second pass over the same batch."""

    def __init__(self, store, **kw):
        super().__init__(store, **kw)
        self._deliver_guard = _OpenGate()


@pytest.mark.rules("R21", "R23", "R18")
def test_p3_fails_when_the_stamp_lands_and_the_prompt_never_does(tmp_path):
    """P3 at-least-once (R21, R23, R18): bob's harness dies just before the wake
    prompt reaches him; `-s` resumes him at 4m. The real poller stamps only after
    a prompt, so the resumed process wakes him at once. A stamp-before-prompt
    poller stamped the batch first: nobody is woken before the 15-minute re-nudge,
    so the resumed process's startup pass does not wake him (R5, D-props-29)."""
    good, bad = assert_break("P3", crash_at_wake_prompt("before"), tmp_path,
                             "the startup of h2-resumed at t=4m did not wake it at once", poller=StampFirstPoller)
    assert [w["proc"] for w in good.events("wake", session="bob")] == ["h2-resumed"]
    crash = good.events("crash")[0]
    assert crash["data"] == {"point": "wake-prompt", "step": 0} and crash["session"] == "bob"
    assert not bad.events("wake", session="bob")


@pytest.mark.rules("R23", "R21")
def test_p3_fails_when_a_prompt_then_death_leaves_the_batch_stamped(tmp_path):
    """P3 at-least-once (R23, R21): bob's harness dies right after the wake
    prompt reached him, before anything else ran: the prompt's turn is lost
    with the process. The real poller had not stamped yet, so the resumed
    process wakes him again; a stamp-before-prompt poller had, so nobody does."""
    good, bad = assert_break("P3", crash_at_wake_prompt("after"), tmp_path, "lost its stamp to a crash",
                             poller=StampFirstPoller)
    assert [w["proc"] for w in good.events("wake", session="bob")] == ["h2", "h2-resumed"]
    crash = good.events("crash")[0]
    assert crash["data"] == {"point": "wake-prompt", "step": 0, "when": "after"}
    assert [w["proc"] for w in bad.events("wake", session="bob")] == ["h2"]


@pytest.mark.rules("R7")
def test_p7_fails_when_a_leave_commits_in_two_transactions(tmp_path):
    """P7 tombstones (R7): alice's greenlit exit leaves, and her harness dies just
    after the leave's transaction commits. The real store wrote the row's removal
    and the tombstone in that one transaction, so her `-s` resume and her next
    message keep her out. A store that commits the removal first dies before
    the tombstone: the resume brings her back."""
    good, bad = assert_break("P7", leave_then_crash_after_commit(), tmp_path, "without an explicit chat_register",
                             store=TwoStepLeaveStore)
    crash = good.events("crash")[0]["data"]
    assert crash["point"] == "unregister" and crash["when"] == "after"
    assert not [e for e in good.events("registered", session="alice") if e["proc"] == "h1-resumed"]


@pytest.mark.rules("R24", "R19")
def test_p1_fails_when_an_idle_inside_a_wake_prompt_re_enters_delivery(tmp_path):
    """P1 single-deliverer (R24, R19): with `events: synchronous` dave's idle is
    handed to the runtime inside the wake prompt that carol's idle flush sends
    bob. The real poller drops that re-entrant pass; one without the guard runs
    it and wakes bob twice for one batch. With queued events the same broken
    poller passes: the host mode is what exposes it."""
    good, bad = assert_break("P1", idle_inside_wake_prompt(), tmp_path, "re-entered", poller=UnguardedPoller)
    inside = good.events("stream-event")
    assert [(e["session"], e["data"]["inside"], e["data"]["prompted"]) for e in inside] == [("dave", "wake", "bob")]
    assert len(bad.events("wake", session="bob")) == 2
    queued = run(idle_inside_wake_prompt("queued"), tmp_path / "queued", poller=UnguardedPoller)
    assert queued.verdict("P1").status == "pass" and not queued.events("stream-event"), explain(queued, "P1")


# ---------------------------------------------------------------------------
# P3 judged wherever mail exists, P5 judged per inbox
# ---------------------------------------------------------------------------

class NoRenudgePoller(ChatPoller):
    """Wakes a recipient once per batch and never again (breaks R18: mail delivered
    more than 15 minutes ago and still unread needs another wake)."""

    def __init__(self, store, **kw):
        super().__init__(store, **{**kw, "renudge_minutes": 10**6})


class EveryThirdPassPoller(ChatPoller):
    """Runs only every third delivery pass, the idle flush included (breaks R13, R19:
    deliverable mail waits up to three cycles)."""

    def __init__(self, store, **kw):
        super().__init__(store, **kw)
        self.passes = 0

    def deliver_pending(self):
        self.passes += 1
        if self.passes % 3 == 0:
            super().deliver_pending()


class SameSecondReadStore(ChatStore):
    """chat_read also returns what the inbox held unread at the start of this second:
    a row another reader stamped a moment earlier in the same second is returned
    again (breaks R10: of two readers of one inbox, each message is returned by one)."""

    def read(self, session_id):
        items = super().read(session_id)
        mine = {i.id for i in items}
        rows = self.conn.execute(
            "SELECT m.id, m.from_session, s.name, m.body, m.created_at FROM chat_messages m"
            " LEFT JOIN chat_sessions s ON s.session_id = m.from_session"
            " WHERE m.to_session = ? AND m.read_at = ? ORDER BY m.id", (session_id, clock.iso())).fetchall()
        return items + [InboxItem(id=i, from_session=f, from_name=render_participant(n, f), body=b, created_at=c)
                        for i, f, n, b, c in rows if i not in mine]


@pytest.mark.rules("R18", "R21")
def test_p3_fails_when_unread_mail_is_never_renudged(tmp_path):
    """P3 at-least-once (R18, R21): silent bob never reads alice's message. The real
    poller wakes him, then again once the stamp is 15 minutes old; one that never
    re-nudges woke him once, which the old end-of-run judge took for enough."""
    spec = two_tabs("p3-no-renudge", [send("30s", "alice", "bob", "is the release green?")],
                    bob_agent="silent", duration="20m", drain="1m")
    good, bad = assert_break("P3", spec, tmp_path, "due a re-nudge", poller=NoRenudgePoller)
    assert len(good.events("wake", session="bob")) == 2 and len(bad.events("wake", session="bob")) == 1


@pytest.mark.rules("R13", "R19")
def test_p3_fails_when_mail_waits_cycles_for_its_wake(tmp_path):
    """P3 at-least-once (R13, R19): bob reads on every wake, so nothing is unread at the
    end either way; a poller that delivers on every third pass only wakes him cycles
    late. Judged per message, the late wake fails; judged at the end, it passed."""
    spec = two_tabs("p3-late-wake",
                    [send("35s", "alice", "bob", "standup in 5"), send("3m5s", "alice", "bob", "moved to 10")],
                    duration="6m", drain="1m")
    good, bad = assert_break("P3", spec, tmp_path, "no wake came after it", poller=EveryThirdPassPoller)
    assert good.verdict("P3").judged == 2
    read = " ".join(e["data"]["text"] for e in bad.events("tool-result", session="bob"))
    assert "standup in 5" in read and "moved to 10" in read  # nothing unread at the end: late, not lost


@proves("P5")
@pytest.mark.rules("R10", "R32")
def test_p5_fails_when_two_readers_of_one_inbox_both_get_a_message(tmp_path):
    """P5 no-loss (R10, R32): bob and carol are two conversations of one Cursor
    workspace, whose server trusts a claimed `as`. At 1m bob reads his inbox and
    carol's model reads it too, claiming bob. The real store hands the message to
    the first reader only; one that returns rows stamped earlier in the same second
    hands it to both. Judged per caller, each read saw it once."""
    spec = scenario("p5-one-inbox-two-readers", [
        opencode("h1", session("alice")),
        cursor("w1", session("bob", "silent"), session("carol", "silent")),
    ], [
        act("10s", "prompt", session="bob", text="morning"),
        act("10s", "prompt", session="carol", text="morning"),
        send("30s", "alice", "bob", "the deploy key rotated"),
        act("1m", "read", session="bob"),
        {"at": "1m", "read": {"session": "carol", "as": "{bob}"}},
    ])
    good, bad = assert_break("P5", spec, tmp_path, "read 2 times (by bob, carol)", store=SameSecondReadStore)
    reads = [e["data"]["text"] for e in good.events("tool-result") if e["data"]["tool"].endswith("read")]
    assert "the deploy key rotated" in reads[0] and "the deploy key rotated" not in reads[1]


class NewestFirstStore(ChatStore):
    """chat_read hands the drained mail newest first (breaks R10: oldest first)."""

    def read(self, session_id):
        return list(reversed(super().read(session_id)))


@proves("P11")
@pytest.mark.rules("R10")
def test_p11_fails_when_a_read_drains_newest_first(tmp_path):
    """P11 reply-model (R10): alice sends bob two messages before he reads; the model predicts
    the read returns them oldest first, a store that reverses them fails it."""
    spec = scenario("p11-newest-first", [opencode("h1", session("alice"), session("bob", "silent"))],
                    [send("20s", "alice", "bob", "first"), send("21s", "alice", "bob", "second"),
                     act("40s", "read", session="bob")])
    assert_break("P11", spec, tmp_path, "oldest first", store=NewestFirstStore)
