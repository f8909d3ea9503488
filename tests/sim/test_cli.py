"""`python -m simulator`: run, lint, new, schema, matrix, bench (called in-process through cli.main)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from simulator import cli
from simulator.result import RunResult, Verdict
from simulator.scenario.schema import schema_text
import repo


ROOT = repo.ROOT
INVALID = repo.INVALID_SCENARIOS


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """An empty working directory to scaffold and lint in."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def scaffold(name: str) -> Path:
    assert cli.main(["new", name]) == 0
    return Path(name) if name.endswith(".yaml") else Path("scenarios") / ((name if "/" in name else f"misc/{name}") + ".yaml")


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
    (target / "no-header.yaml").write_text((target / "good-one.yaml").read_text().split("\n", 1)[1].replace("good-one", "no-header"))
    (target / "twin.yaml").write_text((target / "good-one.yaml").read_text())
    capsys.readouterr()
    assert cli.main(["lint", "scenarios"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "scenarios/basic/bad_duration.yaml:3: duration: '10 minutes' is not a duration — write a number with a unit: 500ms, 90s, 15m, 2h, 7d, or units combined largest first: 5m30s, 2h10m, 1d2h",
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


def _fake_engine(monkeypatch, ok: bool) -> list:
    calls = []

    def run_scenario(spec, *, run_dir, seed=None, progress=None, **_):
        calls.append(seed)
        if progress:
            progress(5, 10)
        (Path(run_dir) / "history.jsonl").write_text("{}\n")
        verdicts = [Verdict("P1", "single-deliverer", "pass", rules=("R25",)),
                    Verdict("P5", "no-loss", "pass" if ok else "fail", "a message vanished.", ("R10",),
                            [{"t": 61_500, "proc": "h1", "session": "alice", "kind": "tool-result", "data": {"tool": "chat_read", "ok": True}}])]
        return RunResult(spec.name, seed, Path(run_dir), Path(run_dir) / "db", Path(run_dir) / "history.jsonl", [], verdicts, 0.2, 60_000, 9)

    monkeypatch.setattr(cli, "run_scenario", run_scenario)
    return calls


def test_run_prints_the_table_and_exit_code(repo, monkeypatch, capsys):
    path = scaffold("basic/first-send")
    calls = _fake_engine(monkeypatch, ok=True)
    capsys.readouterr()
    assert cli.main(["run", str(path)]) == 0
    out = capsys.readouterr().out
    assert "P1     PASS         single-deliverer [R25]" in out
    assert "first-send seed=0: PASSED (2/2 checks ok)" in out
    assert calls == [0]


def test_run_failure_shows_the_story_and_keeps_the_report(repo, monkeypatch, capsys):
    path = scaffold("basic/first-send")
    calls = _fake_engine(monkeypatch, ok=False)
    capsys.readouterr()
    assert cli.main(["run", str(path), "--seed", "7", "--report", "out/r"]) == 1
    out = capsys.readouterr().out
    assert calls == [7]
    assert "P5 failed in scenario first-send with seed 7 (9 dispatches, 1m virtual, 0.2s wall)" in out
    assert "  +1m1.5s  h1/alice  tool-result  tool=chat_read ok=true" in out
    assert "rerun: pytest 'scenarios/basic/first-send.yaml::first-send' --sim-seed 7 -p no:xdist" in out
    assert "   or: python -m simulator run scenarios/basic/first-send.yaml --seed 7" in out
    assert (repo / "out" / "r" / "history.jsonl").read_text() == "{}\n"


def test_run_of_a_broken_file_exits_2(repo, capsys):
    assert cli.main(["run", str(INVALID / "typo_key.yaml")]) == 2
    assert "unknown key `sesions` — did you mean `sessions`?" in capsys.readouterr().err


def test_progress_printer_is_quiet_for_short_runs():
    class Sink(list):
        def write(self, text):
            self.append(text)

        def flush(self):
            pass

    sink = Sink()
    progress, finish = cli._progress_printer(sink)
    progress(1, 2)
    finish()
    assert sink == []


def test_matrix_check_fails_when_a_rule_is_unnamed(repo, capsys):
    assert cli.main(["matrix", "--check", "--root", str(repo)]) == 1
    assert capsys.readouterr().out.splitlines()[-1].startswith("0/36 rules covered; missing: R1, R2,")


def test_bench_runs_bench_main(repo, capsys):
    assert cli.main(["bench"]) == 2
    (repo / "bench").mkdir()
    (repo / "bench" / "bench.py").write_text("def main(argv=None):\n    print('bench ran', argv)\n    return 0\n")
    assert cli.main(["bench"]) == 0
    assert "bench ran None" in capsys.readouterr().out


def test_python_dash_m_entry_point():
    out = subprocess.run([sys.executable, "-m", "simulator", "schema"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["title"] == "Scenario"
