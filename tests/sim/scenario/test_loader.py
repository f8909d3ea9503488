"""The YAML loader: file:line messages that say what to write instead, and the committed schema."""

from __future__ import annotations

import json
import re

import pytest

from simulator.scenario import loader
from simulator.scenario.durations import parse_duration, parse_word_or_duration
from simulator.scenario.errors import did_you_mean
from simulator.scenario.loader import (
    BadValueError, CrossReferenceError, MissingFieldError, ScenarioError, ScenarioErrors,
    ScenarioSyntaxError, UnknownKeyError, format_key_path, load_file, parse_scenario,
)
from simulator.scenario.fields import RepeatedBody, expand_body
from simulator.scenario.schema import SCHEMA_PATH, schema_text
import repo


ROOT = repo.ROOT
INVALID = repo.INVALID_SCENARIOS

# One fixture per defect: (file, line, error class, exact text after "FILE:LINE: ").
CASES = [
    ("unknown_key.yaml", 9, UnknownKeyError,
     "colour: unknown key `colour` — write one of: name, story, rules, seed, markers, duration, drain, dispatch, "
     "properties, expect_outcome, reaches, legacy, processes, steps, expect, policy"),
    ("typo_key.yaml", 6, UnknownKeyError, "processes[0].sesions: unknown key `sesions` — did you mean `sessions`?"),
    ("bad_duration.yaml", 3, BadValueError,
     "duration: '10 minutes' is not a duration — write a number with a unit: 500ms, 90s, 15m, 2h, 7d, "
     "or units combined largest first: 5m30s, 2h10m, 1d2h"),
    ("undefined_session.yaml", 11, CrossReferenceError,
     "steps[0].send.to: undefined session `carol` — write one of the defined sessions: alice, bob"),
    ("undefined_process.yaml", 11, CrossReferenceError,
     "steps[0].kill.process: undefined process `h2` — write one of the defined processes: h1"),
    ("steps_out_of_order.yaml", 12, CrossReferenceError,
     "steps[1].at: step at 1m30s comes before the previous step (2m, line 10) "
     "— list steps in time order (equal times are fine)"),
    ("two_actions.yaml", 10, BadValueError,
     "steps[0]: a step needs exactly one action or fault key, found 2: send, read — "
     "split it into one step per key (they may share the same `at`)"),
    ("no_action.yaml", 10, BadValueError,
     "steps[0]: a step needs exactly one action or fault key, found none — write one of the actions "
     "(send, broadcast, read, register, unregister, list, status, prompt, delete, exit, title, config, start, "
     "cli_list, cli_tail, approve, decline) or faults (kill, crash, sleep, resume, restart, fork, lock, stall, "
     "retry, reload, interleave)"),
    ("bad_rule_id.yaml", 3, BadValueError, "rules[1]: 'R37' is not a design rule id — write R1 .. R36"),
    ("resume_not_never.yaml", 11, CrossReferenceError,
     "steps[0].resume.process: resume target `h2` is not declared `start: never` (it starts at 0s) — "
     "add `start: never` to process h2: the resume step is what starts it"),
    ("yaml_syntax.yaml", 8, ScenarioSyntaxError,
     "YAML syntax: while parsing a block mapping expected <block end>, but found '<block sequence start>' — "
     "check the indentation and the `key: value` form of this line and the one above; "
     "quote values that contain `: ` or start with a special character"),
    ("missing_field.yaml", 2, MissingFieldError,
     "duration: missing required field `duration` — add `duration:`, length of the scripted phase "
     "(a number with a unit: 500ms, 90s, 15m, 2h, 7d, or units combined largest first: 5m30s, 2h10m, 1d2h)"),
    ("expect_on_fault.yaml", 11, CrossReferenceError,
     "steps[0].expect: `expect:` on a `kill` fault, which produces no reply to check — use a point expectation under "
     "the top-level `expect:` instead (e.g. `- at: 2m` with `registered: {session: ...}`); only send, broadcast, read, "
     "register, unregister, list, status, cli_list, cli_tail, approve, decline steps and prompts on claude-code "
     "or cursor sessions have a reply"),
    ("expectation_key_typo.yaml", 10, UnknownKeyError,
     "expect[0].wakes.cuont: unknown key `cuont` in a `wakes` expectation — did you mean `count`?"),
    ("bad_repeat_body.yaml", 11, BadValueError,
     "steps[0].send.body: `times: 1000001` is out of range — write a whole number from 0 to 1000000"),
    ("hook_name_typo.yaml", 10, CrossReferenceError,
     "expect[0].hook_line.hook: unknown hook `stop` for `carol`, a session of a claude-code process — "
     "did you mean `Stop`? (a claude-code session runs: SessionStart, UserPromptSubmit, Stop)"),
    # Lint refuses what would otherwise fail late or pass vacuously:
    ("label_placeholder_typo.yaml", 12, CrossReferenceError,
     "steps[0].expect.not_contains: `{bobb}` names no declared session, so it would stay literal text — "
     "did you mean `{bob}`? (`{label}` is a declared session's name: {alice}, {bob})"),
    ("bare_number_duration.yaml", 10, BadValueError,
     "steps[0].at: 90 has no unit — write `90s` or `90ms` (a bare number would silently mean 90 ms)"),
    ("resume_claude_code_into_opencode.yaml", 13, CrossReferenceError,
     "steps[0].resume.session: `carol` is a session of c1, a claude-code process, which an opencode process (`h2`) "
     "cannot resume — resume an opencode session; "
     "a claude-code session continues in its own host (its id forks with `fork`)"),
    ("unknown_marker.yaml", 3, BadValueError,
     "markers[1]: unknown marker `flaky` — write one of the known markers: slow, race"),
    ("replica_id_without_index.yaml", 8, BadValueError,
     "processes[0].sessions[0].id: `replicas: 4` copies the id `worker`, which has no `{i}`, so every copy would get "
     "the same label — write `{i}` in it (e.g. worker{i}: worker1, worker2, ...)"),
    ("before_catch_up_not_at_a_wake.yaml", 14, CrossReferenceError,
     "expect[0].before_catch_up: `before_catch_up` at 2h, when no sleep ends — set `at` to a sleep's end "
     "(the sleep at 5m for 2h ends at 2h5m)"),
    ("per_hour_without_window.yaml", 10, BadValueError,
     "expect[0].wakes.per_hour: `per_hour` without `between` — add `between: [from, until]`: the stretch whose "
     "every rolling hour is judged"),
    # An interleaving the run could never carry out (D-interleave-1):
    ("pause_call_never_made.yaml", 12, CrossReferenceError,
     "steps[0].interleave.pause.call: session `alice` never makes a broadcast call after this step — pause a call "
     "it makes (heartbeat, pending_notifications, send), or add a step that makes a broadcast call at or after "
     "this one"),
    ("pause_in_exited_process.yaml", 14, CrossReferenceError,
     "steps[1].interleave.pause.session: a pause in `h2`, which has exited by then (steps[0] kill) — move the "
     "interleave step before the process ends, or name a session of a running process"),
    ("interleave_run_in_paused_process.yaml", 14, CrossReferenceError,
     "steps[0].interleave.run[0].read: a run call from `h1`, the process whose call pauses — run calls of sessions "
     "hosted by other processes: the paused process cannot serve one while it waits"),
    # `at` and `between` swapped: the fix says where the key goes
    ("between_beside_expectation.yaml", 11, UnknownKeyError,
     "expect[0].between: unknown key `between` — move `between` inside the expectation, into its body: "
     "`<kind>: {..., between: [from, until]}` (`at` is the key that goes beside it)"),
    ("at_inside_expectation.yaml", 10, UnknownKeyError,
     "expect[0].unread.at: unknown key `at` in a `unread` expectation — move `at` beside it: `- unread: {...}` "
     "with `at: 5m` on the next line, level with `unread:` (inside, `between: [from, until]` judges a window)"),
]


