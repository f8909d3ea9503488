"""P5 attributes a read to the inbox it drained; P6 and P9 know the 10-hop continuation limit;
a property listed by name that judged nothing is not reached."""

from __future__ import annotations

import pytest

from historykit import ALICE, N_ALICE, N_BOB, N_CAROL, RUN_INFO, H, base_world, make_db, make_spec
from simulator.checks.registry import REGISTRY, check_properties
from simulator.checks.view import RunView
from simulator.design import MAX_CONTINUATION_HOPS, mcp_session_id


def judge(pid, h, db, spec):
    return REGISTRY[pid][2](RunView(spec, h.done(), db, RUN_INFO))


# --- P5: a Cursor read drains the inbox its `as` claims ----------------------------------

BOB_MCP, CAROL_MCP = "mcp_b0b0b0b0b0b0", "mcp_ca201ca201ca"


def _cursor_world(tmp_path, second_read_returns_it: bool):
    """alice (opencode) mails bob; bob and carol are two conversations of one Cursor workspace.
    Both read with `as: <bob's name>` at the same moment: Cursor trusts the claim (R32)."""
    spec = make_spec(processes=[{"id": "h1", "sessions": [{"id": "alice"}]},
                                {"id": "w1", "kind": "cursor", "sessions": [{"id": "bob"}, {"id": "carol"}]}])
    db = make_db(tmp_path / "p5.db",
                 sessions=((ALICE, N_ALICE, "opencode", 0), (BOB_MCP, N_BOB, "mcp", 0), (CAROL_MCP, N_CAROL, "mcp", 0)),
                 messages=((ALICE, BOB_MCP, "the deploy key", 10_000, 30_000, 0),))
    h = H()
    h.start(0, "h1", {"alice": ALICE}); h.start(0, "w1", {"bob": BOB_MCP, "carol": CAROL_MCP}, kind="cursor")
    h.registered(1_000, "h1", "alice", ALICE, N_ALICE)
    h.registered(1_000, "w1", "bob", BOB_MCP, N_BOB); h.registered(1_000, "w1", "carol", CAROL_MCP, N_CAROL)
    h.send(10_000, "h1", "alice", N_BOB, "the deploy key")
    first = h.read(30_000, "w1", "bob", [(N_ALICE, 10_000, "the deploy key")], {"as": N_BOB})
    second = h.read(30_000, "w1", "carol", [(N_ALICE, 10_000, "the deploy key")] if second_read_returns_it else [],
                    {"as": N_BOB})
    return spec, db, h, first, second


@pytest.mark.rules("R10", "R32")
def test_p5_catches_two_reads_of_one_inbox_by_different_callers(tmp_path):
    """R10, R32: two concurrent reads of bob's inbox (one by carol's conversation claiming bob)
    both returned the same message. Judged per caller (the old way) each saw it once."""
    spec, db, h, first, second = _cursor_world(tmp_path, second_read_returns_it=True)
    v = judge("P5", h, db, spec)
    assert v.status == "fail" and "read 2 times (by bob, carol)" in v.message, v.message
    assert {e["i"] for e in (*first, *second)} <= {w["i"] for w in v.witness}


@pytest.mark.rules("R10", "R32")
def test_p5_passes_when_the_second_reader_of_the_inbox_finds_it_drained(tmp_path):
    """R10, R32: the read stamped what it returned, so the second claim on bob's inbox gets nothing."""
    spec, db, h, _, _ = _cursor_world(tmp_path, second_read_returns_it=False)
    v = judge("P5", h, db, spec)
    assert v.status == "pass" and v.judged == 3, v.message  # one send, two reads


# --- P6 / P9: the walk stops at 10 hops -----------------------------------------------------

FRESH = "new-comer-00001"


def _hook(h, t, name, unread=0):
    return h.ev(t, "hook", "c1", "carol", hook="UserPromptSubmit", decision=None,
                line=f"[thatch] chat: you are {name} ({unread} unread message(s) for you)."
                if unread else f"[thatch] chat: you are {name} (no unread mail for you).")


