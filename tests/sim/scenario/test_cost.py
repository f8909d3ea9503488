"""The cost estimate of a run, and the warning lint prints when a run would exceed the machine (D-bounds-2)."""

from __future__ import annotations

import io

from simulator import cli
from simulator.scenario import cost
from simulator.scenario.loader import parse_scenario

def spec_of(text: str):
    return parse_scenario(text).spec


def test_polls_dominate_and_follow_the_processes_lives():
    spec = spec_of("""\
name: w
duration: 1h
drain: 0s
processes:
  - id: h1
    sessions: [{id: alice}]
  - id: h2
    poll_interval: 1m
  - id: h3
    start: never
  - id: cc
    kind: claude-code
    sessions: [{id: carol}, {id: dave}]
steps:
  - {at: 30m, kill: {process: h2}}
  - {at: 45m, start: {process: h3}}
""")
    estimate = cost.estimate_cost(spec)
    polls = 120 + 30 + 30  # h1 every 30 s for 1 h, h2 every minute until its kill, h3 from 45m; claude-code never polls
    samples = 120  # at the shortest poll interval
    assert estimate.dispatches == polls + samples + cost.DISPATCHES_PER_STEP * 2 + 2 * 3
    assert estimate.os_processes == 3 + 1 + 2  # a claude-code host forks an MCP server per session


def test_a_machine_sleep_stops_polls_and_samples():
    base = "name: w\nduration: 2h\ndrain: 0s\nprocesses:\n  - id: h1\n"
    awake = cost.estimate_cost(spec_of(base)).dispatches
    asleep = cost.estimate_cost(spec_of(base + "steps:\n  - {at: 1m, sleep: {for: 1h}}\n")).dispatches
    assert awake - asleep == 2 * 120 - cost.DISPATCHES_PER_STEP


def test_no_warning_for_an_ordinary_scenario():
    spec = spec_of("name: w\nduration: 10m\nprocesses: [{id: h1}]\n")
    assert cost.cost_warnings(spec, available_mb=1000) == []


def test_warnings_when_a_run_exceeds_the_memory_or_the_wall_budget():
    procs = "".join(f"  - id: p{i}\n    poll_interval: 1s\n" for i in range(100))
    spec = spec_of(f"name: w\nduration: 1d\nprocesses:\n{procs}")
    memory, wall = cost.cost_warnings(spec, available_mb=500)
    assert memory == ("a run needs about 1200 MB (100 OS processes of ~11 MB), more than the 500 MB "
                      "this machine has available — use fewer processes")
    dispatches = 101 * (86_400 + 300)  # 100 processes and the samples, every second of 1d and the 5m drain
    assert wall.startswith(f"a run makes about {dispatches} dispatches (~{dispatches // 2000} s at ~500 us each), "
                           "over the 120 s wall-clock budget of a run")


def test_lint_prints_the_warning_with_file_and_line_and_still_passes(tmp_path, monkeypatch, capsys):
    path = tmp_path / "heavy.yaml"
    path.write_text("name: heavy\nduration: 29d\nprocesses:\n  - id: h1\n    poll_interval: 1s\n")
    monkeypatch.setattr(cost, "available_memory_mb", lambda: 64_000)
    problems = cli.lint_paths([str(path)])
    err = capsys.readouterr().err
    assert [p for p in problems if "schema comment" not in p] == []
    assert "heavy.yaml:3: warning: a run makes about " in err and "wall-clock budget" in err


def test_available_memory_is_read_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684032 kB\nMemAvailable:   2048000 kB\n")
    assert cost.available_memory_mb(meminfo) == 2000
    assert cost.available_memory_mb(tmp_path / "missing") is None


def test_warn_if_costly_writes_one_line_per_warning(monkeypatch):
    loaded = parse_scenario("name: w\nduration: 29d\nprocesses:\n  - id: h1\n    poll_interval: 1s\n", file="x.yaml")
    monkeypatch.setattr(cost, "available_memory_mb", lambda: None)
    out = io.StringIO()
    cost.warn_if_costly(loaded, out)
    assert out.getvalue().startswith("x.yaml:3: warning: a run makes about ") and out.getvalue().count("\n") == 1


def test_a_week_awake_is_over_the_guides_figure_and_the_warning_says_how_to_shorten_it():
    """A 7-day story of two pollers costs far more than the guide's ~3 s; sleeping through it does not."""
    week = "name: w\nduration: 7d\nprocesses:\n  - id: h1\n  - id: h2\n"
    (warning,) = cost.cost_warnings(spec_of(week), available_mb=64_000)
    assert "over the guide's ~3 s for a scenario — let the machine `sleep:` through idle stretches" in warning
    asleep = week + "steps:\n  - {at: 1m, sleep: {for: 6d23h}}\n"
    assert cost.cost_warnings(spec_of(asleep), available_mb=64_000) == []