def test_every_fixture_has_a_case():
    assert sorted(p.name for p in INVALID.glob("*.yaml")) == sorted(c[0] for c in CASES)


@pytest.mark.parametrize("name,line,cls,text", CASES, ids=[c[0].removesuffix(".yaml") for c in CASES])
def test_invalid_fixture_message(name, line, cls, text):
    display = f"tests/invalid_scenarios/{name}"
    with pytest.raises(cls) as info:
        load_file(INVALID / name, display=display)
    assert str(info.value) == f"{display}:{line}: {text}"
    assert info.value.line == line


VALID = """\
# yaml-language-server: $schema=../../simulator/scenario/scenario.schema.json
name: two-tabs
rules: [R9]
duration: 10m
processes:
  - id: h1
    sessions:
      - id: alice
      - id: bob
        agent: silent
steps:
  - at: 1m
    send: {from: alice, to: bob}
"""


def test_valid_scenario_loads_with_positions():
    loaded = parse_scenario(VALID, file="x.yaml")
    assert loaded.spec.name == "two-tabs"
    assert loaded.spec.processes[0].sessions[1].agent.kind == "silent"
    assert loaded.positions.line_of(("steps", 0, "send", "to")) == (13, 25)
    assert loaded.positions.line_of(("processes", 0, "sessions", 1)) == (9, 9)
    # a path that is not in the file falls back to its nearest ancestor
    assert loaded.positions.line_of(("steps", 0, "send", "body"))[0] == 13


