"""The hostile scenario corpus: every file gives one file:line message, no traceback, in little memory and time,
and never stops the other files (D-loader-8, D-bounds-1).

`files/` holds the committed corpus; `GENERATED` the inputs too large to commit, written at test time.
Each file is linted in its own process (`lint_each.py` forks one per file after the imports), whose peak
memory must stay under 200 MB. The 2 s a file may take is bounded by a generous per-file timeout, never
asserted on the clock (the lint's own seconds are printed for the corpus table:
`pytest -s tests/hostile -k corpus_table`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FILES = HERE / "files"
DRIVER = HERE / "lint_each.py"
MAX_PEAK_MB = 200
TIMEOUT_S = 60  # the generous bound on one file (the target is 2 s); a hang or a runaway is killed here

SIZE = "over the limit of 1000000 bytes"
# file -> (line, what the message says); None: the file is valid and lints clean.
CORPUS: dict[str, tuple[int, str] | None] = {
    "alias-bomb.yaml": (7, "YAML aliases expand the file to more than 50000 values"),
    "alias-text-bomb.yaml": (7, "YAML aliases expand the file to more than 10000000 characters of text"),
    "recursive-alias.yaml": (10, "the alias `*loop` is inside the collection it names (a recursive alias)"),
    "recursive-alias-mapping.yaml": (10, "the alias `*self` is inside the collection it names (a recursive alias)"),
    "python-object-tag.yaml": (10, "could not determine a constructor for the tag"),
    "impossible-date.yaml": (10, "the YAML value `2026-13-45` cannot be read (month must be in 1..12)"),
    "huge-integer.yaml": (10, "cannot be read (Exceeds the limit (4300 digits) for integer string conversion"),
    "merge-of-a-scalar.yaml": (10, "expected a mapping or list of mappings for merging, but found scalar"),
    "unhashable-key.yaml": (10, "found unhashable key"),
    "undefined-alias.yaml": (10, "found undefined alias 'nothing'"),
    "duplicate-anchor.yaml": (11, "found duplicate anchor 'x'"),
    "tab-indentation.yaml": (11, "found character '\\t' that cannot start any token"),
    "nul-byte.yaml": (10, "the character U+0000 is not allowed in YAML"),
    "control-character.yaml": (10, "the character U+0007 is not allowed in YAML"),
    "latin1-bytes.yaml": (10, "not UTF-8 text (byte 0xe9 cannot start a character here)"),
    "utf16.yaml": (1, "not UTF-8 text (byte 0xff cannot start a character here)"),
    "binary-garbage.yaml": (1, "not UTF-8 text"),
    "surrogate-escape.yaml": (12, "the text holds \\udc80, half of a surrogate pair, which is no character"),
    "empty.yaml": (1, "the file holds no scenario"),
    "only-comments.yaml": (1, "the file holds no scenario"),
    "list-at-top.yaml": (3, "the file holds a list, not a scenario"),
    "scalar-at-top.yaml": (3, "the file holds a str, not a scenario"),
    "two-documents.yaml": (11, "a second YAML document (`---`) in the file"),
    "poll-interval-zero.yaml": (7, "processes[0].poll_interval: poll interval 0s is under the limit of 1s"),
    "too-many-processes.yaml": (5, "processes: 150 processes, over the limit of 100"),
    "duration-365000d.yaml": (4, "duration: a duration 365000d is over the limit of 30d"),
    "seed-10e33.yaml": (10, "seed: seed 1000000000000000000000000000000000 is out of range"),
    "negative-seed.yaml": (10, "seed: seed -7 is out of range"),
    "turn-99999999999d.yaml": (10, "agent.turn: a turn 99999999999d is over the limit of 1d"),
    "zero-duration.yaml": (4, "duration: a duration of 0 means nothing here"),
    "zero-lock.yaml": (12, "steps[0].lock.for: a lock of 0 means nothing here"),
    "repeat-body-bomb.yaml": (12, "steps[0].send.body: the body is 1000000000 characters, over the limit of 1000000"),
    "duration-overflow.yaml": (4, "is far too long a duration"),
    "bom.yaml": None,
    "control.yaml": None,
}

WORLD = "name: generated\nduration: 10m\nprocesses:\n  - id: h1\n    sessions: [{id: alice}, {id: bob}]\n"


def _sparse(path: Path, size: int) -> None:
    with path.open("wb") as handle:  # a hole, not 50 MB of writes: only its size is ever looked at
        handle.truncate(size)


# Inputs too large (or too special) to commit: name -> (writer, line, message).
GENERATED = {
    "oversize.yaml": (lambda p: p.write_text(WORLD + "story: " + "x" * 1_000_000 + "\n"), 1, SIZE),
    "fifty-megabytes.yaml": (lambda p: _sparse(p, 50_000_000), 1, "the file is 50000000 bytes, " + SIZE),
    "deep-nesting.yaml": (lambda p: p.write_text(WORLD + "story: " + "[" * 100_000 + "]" * 100_000 + "\n"), 6,
                          "the YAML nests deeper than 50 levels"),
    "wide-list.yaml": (lambda p: p.write_text(WORLD + "story: [" + ",".join(["1"] * 150_000) + "]\n"), 6,
                       "the file holds more than 50000 values"),
    "thousands-of-mistakes.yaml": (
        lambda p: p.write_text(WORLD + "steps:\n" + "".join(f"  - {{at: 1s, bogus{i}: 1}}\n" for i in range(5000))),
        7, "steps[0].bogus0: unknown key `bogus0`"),
    "named-pipe.yaml": (lambda p: os.mkfifo(p), 1, "not a regular file"),
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("hostile-generated")
    for name, (write, _, _) in GENERATED.items():
        write(directory / name)
    return directory


def shown(path: Path) -> str:
    """The path as lint's messages show it, run from the repository root."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


