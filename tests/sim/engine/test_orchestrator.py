"""The orchestrator: world layout, ids, agenda order, dispatch modes, determinism."""

from __future__ import annotations

import json
import re


from engine_harness import TinyHarness
from simulator import Scenario, run_scenario
from simulator.protocol import FollowUp

TINY = {"harness": TinyHarness}


def scenario(**extra) -> Scenario:
    base = {
        "name": "orch", "duration": "3m", "drain": "1m", "seed": 11,
        "processes": [
            {"id": "h1", "project": "alpha", "sessions": [{"id": "alice"}]},
            {"id": "h2", "project": "alpha", "checkout": "worktree", "sessions": [{"id": "bob"}]},
            {"id": "h3", "checkout": "none", "start": "never"},
        ],
        "steps": [
            {"at": "30s", "send": {"from": "alice", "to": "bob", "body": "hi"}},
            {"at": "40s", "read": {"session": "bob"}},
        ],
    }
    base.update(extra)
    return Scenario.model_validate(base)


def test_world_layout_ids_and_config(tmp_path):
    spec = scenario(processes=[
        {"id": "h1", "project": "alpha", "config": {"enabled": False}, "sessions": [{"id": "alice"}]},
        {"id": "h2", "project": "alpha", "checkout": "worktree", "sessions": [{"id": "bob"}]},
        {"id": "c1", "kind": "claude-code", "checkout": "none", "sessions": [{"id": "carol"}]},
    ], steps=[])
    r = run_scenario(spec, run_dir=tmp_path, overrides=TINY, check=False)
    assert r.error is None
    assert r.db_path == tmp_path / "thatch.db" and r.db_path.exists()
    cfg = json.loads((tmp_path / "procs" / "h1" / "config.json").read_text())
    assert cfg == {"chat": {"enabled": False, "autoRegister": True}}
    assert (tmp_path / "dirs" / "h1" / "alpha" / ".git").is_dir()
    assert (tmp_path / "dirs" / "h2" / "alpha" / ".git").read_text().startswith("gitdir: ")
    assert not (tmp_path / "dirs" / "c1" / "workspace" / ".git").exists()
    assert (tmp_path / "procs" / "h1" / "state").is_dir() and (tmp_path / "transcripts").is_dir()
    ids = {lab: sid for e in r.events("process-start") for lab, sid in e["data"]["sessions"].items()}
    assert re.fullmatch(r"ses_[0-9a-f]{24}", ids["alice"]) and re.fullmatch(r"ses_[0-9a-f]{24}", ids["bob"])
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", ids["carol"])
    # claude-code processes have no poller; opencode ones poll from their start
    assert {e["proc"] for e in r.events("poll")} == {"h1", "h2"}


def test_same_seed_gives_a_byte_identical_history(tmp_path):
    spec = scenario()
    a = run_scenario(spec, run_dir=tmp_path / "a", overrides=TINY, check=False)
    b = run_scenario(spec, run_dir=tmp_path / "b", overrides=TINY, check=False)
    assert a.error is None and len(a.history) > 20
    assert a.history_path.read_bytes() == b.history_path.read_bytes()
    c = run_scenario(spec, run_dir=tmp_path / "c", seed=12, overrides=TINY, check=False)
    assert c.history_path.read_bytes() != a.history_path.read_bytes()  # the seed pins the ids
    assert c.seed == 12


def test_same_seed_is_byte_identical_with_the_real_harnesses(tmp_path):
    spec = scenario(steps=[
        {"at": "30s", "prompt": {"session": "alice", "text": "hello"}},
        {"at": "50s", "send": {"from": "alice", "to": "bob", "body": "hi"}},
        {"at": "2m", "kill": {"process": "h2"}},
    ])
    a = run_scenario(spec, run_dir=tmp_path / "a", check=False)
    b = run_scenario(spec, run_dir=tmp_path / "b", check=False)
    assert a.error is None, a.error
    assert a.history_path.read_bytes() == b.history_path.read_bytes()


def test_agenda_order_steps_then_polls_then_samples(tmp_path):
    r = run_scenario(scenario(), run_dir=tmp_path, overrides=TINY, check=False, sample_interval_ms=60_000)
    at30 = [(e["proc"], e["kind"]) for e in r.history if e["t"] == 30_000]
    assert at30 == [("h1", "tool-call"), ("h1", "tool-result"), ("h1", "poll"), ("h2", "poll")]
    assert [e["t"] for e in r.events("sample")] == [0, 60_000, 120_000, 180_000]
    phases = [(e["t"], e["data"]["phase"]) for e in r.events("phase")]
    assert phases == [(0, "script"), (180_000, "drain"), (240_000, "end")]
    kinds = [e["kind"] for e in r.history]
    assert kinds[0] == "run-start" and kinds[-1] == "run-end"
    dispatches = [e["dispatch"] for e in r.history]
    assert dispatches == sorted(dispatches) and [e["i"] for e in r.history] == list(range(len(r.history)))
    assert r.virtual_ms == 240_000 and r.dispatches == max(dispatches)


def test_sample_reads_the_directory(tmp_path):
    r = run_scenario(scenario(), run_dir=tmp_path, overrides=TINY, check=False)
    first = r.events("sample")[0]["data"]["sessions"]
    assert first["alice"]["registered"] and first["alice"]["stale"] is False
    assert first["alice"]["last_seen"] == "2026-01-05T09:00:00Z" and first["alice"]["host_kind"] == "opencode"
    assert first["alice"]["name"] == r.events("registered", session="alice")[0]["data"]["name"]