def test_leading_document_marker_is_fine_a_second_document_is_not():
    assert parse_scenario("---\n" + VALID).spec.name == "two-tabs"
    with pytest.raises(ScenarioSyntaxError,
                       match=r"^f\.yaml:15: a second YAML document \(`---`\) in the file "
                             r"— write one scenario per file$"):
        parse_scenario(VALID + "---\nname: other\n", file="f.yaml")


def test_empty_file_and_non_mapping():
    with pytest.raises(ScenarioSyntaxError, match=r"^e\.yaml:1: the file holds no scenario — "):
        parse_scenario("# only a comment\n", file="e.yaml")
    with pytest.raises(ScenarioSyntaxError, match=r"^e\.yaml:1: the file holds a list, not a scenario — "):
        parse_scenario("- a\n- b\n", file="e.yaml")


def test_duplicate_key_is_refused_not_silently_dropped():
    text = VALID.replace("rules: [R9]\n", "rules: [R9]\nduration: 5m\n")
    with pytest.raises(ScenarioSyntaxError) as info:
        parse_scenario(text, file="d.yaml")
    assert str(info.value) == ("d.yaml:5: duration: duplicate key `duration` (first at line 4) "
                               "— keep one; YAML would silently drop the first")


def test_several_errors_are_reported_together_in_file_order():
    text = VALID.replace("duration: 10m", "duration: soon").replace("agent: silent", "agent: reeder")
    with pytest.raises(ScenarioErrors) as info:
        parse_scenario(text, file="m.yaml")
    lines = str(info.value).splitlines()
    assert lines == [
        "m.yaml:4: duration: 'soon' is not a duration — write a number with a unit: 500ms, 90s, 15m, 2h, 7d, "
        "or units combined largest first: 5m30s, 2h10m, 1d2h",
        "m.yaml:10: processes[0].sessions[1].agent: 'reeder' is not allowed here — did you mean `reader`? "
        "(one of: reader, ping-pong, silent)",
    ]
    assert [type(e) for e in info.value.errors] == [BadValueError, BadValueError]


def test_literal_choice_without_a_close_match_lists_the_choices():
    with pytest.raises(BadValueError) as info:
        parse_scenario(VALID.replace("  - id: h1\n", "  - id: h1\n    kind: vim\n"), file="k.yaml")
    assert str(info.value) == ("k.yaml:7: processes[0].kind: 'vim' is not allowed here "
                               "— write one of: opencode, claude-code, cursor")