@pytest.fixture(scope="module")
def records(generated, tmp_path_factory) -> dict[Path, dict]:
    """Every corpus file linted in its own process: path -> its record."""
    paths = [FILES / n for n in sorted(CORPUS)] + [generated / n for n in sorted(GENERATED)]
    out = tmp_path_factory.mktemp("hostile-records") / "records.json"
    proc = subprocess.run([sys.executable, str(DRIVER), str(out), str(TIMEOUT_S), *map(str, paths)],
                          capture_output=True, text=True, timeout=TIMEOUT_S * len(paths), cwd=ROOT)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return {Path(p): r for p, r in json.loads(out.read_text()).items()}


def assert_one_message(record: dict, path: Path, line: int, message: str) -> None:
    assert record["traceback"] is None, record["traceback"]
    assert "Traceback" not in record["stdout"] + record["stderr"]
    assert record["rc"] == 1
    first = record["stdout"].splitlines()[0]
    assert first.startswith(f"{shown(path)}:{line}: "), first
    assert message in first, first
    assert record["peak_mb"] < MAX_PEAK_MB, f"{path.name}: peak {record['peak_mb']} MB"


def test_every_committed_file_is_in_the_corpus_table():
    assert sorted(p.name for p in FILES.iterdir()) == sorted(CORPUS)


@pytest.mark.parametrize("name", sorted(CORPUS), ids=lambda n: n.removesuffix(".yaml"))
def test_a_committed_file(name, records):
    record = records[FILES / name]
    expected = CORPUS[name]
    if expected is None:
        assert record["rc"] == 0 and record["traceback"] is None and "Traceback" not in record["stderr"], record
        assert record["peak_mb"] < MAX_PEAK_MB
        return
    assert_one_message(record, FILES / name, *expected)


@pytest.mark.parametrize("name", sorted(GENERATED), ids=lambda n: n.removesuffix(".yaml"))
def test_a_generated_file(name, generated, records):
    _, line, message = GENERATED[name]
    assert_one_message(records[generated / name], generated / name, line, message)


def test_lint_of_the_whole_corpus_reports_every_file(tmp_path, generated):
    """One bad file never stops the others: one lint run over all of them names each one."""
    corpus = tmp_path / "corpus"
    shutil.copytree(FILES, corpus)
    for name in GENERATED:
        if name != "named-pipe.yaml":  # a directory listing skips what is not a regular file
            shutil.copy(generated / name, corpus / name)
    proc = subprocess.run([sys.executable, "-m", "simulator", "lint", str(corpus)], capture_output=True, text=True,
                          timeout=TIMEOUT_S * 2, cwd=ROOT)
    assert "Traceback" not in proc.stdout + proc.stderr
    expected = {**{n: e for n, e in CORPUS.items()},
                **{n: (line, msg) for n, (_, line, msg) in GENERATED.items() if n != "named-pipe.yaml"}}
    for name, expectation in expected.items():
        lines = [line for line in proc.stdout.splitlines() if line.startswith(f"{corpus / name}:")]
        if expectation is None:  # a copy elsewhere: its schema comment no longer points at the schema
            assert [line for line in lines if "schema comment" not in line] == [], lines
        else:
            assert lines and lines[0].startswith(f"{corpus / name}:{expectation[0]}: ") and expectation[1] in lines[0]
    assert proc.stdout.splitlines()[-1].startswith(f"{len(expected)} scenario file(s), ")


