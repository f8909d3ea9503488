"""Cross-reference checks: labels, time order, fault targets, each with file:line and a fix."""

from __future__ import annotations

import pytest

from scenariokit import error_lines
from simulator.scenario.loader import parse_scenario
from simulator.scenario.model import Scenario
from simulator.scenario.validate import check_spec

WORLD = """\
name: world
duration: 1h
processes:
  - id: h1
    sessions:
      - id: alice
      - id: bob
  - id: cc
    kind: claude-code
    sessions:
      - id: carol
  - id: h2
    start: never
"""


def errors_of(extra: str, world: str = WORLD) -> list[str]:
    return error_lines(world, extra)


def test_a_consistent_scenario_passes():
    assert errors_of("""\
        steps:
          - at: 1m
            send: {from: alice, to: carol}
          - at: 1m
            fork: {session: carol}
          - at: 2m
            crash: {process: h1, before: delivered-stamp}
          - at: 3m
            resume: {session: bob, process: h2}
        expect:
          - roster: {session: alice, active: [bob, carol]}
        """) == []


def test_undefined_labels_suggest_the_closest():
    assert errors_of("""\
        steps:
          - at: 1m
            send: {from: alise, to: bob}
        """) == ["w.yaml:16: steps[0].send.from: undefined session `alise` — did you mean `alice`? "
                 "(defined sessions: alice, bob, carol)"]


def test_duplicate_labels():
    world = WORLD.replace("      - id: carol", "      - id: bob").replace("  - id: h2\n", "  - id: h1\n")
    assert errors_of("", world) == [
        "w.yaml:11: processes[1].sessions[0].id: duplicate session label `bob` (also in process h1) "
        "— give every session its own label, across all processes",
        "w.yaml:12: processes[2].id: duplicate process label `h1` (also processes[0]) "
        "— give every process its own label",
    ]


def test_parent_must_be_in_the_same_process():
    world = WORLD.replace("      - id: carol", "      - id: carol\n      - id: dave\n        parent: alice")
    assert errors_of("", world) == [
        "w.yaml:13: processes[1].sessions[1].parent: parent `alice` is a session of process h1, "
        "not a session of process cc "
        "— a parent must be hosted by the same process: write one of carol"
    ]


def test_step_after_duration():
    assert errors_of("""\
        steps:
          - at: 2h
            read: {session: bob}
        """) == ["w.yaml:15: steps[0].at: step at 2h is after the scenario's duration (1h) "
                 "— raise `duration` or move the step earlier"]


def test_fork_only_on_claude_code_sessions():
    assert errors_of("""\
        steps:
          - at: 1m
            fork: {session: alice}
        """) == ["w.yaml:16: steps[0].fork.session: fork of `alice`, a session of a opencode process "
                 "— fork models a Claude Code session-id fork: name a session of a claude-code process"]


def test_crash_points_only_in_opencode_or_cursor():
    assert errors_of("""\
        steps:
          - at: 1m
            crash: {process: cc, before: read-stamp}
        """) == ["w.yaml:16: steps[0].crash.process: crash point in `cc`, a claude-code process "
                 "— crash points run inside opencode or cursor processes: use `kill` for a claude-code host"]


def test_restart_target_must_be_a_never_started_opencode_process():
    world = WORLD.replace("  - id: h2\n    start: never\n", "  - id: h2\n    start: never\n    kind: cursor\n")
    assert errors_of("""\
        steps:
          - at: 1m
            restart: {process: h1, into: h2}
        """, world) == ["w.yaml:17: steps[0].restart.into: restart target `h2` is a cursor process "
                        "— a restart starts a new opencode process: declare h2 with `kind: opencode`"]


def test_expectations_name_defined_sessions():
    assert errors_of("""\
        expect:
          - wakes: {session: bobby, count: 1}
          - roster: {session: alice, stale: [zed]}
          - unread: {count: 0}
        """) == [
        "w.yaml:15: expect[0].wakes.session: undefined session `bobby` — did you mean `bob`? "
        "(defined sessions: alice, bob, carol)",
        "w.yaml:16: expect[1].roster.stale[0]: undefined session `zed` "
        "— write one of the defined sessions: alice, bob, carol",
        "w.yaml:17: expect[2].unread: the `unread` expectation names no session "
        "— add `session: <label>` under `unread`",
    ]


def test_check_spec_works_without_a_file():
    spec = Scenario.model_validate({"name": "api", "duration": "1m", "processes": [{"id": "h1"}],
                                    "steps": [{"at": "30s", "kill": {"process": "h9"}}]})
    [error] = check_spec(spec)
    assert str(error) == ("<scenario>: steps[0].kill.process: undefined process `h9` "
                          "— write one of the defined processes: h1")