def _chain_world(tmp_path, forks: int, shown: str, *, mail_left_behind: bool = False):
    """carol (Claude Code) is anchored by a hook line, then her id forks `forks` times with no
    hook between; the next hook line shows `shown`. Samples follow the newest registered row."""
    spec = make_spec(processes=[{"id": "c1", "kind": "claude-code", "sessions": [{"id": "carol"}]}])
    ids = [f"host-{k}" for k in range(forks + 1)]
    h = H()
    h.start(0, "c1", {"carol": ids[0]}, kind="claude-code")
    _hook(h, 1_000, N_CAROL)
    h.sample(5_000, {"carol": (N_CAROL, False, 1_000, "mcp")})
    chain = [h.ev(10_000 + k * 1_000, "fork", "c1", "carol", old_host_id=ids[k], new_host_id=ids[k + 1])
             for k in range(forks)]
    h.sample(50_000, {"carol": (N_CAROL, False, 1_000, "mcp")})
    line = _hook(h, 60_000, shown)
    h.sample(70_000, {"carol": (shown, False, 60_000, "mcp")})
    newest = (mcp_session_id(ids[-1]), shown, "mcp", 60_000)
    # adopted: the row moved to the newest id; not adopted: the old row stays beside a fresh one
    rows = (newest,) if shown == N_CAROL else ((mcp_session_id(ids[0]), N_CAROL, "mcp", 1_000), newest)
    mail = ((ALICE, mcp_session_id(ids[0]), "before the chain", 2_000, None, 0),) if mail_left_behind else ()
    db = make_db(tmp_path / f"chain-{forks}-{shown}.db", sessions=rows, messages=mail)
    return spec, db, h, chain, line


@pytest.mark.rules("R33", "R2")
def test_a_fork_chain_past_ten_hops_starts_afresh_and_passes(tmp_path):
    """R33, R2: 11 forks with no hook between: the walk stops at 10 hops, nothing is adopted, the
    conversation registers under a fresh name and the old row keeps its mail. The old judges
    failed both P6 (a name change without a leave) and P9 (a fresh name after a fork)."""
    spec, db, h, _, _ = _chain_world(tmp_path, MAX_CONTINUATION_HOPS + 1, FRESH, mail_left_behind=True)
    view = RunView(spec, h.done(), db, RUN_INFO)
    p6, p9 = REGISTRY["P6"][2](view), REGISTRY["P9"][2](view)
    assert p6.status == "pass", p6.message
    assert p9.status == "pass" and p9.judged == MAX_CONTINUATION_HOPS + 1, p9.message


@pytest.mark.rules("R33")
def test_a_fork_chain_past_ten_hops_that_adopts_fails_p9(tmp_path):
    """R33: a walk without the hop limit adopts the old name across 11 forks."""
    spec, db, h, chain, line = _chain_world(tmp_path, MAX_CONTINUATION_HOPS + 1, N_CAROL)
    v = judge("P9", h, db, spec)
    assert v.status == "fail" and "the walk stops at 10 hops" in v.message, v.message
    assert {chain[0]["i"], line["i"]} <= {w["i"] for w in v.witness}


@pytest.mark.rules("R33", "R2")
def test_a_ten_hop_chain_still_adopts(tmp_path):
    """R33, R2: exactly 10 forks: the walk reaches the registered ancestor; the name must stay,
    so a fresh one fails P9 and P6."""
    spec, db, h, _, _ = _chain_world(tmp_path, MAX_CONTINUATION_HOPS, N_CAROL)
    assert judge("P9", h, db, spec).status == "pass"
    spec, db, h, _, _ = _chain_world(tmp_path, MAX_CONTINUATION_HOPS, FRESH)
    view = RunView(spec, h.done(), db, RUN_INFO)
    assert REGISTRY["P9"][2](view).status == "fail"
    assert "without leaving the directory" in REGISTRY["P6"][2](view).message


# --- a property listed by name that judged nothing ------------------------------------------

@pytest.mark.rules("R22")
def test_a_listed_property_that_judged_nothing_is_not_reached(tmp_path):
    """R22: two ping-pong agents that never exchanged a message: P10 passed vacuously before;
    listed by name it is NOT REACHED now. Under `properties: all` it stays a pass over nothing."""
    processes = [{"id": "h1", "sessions": [{"id": "alice", "agent": "ping-pong"}, {"id": "bob", "agent": "ping-pong"}]}]
    h = H(); base_world(h); h.phase(600_000, "end")
    events = h.done()
    db = make_db(tmp_path / "pp.db")
    listed = make_spec(processes=processes, properties=["P10"])
    v = check_properties(listed, RunView(listed, events, db, RUN_INFO))[0]
    assert (v.check, v.status, v.judged) == ("P10", "not-reached", 0), v.message
    everything = make_spec(processes=processes)
    v = next(x for x in check_properties(everything, RunView(everything, events, db, RUN_INFO)) if x.check == "P10")
    assert (v.status, v.judged) == ("pass", 0)