def test_pytest_collects_each_bad_file_as_one_error_and_runs_the_rest(tmp_path, generated):
    """In a pytest session every hostile file is one `load-error` item; the session is never interrupted
    and the valid scenarios beside them still run and pass (D-plugin-1)."""
    scenarios = tmp_path / "scenarios" / "hostile"
    shutil.copytree(FILES, scenarios)
    for name in ("deep-nesting.yaml", "wide-list.yaml", "oversize.yaml"):
        shutil.copy(generated / name, scenarios / name)
    # every YAML file under scenarios/ is a scenario here, whatever its first line (or bytes) say
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\nsim_scenario_paths = scenarios\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "--sim-report", "never", "-p", "no:randomly",
                           "scenarios"], capture_output=True, text=True, timeout=TIMEOUT_S * 4, cwd=tmp_path)
    out = proc.stdout
    assert "Interrupted" not in out and "INTERNALERROR" not in out, out[-3000:]
    bad = [n for n, e in CORPUS.items() if e is not None] + ["deep-nesting.yaml", "wide-list.yaml", "oversize.yaml"]
    for name in bad:
        assert f"ERROR scenarios/hostile/{name}::load-error" in out, name
    assert f"2 passed, {len(bad)} errors" in out.splitlines()[-1], out[-2000:]


def test_lint_reports_an_unforeseen_failure_of_one_file_and_goes_on(tmp_path, monkeypatch, capsys):
    """Even an exception the loader never raises (a bug) is that file's problem, not the run's."""
    from simulator import cli

    for name in ("a.yaml", "b.yaml"):
        shutil.copy(FILES / "control.yaml", tmp_path / name)
    real = cli.load_file

    def load_file(path, **kwargs):
        if Path(path).name == "a.yaml":
            raise RecursionError("maximum recursion depth exceeded")
        return real(path, **kwargs)

    monkeypatch.setattr(cli, "load_file", load_file)
    problems = cli.lint_paths([str(tmp_path)])
    assert problems[0] == (f"{tmp_path / 'a.yaml'}:1: cannot be loaded "
                           "(RecursionError: maximum recursion depth exceeded)")
    assert not any("b.yaml" in p and "schema comment" not in p for p in problems)


CONFTEST_WITH_A_LOADER_BUG = """
import simulator.pytest_plugin.items as items

real = items.load_file


def load_file(path, **kwargs):
    if path.name == "loader-bug.yaml":
        raise RecursionError("maximum recursion depth exceeded")
    return real(path, **kwargs)


items.load_file = load_file
"""


def test_collection_turns_an_unforeseen_failure_into_that_files_error(tmp_path):
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    for name in ("loader-bug.yaml", "control.yaml"):
        shutil.copy(FILES / "control.yaml", scenarios / name)
    (tmp_path / "conftest.py").write_text(CONFTEST_WITH_A_LOADER_BUG)
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p no:cacheprovider\nsim_scenario_paths = scenarios\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "--sim-report", "never", "scenarios"],
                          capture_output=True, text=True, timeout=TIMEOUT_S * 2, cwd=tmp_path)
    assert ("scenarios/loader-bug.yaml:1: cannot be loaded (RecursionError: maximum recursion depth exceeded)"
            in proc.stdout)
    assert proc.stdout.splitlines()[-1].startswith("1 passed, 1 error"), proc.stdout[-2000:]


def test_corpus_table(records, capsys):
    """Print file, message, time and peak memory of every corpus file (run with -s to see it)."""
    with capsys.disabled():
        print(f"\n{'file':30} {'lint s':>7} {'peak MB':>8}  message")
        for path, record in records.items():
            first = (record["stdout"].splitlines() or ["(clean)"])[0]
            message = first[len(shown(path)) + 1:] if first.startswith(shown(path)) else first
            print(f"{path.name:30} {record['seconds']:7.3f} {record['peak_mb']:8.1f}  {message[:110]}")
