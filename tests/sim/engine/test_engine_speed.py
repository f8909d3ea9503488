"""The engine's speed shortcuts keep behaviour: each one against the slow path it replaced.

- the pipe's tagged-tuple messages and direct frames (simulator/protocol.py);
- the child's direct freezer move and memoized fake `time.time` (simulator/child/worker.py);
- the recorder's one prebuilt JSON encoder (simulator/history.py);
- the hosted-set file written only when its bytes change (thatch_core/rehost.py);
- `save_coverage` never importing coverage just to learn nothing measures us.
The end-to-end guard (byte-identical history.jsonl before and after) is
tests/sim/engine/test_orchestrator.py's determinism check plus the scenario library.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import multiprocess
import pytest

from simulator import clock
from simulator.history import encode_event
from simulator.protocol import Command, FollowUp, Reply, decode, encode, recv_msg, send_msg
from thatch_core.rehost import HOSTED_STATE_FILE, HostedSet
import repo


ROOT = repo.ROOT

MESSAGES = [
    Command(3, 40, "act", "s1", {"action": "send", "to": "bob", "step": 2}),
    Command(0, 0, "stop"),
    Reply(7),
    Reply(7, ok=False, followups=(FollowUp(9, "turn-end", "s1", {"cause": "wake"}),), result={"ok": True, "text": "é"},
          error="refused", fatal=True, crashes=({"point": "heartbeat", "session": None},)),
    ("a", "plain", "tuple"), (), "held", None, {"x": 1},
]


@pytest.mark.parametrize("msg", MESSAGES, ids=range(len(MESSAGES)))
def test_messages_round_trip_with_their_types(msg):
    """Commands, replies (with follow-ups) and any other object decode to an equal value of the same type."""
    back = decode(encode(msg))
    assert back == msg and type(back) is type(msg)
    for a, b in zip(getattr(msg, "followups", ()), getattr(back, "followups", ())):
        assert type(a) is type(b)


def test_frames_interoperate_with_multiprocess_connections():
    """send_msg/recv_msg speak multiprocess's frame format both ways, big payloads
    included; a closed peer is EOFError, a closed handle OSError."""
    a, b = multiprocess.Pipe()
    big = Command(1, 2, "act", "s", {"body": "y" * 40_000})
    for msg in (MESSAGES[0], MESSAGES[3], big):
        send_msg(a, msg)
        assert recv_msg(b) == msg
        a.send_bytes(encode(msg))
        assert recv_msg(b) == msg
        send_msg(a, msg)
        assert decode(b.recv_bytes()) == msg
    a.close()
    with pytest.raises(EOFError):
        recv_msg(b)
    b.close()
    with pytest.raises(OSError):
        recv_msg(b)


def test_direct_freezer_move_and_memoized_time_match_freezegun():
    """The worker's move (time_to_freeze set directly) and its memoized
    time.time give exactly what freezegun's move_to and fake_time give."""
    from freezegun import api as fz
    from freezegun import freeze_time

    from simulator.child.worker import _memoize_fake_time, _mover

    freezer = freeze_time(clock.START_INSTANT, tick=False)
    frozen = freezer.start()
    try:
        move = _mover(frozen)
        assert move.__name__ == "move"  # the fast path, not the move_to fallback
        _memoize_fake_time()
        assert time.time is not fz.fake_time
        for t in (0, 1, 999, 30_000, 3 * 86_400_000 + 7, 5):
            move(t)
            fast = (time.time(), time.time(), datetime.now(timezone.utc), frozen.time_to_freeze)
            frozen.move_to(clock.instant(0))
            frozen.move_to(clock.instant(t))
            slow = (fz.fake_time(), time.time(), datetime.now(timezone.utc), frozen.time_to_freeze)
            assert fast == slow
            assert type(frozen.time_to_freeze) is type(clock.START_INSTANT)
    finally:
        freezer.stop()
    assert abs(time.time() - fz.real_time()) < 5  # stop() restores the real clock


