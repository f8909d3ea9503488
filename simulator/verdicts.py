"""The catalogue of verdicts: every kind of verdict a run gives, declared once.

A run's verdicts come from six families. The properties (P-ids, judged after
every scenario where their design promises them) and the messaging policies'
promises (Q-ids, judged where a process runs under an option that makes one)
are entries here, each with its title, the design rules it judges, where it
applies and its judge (`module:function`); a judge registers under its id
(`simulator.checks.registry.prop`), which refuses an id not listed here or a
judge other than the one named. The other four families are made per run, one
verdict per claim or step: reach claims, point expectations, expected
outcomes and fault verdicts, with the judge that makes them.

Validation (`properties:`), the tally, the schema, `thatch-sim matrix`,
exploration and docs/rules.md read the ids and titles from here. The module
imports nothing of the simulator: every phase may read it.
"""

from __future__ import annotations

from dataclasses import dataclass

PROPERTY, PROMISE = "property", "promise"
# Where a property applies, in words (the judge's `Promise` says it as a test of one process's options).
EVERY_DESIGN = "every design"
WAKE_CAP = "a wake cap of at most 6 per rolling hour (thatch's design)"
MODELED = "thatch's seed-000 design (the reference model states no other)"
RETRY_DEDUP = "retry de-duplication (`retry_dedup_ms`)"
SPLIT_BODIES = "split bodies (`split_part_len`)"
MACHINERY = "machinery markers (`machinery_markers`)"


@dataclass(frozen=True)
class Entry:
    """One kind of verdict with a fixed id: a property or a policy's promise."""

    id: str
    title: str
    rules: tuple[str, ...]
    applies: str
    judge: str
    family: str = PROPERTY


@dataclass(frozen=True)
class Family:
    """A family of verdicts made per run, one per claim or step: the shape of its ids and its judge."""

    name: str
    ids: str
    title: str
    judge: str


def _p(pid: str, title: str, rules: tuple[str, ...], judge: str, applies: str = EVERY_DESIGN) -> Entry:
    return Entry(pid, title, rules, applies, f"simulator.checks.{judge}")


_MODEL_RULES = ("R1", "R2", "R3", "R5", "R6", "R7", "R9", "R10", "R12", "R27", "R29", "R30", "R31", "R32", "R34",
                "R35", "R36")

PROPERTIES: tuple[Entry, ...] = (
    _p("P1", "single-deliverer", ("R25", "R18", "R24"), "delivery:p1_single_deliverer"),
    _p("P2", "rate-cap", ("R22",), "delivery:p2_rate_cap", WAKE_CAP),
    _p("P3", "at-least-once", ("R18", "R19", "R20", "R21", "R22", "R23", "R29"), "delivery:p3_at_least_once"),
    _p("P4", "liveness", ("R14", "R15", "R35"), "liveness:p4_liveness"),
    _p("P5", "no-loss", ("R9", "R10", "R11", "R26"), "messages:p5_no_loss"),
    _p("P6", "names", ("R2", "R5", "R6", "R26", "R33"), "identity:p6_names"),
    _p("P7", "tombstones", ("R7", "R17"), "identity:p7_tombstones"),
    _p("P8", "broadcast", ("R12", "R35"), "messages:p8_broadcast"),
    _p("P9", "continuation", ("R33",), "identity:p9_continuation"),
    _p("P10", "ping-pong-bounded", ("R22",), "delivery:p10_ping_pong", WAKE_CAP),
    _p("P11", "reply-model", _MODEL_RULES, "model_rows:reply_model", MODELED),
    _p("P12", "retry-lands-once", (), "later:p12_retry_lands_once", RETRY_DEDUP),
    _p("P13", "whole-message", (), "later:p13_whole_message", SPLIT_BODIES),
    _p("P14", "no-machinery-rows", (), "later:p14_no_machinery_rows", MACHINERY),
    _p("P15", "contention-safe", ("R9", "R10", "R12", "R24", "R26"), "contention:p15_contention_safe"),
)

PROMISES: tuple[Entry, ...] = (
    Entry("Q1", "sender-cap", (), "a sender cap (`sender_cap: N`)", "simulator.checks.policies:q1_sender_cap",
          PROMISE),
    Entry("Q2", "inbound", (), "inbound options other than thatch's (`inbound`, `repository_inbound`, "
          "`unregistered`)", "simulator.checks.policies:q2_inbound", PROMISE),
    Entry("Q3", "dropped-reported", (), "options under which a message is held for review",
          "simulator.checks.policies:q3_dropped_reported", PROMISE),
)

FAMILIES: tuple[Family, ...] = (
    Family("reach", "reach:<situation>", "a situation the scenario claims to reach (`reaches:`) happened",
           "simulator.checks.reach:check_reaches"),
    Family("expectation", "expect#<n>, step#<n>", "a point expectation (`expect:`) or a step's reply expectation held",
           "simulator.checks.expectations:check_expectations"),
    Family("outcome", "outcome:<P-id>", "a property the scenario expects to fail under its design failed",
           "simulator.checks.outcome:expected_outcome"),
    Family("fault", "fault#<n>", "a fault step took effect",
           "simulator.checks.faults:fault_verdicts"),
)

CATALOGUE: dict[str, Entry] = {e.id: e for e in PROPERTIES + PROMISES}
PROPERTY_IDS: tuple[str, ...] = tuple(e.id for e in PROPERTIES)
POLICY_PROMISE_IDS: tuple[str, ...] = tuple(e.id for e in PROMISES)
