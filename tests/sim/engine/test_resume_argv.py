"""`resume` with its own command line (`argv`) and directory listing (`listing`).

The language (validate.py: file:line errors), the fake opencode harness (the
command line thatch reads for its own pid, the listing `-c` picks from), the
fault step (`{id}` expansion, what the process-start records) and the
checkers' model of which session a command line opens (D-sim-22).
"""

from __future__ import annotations


import pytest

from engine_harness import TinyHarness
from scenariokit import error_lines
from simulator import Scenario, run_scenario
from simulator.checks.deliverable import Gate
from simulator.checks.view import RunView
from simulator.engine.faults import opened_session
from harnesskit import Driver, make_ctx, session_info
from simulator.protocol import OP_START
from simulator.scenario.validate import check_spec

A, B, C = "ses_alice0000000001", "ses_bob00000000002", "ses_scout00000000003"

WORLD = """\
name: world
duration: 1h
processes:
  - id: h1
    sessions:
      - id: alice
      - id: bob
  - id: h2
    start: never
"""


def errors_of(extra: str) -> list[str]:
    return error_lines(WORLD, extra)


# -- the language ------------------------------------------------------------------


def test_argv_and_listing_that_load():
    assert errors_of("""\
        steps:
          - at: 1m
            resume: {session: bob, process: h2, argv: [opencode, "--session={id}"]}
          - at: 2m
            resume:
              session: bob
              process: h2
              argv: [opencode, run, -s]
          - at: 3m
            resume: {session: bob, process: h2, how: "-c", listing: []}
          - at: 4m
            resume: {session: bob, process: h2, argv: [opencode, -s, "{id}", -c], listing: [alice, bob]}
        """) == []


def test_argv_problems_point_at_the_argument():
    assert errors_of("""\
        steps:
          - at: 1m
            resume:
              session: bob
              process: h2
              argv:
                - opencode
                - {id}
                - 5
                - "--session={sid}"
          - at: 2m
            resume: {session: bob, process: h2, argv: []}
          - at: 3m
            resume: {session: bob, process: h2, argv: "opencode -c"}
        """) == [
        "w.yaml:17: steps[0].resume.argv[1]: `{id}` unquoted is a YAML mapping, not text — quote it: \"{id}\"",
        "w.yaml:18: steps[0].resume.argv[2]: 5 is not a string — write each argument as a string (quote numbers)",
        "w.yaml:19: steps[0].resume.argv[3]: unknown placeholder `{sid}` in `--session={sid}` "
        "— `{id}` (the resumed session's id) is the only placeholder",
        "w.yaml:21: steps[1].resume.argv: an empty command line — write at least the program: [opencode, ...] "
        "(or drop `argv` for the default `opencode -s <id>` / `opencode -c`)",
        "w.yaml:23: steps[2].resume.argv: 'opencode -c' is not a list of arguments "
        "— write the command line as a list of strings, e.g. [opencode, \"--session={id}\"]",
    ]


def test_argv_replaces_how_and_listing_names_declared_sessions():
    assert errors_of("""\
        steps:
          - at: 1m
            resume: {session: bob, process: h2, how: "-c", argv: [opencode, -c]}
          - at: 2m
            resume: {session: bob, process: h2, how: "-c", listing: [bob, scoot]}
        """) == [
        "w.yaml:12: steps[0].resume.how: `how` and `argv` both given; `argv` is the whole command line "
        "— drop `how` (write the flag in `argv`, e.g. [opencode, -c])",
        "w.yaml:14: steps[1].resume.listing[1]: undefined session `scoot` "
        "— write one of the defined sessions: alice, bob",
    ]


def test_check_spec_refuses_a_bad_argv_built_in_python():
    spec = Scenario.model_validate({"name": "api", "duration": "1m",
                                    "processes": [{"id": "h1", "sessions": [{"id": "bob"}]},
                                                  {"id": "h2", "start": "never"}],
                                    "steps": [{"at": "30s", "resume": {"session": "bob", "process": "h2",
                                                                       "argv": ["opencode", 7]}}]})
    [error] = check_spec(spec)
    assert str(error) == ("<scenario>: steps[0].resume.argv[1]: 7 is not a string "
                          "— write each argument as a string (quote numbers)")


