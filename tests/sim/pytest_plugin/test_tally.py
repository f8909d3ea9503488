"""The per-property tally of a session's scenario runs and its end-of-run table."""

from __future__ import annotations

import json

from simulator.pytest_plugin.tally import PropertyTally, decode_verdicts, encode_verdicts
from simulator.result import Verdict

RUN = [Verdict("P1", "single", "pass", judged=3), Verdict("P3", "alo", "fail", judged=1),
       Verdict("P10", "pp", "not-reached"), Verdict("reach:x", "x happens", "pass"),
       Verdict("expect#0", "wakes", "fail"), Verdict("fault#2", "kill fault", "pass")]


def test_tally_counts_properties_and_reach_claims_only():
    tally = PropertyTally()
    tally.add(RUN)
    tally.add([Verdict("P1", "single", "skipped"), Verdict("P2", "ordering", "skipped")])
    assert set(tally.rows) == {"P1", "P2", "P3", "P10", "reach:x"}  # expectations and faults are per scenario
    assert tally.rows["P1"].counts == {"checked": 1, "passed": 1, "failed": 0, "not reached": 0, "n/a": 0,
                                       "judged": 3}
    assert tally.rows["P2"].counts == {"checked": 0, "passed": 0, "failed": 0, "not reached": 0, "n/a": 0,
                                       "judged": 0}
    assert tally.rows["P3"].counts["failed"] == 1 and tally.rows["P10"].counts["not reached"] == 1


def test_table_orders_properties_by_id_then_reach_claims_and_aligns_columns():
    tally = PropertyTally()
    tally.add(RUN)
    tally.add(RUN)
    lines = tally.table()
    assert lines[0].split() == ["check", "checked", "passed", "failed", "not", "reached", "n/a", "judged"]
    assert [ln.split()[0] for ln in lines[1:]] == ["P1", "P3", "P10", "reach:x"]
    # a property's label is its id and the catalogue's title, whatever title a verdict carried
    assert lines[1] == "P1 single-deliverer          2       2       0            0    0       6"
    assert lines[3] == "P10 ping-pong-bounded        2       0       0            2    0       0"  # judged nothing: 0
    assert lines[4] == "reach:x                      2       2       0            0    0       -"  # its id is its label
    assert len({len(ln) for ln in lines}) == 1  # numbers right-aligned under their headers


def test_table_hides_checks_no_run_checked():
    tally = PropertyTally()
    tally.add([Verdict("P2", "ordering", "skipped"), Verdict("reach:y", "y", "skipped")])
    assert tally.table() == []  # nothing to print: no all-zero rows, no bare header
    tally.add([Verdict("P1", "single", "pass"), Verdict("P2", "ordering", "skipped")])
    assert [ln.split()[0] for ln in tally.table()] == ["check", "P1"]


def test_verdicts_survive_the_trip_as_a_json_friendly_report_attribute():
    encoded = encode_verdicts(RUN)
    assert json.loads(json.dumps(encoded)) == encoded  # what xdist can carry between processes
    decoded = decode_verdicts(encoded)
    assert (sorted((v.check, v.title, v.status, v.judged) for v in decoded)
            == sorted((v.check, v.title, v.status, v.judged) for v in RUN))


def test_the_policies_promises_are_tallied_and_not_applicable_is_counted_apart():
    """Q1-Q3 get rows after P10 when they judged; a promise the policy in force does not make (P2 under qoder)
    counts in n/a, never as checked or failed, and keeps its row."""
    tally = PropertyTally()
    tally.add([Verdict("P1", "single", "pass", judged=1), Verdict("P2", "rate-cap", "not-applicable"),
               Verdict("Q1", "sender-cap", "pass", judged=4), Verdict("Q3", "dropped-reported", "fail", judged=1),
               Verdict("Q2", "inbound", "skipped")])
    lines = tally.table()
    assert [ln.split()[0] for ln in lines[1:]] == ["P1", "P2", "Q1", "Q3"]
    assert tally.rows["P2"].counts == {"checked": 0, "passed": 0, "failed": 0, "not reached": 0, "n/a": 1,
                                       "judged": 0}
    assert tally.rows["Q1"].counts["passed"] == 1 and tally.rows["Q3"].counts["failed"] == 1