def test_union_field_gets_one_message():
    with pytest.raises(BadValueError) as info:
        parse_scenario(VALID.replace("rules: [R9]", "properties: some"), file="u.yaml")
    assert str(info.value) == ("u.yaml:3: properties: 'some' is not allowed here — write properties to check: "
                               "`all`, a list of P-ids, or `{exclude: [P-ids]}` (all but those); "
                               "`{include: [P-ids]}`: all, those judged on any design")
    with pytest.raises(BadValueError) as info:
        parse_scenario(VALID.replace("rules: [R9]", "properties: [P1, P16]"), file="u.yaml")
    assert str(info.value) == ("u.yaml:3: properties[1]: 'P16' is not a property id "
                               "— write `all` or a list of P1, P2, P3, P4, P5, P6, P7, P8, P9, P10, P11, P12, P13, "
                               "P14, P15")


def test_pattern_and_type_errors_say_what_to_write():
    with pytest.raises(BadValueError, match=r"^p\.yaml:2: name: 'Two Tabs' has the wrong form — write kebab-case"):
        parse_scenario(VALID.replace("name: two-tabs", "name: Two Tabs"), file="p.yaml")
    with pytest.raises(BadValueError, match=r"^p\.yaml:5: processes: expected a list, got 'h1' — write `- item` lines"):
        parse_scenario(VALID.split("processes:")[0] + "processes: h1\n", file="p.yaml")


def test_unknown_key_inside_a_step_suggests_the_action():
    with pytest.raises(UnknownKeyError) as info:
        parse_scenario(VALID.replace("    send:", "    sned:"), file="s.yaml")
    assert str(info.value) == "s.yaml:13: steps[0].sned: unknown key `sned` — did you mean `send`?"


def test_error_classes_share_one_root_with_one_line_docstrings():
    classes = [ScenarioSyntaxError, UnknownKeyError, MissingFieldError, BadValueError, CrossReferenceError,
               ScenarioErrors]
    for cls in classes:
        assert issubclass(cls, ScenarioError)
        assert cls.__doc__ and "\n" not in cls.__doc__.strip()


def test_format_key_path():
    assert format_key_path(("steps", 3, "send", "to")) == "steps[3].send.to"
    assert format_key_path(()) == "(scenario)"


def test_did_you_mean_names_the_closest_choice_or_nothing():
    assert did_you_mean("sesions", ["sessions", "steps"]) == "did you mean `sessions`?"
    assert did_you_mean("Stp", ["Stop", "stop"], listing="one of: Stop, stop") == (
        "did you mean `Stop`? (one of: Stop, stop)")
    # A same-letters match wins over a closer spelling when case does not count.
    assert did_you_mean("STOP", ["Stoo", "stop"], case_insensitive=True) == "did you mean `stop`?"
    assert did_you_mean("zzz", ["sessions", "steps"]) is None


def test_word_or_duration_takes_the_word_or_a_duration():
    assert parse_word_or_duration("end", "end") == "end"
    assert parse_word_or_duration("2m", "end") == 120_000
    with pytest.raises(ValueError, match=r"^'never' is neither a duration nor `end` — write `end` or a number"):
        parse_word_or_duration("never", "end")


def test_committed_schema_matches_the_model():
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text(), "run `python -m simulator schema --write`"
    schema = json.loads(schema_text())
    assert "from" in schema["$defs"]["SendArgs"]["properties"]  # YAML spellings (aliases), not attribute names
    assert "register" in schema["$defs"]["Step"]["properties"]


def test_every_scenario_validates_against_the_committed_schema():
    """What the loader accepts, the editor's schema accepts too (durations like `2m` for `at`, bare agent kinds)."""
    jsonschema = pytest.importorskip("jsonschema")
    import yaml

    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))
    problems = [f"{p.relative_to(ROOT)}: {list(e.path)}: {e.message[:120]}"
                for p in sorted((ROOT / "scenarios").rglob("*.yaml"))
                for e in validator.iter_errors(yaml.safe_load(p.read_text(encoding="utf-8")))]
    assert problems == []
    assert not validator.is_valid({"name": "x", "duration": "30s5m", "processes": [{"id": "h1"}]})
    assert not validator.is_valid({"name": "x", "duration": "5m", "processes": [{"id": "h1"}],
                                   "expect": [{"wakes": {"session": "a", "cuont": 1}}]})


