"""The language's newer forms at load time: replicated blocks, the exclusion form of
`properties`, durations that must say their unit, `{label}` placeholders that must
name a session, resumes an opencode process can do, known markers, and the bodies of
the windowed, database and `same_name` expectations."""

from __future__ import annotations

import json
import textwrap

import pytest

from scenariokit import error_lines
from simulator.scenario.loader import BadValueError, ScenarioErrors, parse_scenario
from simulator.scenario.model import KNOWN_MARKERS, Scenario
from simulator.scenario.schema import schema_text
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
  - id: cu
    kind: cursor
    sessions:
      - id: dave
  - id: h2
    start: never
"""


def errors_of(extra: str, world: str = WORLD) -> list[str]:
    return error_lines(world, extra)


# -- replicas ------------------------------------------------------------------

REPLICATED = """\
name: replicated
duration: 1h
processes:
  - id: lead
    sessions:
      - id: alice
      - id: w{i}
        replicas: 3
        title: "worker {i}"
        start: "{i}m"
  - id: h{i}
    replicas: 2
    project: p{i}
    sessions:
      - id: a{i}
      - id: b{i}
        agent: silent
steps:
  - at: 5m
    send: {from: w3, to: b2}
"""


def test_replicas_write_the_block_out_with_its_number_in_every_text():
    spec = parse_scenario(REPLICATED, file="r.yaml").spec
    assert [p.id for p in spec.processes] == ["lead", "h1", "h2"]
    assert [(s.id, s.title, s.start) for s in spec.processes[0].sessions] == [
        ("alice", None, 0), ("w1", "worker 1", 60_000), ("w2", "worker 2", 120_000), ("w3", "worker 3", 180_000)]
    assert [(p.project, [s.id for s in p.sessions]) for p in spec.processes[1:]] == [("p1", ["a1", "b1"]),
                                                                                    ("p2", ["a2", "b2"])]
    assert spec.processes[2].sessions[1].agent.kind == "silent"
    assert all(p.replicas == 1 for p in spec.processes)


def test_a_copy_is_located_at_its_template():
    loaded = parse_scenario(REPLICATED, file="r.yaml")
    assert loaded.positions.line_of(("processes", 2, "sessions", 1, "agent"))[0] == 17
    assert loaded.positions.line_of(("processes", 0, "sessions", 3, "title"))[0] == 9


def test_an_error_in_a_template_is_reported_once_at_its_line():
    text = REPLICATED.replace("agent: silent", "agnet: silent").replace("start: \"{i}m\"", "start: 90")
    with pytest.raises(ScenarioErrors) as info:
        parse_scenario(text, file="r.yaml")
    assert [e.format() for e in info.value.errors] == [
        "r.yaml:10: processes[0].sessions[1].start: 90 has no unit — write `90s` or `90ms` "
        "(a bare number would silently mean 90 ms)",
        "r.yaml:17: processes[1].sessions[1].agnet: unknown key `agnet` — did you mean `agent`?",
    ]
    text = REPLICATED.replace("to: b2", "to: b3")
    assert errors_of("", text) == ["w.yaml:20: steps[0].send.to: undefined session `b3` — write one of the defined "
                                   "sessions: alice, w1, w2, w3, a1, b1, a2, b2"]


def test_replicas_that_cannot_be_written_out_are_refused():
    text = """\
        name: bad
        duration: 1h
        processes:
          - id: h{i}
            replicas: 2
            sessions:
              - id: s{i}
                replicas: 2
          - id: x{i}
          - id: y{i}
            replicas: true
        """
    assert errors_of("", textwrap.dedent(text)) == [
        "w.yaml:8: processes[0].sessions[0].replicas: a replicated session inside a replicated process — replicas do "
        "not nest: write the process's sessions out (ids with `{i}`, the process's number), "
        "or replicate only the sessions",
        "w.yaml:9: processes[1]: `{i}` in a block without `replicas` — add `replicas: N` to this block "
        "(copy i gets i for `{i}`), or drop `{i}`",
        "w.yaml:11: processes[2].replicas: True is not a number of copies — write a whole number from 1 to 1000",
    ]


def test_replicas_from_python_are_written_out_too():
    spec = Scenario.model_validate({"name": "p", "duration": "1h", "processes": [
        {"id": "h{i}", "replicas": 2, "sessions": [{"id": "s{i}"}]}]})
    assert [(p.id, [s.id for s in p.sessions]) for p in spec.processes] == [("h1", ["s1"]), ("h2", ["s2"])]


# -- properties ----------------------------------------------------------------


def test_properties_exclusion_checks_all_but_those_and_claims_none_one_by_one():
    spec = parse_scenario(WORLD + "properties: {exclude: [P8, P10]}\n", file="w.yaml").spec
    assert spec.checked_properties() == ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P9", "P11", "P12", "P13", "P14",
                                          "P15")
    assert not spec.lists_properties()
    assert parse_scenario(WORLD + "properties: [P1]\n", file="w.yaml").spec.lists_properties()
    assert errors_of("properties: {exclude: [P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12, P13, P14, P15]}\n") == [
        "w.yaml:18: properties.exclude: `exclude` lists every property, so nothing would be checked — "
        "exclude fewer, or list the few to check instead: properties: [P1, ...]"]
    assert errors_of("properties: {exclud: [P10]}\n") == [
        "w.yaml:18: properties.exclud: unknown key `exclud` — did you mean `exclude`?"]


# -- durations -------------------------------------------------------------------


@pytest.mark.parametrize("extra,path", [
    ("drain: 300\n", "drain"),
    ("steps:\n  - at: 90\n    send: {from: alice, to: bob}\n", "steps[0].at"),
    ("steps:\n  - at: 1m\n    sleep: {for: 90}\n", "steps[0].sleep.for"),
    ("expect:\n  - wakes: {session: bob, count: 1}\n    at: 90\n", "expect[0].at"),
    ("expect:\n  - wakes: {session: bob, count: 1, between: [90, 2m]}\n", "expect[0].wakes.between[0]"),
    ("expect:\n  - same_name: {session: bob, at: [1m, 90]}\n", "expect[0].same_name.at[1]"),
])
def test_a_bare_number_where_a_duration_is_meant_is_refused(extra, path):
    (line,) = errors_of(extra)
    assert f": {path}: " in line and "has no unit — write `" in line and "(a bare number would silently mean" in line


def test_zero_needs_no_unit_and_python_may_pass_milliseconds():
    assert errors_of("drain: 0\nexpect:\n  - wakes: {session: bob, between: [0, 30m], count: 0}\n") == []
    spec = Scenario.model_validate({"name": "p", "duration": 60_000, "processes": [{"id": "h1"}],
                                    "steps": [{"at": 90, "sleep": {"for": 1000}}]})
    assert (spec.duration, spec.steps[0].at) == (60_000, 90)
    assert check_spec(spec) == []


def test_the_editor_schema_accepts_zero_and_units_only():
    schema = json.loads(schema_text())
    assert {"const": 0} in schema["$defs"]["Step"]["properties"]["at"]["anyOf"]
    assert ("replicas" in schema["$defs"]["Process"]["properties"]
            and "replicas" in schema["$defs"]["Session"]["properties"])
    assert "before_catch_up" in schema["$defs"]["Expectation"]["properties"]
    assert schema["properties"]["markers"]["items"]["enum"] == [name for name, _ in KNOWN_MARKERS]


# -- {label} placeholders ----------------------------------------------------------


def test_a_placeholder_must_name_a_declared_session_wherever_it_expands():
    lines = errors_of("""\
        steps:
          - at: 1m
            send: {from: dave, to: alice, as: "{dav}"}
            expect: {ok: true, contains: "{alice}", matches: '{bobb} \\d{12}'}
          - at: 2m
            cli_tail: {from: "{alice}", to: "{carl}"}
          - at: 3m
            cli_tail: {from: "{h1}"}
        expect:
          - hook_line: {session: carol, equals: "{carol} {x}"}
          - roster: {session: alice, not_contains: "{Bob}"}
        """)
    assert [line.split(": ", 2)[1] for line in lines] == [
        "steps[0].send.as", "steps[0].expect.matches", "steps[1].cli_tail.to", "steps[2].cli_tail.from",
        "expect[0].hook_line.equals", "expect[1].roster.not_contains"]
    assert lines[0].endswith("`{dav}` names no declared session, so it would stay literal text — "
                             "did you mean `{dave}`? "
                             "(`{label}` is a declared session's name: {alice}, {bob}, {carol}, {dave})")
    assert lines[4].endswith("`{x}` names no declared session, so it would stay literal text — write a declared "
                             "session's label in braces ({alice}, {bob}, {carol}, {dave}), or drop the braces")


def test_literal_text_and_regex_counts_are_not_placeholders():
    assert errors_of("""\
        steps:
          - at: 1m
            send: {from: alice, to_raw: "{nobody}"}
            expect: {ok: false, matches: 'mcp_[0-9a-f]{12} \\{literal\\}'}
        """) == []


# -- resume, markers ---------------------------------------------------------------


def test_only_an_opencode_session_can_be_resumed():
    assert errors_of("steps:\n  - at: 1m\n    resume: {session: dave, process: h2}\n") == [
        "w.yaml:20: steps[0].resume.session: `dave` is a session of cu, a cursor process, which an opencode process "
        "(`h2`) cannot resume — resume an opencode session; a cursor session continues in its own host "
        "(its conversation stays in its workspace process)"]
    assert errors_of("steps:\n  - at: 1m\n    resume: {session: bob, process: h2}\n") == []


def test_markers_are_the_known_ones():
    assert errors_of("markers: [slow, race]\n") == []
    assert errors_of("markers: [raec]\n") == [
        "w.yaml:18: markers[0]: unknown marker `raec` — did you mean `race`? (known markers: slow, race)"]


# -- expectation bodies --------------------------------------------------------------


def test_new_expectation_bodies_say_what_they_judge():
    lines = errors_of("""\
        steps:
          - at: 5m
            sleep: {for: 10m}
        expect:
          - tombstones: {session: bob}
          - counter: {count: 1}
          - messages: {to: bobb, count: 1}
          - store_errors: {process: h3, count: 0}
          - wakes: {session: bob, between: [2h, 3h], count: 1}
          - unread: {session: bob, between: [1h, 30m], max: 0}
            at: 5m
          - same_name: {session: bob, at: [1m, end]}
            at: 5m
          - wakes: {session: bob, per_hour: {most: 6}, between: [0, 1h]}
          - registered: {session: bob, row: 0}
          - wakes: {session: bob, count: 0}
            before_catch_up: true
          - wakes: {session: bob, count: 0}
            at: 15m
            before_catch_up: true
        """)
    assert [line.split(": ", 1)[1] for line in lines] == [
        "expect[0].tombstones: a `tombstones` expectation says no number — add count, min or max (count: 0 for none)",
        "expect[1].counter: a `counter` expectation needs exactly one of `session` and `base` — write "
        "`session: <label>` (the base of its name) or `base: <name base>`, not both",
        "expect[2].messages.to: undefined session `bobb` — did you mean `bob`? "
        "(defined sessions: alice, bob, carol, dave)",
        "expect[3].store_errors.process: undefined process `h3` — write one of the defined processes: h1, cc, cu, h2",
        "expect[4].wakes.between: 2h is after the end of the run (1h5m: duration + drain) "
        "— write a window inside the run",
        "expect[5].unread.between: 30m is not after 1h — write the earlier time first, then a later one",
        "expect[6].at: `at` on a `same_name` expectation that gives its own times (`same_name.at`) — "
        "drop this `at`: `same_name.at` says when it is judged",
        "expect[7].wakes.per_hour.most: unknown key `most` in `per_hour` — write count, min or max",
        "expect[8].registered.row: 0 is not allowed here — write `first` (the session's original id), `latest` "
        "(its newest id, after forks) or N (its Nth id)",
        "expect[9].before_catch_up: `before_catch_up` on an expectation at `end` — put it on an expectation "
        "whose `at` is the instant a sleep ends",
    ]
    assert errors_of("""\
        steps:
          - at: 5m
            sleep: {for: 10m}
        expect:
          - roster: {session: alice, stale: [bob]}
            at: 15m
            before_catch_up: true
          - same_name: {session: bob, at: [1m, end], is: false}
          - counter: {base: ba-sil, min: 1}
          - messages: {via_broadcast: true, read: false, count: 0}
          - store_errors: {between: [0, 30m], count: 0}
          - registered: {session: carol, row: latest}
        """) == []


def test_the_old_bodies_keep_their_messages():
    with pytest.raises(BadValueError) as info:
        parse_scenario(WORLD + "expect:\n  - wakes: {session: bob, count: -1}\n", file="w.yaml")
    assert str(info.value) == ("w.yaml:19: expect[0].wakes.count: -1 is not allowed here "
                               "— write a whole number, 0 or more")