def test_memoized_time_answers_like_freezegun_for_ignored_callers():
    """freezegun hands real time to callers in its ignore list (threading, queue, ...)
    within `call_stack_inspection_limit` frames of the caller; the worker's
    memoized time.time agrees with freezegun's fake_time caller for caller."""
    from freezegun import api as fz
    from freezegun import freeze_time

    from simulator.child.worker import _memoize_fake_time

    def caller(module: str, inner=None):
        scope = {"__name__": module, "inner": inner}
        exec("def call(clock):\n    return inner(clock) if inner else clock()", scope)
        return scope["call"]

    def under_threading(levels: int):
        """A `threading` frame `levels` frames above the one that reads the clock."""
        inner = caller("mine.level0")
        for depth in range(1, levels):
            inner = caller(f"mine.level{depth}", inner)
        return caller("threading", inner)

    shallow, deep = under_threading(4), under_threading(5)
    callers = [caller("threading"), caller("queue.sub"), caller("mine"), caller("mine", caller("threading")),
               caller("multiprocessing_x"), caller("gi"), shallow, deep]
    real = [True, True, False, True, True, True, True, False]  # the deep one: past the 5-frame limit

    freezer = freeze_time(clock.START_INSTANT, tick=False)
    freezer.start()
    try:
        frozen = fz.fake_time()
        assert [c(fz.fake_time) != frozen for c in callers] == real
        _memoize_fake_time()
        assert time.time is not fz.fake_time
        for _ in range(2):  # the second time from the remembered answers
            assert [c(time.time) != frozen for c in callers] == real
    finally:
        freezer.stop()


def test_recorder_encoder_is_json_dumps_with_the_same_options():
    """One prebuilt encoder: byte for byte json.dumps(sort_keys, compact, ensure_ascii=False, default=str)."""
    event = {"t": 1, "dispatch": 2, "proc": "h1", "inc": 0, "session": None, "kind": "wake",
             "data": {"text": "héllo\u2028\"x\"", "n": [1.5, None, True], "z": {"b": 1, "a": Path("/p")}}, "seq": 5}
    assert encode_event(event) == json.dumps(event, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                             default=str)


@pytest.mark.rules("R15")
def test_hosted_set_file_is_rewritten_only_when_what_a_restart_reads_changes(tmp_path):
    """R15: the persisted hosted set always holds the sessions in memory and
    their rehost deadlines, but activity alone does not rewrite it; a file
    replaced or removed by someone else is written again."""
    hs = HostedSet(tmp_path, 60_000, log=lambda m: None)
    path = tmp_path / HOSTED_STATE_FILE
    hs.touch("ses_a", 1000)
    first = os.stat(path).st_ino
    hs.touch("ses_a", 2000)   # activity only: a successor reads the same set
    hs.persist()
    assert os.stat(path).st_ino == first
    assert json.loads(path.read_text())["sessions"] == {"ses_a": {"last_activity_ms": 1000, "rehost_until_ms": None}}
    hs.touch("ses_b", 3000)   # a new session: a successor must re-host it
    assert os.stat(path).st_ino != first
    assert sorted(json.loads(path.read_text())["sessions"]) == ["ses_a", "ses_b"]
    hs.drop("ses_b")
    assert sorted(json.loads(path.read_text())["sessions"]) == ["ses_a"]
    path.write_text("{}")     # another writer
    hs.persist()
    assert json.loads(path.read_text())["sessions"]["ses_a"]["last_activity_ms"] == 2000
    path.unlink()
    hs.persist()
    assert json.loads(path.read_text())["sessions"] == {"ses_a": {"last_activity_ms": 2000, "rehost_until_ms": None}}


@pytest.mark.rules("R15")
def test_a_rehosted_session_that_graduates_is_rewritten_without_its_deadline(tmp_path):
    """R15: graduation changes what a successor reads (no deadline any more),
    so the file is rewritten at the first activity of a re-hosted session."""
    (tmp_path / HOSTED_STATE_FILE).write_text(json.dumps(
        {"version": 1, "sessions": {"ses_a": {"last_activity_ms": 5, "rehost_until_ms": None}}}))
    hs = HostedSet(tmp_path, 60_000, log=lambda m: None)
    assert hs.load_previous(1000) == ["ses_a"]
    hs.persist()
    assert json.loads((tmp_path / HOSTED_STATE_FILE).read_text())["sessions"]["ses_a"]["rehost_until_ms"] == 61_000
    hs.touch("ses_a", 2000)
    assert json.loads((tmp_path / HOSTED_STATE_FILE).read_text())["sessions"]["ses_a"] == \
        {"last_activity_ms": 2000, "rehost_until_ms": None}


