"""The front door stays a front door: README.md short, current and undated; the bench keeps the figures."""

from __future__ import annotations

import importlib.util
import re
import sys

import repo

README = repo.ROOT / "README.md"


def _bench():
    if "bench_main" not in sys.modules:
        sys.path.insert(0, str(repo.ROOT / "bench"))
        spec = importlib.util.spec_from_file_location("bench_main", repo.ROOT / "bench" / "bench.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return sys.modules["bench_main"]


def test_readme_is_short_and_keeps_the_two_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 160
    assert "bash scripts/main.sh" in text and "bash scripts/test.sh" in text


def test_readme_holds_no_dated_figures():
    text = README.read_text(encoding="utf-8")
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", text), "dated figures belong in bench/RESULTS.md"
    assert "MISSED" not in text


def test_readme_names_every_property_and_rule():
    text = README.read_text(encoding="utf-8")
    last_property = max(int(n) for n in re.findall(r"^\| P(\d+) \|", (repo.ROOT / "docs" / "rules.md").read_text(
        encoding="utf-8"), re.M))
    for listed in re.findall(r"\bP1-P(\d+)\b", text):
        assert int(listed) >= last_property, f"README lists P1-P{listed}; docs/rules.md defines P{last_property}"


def test_bench_record_puts_the_newest_run_first(tmp_path):
    bench = _bench()
    results = tmp_path / "RESULTS.md"
    bench.record("first run\n", ["--quick"], results)
    bench.record("second run\n", ["--no-suite"], results)
    text = results.read_text(encoding="utf-8")
    assert text.startswith(bench.RESULTS_HEAD)
    assert text.index("second run") < text.index("first run")
    assert re.search(r"^## \d{4}-\d\d-\d\d \d\d:\d\d UTC: `thatch-sim bench --no-suite`$", text, re.M)
    assert text.count("\n## ") == 2
