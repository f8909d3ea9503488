"""The fault forms of issue 9: a crash after its step, the wake-prompt host step, `events:` (R23, R24).

Each form loads, dumps the way its author wrote it, and is refused with
file:line and what to write instead where it could never take effect.
"""

from __future__ import annotations


import pytest

from scenariokit import error_lines
from simulator.scenario.kinds import CrashArgs

WORLD = """\
name: world
duration: 1h
processes:
  - id: h1
    sessions:
      - id: alice
  - id: cu
    kind: cursor
    sessions:
      - id: carol
"""


def errors_of(extra: str, world: str = WORLD) -> list[str]:
    return error_lines(world, extra)


@pytest.mark.rules("R21", "R23")
def test_the_crash_forms_load_and_dump_as_written():
    """R21, R23: `before:`/`after:` a named step, `sql:` with `when:`; a `before:`
    crash dumps exactly its old keys (its `fault` record in the history is unchanged)."""
    assert errors_of("""\
        steps:
          - {at: 1m, crash: {process: h1, after: delivered-stamp}}
          - {at: 1m, crash: {process: h1, before: wake-prompt}}
          - {at: 1m, crash: {process: h1, after: wake-prompt, nth: 2}}
          - {at: 1m, crash: {process: h1, sql: "update chat_sessions set topic", when: after}}
          - {at: 1m, crash: {process: cu, after: read-stamp}}
        """) == []
    before = CrashArgs.model_validate({"process": "h1", "before": "delivered-stamp"})
    assert before.model_dump(mode="json", by_alias=True) == {"process": "h1", "before": "delivered-stamp",
                                                             "sql": None, "nth": 1}
    assert (before.point, before.timing) == ("delivered-stamp", "before")
    after = CrashArgs.model_validate({"process": "h1", "sql": "commit", "when": "after"})
    assert after.model_dump(mode="json", by_alias=True)["when"] == "after" and after.timing == "after"


def test_a_crash_names_exactly_one_point_and_when_goes_with_sql_or_call_only():
    both = errors_of("""\
        steps:
          - {at: 1m, crash: {process: h1, before: heartbeat, after: heartbeat}}
        """)
    assert len(both) == 1 and "w.yaml:" in both[0] and "found `before` and `after`" in both[0] \
        and "`after: <named step>`" in both[0]
    when = errors_of("""\
        steps:
          - {at: 1m, crash: {process: h1, before: heartbeat, when: after}}
        """)
    assert len(when) == 1 and "`when` goes with `sql` or `call` only — write `after: heartbeat` alone" in when[0]

    half = errors_of("""\
        steps:
          - {at: 1m, crash: {process: h1, call: send}}
        """)
    assert len(half) == 1 and "`call` and `statement` go together" in half[0]
    unknown = errors_of("""\
        steps:
          - {at: 1m, crash: {process: h1, call: nope, statement: 2}}
        """)
    assert len(unknown) == 1 and "call" in unknown[0]
    assert errors_of("""\
        steps:
          - {at: 1m, crash: {process: h1, call: send, statement: 3, when: after}}
        """) == []


@pytest.mark.rules("R23")
def test_the_wake_prompt_step_is_refused_where_no_wake_prompt_comes():
    """R23: a Cursor process receives no wake prompts: the point could never fire."""
    errs = errors_of("""\
        steps:
          - {at: 1m, crash: {process: cu, after: wake-prompt}}
        """)
    assert errs == ["w.yaml:12: steps[0].crash.after: `after: wake-prompt` in `cu`, a cursor process — the wake-prompt "
                    "step happens in opencode processes only: crash one of those, or pick a statement of this process "
                    "(e.g. `before: read-stamp`)"]


@pytest.mark.rules("R24")
def test_a_synchronous_event_stream_is_refused_outside_opencode():
    """R24: the event stream is the fake opencode server's."""
    world = WORLD.replace("    kind: cursor\n", "    kind: cursor\n    events: synchronous\n")
    errs = errors_of("", world)
    assert len(errs) == 1 and "processes[1].events: `events: synchronous` on `cu`, a cursor process" in errs[0]
    assert errors_of("", WORLD.replace("  - id: h1\n", "  - id: h1\n    events: synchronous\n")) == []


@pytest.mark.rules("R13", "R14")
def test_a_stall_names_a_process_that_polls():
    """R13, R14: poll jitter loses a poll timer, so only a polling process can stall."""
    assert errors_of("""\
        steps:
          - {at: 1m, stall: {process: h1, for: 20s}}
        """) == []
    errs = errors_of("""\
        steps:
          - {at: 1m, stall: {process: cu, for: 20s}}
        """)
    assert len(errs) == 1 and "stall of `cu`, a cursor process" in errs[0] and "runs no poller" in errs[0]
