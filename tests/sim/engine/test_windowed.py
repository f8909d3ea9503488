"""The windowed engine against lockstep: the same judged history and verdicts, scenario by scenario.

Normalisation (D-sim-23): the two engines may order differently only the
entries of *different* processes due at the same virtual instant (lockstep
follows agenda insertion order, windowed the processes' declaration order);
those touch disjoint rows and commute. So each history is compared as, per
virtual instant, every place's own event sequence (the orchestrator's, each
process's), with the interleaving between places at one instant left out;
dispatch numbers and positions are left out with it. Everything else,
including every event's data and each process's own order, must match.
Concurrent scenarios race by design: their histories differ run to run in
either engine and windows never apply to them, so only their verdicts are
compared.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from simulator import Scenario, run_scenario
from simulator.explore.generator import generate
from simulator.explore.swarm import SMALL
from simulator.history import HISTORY_DIR, read_events
from simulator.scenario.loader import load_file
import repo

SCENARIOS = sorted((repo.ROOT / "scenarios").rglob("*.yaml"))


def _specs(path: Path) -> list[Scenario]:
    loaded = load_file(path)
    return [getattr(s, "spec", s) for s in (loaded if isinstance(loaded, list) else [loaded])]


def normalised(history: list[dict]) -> dict:
    """{(t, place): [(session, kind, data), ...]}: each place's own order per instant."""
    out: dict = defaultdict(list)
    for e in history:
        out[(e["t"], e["proc"] or "")].append((e["session"], e["kind"], json.dumps(e["data"], sort_keys=True)))
    return dict(out)


def assert_engines_agree(spec: Scenario, tmp_path: Path) -> None:
    """Windowed gives lockstep's verdicts, error and (serial) judged history for `spec`."""
    runs = {engine: run_scenario(spec, run_dir=tmp_path / f"{spec.name}-{engine}", engine=engine)
            for engine in ("lockstep", "windowed")}
    lock, win = runs["lockstep"], runs["windowed"]
    assert sorted((v.check, v.status) for v in win.verdicts) == sorted((v.check, v.status) for v in lock.verdicts)
    assert win.error == lock.error
    if spec.dispatch != "concurrent":
        assert normalised(win.history) == normalised(lock.history)
        assert win.dispatches == lock.dispatches


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: str(p.relative_to(repo.ROOT / "scenarios")))
def test_windowed_and_lockstep_judge_every_library_scenario_alike(path, tmp_path):
    """Every scenario in the library: windowed gives lockstep's verdicts, error and (serial) judged history."""
    for spec in _specs(path):
        assert_engines_agree(spec, tmp_path)


# 100 seeds keep the unit suite quick enough to rerun many times on a loaded
# machine (D-sim-26); `explore` campaigns reach further.
EXPLORE_SEEDS, EXPLORE_CHUNK = 100, 25


@pytest.mark.parametrize("first", range(0, EXPLORE_SEEDS, EXPLORE_CHUNK),
                         ids=lambda s: f"seeds{s}-{s + EXPLORE_CHUNK - 1}")
def test_windowed_and_lockstep_judge_generated_worlds_alike(first, tmp_path):
    """Worlds nobody wrote: small `explore` seeds (kills, crashes, resumes, sleeps, locks,
    broadcasts...) judged alike by both engines, under the same normalisation. Serial: a
    concurrent world never windows, and its races differ run to run in either engine."""
    for seed in range(first, first + EXPLORE_CHUNK):
        assert_engines_agree(generate(seed, SMALL, dispatch="serial").spec, tmp_path / str(seed))


def mail_world(procs: int = 3, hours: int = 2) -> Scenario:
    processes = [{"id": f"h{p}", "sessions": [{"id": f"s{p}x{k}", "agent": "reader"} for k in range(2)]}
                 for p in range(procs)]
    steps = [{"at": at, "send": {"from": f"s{(at // 600_000) % procs}x0", "to": f"s{(at // 600_000 + 1) % procs}x1",
                                 "body": f"at {at}"}} for at in range(60_000, hours * 3_600_000, 600_000)]
    return Scenario.model_validate({"name": "mail-world", "seed": 3, "duration": hours * 3_600_000, "drain": 0,
                                    "processes": processes, "steps": steps})