# -- the checkers' model of opencode's command line ----------------------------------------


LISTING = [{"id": A, "parent_id": None, "label": "alice", "updated_ms": 5},
           {"id": B, "parent_id": None, "label": "bob", "updated_ms": 9},
           {"id": C, "parent_id": B, "label": "scout", "updated_ms": 99}]
IDS = {"alice": A, "bob": B, "scout": C}


@pytest.mark.parametrize("argv, opens", [
    (["opencode", "-s", B], "bob"),
    (["opencode", f"--session={A}"], "alice"),
    (["opencode", "--session", A, "-s", B], "alice"),     # the first id wins
    (["opencode", "-s", A, "-c"], "alice"),               # -s wins over -c
    (["opencode", "-c"], "bob"),                          # newest top-level; the child is newer
    (["opencode", "--continue"], "bob"),
    (["opencode", "run", "-s"], None),                    # a flag without its value
    (["opencode", "-s", "-c"], "bob"),                    # -s has no value; -c still counts
    (["opencode", "--session="], None),
    (["opencode", "--", "-s", B], None),                  # after `--`: a message, not flags
    (["opencode"], None),
])
def test_opened_session_models_opencodes_flags(argv, opens):
    assert opened_session(argv, LISTING, IDS) == opens


def test_continue_over_only_a_child_or_nothing_opens_nothing():
    assert opened_session(["opencode", "-c"], LISTING[2:], IDS) is None
    assert opened_session(["opencode", "-c"], [], IDS) is None


# -- the fake opencode harness ----------------------------------------------------------------


@pytest.fixture
def drivers(tmp_path, frozen_sim):
    made = []

    def make(sessions, label="h1", **extra):
        d = Driver(make_ctx(tmp_path, label, "opencode", sessions, **extra), tmp_path / "run", frozen_sim)
        made.append(d)
        return d

    yield make
    for d in made:
        d.close()


def first_run(drivers):
    """bob registers in h1 (and scout, his child, is opened there), then h1 is gone."""
    d = drivers([session_info("bob", B), session_info("scout", C, parent_id=B, joins="never")])
    d.send(OP_START, 0)
    d.run_until(30_000)
    name = d.events("registered", "bob")[0]["data"]["name"]
    d.close()
    return name


@pytest.mark.rules("R5")
def test_the_harness_reports_the_resume_argv_as_its_command_line(drivers):
    """R5: `--session=<id>` on the harness's own command line reclaims the name at startup."""
    name = first_run(drivers)
    again = drivers([session_info("bob", B)], label="h2", argv=["opencode", f"--session={B}"], resumed="bob")
    assert again.harness._cmdline(0) == ["opencode", f"--session={B}"]
    again.send(OP_START, 100_000)
    assert [e["data"] for e in again.events("registered")] == [{"session_id": B, "name": name, "how": "startup"}]
    assert again.harness.runtime.startup_session == B


@pytest.mark.rules("R5")
@pytest.mark.parametrize("argv", [["opencode", "--continue"], ["opencode", "-s", B, "-c"]], ids=["continue", "s-wins"])
def test_continue_and_s_over_c_from_the_resume_argv(drivers, argv):
    """R5: `--continue` takes the newest top-level listed session; `-s <id>` beats `-c`
    even when the listing's newest top-level session is another one."""
    first_run(drivers)
    listing = [{"id": B, "parent_id": None, "updated_ms": 5}, {"id": C, "parent_id": B, "updated_ms": 99}]
    if "-s" in argv:
        listing.append({"id": A, "parent_id": None, "updated_ms": 50})
    again = drivers([session_info("bob", B)], label="h2", argv=argv, directory_sessions=listing, resumed="bob")
    again.send(OP_START, 100_000)
    assert again.harness.runtime.startup_session == B
    assert [e["session"] for e in again.events("registered")] == ["bob"]


