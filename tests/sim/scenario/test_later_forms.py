"""The later design's forms at load time: `properties: {include: [...]}`, `expect_outcome`, the retry and
reload faults, a clipping host, machinery children, paged reads, and the `thatch-later` set."""

from __future__ import annotations

from scenariokit import error_lines
from simulator.scenario.loader import parse_scenario
from simulator.scenario.policies import POLICY_SETS, THATCH, parse_policy_set, policy_spec_of, scenario_options

WORLD = """\
name: world
duration: 1h
processes:
  - id: h1
    clip: 2000
    sessions:
      - id: alice
      - id: kid
        parent: alice
        machinery: true
        joins: idle
  - id: cc
    kind: claude-code
    sessions:
      - id: carol
"""


def test_include_judges_all_and_names_the_included():
    spec = parse_scenario(WORLD + "properties: {include: [P12, P14]}\n", file="w.yaml").spec
    assert spec.checked_properties()[-4:] == ("P12", "P13", "P14", "P15")
    assert spec.included_properties() == {"P12", "P14"} and not spec.lists_properties()


def test_an_expected_outcome_must_name_a_design_and_a_checked_property():
    assert error_lines(WORLD, "properties: [P1]\nexpect_outcome: {fails: {thatch: [P12]}}\n") == [
        "w.yaml:17: expect_outcome.fails.thatch[0]: P12 is expected to fail under thatch but the scenario does "
        "not check it — check it: properties: {include: [P12]}"]
    assert "is not a named design" in error_lines(WORLD, "expect_outcome: {fails: {later: [P12]}}\n")[0]


def test_a_machinery_child_needs_a_parent_on_an_opencode_process():
    world = WORLD.replace("        parent: alice\n", "").replace("      - id: carol\n",
                                                                  "      - id: carol\n        machinery: true\n")
    assert [line.split(": ", 1)[1] for line in error_lines(world, "")] == [
        "processes[0].sessions[1].machinery: machinery child kid has no parent — add `parent: <label>`: the "
        "session the plugin made it for",
        "processes[1].sessions[0].machinery: machinery child carol has no parent — add `parent: <label>`: the "
        "session the plugin made it for",
        "processes[1].sessions[0].machinery: machinery child carol on a claude-code process — machinery children "
        "are the opencode plugin's own: move it to an opencode process"]


def test_the_retry_and_reload_faults_and_paged_reads_load():
    steps = ("steps:\n  - at: 1m\n    send: {from: alice, to: carol, body: hi}\n"
             "  - at: 1m1s\n    retry: {session: alice, tool: send, times: 2}\n"
             "  - at: 2m\n    reload: {process: h1}\n"
             "  - at: 3m\n    read: {session: alice, message: 1, offset: 2000}\n")
    spec = parse_scenario(WORLD + steps, file="w.yaml").spec
    assert [s.action for s in spec.steps] == ["send", "retry", "reload", "read"]
    assert spec.steps[1].args.times == 2 and spec.steps[3].args.offset == 2000
    assert "reload" in error_lines(WORLD, "steps:\n  - at: 1m\n    reload: {process: cc}\n")[0]


def test_the_later_set_is_named_and_survives_a_compare_run():
    later = POLICY_SETS["thatch-later"]
    assert later.retry_dedup_ms == 10_000 and later.split_part_len == 2000 and later.max_body_chars == 20_000
    assert THATCH.later == frozenset() and len(later.later) == 8
    label, options = parse_policy_set("thatch-later")
    assert options == later
    spec = parse_scenario(WORLD, file="w.yaml").spec
    assert scenario_options(spec.model_copy(update={"policy": policy_spec_of(later)})) == later
    assert later.to_config()["retryDedupMs"] == 10_000
