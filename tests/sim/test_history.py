"""The history recorder: one O_APPEND line per event, SIGKILL-proof, merged deterministically."""

from __future__ import annotations

import json
import os
import signal

from simulator.history import MERGED_NAME, History, Recorder, merge, read_events


def test_emit_writes_one_sorted_json_line_per_event(tmp_path):
    rec = Recorder.for_process(tmp_path, "h1", 0)
    rec.current(dispatch=7, t=90_000)
    rec.emit("poll", hosted=["alice"])
    rec.emit("wake", "bob", senders=["x"], count=1, text="...", hosted=True)
    lines = (tmp_path / "history" / "h1.0.jsonl").read_text().splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first == {"t": 90_000, "dispatch": 7, "proc": "h1", "inc": 0, "session": None,
                     "kind": "poll", "data": {"hosted": ["alice"]}, "seq": 0}
    assert lines[0] == json.dumps(first, sort_keys=True, separators=(",", ":"))
    assert json.loads(lines[1])["seq"] == 1 and json.loads(lines[1])["session"] == "bob"
    assert rec.has_emitted("wake") and not rec.has_emitted("crash")


def test_events_written_before_a_sigkill_survive(tmp_path):
    pid = os.fork()
    if pid == 0:  # child: record, then die the hard way
        rec = Recorder.for_process(tmp_path, "h1", 0)
        for n in range(50):
            rec.emit("poll", hosted=[f"s{n}"])
        rec.emit("crash", point="heartbeat", sql="update ...", step=None)
        os.kill(os.getpid(), signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    events = read_events(tmp_path / "history" / "h1.0.jsonl")
    assert len(events) == 51 and events[-1]["kind"] == "crash"


def test_merge_orders_by_dispatch_then_orchestrator_then_declared_processes(tmp_path):
    orch = Recorder.for_process(tmp_path, "orchestrator")
    h2, h1 = Recorder.for_process(tmp_path, "h2"), Recorder.for_process(tmp_path, "h1")
    h2.current(2, 30_000); h2.emit("poll", hosted=[])
    h1.current(2, 30_000); h1.emit("poll", hosted=[]); h1.emit("wake", "a", senders=[], count=0, text="", hosted=True)
    orch.current(2, 30_000); orch.emit("fault", fault="kill", step=0, args={})
    orch.current(1, 0); orch.emit("run-start", scenario="s", seed=1, dispatch_mode="serial", epoch_ms=0)
    merged = merge(tmp_path, ["h2", "h1"])
    assert [(e["dispatch"], e["proc"], e["kind"]) for e in merged] == [
        (1, "orchestrator", "run-start"), (2, "orchestrator", "fault"),
        (2, "h2", "poll"), (2, "h1", "poll"), (2, "h1", "wake")]
    assert [e["i"] for e in merged] == [0, 1, 2, 3, 4]
    assert set(merged[0]) == {"i", "t", "dispatch", "proc", "session", "kind", "data"}
    text = (tmp_path / MERGED_NAME).read_text()
    assert [json.loads(line) for line in text.splitlines()] == merged


def test_merge_skips_a_torn_last_line_and_is_byte_stable(tmp_path):
    rec = Recorder.for_process(tmp_path, "h1")
    rec.emit("poll", hosted=[])
    with open(
tmp_path / "history" / "h1.0.jsonl", "a") as fh:
        fh.write('{"t": 0, "kind": "wa')  # killed mid-write (never by os.write, but be safe)
    first = merge(tmp_path, ["h1"])
    again = (tmp_path / MERGED_NAME).read_bytes()
    merge(tmp_path, ["h1"])
    assert len(first) == 1 and (tmp_path / MERGED_NAME).read_bytes() == again


def test_a_cut_history_holds_what_had_happened_by_then():
    lines = [{"t": 10 * n, "proc": "h1", "session": "bob" if n % 2 else "alice", "kind": "poll",
              "data": {"hosted": []}} for n in range(6)]
    history = History.decode(lines)  # hand-built lines without `i`: their order gives it
    assert [e.i for e in history] == [0, 1, 2, 3, 4, 5]
    cut = history.cut(3)
    assert [e.i for e in cut] == [0, 1, 2, 3] and cut.limit == 3
    assert [e.i for e in cut.of("poll", session="bob")] == [1, 3]
    assert [e.t for e in history.of("poll", session="bob")] == [10, 30, 50]


def test_merge_gives_window_events_their_final_dispatch_and_leaves_the_files_as_written(tmp_path):
    """A window event recorded under a provisional dispatch number comes out of the merge under its
    final one, sorted there; a number the table lacks stays; the process file is not rewritten."""
    orch, h1 = Recorder.for_process(tmp_path, "orchestrator"), Recorder.for_process(tmp_path, "h1", 1)
    orch.current(3, 0); orch.emit("fault", fault="kill", step=0, args={})
    orch.current(6, 9_000); orch.emit("fault", fault="kill", step=1, args={})
    h1.current(-1, 5_000); h1.emit("poll", hosted=["a"])        # window 1: final dispatch 5
    h1.current(-2, 8_000); h1.emit("poll", hosted=["b"])        # window 1: final dispatch 4
    h1.current(-3, 9_000); h1.emit("poll", hosted=["c"])        # never numbered: stays as written
    written = (tmp_path / "history" / "h1.1.jsonl").read_bytes()
    merged = merge(tmp_path, ["h1"], {("h1", 1): {-1: 5, -2: 4}, ("h1", 0): {-3: 7}})
    assert [(e["dispatch"], e["kind"], e["data"].get("hosted")) for e in merged] == [
        (-3, "poll", ["c"]), (3, "fault", None), (4, "poll", ["b"]), (5, "poll", ["a"]), (6, "fault", None)]
    assert (tmp_path / "history" / "h1.1.jsonl").read_bytes() == written
    assert [e["dispatch"] for e in read_events(tmp_path / "history" / "h1.1.jsonl")] == [-1, -2, -3]
