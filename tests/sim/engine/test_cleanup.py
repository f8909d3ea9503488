"""No orphans: whatever ends a run (a harness error, a dead child, the wall guard), no child survives."""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import time
from pathlib import Path

import multiprocess
import pytest

from engine_harness import TinyHarness
from simulator import Scenario, run_scenario
from simulator.engine.orchestrator import SimulationTimeout
from simulator.protocol import FollowUp


def children_of(pid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process whose parent is `pid`, from /proc (zombies included)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[1]) == pid:
            out.append((int(entry.name), fields[0]))
    return out


def process_state(pid: int):
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rindex(")") + 2]


def scenario(**extra) -> Scenario:
    return Scenario.model_validate({
        "name": "cleanup", "duration": "5m", "drain": "1m",
        "processes": [
            {"id": "h1", "sessions": [{"id": "alice"}]},
            {"id": "h2", "sessions": [{"id": "bob"}]},
            {"id": "h3", "start": "never"},
        ],
        **extra,
    })


def failing_at(op: str, t: int = 45_000):
    def ups(start_t):
        return [FollowUp(t, op, None, {})] if start_t == 0 else []
    return ups


@pytest.fixture(autouse=True)
def no_children_left():
    yield
    assert children_of(os.getpid()) == []
    assert multiprocess.active_children() == []


def test_a_harness_exception_ends_the_run_with_an_error_and_no_orphans(tmp_path):
    r = run_scenario(scenario(), run_dir=tmp_path, overrides={"harness": TinyHarness, "followups": failing_at("boom")},
                     check=False)
    assert r.error is not None and "the tiny harness was told to fail" in r.error
    assert "h1 failed on boom at t=45000" in r.error
    assert not r.ok
    assert r.history[-1]["kind"] == "run-end"
    assert {e["data"]["target"] for e in r.events("process-exit")} == {"h1", "h2"}


def test_a_child_that_dies_on_its_own_is_an_engine_error(tmp_path):
    r = run_scenario(scenario(), run_dir=tmp_path, overrides={"harness": TinyHarness, "followups": failing_at("die")},
                     check=False)
    assert r.error is not None
    assert r.error.startswith("process h1 died unexpectedly (exit code 3) during die to h1 at t=45000")


def test_the_wall_guard_kills_everything_and_names_where_it_stopped(tmp_path):
    started = time.monotonic()
    with pytest.raises(SimulationTimeout) as info:
        # 3 s: far more than reaching the hang takes even on a loaded 2-core
        # machine, so the guard always fires at the hang, not before it.
        run_scenario(scenario(), run_dir=tmp_path, wall_timeout_s=3.0,
                     overrides={"harness": TinyHarness, "followups": failing_at("hang")}, check=False)
    assert time.monotonic() - started < 15
    assert str(info.value) == ("scenario 'cleanup' (seed 0) exceeded its wall-clock budget of 3s at virtual time "
                               "45s (45000 ms); last dispatch #8: hang to h1 at t=45000")
    # the partial history is still merged for the post-mortem
    assert (tmp_path / "history.jsonl").read_text().splitlines()[-1].find('"partial":true') > 0


def test_graceful_end_stops_every_child(tmp_path):
    spec = scenario(steps=[{"at": "1m", "start": {"process": "h3"}}, {"at": "2m", "kill": {"process": "h2"}}])
    r = run_scenario(spec, run_dir=tmp_path, overrides={"harness": TinyHarness}, check=False)
    assert r.error is None
    assert [(e["data"]["target"], e["data"]["reason"]) for e in r.events("process-exit")] == [
        ("h2", "killed"), ("h1", "end"), ("h3", "end")]


def open_descriptors() -> set[int]:
    return {int(fd) for fd in os.listdir("/proc/self/fd")}


@pytest.mark.parametrize("followups", [None, "boom"], ids=["graceful end", "harness error"])
def test_a_run_leaves_no_descriptor_open(tmp_path, followups):
    """Every pipe and process sentinel of a run is closed when it returns, with the cyclic collector off: a
    long-lived parent (a campaign, a pytest worker) would otherwise hold a few more per run until a full
    collection, and past 1,024 a child's `select` refuses its own pipes."""
    overrides = {"harness": TinyHarness, **({"followups": failing_at(followups)} if followups else {})}
    spec = scenario(steps=[{"at": "1m", "start": {"process": "h3"}}, {"at": "2m", "kill": {"process": "h2"}}])
    run_scenario(spec, run_dir=tmp_path / "warm", overrides=overrides, check=False)  # lazily opened files
    gc.collect()
    gc.disable()
    try:
        before = open_descriptors()
        for k in range(3):
            run_scenario(spec, run_dir=tmp_path / f"run{k}", overrides=overrides, check=False)
        assert open_descriptors() - before == set()
    finally:
        gc.enable()


def wait_for_pidfiles(directory: Path, count: int, timeout_s: float) -> list[int]:
    """The pids in `directory`'s `*.pid` files once `count` of them exist (or at the deadline).
    Each file is renamed into place whole, so one that exists is never read half-written."""
    deadline = time.monotonic() + timeout_s
    while True:
        pids = sorted(int(p.read_text()) for p in directory.glob("*.pid"))
        if len(pids) >= count or time.monotonic() > deadline:
            return pids
        time.sleep(0.01)


def wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    """The pids still running (not gone, not a zombie waiting for init) at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [p for p in pids if process_state(p) not in (None, "Z", "X")]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.01)


def test_harness_processes_die_with_a_killed_orchestrator(tmp_path):
    """The orchestrator itself is SIGKILLed (no finally runs): PR_SET_PDEATHSIG takes its children down.
    Whatever happens, the test reaps its orchestrator and kills any harness it saw start."""
    spec = scenario()
    piddir = tmp_path / "pids"
    piddir.mkdir()

    class PidHarness(TinyHarness):
        def handle(self, cmd):
            if cmd.op == "start":
                partial = piddir / f"{os.getpid()}.partial"
                partial.write_text(str(os.getpid()))
                partial.rename(piddir / f"{os.getpid()}.pid")
            if cmd.op == "poll":
                time.sleep(60)  # the orchestrator is killed meanwhile
            return super().handle(cmd)

    orchestrator = os.fork()
    if orchestrator == 0:
        try:
            run_scenario(spec, run_dir=tmp_path / "run", overrides={"harness": PidHarness}, check=False)
        finally:
            os._exit(0)
    harness_pids: list[int] = []
    try:
        # h1 and h2 start at 0 (h3 never does); generous: a loaded machine forks slowly
        harness_pids = wait_for_pidfiles(piddir, 2, timeout_s=60)
        assert len(harness_pids) == 2, f"only {len(harness_pids)} of 2 harness processes started"
        os.kill(orchestrator, signal.SIGKILL)
        os.waitpid(orchestrator, 0)
        orchestrator = 0
        assert wait_gone(harness_pids, timeout_s=15) == [], "a harness process outlived its orchestrator"
    finally:
        if orchestrator:
            os.kill(orchestrator, signal.SIGKILL)
            os.waitpid(orchestrator, 0)
        for pid in wait_gone(harness_pids, timeout_s=0):
            with contextlib.suppress(ProcessLookupError):  # it may die on its own meanwhile
                os.kill(pid, signal.SIGKILL)
