"""The real suite's "roster age and checkout kind" and "chatLiveness and roster split" blocks."""

from __future__ import annotations

import pytest

from thatch_core import clock
from thatch_core.cli import format_roster
from thatch_core.constants import DAY_MS, POLL_INTERVAL_MS, STALE_MS
from thatch_core.staleness import human_age, is_stale, sort_roster, split_roster
from thatch_core.types import SessionRow

NOW = clock.parse_iso_ms("2026-09-14T12:00:00Z")


def ago(ms: int) -> str:
    return clock.iso(NOW - ms)


def row(**over) -> SessionRow:
    fields = dict(session_id="ses_x", name="x-00001", topic=None, project="p", host_kind="opencode",
                  auto=True, worktree=None, registered_at="2026-09-14T11:00:00Z", last_seen=ago(5_000))
    fields.update(over)
    return SessionRow(**fields)


def status_cell(rows, name: str) -> str:
    """The STATUS column of ``name``'s line in the ``chat list`` roster."""
    lines = format_roster(rows, now_ms=NOW, stale_days=None, color=False).splitlines()
    header = next(line for line in lines if line.startswith("NAME"))
    start = header.index("STATUS")
    line = next(line for line in lines if line.startswith(name + " "))
    return line[start:].split()[0]


@pytest.mark.rules("R16")
def test_age_buckets():
    """
    "humanAge renders human-readable buckets": a roster age reads ``45s ago``,
    ``5m ago``, ``3h ago`` or ``2d ago``, and an unparseable stamp reads
    ``unknown age`` (R16).
    """
    now = clock.parse_iso_ms("2026-09-14T12:00:00Z")
    assert human_age("2026-09-14T11:59:15Z", now) == "45s ago"
    assert human_age("2026-09-14T11:55:00Z", now) == "5m ago"
    assert human_age("2026-09-14T09:00:00Z", now) == "3h ago"
    assert human_age("2026-09-12T12:00:00Z", now) == "2d ago"
    assert human_age("not-a-date", now) == "unknown age"


@pytest.mark.rules("R4")
def test_checkout_kind_recorded(store, reg, tmp_path):
    """
    "registration records the checkout kind; default rows read as unknown": a
    session registered from a linked worktree (a ``.git`` file) records
    ``worktree``; one registered with no directory records none (R4).
    """
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / ".git").write_text("gitdir: /elsewhere/.git/worktrees/tree\n")
    reg("ses_a", "ap-ri-cot")
    reg("ses_w", "bis-cuit", directory=str(tree))
    rows = {r.session_id: r for r in store.list_sessions()}
    assert rows["ses_a"].worktree is None
    assert rows["ses_w"].worktree == "worktree"


@pytest.mark.rules("R6")
def test_register_reports_created_vs_existing(reg):
    """
    "register reports created vs existing": the first registration reports a
    newly minted row, the second an existing one (R6).
    """
    first = reg("ses_c1", "gar-net")
    assert first.drawn and not first.reclaimed
    second = reg("ses_c1", "gar-net")
    assert second.reclaimed and not second.drawn


@pytest.mark.rules("R13")
def test_heartbeat_refreshes_last_seen(store, reg, frozen):
    """
    "heartbeat refreshes last_seen": a beat never moves ``last_seen`` back (R13).
    """
    reg("ses_hb", "dew-drop")
    before = store.get("ses_hb").last_seen
    frozen.tick(5)
    store.heartbeat(["ses_hb"])
    after = store.get("ses_hb").last_seen
    assert clock.parse_iso_ms(after) >= clock.parse_iso_ms(before)


@pytest.mark.rules("R14")
def test_stale_is_two_missed_beats():
    """
    "stale is two missed beats: one late beat is still fresh": the threshold
    is two poll intervals; a row one beat late, or exactly at the threshold,
    is fresh; a millisecond past it is stale (R14).
    """
    assert STALE_MS == 2 * POLL_INTERVAL_MS
    assert not is_stale(row(last_seen=ago(POLL_INTERVAL_MS + 5_000)), NOW)
    assert not is_stale(row(last_seen=ago(STALE_MS)), NOW)
    assert is_stale(row(last_seen=ago(STALE_MS)), NOW + 1)


@pytest.mark.rules("R35")
def test_mcp_rows_turn_driven():
    """
    "mcp rows are turn-driven: idle is the normal between-prompts state": in
    ``chat list``'s STATUS column a recently seen mcp row reads ``active`` and
    one past the stale threshold reads ``idle`` (R35).
    """
    assert status_cell([row(host_kind="mcp")], "x-00001") == "active"
    assert status_cell([row(host_kind="mcp", last_seen=ago(STALE_MS + 1_000))], "x-00001") == "idle"


@pytest.mark.rules("R16", "R35")
def test_roster_split_keeps_mcp_active():
    """
    "splitChatRoster separates stale opencode rows; mcp rows are always
    active": a fresh opencode row and an old mcp row are Active, an old
    opencode row is Stale (R16, R35).
    """
    fresh = row(session_id="ses_f", name="f-00001")
    dead = row(session_id="ses_d", name="d-00001", last_seen=ago(STALE_MS + 1_000))
    mcp = row(session_id="ses_m", name="m-00001", host_kind="mcp", last_seen=ago(STALE_MS + 1_000))
    active, stale, _ = split_roster([fresh, dead, mcp], NOW)
    assert [r.session_id for r in active] == ["ses_f", "ses_m"]
    assert [r.session_id for r in stale] == ["ses_d"]


@pytest.mark.rules("R16")
def test_roster_order_project_then_recency():
    """
    "sortChatRoster orders by project, then most recently seen; unknown project
    last": alphabetical projects, newest beat first inside one, the no-project
    row at the end; the input rows are untouched (R16).
    """
    zeta = row(session_id="ses_z", name="z-00001", project="zeta/app", last_seen=ago(2 * DAY_MS))
    alpha_old = row(session_id="ses_a2", name="a2-00001", project="alpha/app", last_seen=ago(DAY_MS))
    alpha_new = row(session_id="ses_a1", name="a1-00001", project="alpha/app", last_seen=ago(60_000))
    orphan = row(session_id="ses_o", name="o-00001", project=None, last_seen=ago(60_000))
    given = [zeta, orphan, alpha_old, alpha_new]
    ordered = sort_roster(given)
    assert [r.session_id for r in ordered] == ["ses_a1", "ses_a2", "ses_z", "ses_o"]
    assert [r.session_id for r in given] == ["ses_z", "ses_o", "ses_a2", "ses_a1"]


@pytest.mark.rules("R16")
def test_stale_cap_hides_and_counts():
    """
    "splitChatRoster staleCapMs hides stale rows older than the cap and reports
    the count": no cap hides nothing; a one-day cap hides the week-old stale row
    and counts it, shows the row exactly a day old, and leaves the week-old mcp
    row Active (the cap bounds only the Stale section) (R16).
    """
    rows = [row(session_id="ses_f", name="f-00001"),
            row(session_id="ses_d1", name="d1-00001", last_seen=ago(DAY_MS)),
            row(session_id="ses_d7", name="d7-00001", last_seen=ago(7 * DAY_MS)),
            row(session_id="ses_m", name="m-00001", host_kind="mcp", last_seen=ago(7 * DAY_MS))]
    assert split_roster(rows, NOW).hidden == 0
    capped = split_roster(rows, NOW, stale_cap_ms=DAY_MS)
    assert [r.session_id for r in capped.stale] == ["ses_d1"] and capped.hidden == 1
    assert [r.session_id for r in capped.active] == ["ses_f", "ses_m"]