@pytest.mark.rules("R5")
@pytest.mark.parametrize("argv", [["opencode", "run", "-s"], ["opencode", "--session="], ["opencode"]])
def test_a_command_line_naming_no_session_hosts_nothing_at_startup(drivers, argv):
    """R5: a session flag without its value names nothing: no startup host, no registration."""
    first_run(drivers)
    again = drivers([session_info("bob", B)], label="h2", argv=argv, resumed="bob")
    again.send(OP_START, 100_000)
    assert again.harness.runtime.startup_session is None and again.harness.runtime.hosted_sessions() == []
    assert again.events("registered") == []


@pytest.mark.rules("R5")
@pytest.mark.parametrize("listing", [[LISTING[2]], []], ids=["only-a-child", "empty"])
def test_continue_with_no_top_level_session_continues_nothing(drivers, tmp_path, listing):
    """R5: `-c` over a listing with only a sub-agent child (or nothing) continues
    nothing; an empty listing is the directory, not "fall back to my own sessions"."""
    first_run(drivers)
    again = drivers([session_info("scout", C, parent_id=B)], label="h2", startup=("-c", None),
                    directory_sessions=listing, resumed="scout")
    again.send(OP_START, 100_000)
    assert again.harness.runtime.startup_session is None and again.harness.runtime.hosted_sessions() == []
    assert again.events("registered") == []


# -- the fault step and the checkers ---------------------------------------------------------


def scenario(steps) -> Scenario:
    return Scenario.model_validate({
        "name": "resume-argv", "duration": "3m", "drain": "1m", "seed": 5,
        "processes": [
            {"id": "h1", "project": "alpha", "sessions": [{"id": "alice"}]},
            {"id": "h2", "project": "alpha",
             "sessions": [{"id": "bob"}, {"id": "scout", "parent": "bob", "start": "10s"}]},
            {"id": "h3", "project": "alpha", "start": "never"},
        ],
        "steps": steps,
    })


def test_resume_argv_expands_the_id_and_records_what_it_opens(tmp_path):
    steps = [{"at": "30s", "kill": {"process": "h2"}},
             {"at": "50s", "resume": {"session": "bob", "process": "h3", "argv": ["opencode", "--session={id}"]}}]
    r = run_scenario(scenario(steps), run_dir=tmp_path, overrides={"harness": TinyHarness}, check=False)
    start = [e for e in r.events("process-start") if e["data"]["target"] == "h3"][0]["data"]
    bob = start["sessions"]["bob"]
    assert (start["how"], start["argv"], start["opens"]) == ("argv", ["opencode", f"--session={bob}"], "bob")
    assert r.events("fault-fired")[-1]["data"]["detail"]["argv"] == ["opencode", f"--session={bob}"]
    assert r.verdict("fault#1").status == "pass"


def test_resume_listing_is_what_continue_picks_from(tmp_path):
    steps = [{"at": "30s", "kill": {"process": "h2"}},
             {"at": "50s", "resume": {"session": "scout", "process": "h3", "how": "-c", "listing": ["scout"]}}]
    r = run_scenario(scenario(steps), run_dir=tmp_path, overrides={"harness": TinyHarness}, check=False)
    start = [e for e in r.events("process-start") if e["data"]["target"] == "h3"][0]["data"]
    assert start["how"] == "-c" and start["opens"] is None
    clock = [e for e in r.events("clock") if e["proc"] == "h3"][0]["data"]
    assert clock["startup"] == ["-c", None]


def _view(events) -> RunView:
    for i, e in enumerate(events):
        e.setdefault("i", i)
        e.setdefault("session", None)
    return RunView(None, events, None)


