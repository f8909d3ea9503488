"""Scenarios, the CLI and compare on a real checkout: the same files, judged the same way, deterministic."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.api import code_under_test, run_scenario
from simulator.engine.orchestrator import LOCK_BUSY_TIMEOUT_MS, Orchestrator
from simulator.explore.determinism import first_difference
from simulator.result import SUT_CHECK
from simulator.scenario.loader import load_scenario, parse_scenario
from simulator.sut import CORE, SutError, bun
from simulator.sut.capabilities import capabilities_of

ROOT = Path(__file__).resolve().parents[2]
REFUSALS = ROOT / "scenarios" / "messages" / "send-refusals.yaml"
PING_PONG = ROOT / "scenarios" / "ratecap" / "ping-pong-three-hours.yaml"
TOMBSTONES = ROOT / "scenarios" / "registration" / "leave-then-idle-no-rejoin.yaml"


@pytest.mark.rules("R9", "R22")
@pytest.mark.parametrize("path", [REFUSALS, PING_PONG], ids=lambda p: p.stem)
def test_the_same_seed_gives_the_same_history_on_a_checkout(checkout, tmp_path, path):
    """R9/R22 on the real code, twice with one seed: event for event the same history (virtual time,
    seeded Math.random, harness-driven poll cycles), and the scenario passes."""
    spec = load_scenario(path)
    runs = [run_scenario(spec, run_dir=tmp_path / f"run{i}", sut=checkout) for i in range(2)]
    assert runs[0].error is None and runs[0].sut == checkout.name
    assert [v.check for v in runs[0].failures()] == []
    assert first_difference(runs[0].history, runs[1].history) is None
    assert (tmp_path / "run0" / "history.jsonl").read_bytes() == (tmp_path / "run1" / "history.jsonl").read_bytes()


@pytest.mark.rules("R12", "R10", "R23")
@pytest.mark.parametrize("name", ["broadcast/crash-inside-broadcast", "delivery/crash-between-read-and-stamp",
                                  "delivery/crash-between-wake-and-stamp"])
def test_crash_points_inside_the_real_code(checkout, tmp_path, name):
    """R12/R10/R23 on the real code: the sidecar reports each statement and waits for the harness's go,
    so a crash point kills the process just where it would kill thatch_core's (inside the broadcast's
    transaction, between the read's select and stamp, between the wake and its stamp)."""
    result = run_scenario(load_scenario(ROOT / "scenarios" / f"{name}.yaml"), run_dir=tmp_path / "run", sut=checkout)
    assert result.error is None
    assert [v.check for v in result.failures()] == []
    assert any(e["kind"] == "crash" for e in result.history)


@pytest.mark.rules("R7")
def test_a_scenario_needing_what_the_checkout_lacks_is_not_applicable(checkout, tmp_path):
    """R7 needs leave tombstones; 0.1.41 has none: the scenario is not run there and says why."""
    if not capabilities_of(checkout).lacks("tombstones"):
        pytest.skip("this checkout has tombstones")
    spec = load_scenario(TOMBSTONES)
    result = run_scenario(spec, run_dir=tmp_path / "run", sut=checkout)
    [verdict] = result.verdicts
    assert (verdict.check, verdict.status) == (SUT_CHECK, "not-applicable")
    assert "no leave tombstones in this checkout" in verdict.message and result.history == []
    assert run_scenario(spec, run_dir=tmp_path / "core", sut=CORE).ok


def test_a_property_needing_what_the_checkout_lacks_is_not_applicable(checkout, tmp_path):
    """P6 judges assigned counter names; on a claimed-names checkout it is not applicable, its finding kept."""
    if not capabilities_of(checkout).lacks("assigned-names"):
        pytest.skip("this checkout assigns counter names")
    result = run_scenario(load_scenario(REFUSALS), run_dir=tmp_path / "run", sut=checkout)
    p6 = result.verdict("P6")
    assert p6.status == "not-applicable" and "no assigned counter names" in p6.message and "was: fail" in p6.message


def thatch_sim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simulator", *args], cwd=ROOT, capture_output=True, text=True)


def test_cli_run_names_the_system(checkout):
    done = thatch_sim("run", str(REFUSALS), "--sut", str(checkout.checkout))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"on {checkout.name} in" in done.stdout and f"sut={checkout.name}: PASSED" in done.stdout


def test_cli_refuses_what_is_no_checkout(tmp_path):
    (tmp_path / "src").mkdir()
    done = thatch_sim("run", str(REFUSALS), "--sut", str(tmp_path))
    assert done.returncode == 2 and f"{tmp_path / 'src' / 'chat.ts'} not found" in done.stderr


