"""Where exploration runs go when no `--work` is named (simulator/explore/judge.py).

Runs go to memory-backed scratch (`/dev/shm`) when it is there and roomy and
`TMPDIR` names no other place; a failed run kept for a person to read moves
out of it to the system temp dir, and a passing one leaves nothing behind.
The scratch root is pointed at a test directory, so these hold on any machine.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from explorekit import NoTombstoneStore, planted_seed
from simulator.explore import judge
from simulator.explore.campaign import Settings, generated
from simulator.explore.swarm import SMALL


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    root = tmp_path / "shm"
    root.mkdir()
    monkeypatch.setattr(judge, "SHARED_MEMORY", str(root))
    monkeypatch.delenv("TMPDIR", raising=False)
    disk = tmp_path / "disk"
    disk.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(disk))  # what the system temp dir is, for this test
    return root, disk


def test_scratch_is_shared_memory_unless_tmpdir_names_a_place_or_it_is_full(scratch, monkeypatch):
    root, _ = scratch
    assert judge.scratch_root() == str(root)
    room = judge.SCRATCH_ROOM_BYTES
    monkeypatch.setattr(judge, "SCRATCH_ROOM_BYTES", 1 << 62)  # no disk has that much room
    assert judge.scratch_root() is None
    monkeypatch.setattr(judge, "SCRATCH_ROOM_BYTES", room)
    monkeypatch.setenv("TMPDIR", str(root.parent))
    assert judge.scratch_root() is None
    monkeypatch.setattr(judge, "SHARED_MEMORY", str(root / "missing"))
    monkeypatch.delenv("TMPDIR")
    assert judge.scratch_root() is None


def test_a_kept_failed_run_moves_to_the_temp_dir_and_a_passing_one_leaves_nothing(scratch):
    """A planted bug (a leave writes no tombstone) makes a run fail: it is kept, out of scratch,
    with its history; the same world with the real store passes and its directory is gone."""
    root, disk = scratch
    spec = generated(planted_seed(), Settings(size=SMALL)).spec
    failed = judge.run_explored(spec, overrides={"store": NoTombstoneStore})
    assert not failed.ok
    assert failed.run_dir is not None and failed.run_dir.parent == disk
    assert (failed.run_dir / "history.jsonl").is_file()
    assert list(root.iterdir()) == []
    passed = judge.run_explored(spec)
    assert passed.ok and passed.run_dir is None
    assert list(root.iterdir()) == [] and [p for p in disk.iterdir() if p != failed.run_dir] == []


def test_a_named_work_dir_is_used_as_it_is(scratch, tmp_path):
    root, _ = scratch
    spec = generated(planted_seed(), Settings(size=SMALL)).spec
    outcome = judge.run_explored(spec, work=tmp_path / "runs", keep="always")
    assert outcome.run_dir.parent == tmp_path / "runs" and isinstance(outcome.run_dir, Path)
    assert list(root.iterdir()) == []