def test_a_step_for_an_unhosted_session_is_dropped_and_recorded(tmp_path):
    spec = scenario(steps=[{"at": "10s", "kill": {"process": "h2"}}, {"at": "20s", "read": {"session": "bob"}}])
    r = run_scenario(spec, run_dir=tmp_path, overrides=TINY, check=False)
    dropped = r.events("step-dropped")
    assert len(dropped) == 1 and dropped[0]["data"]["step"] == 1
    assert "h2 is not running" in dropped[0]["data"]["reason"]
    assert not r.events("tool-call", session="bob")


def test_followups_from_replies_are_scheduled(tmp_path):
    r = run_scenario(scenario(), run_dir=tmp_path, overrides={**TINY, "turns": True}, check=False)
    ends = r.events("turn-end")
    assert [(e["t"], e["session"], e["data"]) for e in ends] == [(31_000, "alice", {"cause": "user"})]


def test_start_followups_reach_the_agenda(tmp_path):
    def ups(t):
        return [FollowUp(t + 5_000, "turn-end", "alice", {"cause": "wake"})]

    r = run_scenario(scenario(steps=[]), run_dir=tmp_path, overrides={**TINY, "followups": ups}, check=False)
    assert [(e["proc"], e["t"]) for e in r.events("turn-end")][:1] == [("h1", 5_000)]


def test_concurrent_dispatch_sends_same_time_commands_as_one_wave(tmp_path):
    spec = scenario(dispatch="concurrent", steps=[
        {"at": "30s", "send": {"from": "alice", "to": "bob", "body": "hi"}},
        {"at": "30s", "status": {"session": "bob"}},
    ])
    r = run_scenario(spec, run_dir=tmp_path, overrides=TINY, check=False)
    assert r.error is None
    at30 = [e for e in r.history if e["t"] == 30_000 and e["proc"] != "orchestrator"]
    by_dispatch = {}
    for e in at30:
        by_dispatch.setdefault(e["dispatch"], set()).add(e["proc"])
    # wave 1: alice's send (h1) with bob's status (h2); wave 2: both polls
    assert list(by_dispatch.values()) == [{"h1", "h2"}, {"h1", "h2"}]
    serial = run_scenario(scenario(steps=spec.model_dump(by_alias=True)["steps"]), run_dir=tmp_path / "s",
                          overrides=TINY, check=False)
    assert len({e["dispatch"] for e in serial.history if e["t"] == 30_000 and e["proc"] != "orchestrator"}) == 4


def test_start_step_starts_a_never_process(tmp_path):
    spec = scenario(processes=[
        {"id": "h1", "sessions": [{"id": "alice"}]},
        {"id": "late", "start": "never", "sessions": [{"id": "zed"}]},
    ], steps=[{"at": "50s", "start": {"process": "late"}}])
    r = run_scenario(spec, run_dir=tmp_path, overrides=TINY, check=False)
    starts = [(e["t"], e["data"]["target"]) for e in r.events("process-start")]
    assert starts == [(0, "h1"), (50_000, "late")]
    assert [e["t"] for e in r.events("poll") if e["proc"] == "late"][:2] == [80_000, 110_000]


def test_progress_callback_reports_virtual_time(tmp_path):
    seen = []
    run_scenario(scenario(duration="30m"), run_dir=tmp_path, overrides=TINY, check=False,
                 progress=lambda now, total: seen.append((now, total)))
    assert seen and all(total == 31 * 60_000 for _, total in seen)
    assert seen[-1] == (31 * 60_000, 31 * 60_000)  # the last report is the end
    assert [now for now, _ in seen] == sorted(now for now, _ in seen)


def test_expectations_are_observed_at_their_time(tmp_path):
    spec = scenario(expect=[
        {"at": "35s", "unread": {"session": "bob", "count": 1}},
        {"registered": {"session": "alice", "is": True}},
    ])
    r = run_scenario(spec, run_dir=tmp_path, overrides=TINY, check=False)
    seen = [(e["t"], e["session"], e["data"]) for e in r.events("expectation")]
    name = r.events("registered", session="alice")[0]["data"]["name"]
    assert seen == [
        (35_000, "bob", {"index": 0, "kind": "unread", "ok": None,
                         "detail": {"registered": True,
                                    "name": r.events("registered", session="bob")[0]["data"]["name"],
                                    "unread": 1}}),
        (240_000, "alice", {"index": 1, "kind": "registered", "ok": None,
                            "detail": {"registered": True, "name": name, "unread": 0}}),
    ]


def test_samples_miss_a_machine_sleep_and_keep_their_phase(tmp_path):
    """Nothing is sampled while the machine sleeps; the sampling clock keeps its phase, so the
    first sample after the wake falls on the first beat of the grid at or after it."""
    spec = scenario(duration="3h", steps=[{"at": "95s", "sleep": {"for": "2h"}}])
    r = run_scenario(spec, run_dir=tmp_path, overrides=TINY, check=False)
    assert r.error is None
    interval = 30_000  # the default: the shortest poll interval
    times = [e["t"] for e in r.events("sample")]
    asleep, wake = 95_000, 95_000 + 7_200_000
    assert times and all(t % interval == 0 for t in times)
    assert not [t for t in times if asleep < t < wake]
    assert min(t for t in times if t >= wake) == -(-wake // interval) * interval
    assert max(t for t in times if t < asleep) == 90_000