def test_every_scenario_file_starts_with_the_schema_comment():
    from simulator.cli import header_problem

    files = sorted((ROOT / "scenarios").rglob("*.y*ml")) + sorted(INVALID.glob("*.yaml"))
    problems = [f"{p}: {header_problem(p, p.read_text(encoding='utf-8'))}" for p in files
                if header_problem(p, p.read_text(encoding="utf-8"))]
    assert problems == []


@pytest.mark.parametrize("text,ms", [
    ("5m30s", 330_000), ("2h10m", 7_800_000), ("1d2h", 93_600_000), ("1m500ms", 60_500), ("5m 30s", 330_000),
    ("90s", 90_000), ("1.5s", 1_500), ("500ms", 500), (90, 90),
])
def test_compound_durations(text, ms):
    assert parse_duration(text) == ms
    if isinstance(text, str):  # the schema an editor checks with agrees with the parser
        pattern = json.loads(schema_text())["$defs"]["Window"]["properties"]["until"]["anyOf"][0]["pattern"]
        assert re.match(pattern, text)


@pytest.mark.parametrize("text", ["30s5m", "5m5m", "", "m", "5", "1h 2x", "2 hours"])
def test_bad_compound_durations_list_the_accepted_forms(text):
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert str(info.value) == (f"{text!r} is not a duration — write a number with a unit: 500ms, 90s, 15m, 2h, 7d, "
                               "or units combined largest first: 5m30s, 2h10m, 1d2h")
    pattern = json.loads(schema_text())["$defs"]["Window"]["properties"]["until"]["anyOf"][0]["pattern"]
    assert not re.match(pattern, text)


def test_compound_duration_everywhere_a_duration_is():
    text = VALID.replace("duration: 10m", "duration: 1h30m").replace("  - at: 1m\n", "  - at: 5m30s\n")
    text += "expect:\n  - at: 1h2m3s\n    unread: {session: bob, count: 0}\n"
    spec = parse_scenario(text.replace("        agent: silent", "        agent: {kind: silent, turn: 1m30s}")).spec
    assert (spec.duration, spec.steps[0].at, spec.expect[0].at) == (5_400_000, 330_000, 3_723_000)
    assert spec.processes[0].sessions[1].agent.turn == 90_000


def test_repeated_body_is_compact_in_the_spec_and_expanded_for_the_tool():
    text = VALID.replace("send: {from: alice, to: bob}",
                         'send: {from: alice, to: bob, body: {repeat: "ab", times: 3, prefix: " "}}')
    text += '  - at: 2m\n    broadcast: {from: alice, body: {repeat: "x", times: 10001}}\n'
    spec = parse_scenario(text).spec
    assert isinstance(spec.steps[0].args.body, RepeatedBody)
    assert expand_body(spec.steps[0].args.body) == " ababab"
    # the harness gets the step as JSON (orchestrator._step_args): the mapping expands the same way
    assert len(expand_body(spec.steps[1].args.body.model_dump(mode="json"))) == 10_001
    assert expand_body("plain") == "plain" and expand_body(None) is None
    assert expand_body({"repeat": "y", "times": 0}) == ""


@pytest.mark.parametrize("body,text", [
    ('{repeat: "", times: 3}', "`repeat` is empty — write the text to repeat (at least one character)"),
    ("{repeat: x, times: -1}", "`times: -1` is out of range — write a whole number from 0 to 1000000"),
    ("{repeat: x}", "a repeated body needs `times` — write {repeat: TEXT, times: N} (optional prefix, suffix)"),
    ("{repaet: x, times: 3}",
     "unknown key `repaet` in a repeated body — write {repeat: TEXT, times: N} (optional prefix, suffix)"),
    ("7", "7 is not a message body — write a string (quote it) or {repeat: TEXT, times: N} (optional prefix, suffix)"),
])
def test_repeated_body_errors(body, text):
    with pytest.raises(BadValueError) as info:
        parse_scenario(VALID.replace("send: {from: alice, to: bob}", f"send: {{from: alice, to: bob, body: {body}}}"),
                       file="r.yaml")
    assert str(info.value) == f"r.yaml:13: steps[0].send.body: {text}"


def test_loader_module_documents_the_one_document_decision():
    assert "ONE scenario" in loader.__doc__
