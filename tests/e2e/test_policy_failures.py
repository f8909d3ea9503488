"""The messaging policies: thatch's design is untouched by them, and every policy promise can fail.

Two halves, both through the real simulator (forked harnesses, the real WAL
database, the real checkers):

- thatch's design as a policy is no change at all: library scenarios run with
  `policy:` unset and with `policy: thatch` written out have byte-identical
  histories and the same verdicts;
- each promise of the policies (simulator/checks/policies.py, Q1-Q3) fails by
  name against a deliberately broken store, in the style of
  test_property_failures.py: the same world runs clean with the real store
  (the promise passes, the run is ok) and with the broken subclass injected
  through `overrides` (the promise fails with a witness).

The broken stores live here on purpose: each is the smallest believable bug
its promise exists to catch.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

import repo
from scenario_builders import assert_break, act, explain, opencode, run, scenario, send, session
from simulator.verdicts import POLICY_PROMISE_IDS
from simulator.scenario.loader import load_file
from simulator.scenario.policies import PolicySpec
from thatch_core import clock
from thatch_core.policy import DECLINED, EXPIRED
from thatch_core.policy import DEFAULT as DEFAULT_POLICY
from thatch_core.store import ChatStore

PROVEN: dict[str, str] = {}  # Q-id -> the test that breaks it


def proves(qid: str):
    def deco(fn):
        PROVEN.setdefault(qid, fn.__name__)
        return fn
    return deco



# ---------------------------------------------------------------------------
# thatch's design is no policy at all
# ---------------------------------------------------------------------------

LIBRARY = ("scenarios/ratecap/ping-pong-three-hours.yaml", "scenarios/guide/reviewer-leaves.yaml",
           "scenarios/delivery/one-wake-many-senders.yaml", "scenarios/broadcast/skip-stale-opencode-mcp-receives.yaml")


@pytest.mark.parametrize("path", LIBRARY)
def test_policy_thatch_written_out_changes_nothing(path, tmp_path):
    """R9, R22: `policy: thatch` (every option at thatch's value) runs the scenario exactly as no policy does."""
    spec = load_file(repo.ROOT / path).spec
    assert spec.policy is None
    explicit = spec.model_copy(update={"policy": PolicySpec(base="thatch")})
    plain, named = run(spec, tmp_path / "plain"), run(explicit, tmp_path / "named")
    digest = [hashlib.sha256(Path(r.history_path).read_bytes()).hexdigest() for r in (plain, named)]
    assert digest[0] == digest[1]
    assert [(v.check, v.status) for v in plain.verdicts] == [(v.check, v.status) for v in named.verdicts]
    assert not any(v.check.startswith("Q") for v in named.verdicts)  # no policy promise to judge
    assert plain.ok, explain(plain)


# ---------------------------------------------------------------------------
# Broken stores
# ---------------------------------------------------------------------------

class CaplessStore(ChatStore):
    """Forgets the sender cap: counts nothing, refuses nothing."""

    def send(self, from_session, to_name_or_id, body, *, policy=DEFAULT_POLICY):
        return super().send(from_session, to_name_or_id, body, policy=replace(policy, sender_cap=None))


class StandinglessStore(ChatStore):
    """Never reads the recipient's published standing: every message is delivered at once."""

    def _standing(self, session_id):
        return None


class LeakyHoldStore(ChatStore):
    """Holds a message for approval and puts it in the recipient's inbox anyway."""

    def _hold(self, from_session, to_session, body, d, st):
        held = super()._hold(from_session, to_session, body, d, st)
        self.conn.execute("INSERT INTO chat_messages (from_session, to_session, body, created_at, via_broadcast)"
                          " VALUES (?, ?, ?, ?, 0)", (from_session, to_session, body, clock.iso()))
        return held


class SilentDeclineStore(ChatStore):
    """Drops a declined message without telling its sender."""

    def _notify(self, held_id, sender, to, body, outcome, expiry_ms, now):
        if outcome != DECLINED:
            super()._notify(held_id, sender, to, body, outcome, expiry_ms, now)


class ExpiryAsRefusalStore(ChatStore):
    """Tells the sender of a message whose prompt ran out that it was refused."""

    def _notify(self, held_id, sender, to, body, outcome, expiry_ms, now):
        super()._notify(held_id, sender, to, body, DECLINED if outcome == EXPIRED else outcome, expiry_ms, now)


# ---------------------------------------------------------------------------
# The worlds
# ---------------------------------------------------------------------------

def ping_pong_under_cap(name: str = "ping-pong-under-cap"):
    """Two ping-pong agents under the qoder set: three messages each, then the cap."""
    return scenario(name, [opencode("h1", session("alice", "ping-pong")), opencode("h2", session("bob", "ping-pong"))],
                    [send("30s", "alice", "bob", "ping")], duration="10m", drain="1m", policy="qoder")


def held_for_review(name: str, *steps: dict, duration: str = "8m"):
    """bob bypasses permission checks under the qoder set, so alice's mail to him is held behind a prompt."""
    return scenario(name, [opencode("h1", session("alice")),
                           opencode("h2", session("bob"), policy={"permissions": "bypass"})],
                    [send("30s", "alice", "bob", "please run the integration suite"), *steps],
                    duration=duration, drain="1m", policy="qoder")


@proves("Q1")
def test_q1_fails_when_the_sender_cap_is_forgotten(tmp_path):
    """The fourth unprompted reply to the same peer is refused by the cap; a store that forgets the cap accepts it."""
    good, _ = assert_break("Q1", ping_pong_under_cap(), tmp_path, "with no user prompt since its last 3",
                           store=CaplessStore)
    assert any(c["data"]["text"].startswith("Not sent: you have sent") for c in good.events("tool-result"))


@proves("Q2")
def test_q2_fails_when_a_hold_is_ignored(tmp_path):
    """A session whose fallback holds must not get mail delivered at once."""
    assert_break("Q2", held_for_review("hold-ignored", act("2m", "approve", session="bob")), tmp_path,
                 "was delivered, but bob's standing", store=StandinglessStore)


@proves("Q2")
def test_q2_fails_when_a_held_message_reaches_the_inbox(tmp_path):
    """A held message stays out of the recipient's inbox and reads until its user approves it."""
    assert_break("Q2", held_for_review("hold-leaks", act("2m", "approve", session="bob")), tmp_path,
                 "in bob's inbox before its user approved it", store=LeakyHoldStore)


@proves("Q3")
def test_q3_fails_when_a_decline_is_not_reported(tmp_path):
    """A declined message is reported to its sender as refused."""
    assert_break("Q3", held_for_review("decline-unreported", act("2m", "decline", session="bob")), tmp_path,
                 "its sender was not told it was refused", store=SilentDeclineStore)


@proves("Q3")
def test_q3_fails_when_an_expiry_is_reported_as_a_refusal(tmp_path):
    """A message whose prompt ran out is reported as expired, not refused: a distinction the sender can act on."""
    assert_break("Q3", held_for_review("expiry-as-refusal"), tmp_path,
                 "reported refused though its user never declined it", store=ExpiryAsRefusalStore)


def test_every_policy_promise_is_broken_once():
    assert sorted(PROVEN) == sorted(POLICY_PROMISE_IDS)
