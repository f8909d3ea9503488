"""`thatch-sim` (`python -m simulator`): run, lint, new, schema, matrix, bench.

Mostly called in-process through cli.main; what only a real process shows
(Ctrl-C, the wall guard, --help, --version, the bench's own parser) runs
`python -m simulator` in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import pytest

from simulator import cli, design
from simulator.result import RunResult, Verdict
from simulator.scenario.schema import schema_text
import repo


ROOT = repo.ROOT
INVALID = repo.INVALID_SCENARIOS


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """An empty working directory to scaffold and lint in; run directories go to its tmp/."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path


def run_dirs(repo: Path) -> list[Path]:
    return sorted((repo / "tmp").glob("thatch-sim-*"))


def scaffold(name: str) -> Path:
    assert cli.main(["new", name]) == 0
    return (Path(name) if name.endswith(".yaml")
            else Path("scenarios") / ((name if "/" in name else f"misc/{name}") + ".yaml"))


def test_new_scaffolds_a_scenario_that_lints_clean(repo, capsys):
    assert cli.main(["new", "basic/first-send"]) == 0
    path = repo / "scenarios" / "basic" / "first-send.yaml"
    text = path.read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    assert "name: first-send" in text
    assert cli.main(["lint"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 scenario file(s), 0 problem(s)"


def test_new_defaults_refusals_and_paths(repo, capsys):
    assert cli.main(["new", "solo"]) == 0
    assert (repo / "scenarios" / "misc" / "solo.yaml").exists()
    assert cli.main(["new", "solo"]) == 1
    assert cli.main(["new", "Bad Name"]) == 2
    assert cli.main(["new", "elsewhere/x/custom-path.yaml"]) == 0
    assert (repo / "elsewhere" / "x" / "custom-path.yaml").exists()
    assert "already exists" in capsys.readouterr().err


def test_lint_prints_every_error_and_fails(repo, capsys):
    cli.main(["new", "basic/good-one"])
    target = repo / "scenarios" / "basic"
    for name in ("typo_key.yaml", "bad_duration.yaml"):
        (target / name).write_text((INVALID / name).read_text())
    (target / "no-header.yaml").write_text(
        (target / "good-one.yaml").read_text().split("\n", 1)[1].replace("good-one", "no-header"))
    (target / "twin.yaml").write_text((target / "good-one.yaml").read_text())
    capsys.readouterr()
    assert cli.main(["lint", "scenarios"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "scenarios/basic/bad_duration.yaml:3: duration: '10 minutes' is not a duration "
        "— write a number with a unit: 500ms, 90s, 15m, 2h, 7d, or units combined largest first: 5m30s, 2h10m, 1d2h",
        "scenarios/basic/no-header.yaml:1: missing schema comment — start the file with "
        "`# yaml-language-server: $schema=" + out[1].split("$schema=")[1],
        "scenarios/basic/twin.yaml:7: name: scenario name `good-one` is also used by scenarios/basic/good-one.yaml "
        "— give each scenario its own name (reports are filed by name)",
        "scenarios/basic/typo_key.yaml:6: processes[0].sesions: unknown key `sesions` — did you mean `sessions`?",
        "5 scenario file(s), 4 problem(s)",
    ]


def test_lint_of_a_missing_path(repo, capsys):
    assert cli.main(["lint", "nope.yaml"]) == 1
    assert capsys.readouterr().out.startswith("nope.yaml: no such file")


def test_schema_prints_and_checks(capsys):
    assert cli.main(["schema"]) == 0
    assert capsys.readouterr().out == schema_text()
    assert cli.main(["schema", "--check"]) == 0


def _fake_engine(monkeypatch, ok: bool, extra: tuple[Verdict, ...] = ()) -> list:
    calls = []

    def run_scenario(spec, *, run_dir, seed=None, progress=None, **_):
        calls.append(seed)
        if progress:
            progress(5, 10)
        (Path(run_dir) / "history.jsonl").write_text("{}\n")
        verdicts = [Verdict("P1", "single-deliverer", "pass", rules=("R25",)),
                    Verdict("P5", "no-loss", "pass" if ok else "fail", "a message vanished.", ("R10",),
                            [{"t": 61_500, "proc": "h1", "session": "alice", "kind": "tool-result",
                              "data": {"tool": "chat_read", "ok": True}}])]
        verdicts += [Verdict(v.check, v.title, v.status, v.message) for v in extra]  # fresh: the CLI places them
        return RunResult(spec.name, seed, Path(run_dir), Path(run_dir) / "db", Path(run_dir) / "history.jsonl", [],
                         verdicts, 0.2, 60_000, 9)

    monkeypatch.setattr(cli, "run_scenario", run_scenario)
    return calls


def test_run_prints_the_table_and_a_passing_run_cleans_up(repo, monkeypatch, capsys):
    path = scaffold("basic/first-send")
    calls = _fake_engine(monkeypatch, ok=True)
    capsys.readouterr()
    assert cli.main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("running first-send seed=0 on thatch-core in ")
    assert "P1     PASS         single-deliverer [R25]" in out
    assert "first-send seed=0 sut=thatch-core: PASSED (2/2 checks ok)" in out
    assert "run dir" not in out
    assert calls == [0]
    assert run_dirs(repo) == []


def test_run_engine_switch_reaches_run_scenario(repo, monkeypatch, capsys):
    path = scaffold("basic/first-send")
    engines = []
    _fake_engine(monkeypatch, ok=True)
    fake = cli.run_scenario
    monkeypatch.setattr(cli, "run_scenario", lambda spec, **kw: engines.append(kw.get("engine")) or fake(spec, **kw))
    assert cli.main(["run", str(path), "--engine", "windowed"]) == 0
    assert cli.main(["run", str(path)]) == 0  # no flag: the API's default ($THATCH_SIM_ENGINE, else windowed)
    assert engines == ["windowed", None]
    with pytest.raises(SystemExit):
        cli.main(["run", str(path), "--engine", "warp"])
    assert "invalid choice: 'warp'" in capsys.readouterr().err


def test_run_keep_and_run_dir_keep_a_passing_run(repo, monkeypatch, capsys):
    path = scaffold("basic/first-send")
    _fake_engine(monkeypatch, ok=True)
    assert cli.main(["run", str(path), "--keep"]) == 0
    (kept,) = run_dirs(repo)
    assert f"run dir: {kept}" in capsys.readouterr().out
    assert cli.main(["run", str(path), "--run-dir", "mine"]) == 0
    assert (repo / "mine" / "history.jsonl").exists()
    assert "run dir: mine" in capsys.readouterr().out
    assert cli.main(["run", str(path), "--run-dir", "mine"]) == 2  # not empty now
    assert "mine is not an empty directory" in capsys.readouterr().err


def test_run_failure_shows_the_story_and_keeps_the_run_and_the_report(repo, monkeypatch, capsys):
    path = scaffold("basic/first-send")
    calls = _fake_engine(monkeypatch, ok=False)
    capsys.readouterr()
    assert cli.main(["run", str(path), "--seed", "7", "--report", "out/r"]) == 1
    out = capsys.readouterr().out
    assert calls == [7]
    assert "P5 failed in scenario first-send with seed 7 (9 dispatches, 1m virtual, 0.2s wall)" in out
    assert "  +1m1s500ms  h1/alice  tool-result  tool=chat_read ok=true" in out
    assert "rerun: pytest 'scenarios/basic/first-send.yaml::first-send' --sim-seed 7 -p no:xdist" in out
    assert "   or: python -m simulator run scenarios/basic/first-send.yaml --seed 7" in out
    (kept,) = run_dirs(repo)
    assert f"run dir: {kept}" in out
    assert (repo / "out" / "r" / "history.jsonl").read_text() == "{}\n"


def test_run_failure_names_file_and_line_of_each_failed_step_or_expectation(repo, monkeypatch, capsys):
    path = scaffold("basic/first-send")
    lines = path.read_text().splitlines()
    step_reply = 1 + lines.index("    expect: {ok: true}")
    unread = 1 + next(i for i, line in enumerate(lines) if line.startswith("  - unread:"))
    _fake_engine(monkeypatch, ok=False, extra=(Verdict("step#0", "reply of step 0", "fail", "reply ok=false"),
                                                Verdict("expect#1", "unread of bob at end", "fail", "bob has 1")))
    capsys.readouterr()
    assert cli.main(["run", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "P5 no-loss [R10]: FAIL" in out  # judged by default: the file states it nowhere
    assert f"scenarios/basic/first-send.yaml:{step_reply}: step#0 reply of step 0: FAIL" in out
    assert f"scenarios/basic/first-send.yaml:{unread}: expect#1 unread of bob at end: FAIL" in out


def test_run_of_a_broken_file_exits_2(repo, capsys):
    assert cli.main(["run", str(INVALID / "typo_key.yaml")]) == 2
    assert "unknown key `sesions` — did you mean `sessions`?" in capsys.readouterr().err
    assert run_dirs(repo) == []


class Sink(list):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def write(self, text):
        self.append(text)

    def flush(self):
        pass

    def isatty(self):
        return self.tty


def test_progress_printer_is_quiet_for_short_runs():
    sink = Sink(tty=True)
    progress, finish = cli._progress_printer(sink)
    progress(1, 2)
    finish()
    assert sink == []


def test_progress_is_shown_on_a_terminal_only(monkeypatch):
    clock = iter([0.0, 5.0, 5.0])
    monkeypatch.setattr(cli.time, "perf_counter", lambda: next(clock))
    tty = Sink(tty=True)
    progress, finish = cli._progress_printer(tty)
    progress(5, 10)
    finish()
    assert tty == ["\r  running: 5/10 (50%) after 5s", "\n"]
    progress, finish = cli._progress_printer(Sink(tty=False))
    assert progress is None  # a log file gets no `\r` lines


def test_matrix_check_prints_one_summary_line_and_the_listing_with_v(repo, capsys):
    assert cli.main(["matrix", "--check", "--root", str(repo)]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("0/36 rules covered; missing: R1, R2,")
    assert cli.main(["matrix", "--check", "-v", "--root", str(repo)]) == 1
    listing = capsys.readouterr().out.splitlines()
    assert len(listing) > 36 and listing[-1] == line
    assert cli.main(["matrix", "--root", str(repo)]) == 0
    assert capsys.readouterr().out.splitlines() == listing


def test_bench_runs_bench_main_with_its_own_arguments(repo, monkeypatch, capsys):
    monkeypatch.setattr(cli, "CHECKOUT", repo / "elsewhere")
    assert cli.main(["bench"]) == 2
    (repo / "bench").mkdir()
    (repo / "bench" / "bench.py").write_text("def main(argv=None):\n    print('bench ran', argv)\n    return 0\n")
    assert cli.main(["bench"]) == 0
    assert cli.main(["bench", "--quick", "-x"]) == 0
    assert capsys.readouterr().out.splitlines() == ["bench ran []", "bench ran ['--quick', '-x']"]


def _sim(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simulator", *args], cwd=ROOT, capture_output=True, text=True,
                          **kwargs)


def test_bench_help_is_the_benchs_own():
    """issue 11: `bench` used to reach the benchmark's parser as an argument of its own."""
    done = _sim("bench", "--help")
    assert done.returncode == 0, done.stderr
    assert "--quick" in done.stdout and "Simulator benchmark" in done.stdout


def test_python_dash_m_entry_point():
    out = _sim("schema", check=True).stdout
    assert json.loads(out)["title"] == "Scenario"


def test_console_script_version_and_help_with_examples_and_exit_codes():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"thatch-sim": "simulator.cli:main", "thatch-core": "thatch_core.__main__:main"}
    version = _sim("--version")
    assert version.returncode == 0 and version.stdout.startswith("thatch-sim ")
    top = _sim("--help").stdout
    for command in ("run", "lint", "new", "schema", "matrix", "bench"):
        assert f"\n    {command} " in top
    assert "examples:\n  thatch-sim run " in top
    assert "exit codes:" in top and "130  interrupted (Ctrl-C)" in top
    run = _sim("run", "--help").stdout
    assert "usage: thatch-sim run" in run and " FILE" in run and "--wall-budget S" in run
    assert "examples:\n  thatch-sim run " in run
    usage = _sim("run", "x.yaml", "--bogus")
    assert usage.returncode == 2 and "unrecognized arguments: --bogus" in usage.stderr


# Two processes polling for a virtual month: far longer than any test waits.
LONG_SCENARIO = """\
name: long-quiet-month
duration: 30d
drain: 0s
processes:
  - id: h1
    sessions:
      - id: alice
  - id: h2
    sessions:
      - id: bob
steps:
  - at: 1m
    send: {from: alice, to: bob, body: "hello"}
"""


def _kept_run_dir(line: str) -> Path:
    return Path(line.split("run dir kept: ", 1)[1].split(" ", 1)[0])


@pytest.fixture
def long_scenario(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    path = tmp_path / "long.yaml"
    path.write_text(LONG_SCENARIO)
    return path


@pytest.mark.slow  # ~3 s: a real run, stopped
def test_ctrl_c_stops_a_run_with_one_line_and_keeps_its_directory(long_scenario):
    # Ctrl-C signals the terminal's whole foreground process group: so does this test. A runner
    # started as a background job of a non-interactive shell inherits SIGINT ignored, and Python keeps
    # an inherited SIG_IGN: give the run the default disposition a terminal's foreground job has.
    proc = subprocess.Popen([sys.executable, "-m", "simulator", "run", str(long_scenario)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        started = proc.stdout.readline()
        assert started.startswith("running long-quiet-month seed=0 on thatch-core in ")
        # into the run proper (every child forked and writing its history), not its first milliseconds
        run_dir = Path(started.split(" in ", 1)[1].strip())
        last_child = run_dir / "history" / "h2.0.jsonl"
        while proc.poll() is None and not (last_child.exists() and last_child.stat().st_size):
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130
    assert "Traceback" not in out + err
    (line,) = err.splitlines()
    assert line.startswith("thatch-sim run: interrupted long-quiet-month seed=0; run dir kept: ")
    assert _kept_run_dir(line) == run_dir and run_dir.is_dir()


@pytest.mark.slow  # ~2 s: a real run, until its wall budget
def test_wall_budget_stops_a_run_with_one_line_and_keeps_its_directory(long_scenario):
    done = _sim("run", str(long_scenario), "--wall-budget", "1", timeout=60)
    assert done.returncode == 3
    assert "Traceback" not in done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert "exceeded its wall-clock budget of 1s" in line and "(raise the budget with --wall-budget S)" in line
    run_dir = _kept_run_dir(line)
    assert run_dir.is_dir() and (run_dir / "thatch.db").exists()


def test_texts_prints_every_shown_text_by_surface(capsys):
    """R9, R31: `thatch-sim texts` is the reference of simulator.design.SHOWN_TEXTS; words narrow it."""
    assert cli.main(["texts"]) == 0
    out = capsys.readouterr().out
    for text in design.SHOWN_TEXTS:
        assert f"-- {text.key}: {text.when}\n" in out
    assert out.index("== tool reply") < out.index("== hook line") < out.index("== later design")
    assert cli.main(["texts", "HOOK", "leave"]) == 0
    narrowed = capsys.readouterr().out
    assert "-- hook.leave:" in narrowed and "-- hook.identity:" not in narrowed and "== wake" not in narrowed
    assert cli.main(["texts", "no-such-word"]) == 1
    assert "no text holds 'no-such-word'" in capsys.readouterr().err