@pytest.mark.rules("R13", "R5")
def test_a_resumed_session_its_command_line_does_not_open_is_hosted_from_its_first_use():
    """D-sim-22, D-real-host-5: the checkers hold a resume's session hosted only if the
    command line opens it, else from its first use there: its first status event (a prompt
    alone hosts nothing; the prompt's turn reports busy)."""
    start = {"t": 0, "proc": "orchestrator", "kind": "process-start",
             "data": {"target": "h3", "incarnation": 0, "sessions": {"bob": B}, "resumed": "bob", "opens": None}}
    prompt = {"t": 60_000, "proc": "h3", "session": "bob", "kind": "user-prompt", "data": {}}
    busy = {"t": 61_000, "proc": "h3", "session": "bob", "kind": "status",
            "data": {"status": "busy", "compacting": False}}
    view = _view([start, prompt, busy])
    [inc] = view.hosting.incs
    assert inc.dormant == {"bob"}
    assert not view.hosting.is_hosting(inc, "bob", 30_000) and not view.hosting.is_hosting(inc, "bob", 60_000)
    assert view.hosting.is_hosting(inc, "bob", 61_000)
    opened = dict(start, data=dict(start["data"], opens="bob"))
    view = _view([opened])
    assert view.hosting.is_hosting(view.hosting.incs[0], "bob", 30_000)


@pytest.mark.rules("R5", "R14")
def test_the_session_a_continue_opens_instead_is_hosted_from_the_start():
    """R5, R14 (D-sim-22): `-c` resuming bob opens alice, the newest session, so the new process
    hosts alice from its start (it beats her and can wake her) and bob only from his first use."""
    start = {"t": 0, "proc": "orchestrator", "kind": "process-start",
             "data": {"target": "h3", "incarnation": 0, "sessions": {"bob": B}, "resumed": "bob", "opens": "alice"}}
    joined = {"t": 0, "proc": "h3", "session": "alice", "kind": "registered",
              "data": {"session_id": "ses_alice", "name": "ba-sil-00001", "how": "auto"}}
    end = {"t": 60_000, "proc": "orchestrator", "kind": "phase", "data": {"phase": "end"}}
    view = _view([start, joined, end])
    [inc] = view.hosting.incs
    assert inc.dormant == {"bob"} and inc.opened == "alice"
    assert view.hosting.is_hosting(inc, "alice", 0) and not view.hosting.is_hosting(inc, "bob", 30_000)
    assert [(s.start, s.reason) for s in Gate(view).timeline("alice")] == [(0, "")]


@pytest.mark.rules("R5", "R18")
def test_the_session_a_continue_opens_is_a_tab_its_process_can_wake(tmp_path):
    """R5, R18: h2 dies; resuming alice with `-c` opens the newest listed session, bob, in h3.
    When carol mails bob, h3 wakes him: its server has the tab (it used to answer "not found",
    so the mail waited)."""
    spec = Scenario.model_validate({
        "name": "continue-opens-a-tab", "duration": "4m", "drain": "1m", "seed": 3,
        "processes": [
            {"id": "h1", "project": "alpha", "sessions": [{"id": "carol"}]},
            {"id": "h2", "project": "alpha", "sessions": [{"id": "alice"}, {"id": "bob", "start": "5s"}]},
            {"id": "h3", "project": "alpha", "start": "never"},
        ],
        "steps": [{"at": "30s", "kill": {"process": "h2"}},
                  {"at": "50s", "resume": {"session": "alice", "process": "h3", "how": "-c",
                                           "listing": ["alice", "bob"]}},
                  {"at": "2m", "send": {"from": "carol", "to": "bob", "body": "ping"}}],
    })
    r = run_scenario(spec, run_dir=tmp_path)
    start = [e for e in r.events("process-start") if e["data"]["target"] == "h3"][0]["data"]
    assert start["opens"] == "bob"
    assert any(w["proc"] == "h3" and w["session"] == "bob" for w in r.events("wake"))
    assert r.verdict("P3").status == "pass", r.verdict("P3").message
