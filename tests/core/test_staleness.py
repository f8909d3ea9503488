"""thatch_core.staleness, clock and git helpers: the one liveness rule and roster order."""

from __future__ import annotations

import pytest
from freezegun import freeze_time

from thatch_core import clock
from thatch_core.constants import REHOST_GRACE_ENV, STALE_MS, rehost_grace_ms
from thatch_core.git import detect_worktree_kind
from thatch_core.staleness import human_age, is_stale, liveness, sort_roster, split_roster
from thatch_core.types import SessionRow

T0 = "2026-11-29T13:45:07Z"


def row(sid, project, last_seen, name=None, kind="opencode"):
    return SessionRow(session_id=sid, name=name or sid, topic=None, project=project,
                      host_kind=kind, auto=True, worktree=None,
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


@pytest.mark.rules("R16", "R14", "R35")
def test_split_roster_keeps_every_mcp_row_active():
    """R16, R14, R35: Active holds fresh opencode rows and every mcp row (its age
    only means between turns); Stale holds opencode rows that missed two
    beats; each section in roster order."""
    with freeze_time(T0):
        rows = [row("old", "p", "2026-11-29T13:40:00Z"), row("new", "p", T0),
                row("mid", None, "2026-11-29T13:44:30Z"),
                row("mcp_quiet", "p", "2026-11-20T00:00:00Z", kind="mcp"),
                row("mcp_busy", "p", "2026-11-29T13:45:00Z", kind="mcp")]
        active, stale, hidden = split_roster(rows)
    assert [r.session_id for r in active] == ["new", "mcp_busy", "mcp_quiet", "mid"]
    assert [r.session_id for r in stale] == ["old"] and hidden == 0


@pytest.mark.rules("R14", "R35")
def test_liveness_names_the_four_readings():
    """R14, R35: fresh/stale for an opencode row, active/idle for an mcp row,
    one is_stale rule under both; an unknown host kind reads as opencode."""
    now = clock.parse_iso_ms(T0)
    fresh, quiet = "2026-11-29T13:44:30Z", "2026-11-29T13:40:00Z"
    assert [liveness(row("a", None, t, kind=k), now) for k in ("opencode", "mcp", "other") for t in (fresh, quiet)] \
        == ["fresh", "stale", "active", "idle", "fresh", "stale"]


@pytest.mark.rules("R16")
def test_split_roster_stale_cap_counts_hidden_rows():
    """R16: with a cap, stale rows seen longer ago are counted, not listed; an
    mcp row is never hidden (it is Active), nor a row with no readable age."""
    now = clock.parse_iso_ms(T0)
    rows = [row("recent", "p", "2026-11-29T13:00:00Z"), row("ancient", "p", "2026-11-01T00:00:00Z"),
            row("mcp_ancient", "p", "2026-11-01T00:00:00Z", kind="mcp"), row("garbled", "p", "whenever")]
    split = split_roster(rows, now, stale_cap_ms=86_400_000)
    assert [r.session_id for r in split.active] == ["mcp_ancient"]
    assert sorted(r.session_id for r in split.stale) == ["garbled", "recent"] and split.hidden == 1
    assert split_roster(rows, now).hidden == 0


@pytest.mark.rules("R16")
def test_human_age_steps_and_unknown_age():
    """R16: `45s ago` under a minute, then whole minutes, hours and days;
    clock skew reads `0s ago`; an unreadable time reads `unknown age`."""
    now = clock.parse_iso_ms(T0)
    ago = lambda s: human_age(clock.iso(now - s * 1000), now)  # noqa: E731
    assert [ago(s) for s in (0, 59, 60, 3599, 3600, 86_399, 86_400, 10 * 86_400)] == [
        "0s ago", "59s ago", "1m ago", "59m ago", "1h ago", "23h ago", "1d ago", "10d ago"]
    assert human_age(clock.iso(now + 5000), now) == "0s ago"
    assert human_age("not a time", now) == human_age(None, now) == "unknown age"


@pytest.mark.rules("R16", "R35")
def test_the_tool_roster_uses_the_same_split_and_age(tmp_path):
    """R16, R35: the chat_list tool lists a quiet mcp row before its Stale
    section, as the CLI does, and prints the shared age text."""
    import random

    from thatch_core.config import StaticConfig
    from thatch_core.db import open_db
    from thatch_core.store import ChatStore
    from thatch_core.tools import ChatTools

    with freeze_time(T0) as frozen:
        conn = open_db(tmp_path / "t.db")
        store = ChatStore(conn, rng=random.Random(0))
        store.register("mcp_0123456789ab", kind="mcp", project="p")
        store.register("ses_gone", project="p")
        frozen.tick(300)
        store.register("ses_me", project="p")
        text = ChatTools(store, StaticConfig()).call("list", {}, identity="ses_me").text
        quiet, gone = store.get("mcp_0123456789ab").name, store.get("ses_gone").name
        conn.close()
    stale_at = text.index("Stale")
    assert text.index(quiet) < stale_at < text.index(gone), text
    assert "5m ago" in text


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
