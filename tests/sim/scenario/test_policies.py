"""`policy:` and the review steps in the scenario language, and the policy sets `compare` takes.

A policy is a named set or options laid over one; a process's options are
laid over the scenario's; a host the policies do not model runs thatch's
design. Every mistake is refused with file:line and what to write instead.
"""

from __future__ import annotations

import textwrap

import pytest

from scenariokit import error_lines
from simulator.scenario.loader import parse_scenario
from simulator.scenario.policies import (
    QODER, THATCH, PolicySetError, options_by_process, parse_policy_set, policy_spec_of, uses_policies,
)

WORLD = """\
name: world
duration: 1h
processes:
  - id: h1
    sessions:
      - id: alice
  - id: h2
    policy: {permissions: bypass}
    sessions:
      - id: bob
  - id: cc
    kind: claude-code
    sessions:
      - id: carol
"""


def load(extra: str = "", world: str = WORLD):
    return parse_scenario(world + textwrap.dedent(extra), file="w.yaml").spec


def errors_of(extra: str, world: str = WORLD) -> list[str]:
    return error_lines(world, extra)


def test_a_named_set_and_process_options_compose():
    spec = load("policy: qoder\n")
    opts = options_by_process(spec)
    assert opts["h1"] == QODER
    assert opts["h2"].permissions == "bypass" and opts["h2"].sender_cap == 3
    assert opts["cc"] == THATCH          # claude-code runs thatch's design
    assert uses_policies(spec)


def test_no_policy_is_thatch_everywhere_but_where_a_process_says():
    spec = load(world=WORLD.replace("    policy: {permissions: bypass}\n", ""))
    assert not uses_policies(spec) and spec.policy is None
    spec = load("policy: {base: qoder, sender_cap: off, wake_cap: 6, dialog_expiry: never}\n")
    assert options_by_process(spec)["h1"].describe() == (
        "inbound=auto, unregistered=hold, exited=refuse, dialog_expiry_ms=never")


def test_review_steps_load_and_name_their_sender():
    spec = load("""\
        policy: qoder
        steps:
          - {at: 1m, approve: {session: bob, from: alice}}
          - {at: 2m, decline: {session: bob}, expect: {ok: false, equals: "No held message to review."}}
        """)
    assert [s.action for s in spec.steps] == ["approve", "decline"]
    assert spec.steps[0].approve.sender == "alice"


@pytest.mark.parametrize("extra, found", [
    ("policy: qodr\n", "unknown policy `qodr` — did you mean `qoder`?"),
    ("policy: {sender_cap: 0}\n", "sender_cap"),
    ("policy: {inbound: maybe}\n", "inbound"),
    ("policy: {dialog_expiry: 0s}\n", "a prompt that expires at once"),
    ("policy: {repository_inbound: accept}\n", "repository_inbound"),
    ("steps:\n  - {at: 1m, approve: {session: bobb}}\n", "undefined session `bobb`"),
    ("steps:\n  - {at: 1m, approve: {session: carol}}\n", "`approve` in `carol`, a session of a claude-code process"),
])
def test_policy_mistakes_are_refused_with_a_line(extra, found):
    errors = errors_of(extra)
    assert errors and any(found in e for e in errors), errors
    assert all(e.startswith("w.yaml:") for e in errors)


def test_a_policy_on_a_claude_code_process_is_refused():
    world = WORLD.replace("    kind: claude-code\n", "    kind: claude-code\n    policy: qoder\n")
    assert any("`policy:` on `cc`, a claude-code process" in e for e in errors_of("", world))


def test_compare_takes_named_sets_changes_and_files(tmp_path):
    assert parse_policy_set("thatch") == ("thatch", THATCH)
    label, opts = parse_policy_set("qoder+wake_cap=6+dialog_expiry=never")
    assert (opts.wake_cap, opts.dialog_expiry_ms, opts.sender_cap) == (6, None, 3)
    path = tmp_path / "strict.yaml"
    path.write_text("name: strict\npolicy: {base: qoder, inbound: refuse}\n")
    assert parse_policy_set(str(path)) == ("strict", QODER.__class__(**{**QODER.__dict__, "inbound": "refuse"}))
    for bad in ("qodr", "qoder+wake_cap", "qoder+colour=red"):
        with pytest.raises(PolicySetError):
            parse_policy_set(bad)


@pytest.mark.parametrize("options", [THATCH, QODER, parse_policy_set("qoder+sender_cap=5+interactive=false")[1]])
def test_a_set_written_out_is_the_same_set(options):
    assert policy_spec_of(options).options_over(QODER) == options