def test_cross_check_can_be_skipped():
    loaded = parse_scenario(WORLD + "steps:\n  - at: 1m\n    kill: {process: nope}\n", cross_check=False)
    assert loaded.spec.steps[0].args.process == "nope"


REPLY_HINT = ("use a point expectation under the top-level `expect:` instead "
              "(e.g. `- at: 2m` with `registered: {session: ...}`); "
              "only send, broadcast, read, register, unregister, list, status, cli_list, cli_tail, approve, decline "
              "steps and prompts on "
              "claude-code or cursor sessions have a reply")


def test_expect_only_on_steps_that_leave_a_reply():
    """A step `expect:` on an action that records no tool result or hook line would fail every run: refused at lint."""
    assert errors_of("""\
        steps:
          - at: 1m
            config: {process: h1, enabled: false}
            expect: {ok: true}
          - at: 1m
            title: {session: alice, title: x}
            expect: {ok: true}
          - at: 2m
            sleep: {for: 1m}
            expect: {ok: true}
          - at: 3m
            prompt: {session: alice}
            expect: {contains: "you are"}
        """) == [
        f"w.yaml:17: steps[0].expect: `expect:` on a `config` step, which produces no reply to check — {REPLY_HINT}",
        f"w.yaml:20: steps[1].expect: `expect:` on a `title` step, which produces no reply to check — {REPLY_HINT}",
        f"w.yaml:23: steps[2].expect: `expect:` on a `sleep` fault, which produces no reply to check — {REPLY_HINT}",
        "w.yaml:26: steps[3].expect: `expect:` on a prompt to `alice`, a session of an opencode process, "
        "which prints no "
        "hook line to check — use a point expectation under the top-level `expect:` instead (e.g. `- at: 2m` with "
        "`registered: {session: ...}`), or prompt a claude-code or cursor session",
    ]
    # tool steps, CLI steps and prompts on an MCP host do leave a reply
    assert errors_of("""\
        steps:
          - at: 1m
            read: {session: bob}
            expect: {ok: true}
          - at: 1m
            cli_list: {stale: all}
            expect: {contains: "x"}
          - at: 1m
            prompt: {session: carol}
            expect: {contains: "you are {carol}"}
        """) == []


@pytest.mark.rules("R33")
def test_a_forks_older_id_is_a_session_from_the_fork_on():
    """R33: `fork: {older_as: LABEL}` names the older id, which keeps running: later steps may target it (and
    `{LABEL}` expands), a step before the fork may not, and the label must be new."""
    assert errors_of("""\
        steps:
          - at: 1m
            fork: {session: carol, older_as: carol-before}
          - at: 2m
            prompt: {session: carol-before}
            expect: {contains: "you are {carol-before}"}
          - at: 2m
            send: {from: carol-before, to: alice}
        """) == []
    assert errors_of("""\
        steps:
          - at: 1m
            prompt: {session: carol-before}
          - at: 2m
            fork: {session: carol, older_as: carol-before}
          - at: 3m
            fork: {session: carol, older_as: bob}
          - at: 4m
            fork: {session: carol, older_as: carol-before}
        """) == [
        "w.yaml:16: steps[0].prompt.session: `carol-before` is the older id of the fork at steps[1], which has not "
        "happened by this step — move the step after steps[1], or target `carol`",
        "w.yaml:20: steps[2].fork.older_as: `bob` is already a declared session — name the older id with a label "
        "of its own (e.g. `carol-before`)",
        "w.yaml:22: steps[3].fork.older_as: `carol-before` already names the older id of an earlier fork — give "
        "each fork's older id its own label",
    ]


def test_silent_is_for_a_prompts_hooks_and_stands_alone():
    """`expect: {silent: ...}` judges a prompt's hook output: refused on a tool step and beside a text key."""
    assert errors_of("""\
        steps:
          - at: 1m
            read: {session: bob}
            expect: {silent: true}
          - at: 1m
            prompt: {session: carol}
            expect: {silent: true, contains: "you are"}
          - at: 2m
            prompt: {session: carol}
            expect: {silent: true}
        """) == [
        "w.yaml:17: steps[0].expect.silent: `silent:` on a `read` step, which replies with a text, not hook output "
        "— use `silent:` on a `prompt` step of a claude-code or cursor session; for a tool reply write `ok:`, "
        "`equals:`, `contains:` or `matches:`",
        "w.yaml:20: steps[1].expect.silent: `silent: true` beside a text key: a hook that printed nothing has no text "
        "to match — keep `silent: true` alone, or drop it and match the line with `contains:`/`equals:`",
    ]


