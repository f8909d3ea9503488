"""The later design's options in the scenario language: the `thatch-later` set, on every host kind.

They sit beside the messaging policies in `policy:`; unlike those they
apply to claude-code and cursor processes too, and the config file the
engine writes carries them under `chat.policy`.
"""

from __future__ import annotations

import textwrap

import pytest

from scenariokit import error_lines
from simulator.scenario.loader import parse_scenario
from simulator.scenario.policies import (
    LATER_FIELDS, POLICY_SETS, QODER, THATCH, THATCH_LATER, options_by_process, parse_policy_set, policy_spec_of,
)

WORLD = """\
name: world
duration: 1h
processes:
  - id: oc
    sessions:
      - id: alice
  - id: cc
    kind: claude-code
    sessions:
      - id: carol
  - id: cu
    kind: cursor
    sessions:
      - id: dave
"""


def load(extra: str = "", world: str = WORLD):
    return parse_scenario(world + textwrap.dedent(extra), file="w.yaml").spec


def test_the_preset_turns_every_later_option_on_and_no_messaging_one():
    assert POLICY_SETS["thatch-later"] == THATCH_LATER and THATCH_LATER.later == frozenset(LATER_FIELDS)
    assert THATCH_LATER.messaging() == THATCH and THATCH.later == frozenset() and QODER.later == frozenset()
    assert THATCH_LATER.to_config() == {
        "retryDedupMs": 10_000, "machineryMarkers": True, "splitPartLen": 2000, "maxBodyChars": 20_000,
        "pagedReads": True, "nameClaims": True, "projectBoundAs": True, "mcpProjectEnv": True}


def test_the_later_options_apply_on_every_host_kind():
    opts = options_by_process(load("policy: thatch-later\n"))
    assert opts["oc"] == opts["cc"] == opts["cu"] == THATCH_LATER


def test_a_later_only_policy_on_a_cursor_process_is_fine_a_messaging_one_is_not():
    own = "    kind: cursor\n    policy: {base: thatch-later, paged_reads: false}\n"
    world = WORLD.replace("    kind: cursor\n", own)
    spec = load(world=world)
    assert options_by_process(spec)["cu"].later == frozenset(LATER_FIELDS) - {"paged_reads"}
    assert options_by_process(spec)["oc"] == THATCH
    bad = WORLD.replace("    kind: cursor\n", "    kind: cursor\n    policy: {base: thatch-later, sender_cap: 3}\n")
    assert any("`policy:` on `cu`, a cursor process" in e for e in error_lines(bad, ""))


def test_qoder_at_the_top_still_leaves_mcp_hosts_on_thatch():
    opts = options_by_process(load("policy: {base: qoder, retry_dedup: 5s}\n"))
    assert opts["cc"] == THATCH.__class__(retry_dedup_ms=5000) and opts["oc"].sender_cap == 3


@pytest.mark.parametrize("extra, found", [
    ("policy: {retry_dedup: 0s}\n", "de-duplicates nothing"),
    ("policy: {split_part_len: 0}\n", "split_part_len"),
    ("policy: {max_body_chars: 0}\n", "max_body_chars"),
    ("policy: {paged_reads: sometimes}\n", "paged_reads"),
    ("policy: thatch-latr\n", "did you mean `thatch-later`?"),
])
def test_later_mistakes_are_refused_with_a_line(extra, found):
    errors = error_lines(WORLD, extra)
    assert errors and any(found in e for e in errors), errors


def test_compare_takes_the_preset_and_its_changes():
    assert parse_policy_set("thatch-later") == ("thatch-later", THATCH_LATER)
    _, opts = parse_policy_set("thatch-later+split_part_len=off+retry_dedup=off")
    assert opts.split_part_len is None and opts.retry_dedup_ms is None and opts.paged_reads
    assert opts.describe() == ("machinery_markers=true, max_body_chars=20000, paged_reads=true, name_claims=true, "
                               "project_bound_as=true, mcp_project_env=true")


@pytest.mark.parametrize("options", [THATCH_LATER, parse_policy_set("qoder+paged_reads=true+split_part_len=900")[1]])
def test_a_later_set_written_out_is_the_same_set(options):
    assert policy_spec_of(options).options_over(QODER) == options