def test_cli_shows_bun_s_error_for_a_checkout_that_does_not_load(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "chat.ts").write_text("export const broken = ;\n")
    (tmp_path / "src" / "chat-names.ts").write_text("export const CHAT_NAME_POOL = [];\n")
    done = thatch_sim("run", str(REFUSALS), "--sut", str(tmp_path))
    assert done.returncode == 2
    assert "chat.ts does not load under bun" in done.stderr and "export const broken = ;" in done.stderr


def test_a_bad_thatch_bun_is_named(checkout):
    done = subprocess.run([sys.executable, "-m", "simulator", "run", str(REFUSALS), "--sut", str(checkout.checkout)],
                          cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "THATCH_BUN": "/no/bun"})
    assert done.returncode == 2 and "THATCH_BUN=/no/bun is not an executable bun binary" in done.stderr


def test_no_bun_anywhere_names_the_install_command(monkeypatch):
    monkeypatch.delenv("THATCH_BUN", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(bun.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SutError, match=r"bun not found.*pip install -e '\.\[real\]'"):
        bun.bun_path()


def test_compare_lays_both_systems_side_by_side(checkout, tmp_path):
    page = tmp_path / "compare.html"
    done = thatch_sim("compare", str(REFUSALS), "--sut", f"thatch-core,{checkout.checkout}", "--html", str(page))
    assert done.returncode == 0, done.stderr
    assert "thatch-core" in done.stdout and checkout.name in done.stdout
    if capabilities_of(checkout).lacks("assigned-names"):
        assert "differs: P6" in done.stdout
    assert checkout.name in page.read_text()


@pytest.mark.rules("R12")
def test_an_incident_expected_on_a_checkout_is_caught_there_only(checkout, tmp_path):
    """R12 under contention, on purpose: the checkout's broadcast reads its roster in a deferred
    transaction; dev's send commits while it is paused after that read, so its first insert fails
    with SQLITE_BUSY_SNAPSHOT and P15 fails there, as `expect_outcome: {fails: {checkout: [P15]}}`
    says; thatch_core's BEGIN IMMEDIATE holds the lock from the read on, and P15 holds."""
    text = """
name: broadcast-snapshot-race
seed: 2
duration: 3m
properties: [P15, P5]
expect_outcome: {fails: {checkout: [P15]}}
processes:
  - {id: h1, sessions: [{id: lead, agent: silent}]}
  - {id: h2, sessions: [{id: dev, agent: silent}]}
  - {id: h3, sessions: [{id: qa, agent: silent}]}
steps:
  - at: 1m
    interleave:
      pause: {session: lead, call: broadcast, statement: 3, when: after}
      run: [{send: {from: dev, to: qa, body: on staging}}]
  - at: 1m
    broadcast: {from: lead, body: freezing main}
"""
    spec = parse_scenario(text).spec
    real = run_scenario(spec, run_dir=tmp_path / "real", sut=checkout)
    assert real.verdict("P15").status == "expected-fail" and real.ok
    assert "SQLITE_BUSY" in real.verdict("P15").message
    core = run_scenario(spec, run_dir=tmp_path / "core", sut=CORE)
    assert core.verdict("P15").status == "pass" and core.ok


@pytest.mark.rules("R24")
def test_a_checkout_keeps_the_design_busy_timeout_under_a_lock_fault(checkout, tmp_path):
    """thatch_core meets a lock fault with a 20 ms busy timeout and retries; a checkout has no retry, so
    it keeps the real 5000 ms. With 20 ms, store-lock-contention's pollers on 0.1.41 failed on another
    process's ordinary write long after the lock (P15 at 11m30s, under machine load)."""
    spec = load_scenario(ROOT / "scenarios" / "liveness" / "store-lock-contention.yaml")
    on_checkout = Orchestrator(spec, tmp_path / "checkout", code_under_test(checkout))
    on_core = Orchestrator(spec, tmp_path / "core", code_under_test(CORE))
    assert (on_checkout.world.busy_timeout_ms, on_core.world.busy_timeout_ms) == (5000, LOCK_BUSY_TIMEOUT_MS)


@pytest.mark.rules("R9")
def test_a_checkout_runs_from_a_process_holding_over_a_thousand_descriptors(checkout, tmp_path):
    """R9 on the real code from a long-lived parent (a pytest worker late in the suite): the harnesses it
    forks inherit its descriptors, so their sidecar pipes are numbered past 1024, where `select` refuses
    ("filedescriptor out of range"); the sidecar waits on them all the same."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))  # a default soft limit is 1024
    held = []
    try:
        while len(held) < 1100:
            held.append(os.open(os.devnull, os.O_RDONLY))
        result = run_scenario(load_scenario(REFUSALS), run_dir=tmp_path / "run", sut=checkout)
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert result.error is None
    assert [v.check for v in result.failures()] == []