def test_expectation_bodies_take_only_the_keys_they_read():
    """Dict-typed expectations refuse unknown keys (with the closest key or the list) and values of the wrong type."""
    assert errors_of("""\
        expect:
          - wakes: {session: bob, cuont: 1}
          - echoes: {session: bob, count: -1, contains: 5}
          - roster: {session: bob, active: bob}
          - hook_line: {session: carol, color: red}
          - registered: {session: bob, is: "true"}
        """) == [
        "w.yaml:15: expect[0].wakes.cuont: unknown key `cuont` in a `wakes` expectation — did you mean `count`?",
        "w.yaml:16: expect[1].echoes.count: -1 is not allowed here — write a whole number, 0 or more",
        "w.yaml:16: expect[1].echoes.contains: 5 is not allowed here — write a string (quote it)",
        "w.yaml:17: expect[2].roster.active: 'bob' is not allowed here — write a list of session labels",
        "w.yaml:18: expect[3].hook_line.color: unknown key `color` in a `hook_line` expectation "
        "— a `hook_line` expectation "
        "takes: session, hook, contains, not_contains, equals, matches, absent, count, min, max, "
        "between",
        "w.yaml:19: expect[4].registered.is: 'true' is not allowed here — write true or false",
    ]


@pytest.mark.rules("R31")
def test_replies_name_a_step_that_records_replies_and_host_ids_sit_on_mcp_sessions():
    """R31: `replies.step` is an index or a step's name, of a step that records replies (a retry fault
    does); `expect:` on a retry points there. `host_id` belongs to claude-code / cursor sessions, once each."""
    assert errors_of("""\
        steps:
          - {at: 1m, name: hello, send: {from: alice, to: bob}}
          - at: 2m
            name: again
            retry: {session: alice, tool: send}
            expect: {ok: true}
          - {at: 3m, name: gone, delete: {session: bob}}
        expect:
          - replies: {step: hello, ok: true}
          - replies: {step: again, count: 1}
          - replies: {step: helo, ok: true}
          - replies: {step: 7, ok: true}
          - replies: {step: gone, ok: true}
        """) == [
        "w.yaml:19: steps[1].expect: `expect:` on a `retry` fault, which repeats a call of another step — check "
        "the repeated calls' replies with a point expectation under the top-level `expect:`: `- replies: {step: "
        "<this step's index or name>, contains: ...}`",
        "w.yaml:24: expect[2].replies.step: no step is named `helo` — did you mean `hello`? (defined step names: "
        "hello, again, gone)",
        "w.yaml:25: expect[3].replies.step: there is no step 7 (the scenario has 3 steps) — write an index from 0 "
        "to 2, or a step's `name:`",
        "w.yaml:26: expect[4].replies.step: step 2 is a `delete` step, which records no reply — name a tool or CLI "
        "step (send, broadcast, read, register, unregister, list, status, cli_list, cli_tail, approve, decline) or "
        "a `retry` fault",
    ]
    world = WORLD.replace("      - id: carol\n", "      - id: carol\n        host_id: ABC-123\n      - id: cal\n"
                          "        host_id: ABC-123\n").replace("      - id: bob\n", "      - id: bob\n"
                                                               "        host_id: x\n")
    assert errors_of("", world) == [
        "w.yaml:8: processes[0].sessions[1].host_id: `host_id` on bob, a session of an opencode process — "
        "claude-code or cursor hosts have host session ids; drop it here, or move the session to such a process",
        "w.yaml:15: processes[1].sessions[1].host_id: cal has the host id 'ABC-123' of carol — give each session "
        "its own host id (one conversation is one session; a fork's `host_id` changes a session's id later)",
    ]


def test_a_key_on_the_wrong_object_names_its_place():
    """`clip:` on a session, `turn:` on a process: the hint says which object takes the key."""
    world = WORLD.replace("      - id: alice\n", "      - id: alice\n        clip: 2000\n").replace(
        "  - id: h2\n", "  - id: h2\n    turn: 10s\n")
    assert errors_of("", world) == [
        "w.yaml:7: processes[0].sessions[0].clip: unknown key `clip` — `clip` belongs on the process "
        "(`processes[i]`): move it there",
        "w.yaml:14: processes[2].turn: unknown key `turn` — `turn` belongs on the agent "
        "(`processes[i].sessions[j].agent`): move it there",
    ]
