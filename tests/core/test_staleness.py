"""thatch_core.staleness, clock and git helpers: the one liveness rule and roster order."""

from __future__ import annotations

import pytest
from freezegun import freeze_time

from thatch_core import clock
from thatch_core.constants import REHOST_GRACE_ENV, STALE_MS, rehost_grace_ms
from thatch_core.git import detect_worktree_kind
from thatch_core.staleness import group_roster, is_stale, sort_roster
from thatch_core.types import SessionRow

T0 = "2026-11-29T13:45:07Z"


def row(sid, project, last_seen, name=None):
    return SessionRow(session_id=sid, name=name or sid, topic=None, project=project,
                      host_kind="opencode", auto=True, worktree=None,
                      registered_at=last_seen, last_seen=last_seen)


@pytest.mark.rules("R14")
def test_stale_after_two_missed_beats():
    """R14: stale means age > 60 s (two 30 s beats); exactly 60 s is fresh."""
    assert STALE_MS == 60_000
    with freeze_time(T0) as frozen:
        seen = clock.iso()
        frozen.tick(60)
        assert not is_stale(seen)
        frozen.tick(1)
        assert is_stale(seen)
        assert is_stale(row("a", None, seen))
        assert is_stale({"last_seen": seen})
    base = clock.parse_iso_ms(T0)
    assert not is_stale(T0, now_ms=base + STALE_MS)
    assert is_stale(T0, now_ms=base + STALE_MS + 1)


@pytest.mark.rules("R14")
def test_unreadable_last_seen_counts_as_stale():
    """R14: nothing proves a row with a garbled heartbeat alive."""
    assert is_stale("not a time", now_ms=0)
    assert is_stale(None, now_ms=0)


@pytest.mark.rules("R16")
def test_sort_roster_project_first_then_recency():
    """R16: projects alphabetical (case-insensitive), no-project rows last,
    newest beat first within a project."""
    rows = [
        row("n1", None, "2026-11-29T13:00:00Z"),
        row("b_old", "beta", "2026-11-29T12:00:00Z"),
        row("z1", "Zeta", "2026-11-29T10:00:00Z"),
        row("b_new", "beta", "2026-11-29T13:00:00Z"),
        row("n2", None, "2026-11-29T13:30:00Z"),
        row("b_mid", "beta", "2026-11-29T12:30:00Z"),
    ]
    assert [r.session_id for r in sort_roster(rows)] == ["b_new", "b_mid", "b_old", "z1", "n2", "n1"]


@pytest.mark.rules("R16", "R14")
def test_group_roster_active_and_stale():
    """R16, R14: Active and Stale sections, each in roster order."""
    with freeze_time(T0):
        rows = [row("old", "p", "2026-11-29T13:40:00Z"), row("new", "p", T0),
                row("mid", None, "2026-11-29T13:44:30Z")]
        active, stale = group_roster(rows)
    assert [r.session_id for r in active] == ["new", "mid"]
    assert [r.session_id for r in stale] == ["old"]


def test_clock_iso_roundtrip_under_freezegun():
    with freeze_time(T0):
        assert clock.iso() == T0
        assert clock.now_ms() == clock.parse_iso_ms(T0)
        assert clock.iso_minutes_ago(15) == "2026-11-29T13:30:07Z"
        assert clock.iso_ms_ago(1500) == "2026-11-29T13:45:05Z"
    assert clock.parse_iso_ms("2026-11-29 13:45:07") == clock.parse_iso_ms(T0)
    assert clock.parse_iso_ms("2026-11-29T13:45:07.500+00:00") == clock.parse_iso_ms(T0) + 500
    with pytest.raises(ValueError):
        clock.parse_iso_ms("yesterday")


@pytest.mark.rules("R4")
def test_detect_worktree_kind(tmp_path):
    """R4: .git dir = root, .git file = worktree, nothing = None."""
    (tmp_path / "r" / ".git").mkdir(parents=True)
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / ".git").write_text("gitdir: x\n")
    assert detect_worktree_kind(tmp_path / "r") == "root"
    assert detect_worktree_kind(str(tmp_path / "w")) == "worktree"
    assert detect_worktree_kind(tmp_path) is None
    assert detect_worktree_kind(tmp_path / "missing") is None
    assert detect_worktree_kind(None) is None
    assert detect_worktree_kind(42) is None  # not a path at all: undetected, not a crash
    assert detect_worktree_kind("bad\0path") is None


@pytest.mark.rules("R15")
def test_rehost_grace_override():
    """R15: THATCH_CHAT_REHOST_GRACE_MINUTES overrides the 24 h grace; junk falls back."""
    assert rehost_grace_ms({}) == 86_400_000
    assert rehost_grace_ms({REHOST_GRACE_ENV: "5"}) == 300_000
    assert rehost_grace_ms({REHOST_GRACE_ENV: "soon"}) == 86_400_000
    assert rehost_grace_ms({REHOST_GRACE_ENV: "-1"}) == 86_400_000