def test_windowed_is_byte_identical_run_to_run(tmp_path):
    """A scenario and seed give one history under the windowed engine."""
    spec = mail_world()
    first, second = (run_scenario(spec, run_dir=tmp_path / f"r{i}", engine="windowed", sample_interval_ms=3_600_000)
                     for i in range(2))
    assert first.history_path.read_bytes() == second.history_path.read_bytes()
    assert all(e["dispatch"] > 0 for e in first.history)  # every provisional number was mapped
    # ... in the merge: the process files keep the provisional numbers they were written with (D-history-3)
    assert any(e["dispatch"] < 0 for path in (first.run_dir / HISTORY_DIR).glob("*.jsonl") for e in read_events(path))


def test_windows_batch_a_process_timers_into_one_round_trip(tmp_path, monkeypatch):
    """Between two sends a process's beats (and its turn ends) go out as one window, not one command each."""
    from simulator.engine import window

    sent = []
    real = window.send_msg
    monkeypatch.setattr(window, "send_msg", lambda conn, cmd: (sent.append(cmd), real(conn, cmd))[1])
    res = run_scenario(mail_world(), run_dir=tmp_path / "run", engine="windowed", sample_interval_ms=3_600_000)
    assert res.error is None
    polls = sum(1 for e in res.history if e["kind"] == "poll")
    entries = sum(len(cmd.args["entries"]) for cmd in sent)
    assert sent and entries >= polls and len(sent) * 5 < polls


def test_lockstep_stays_available_and_unknown_engines_are_refused(tmp_path):
    spec = mail_world(procs=2, hours=1)
    assert run_scenario(spec, run_dir=tmp_path / "a", engine="lockstep").error is None
    with pytest.raises(ValueError, match="unknown engine"):
        run_scenario(spec, run_dir=tmp_path / "b", engine="turbo")


def test_windowed_is_the_default_and_lockstep_is_asked_for(tmp_path, monkeypatch):
    """No engine named: windows go out; THATCH_SIM_ENGINE=lockstep (or engine=) turns them off."""
    from simulator.engine import window

    sent = []
    real = window.send_msg
    monkeypatch.setattr(window, "send_msg", lambda conn, cmd: (sent.append(cmd), real(conn, cmd))[1])
    monkeypatch.delenv("THATCH_SIM_ENGINE", raising=False)
    spec = mail_world(procs=2, hours=1)
    assert run_scenario(spec, run_dir=tmp_path / "default").error is None
    assert sent
    sent.clear()
    monkeypatch.setenv("THATCH_SIM_ENGINE", "lockstep")
    assert run_scenario(spec, run_dir=tmp_path / "env").error is None
    assert run_scenario(spec, run_dir=tmp_path / "arg", engine="lockstep").error is None
    assert not sent


def test_at_most_one_window_per_core_runs_and_the_history_is_unchanged(tmp_path, monkeypatch):
    """A window goes to at most WINDOW_PARALLEL processes at once (the next when one answers); how
    many run at once changes nothing in the history, byte for byte."""
    from simulator.engine import window
    from simulator.engine.dispatch import Dispatcher

    outstanding, most = set(), [0]
    real_send, real_wait, real_collect = window.send_msg, Dispatcher.wait_any, window.Windows._collect

    def send(conn, cmd):
        outstanding.add(conn)
        most[0] = max(most[0], len(outstanding))
        return real_send(conn, cmd)

    def wait_any(self, lives):
        live = real_wait(self, lives)
        outstanding.discard(live.conn)
        return live

    def collect(self, live, cmd):
        outstanding.discard(live.conn)
        return real_collect(self, live, cmd)

    monkeypatch.setattr(window, "send_msg", send)
    monkeypatch.setattr(Dispatcher, "wait_any", wait_any)
    monkeypatch.setattr(window.Windows, "_collect", collect)
    spec = mail_world(procs=3)
    histories = {}
    for parallel in (16, 2, 1):
        monkeypatch.setattr(window, "WINDOW_PARALLEL", parallel)
        most[0] = 0
        res = run_scenario(spec, run_dir=tmp_path / str(parallel), engine="windowed", sample_interval_ms=3_600_000)
        assert res.error is None and most[0] == min(parallel, 3)
        histories[parallel] = res.history_path.read_bytes()
    assert histories[1] == histories[2] == histories[16]