def test_save_coverage_does_not_import_coverage():
    """Without coverage loaded nothing measures the process: save_coverage
    returns without importing the package (it cost every child ~30 ms)."""
    code = ("import sys; pre = 'coverage' in sys.modules; from simulator.child.hygiene import save_coverage; "
            "save_coverage(); print(pre or 'coverage' not in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def _patched_by_freezer(conn, fast: bool) -> None:
    """In a forked child: start one freezer (the child's own shortcut, or freezegun's plain
    start) and send back which module attributes it patched."""
    from freezegun import api as freezegun_api, freeze_time
    from simulator.child import worker
    from simulator.child import preload

    scanned = preload.modules_for_freezer() is not None
    started = []
    plain_start = freezegun_api._freeze_time.start

    def start(self):
        started.append(self)
        return plain_start(self)

    freezegun_api._freeze_time.start = start
    if fast:
        worker._start_freezer()
    else:
        freeze_time(clock.START_INSTANT, tick=False).start()
    conn.send((scanned, sorted(f"{module.__name__}.{name}" for module, name, _ in started[-1].undo_changes)))
    conn.close()


def _freezer_changes(fast: bool, scan: bool = True) -> tuple[bool, list[str]]:
    """(did the child use the parent's scan, what its freezer patched)."""
    import multiprocess.popen_fork  # noqa: F401 - loaded by the first start, after the scan otherwise
    from simulator.child import preload

    ctx = multiprocess.get_context("fork")
    parent_end, child_end = ctx.Pipe()
    proc = ctx.Process(target=_patched_by_freezer, args=(child_end, fast))
    if scan:
        preload.freezer_modules()  # as `Processes.fork` does just before the fork
    proc.start()
    child_end.close()
    scanned, changes = parent_end.recv()
    proc.join()
    return scanned, changes


def test_a_childs_freezer_patches_what_freezeguns_full_scan_patches():
    """The parent's scan before a fork (child/preload.py) lets the child's freezer visit only the
    modules holding a time function: the same attributes get patched as by freezegun's own start."""
    from simulator.child import preload
    import simulator.harness.claude_code  # noqa: F401 - what a run has loaded
    import simulator.harness.opencode  # noqa: F401

    preload.preload({})
    visit = preload.freezer_modules()
    assert 0 < len(visit) < len(sys.modules) and preload.modules_for_freezer() is visit
    _, full = _freezer_changes(fast=False)
    assert full and any(name.startswith("thatch_core.") for name in full)
    assert _freezer_changes(fast=True) == (True, full)


def test_a_module_loaded_after_the_scan_makes_the_child_visit_them_all(tmp_path, monkeypatch):
    """A module imported after the parent's scan (a lazy import between two forks) is not known
    to it: the child then visits every module, as freezegun would."""
    from simulator.child import preload

    preload.freezer_modules()
    (tmp_path / "late_clock_user.py").write_text("from time import time as now\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "late_clock_user", raising=False)
    import late_clock_user  # noqa: F401
    assert preload.modules_for_freezer() is None
    scanned, changes = _freezer_changes(fast=True, scan=False)
    assert not scanned and "late_clock_user.now" in changes
    assert "late_clock_user" in preload.freezer_modules()


def _sentences_of_the_spare(conn, seed: int) -> None:
    from simulator.child import preload

    fake = preload.take_faker()
    assert fake is not None and preload.take_faker() is None  # one taker per process
    fake.seed_instance(seed)
    conn.send([fake.sentence(nb_words=8) for _ in range(5)])
    conn.close()


def test_the_faker_built_before_a_fork_draws_as_a_fresh_one_seeded_alike():
    """A child's inherited warm-up Faker, seeded by the child, gives the bodies a Faker built and
    seeded there would: the shortcut changes no history."""
    from faker import Faker

    from simulator.child import preload

    preload.preload({})
    ctx = multiprocess.get_context("fork")
    parent_end, child_end = ctx.Pipe()
    proc = ctx.Process(target=_sentences_of_the_spare, args=(child_end, 1234))
    proc.start()
    child_end.close()
    inherited = parent_end.recv()
    proc.join()
    fresh = Faker()
    fresh.seed_instance(1234)
    assert proc.exitcode == 0 and inherited == [fresh.sentence(nb_words=8) for _ in range(5)]


def test_a_module_sharing_another_ones_name_is_visited_by_what_it_holds(monkeypatch):
    """freezegun's cache keeps one entry per module name: a second module object under a name
    (an alias, a re-import) is judged by its own attributes, so the child's freezer still
    patches it as freezegun's full start does."""
    import types

    from freezegun import api as fz

    from simulator.child import preload

    holder, other = types.ModuleType("twin_clock"), types.ModuleType("twin_clock")
    holder.now = fz.real_time
    monkeypatch.setitem(sys.modules, "twin_clock_holder", holder)
    monkeypatch.setitem(sys.modules, "twin_clock", other)  # scanned last: the cache entry is its own
    visit = preload.freezer_modules(rescan=True)
    assert visit.get("twin_clock_holder") is holder and "twin_clock" not in visit
    _, full = _freezer_changes(fast=False)
    assert "twin_clock.now" in full
    assert _freezer_changes(fast=True) == (True, full)
