"""The later design's properties P12-P14 on hand-built histories, where each is judged (its promise, or
`properties: {include: [...]}`), and a scenario's expected outcome under a named design."""

from __future__ import annotations

import pytest

from historykit import ALICE, BOB, N_ALICE, N_BOB, RUN_INFO, H, base_world, make_db, make_spec
from simulator.checks import check_all
from simulator.design import DEDUP_REPLY_MARK, INBOX_BEGIN, INBOX_END, index_at_units
from thatch_core.later import split_body

INCLUDE = {"include": ["P12", "P13", "P14"]}
BODY = "the release branch is green, tag it"


def verdicts(spec, h, db) -> dict:
    return {v.check: v for v in check_all(spec, h.done(), db, RUN_INFO)}


def retried_send(h: H, *, retry_at: int = 62_000) -> None:
    base_world(h)
    h.send(60_000, "h1", "alice", N_BOB, BODY)
    h.ev(retry_at, "tool-call", "h1", "alice", tool="thatch_chat_send", args={"to": N_BOB, "body": BODY}, retry=1)
    h.ev(retry_at, "tool-result", "h1", "alice", tool="thatch_chat_send", ok=True, text="[sent]", step=1)


def test_p12_a_retry_that_lands_a_second_unread_copy_fails(tmp_path):
    """A send retried by its host lands twice while the first copy is unread: P12 fails, naming the ids."""
    h = H(); retried_send(h)
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, BODY, 60_000, None, 0), (ALICE, BOB, BODY, 62_000, None, 0)))
    v = verdicts(make_spec(properties=INCLUDE), h, db)["P12"]
    assert v.status == "fail" and "landed 2 times" in v.message and "1, 2" in v.message


@pytest.mark.rules("R9")
def test_p12_counts_a_split_copy_by_its_whole_body_not_its_first_page(tmp_path):
    """Two different long bodies from alice to bob in one second open with the same page; the second is retried
    and suppressed. Only its own batch is a copy of it (seed 1015 of the thatch-later campaign took the first
    body's batch for a second copy, matching the opening of its first part)."""
    one, two = "alice handoff part " * 265, "alice handoff part " * 286
    h = H(); base_world(h)
    h.send(60_000, "h1", "alice", N_BOB, one)
    h.send(60_000, "h1", "alice", N_BOB, two)
    h.ev(60_000, "tool-call", "h1", "alice", tool="thatch_chat_send", args={"to": N_BOB, "body": two}, retry=2)
    h.ev(60_000, "tool-result", "h1", "alice", tool="thatch_chat_send", ok=True, text="[sent]", step=2)
    rows = tuple((ALICE, BOB, part, 60_000, None, 0) for body in (one, two) for part in split_body(body, 2000))
    v = verdicts(make_spec(policy="thatch-later"), h, make_db(tmp_path / "t.db", messages=rows))["P12"]
    assert v.status == "pass", v.message


def test_p12_a_retry_that_stores_nothing_new_passes(tmp_path):
    h = H(); retried_send(h)
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, BODY, 60_000, None, 0),))
    v = verdicts(make_spec(properties=INCLUDE), h, db)["P12"]
    assert v.status == "pass" and v.judged == 1


def test_p12_a_second_copy_after_the_first_was_read_passes(tmp_path):
    """Once the first copy was read, the identical body may deliver again (an intentional resend)."""
    h = H(); retried_send(h)
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, BODY, 60_000, 61_000, 0),
                                              (ALICE, BOB, BODY, 62_000, None, 0)))
    assert verdicts(make_spec(properties=INCLUDE), h, db)["P12"].status == "pass"


def test_p12_a_retry_after_the_window_is_not_judged(tmp_path):
    h = H(); retried_send(h, retry_at=90_000)
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, BODY, 60_000, None, 0), (ALICE, BOB, BODY, 90_000, None, 0)))
    assert verdicts(make_spec(properties=INCLUDE), h, db)["P12"].status == "skipped"


def test_p12_to_p14_are_not_applicable_on_seed_000s_design_unless_included(tmp_path):
    h = H(); retried_send(h)
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, BODY, 60_000, None, 0), (ALICE, BOB, BODY, 62_000, None, 0)))
    vs = verdicts(make_spec(), h, db)
    assert {vs[p].status for p in ("P12", "P13", "P14")} == {"not-applicable"}
    assert "retry de-duplication" in vs["P12"].message


def test_p12_is_judged_by_default_under_the_later_design(tmp_path):
    h = H(); retried_send(h)
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, BODY, 60_000, None, 0), (ALICE, BOB, BODY, 62_000, None, 0)))
    assert verdicts(make_spec(policy="thatch-later"), h, db)["P12"].status == "fail"


def read_of(h: H, t: int, text: str, clipped_from: int | None = None, **args) -> None:
    """bob's chat_read: a drain, or with `message`/`offset` a page of one message."""
    extra = {"clipped_from": clipped_from} if clipped_from else {}
    h.ev(t, "tool-call", "h1", "bob", tool="thatch_chat_read", args=args)
    h.ev(t, "tool-result", "h1", "bob", tool="thatch_chat_read", ok=True, text=text, **extra)


def test_p13_a_read_message_its_clipped_output_cut_short_fails(tmp_path):
    body = "row " * 1000
    h = H(); base_world(h)
    read_of(h, 120_000, ("[thatch] chat inbox:\n[from ba-sil-00001, Jan 5 09:01Z] " + body)[:2000], clipped_from=4100)
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, body, 60_000, 120_000, 0),))
    v = verdicts(make_spec(properties=INCLUDE), h, db)["P13"]
    assert v.status == "fail" and "clipped 1 of those outputs" in v.message


def test_p13_pages_that_show_every_character_pass(tmp_path):
    body = "".join(f"line {n:04d}. " for n in range(300))
    h = H(); base_world(h)
    read_of(h, 120_000, "[from ba-sil-00001, Jan 5 09:01Z] " + body[:2000] + "\n[clipped ...]")
    for k, off in enumerate(range(0, len(body), 1500)):
        read_of(h, 130_000 + k * 1000, "[page] " + body[off:off + 1600], message=1, offset=off)
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, body, 60_000, 120_000, 0),))
    assert verdicts(make_spec(properties=INCLUDE), h, db)["P13"].status == "pass"


def test_p13_a_split_batch_stored_in_part_fails(tmp_path):
    h = H(); base_world(h)
    first = "(message 1 of 3) part one (continued in next message)"
    second = "part two (continued in next message)"
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, first, 60_000, None, 0),
                                              (ALICE, BOB, second, 60_000, None, 0)))
    v = verdicts(make_spec(properties=INCLUDE), h, db)["P13"]
    assert v.status == "fail" and "batch of 3 parts but 2 were stored" in v.message


def test_p13_a_part_is_judged_by_its_own_pages_not_by_a_twin_elsewhere(tmp_path):
    """Two parts with one repeated text: part 1 is paged whole, part 2 only once and clipped by the host (as the
    drain was). The characters part 2 lacks are on part 1's pages, and still never reached the reader as part 2's."""
    body = "abc " * 750
    h = H(); base_world(h)
    head = "[from ba-sil-00001, Jan 5 09:01Z] "
    drained = head + body[:2000] + "\n[clipped: more]\n" + head + body[:1000]  # the host cut it in row 2's line
    read_of(h, 120_000, drained, clipped_from=4500)
    read_of(h, 130_000, "[page] " + body[2000:], message=1, offset=2000)
    read_of(h, 140_000, ("[page] " + body)[:1500], clipped_from=2450, message=2, offset=0)
    twins = ((ALICE, BOB, body, 60_000, 120_000, 0), (ALICE, BOB, body, 60_000, 120_000, 0))
    v = verdicts(make_spec(properties=INCLUDE), h, make_db(tmp_path / "t.db", messages=twins))["P13"]
    assert v.status == "fail" and "message #2" in v.message and "characters 0-1493" in v.message, v.message


def test_p13_a_part_cut_by_the_designs_own_page_is_not_unseen(tmp_path):
    """A drain shows each message up to a page and a marker saying how to read on: a reader that did not page
    was told, so the rest is not hidden by the host (P5 and P13 pass)."""
    body = "abc " * 750
    h = H(); base_world(h)
    read_of(h, 120_000, "[from ba-sil-00001, Jan 5 09:01Z] " + body[:2000] + "\n[clipped: showing 2000 of 3000]")
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, body, 60_000, 120_000, 0),))
    vs = verdicts(make_spec(properties=INCLUDE), h, db)
    assert vs["P13"].status == "pass" and vs["P5"].status == "pass", (vs["P13"].message, vs["P5"].message)


@pytest.mark.rules("R10")
def test_p13_and_p5_find_each_drained_row_by_the_id_its_line_names(tmp_path):
    """Two drains in one stamp second, each showing one of two rows whose first page is alike: the finder takes
    the row each line names (`id N`), not the first row whose text fits (seed 1013 of the thatch-later
    campaign took row 1's text for row 2's line, so row 2 read as never returned and never shown)."""
    body = "abc " * 750
    h = H(); base_world(h)
    for row_id in (1, 2):
        line = (f"[from ba-sil-00001, Jan 5 09:01Z, id {row_id}] {body[:2000]}\n[clipped: showing 2000 of 3003 "
                f"characters - continue with chat_read, message {row_id}, offset 2000]")
        read_of(h, 120_000, f"[thatch] chat inbox: 1 message(s), now marked read.\n{INBOX_BEGIN}\n{line}\n{INBOX_END}")
    twins = ((ALICE, BOB, body + "one", 60_000, 120_000, 0), (ALICE, BOB, body + "two", 60_000, 120_000, 0))
    vs = verdicts(make_spec(properties=INCLUDE), h, make_db(tmp_path / "t.db", messages=twins))
    assert vs["P13"].status == "pass" and vs["P5"].status == "pass", (vs["P13"].message, vs["P5"].message)


@pytest.mark.rules("R6", "R2")
def test_p6_lets_a_replaced_claim_give_the_conversation_a_second_name(db):
    """R6, R2: under project-bound claims a chat_register with an `as` of another project (or none) registers a
    fresh identity instead and says so (D-later-6); the conversation then goes by that name and, where its host
    anchors the old one, by the old one too (seed 1025 of the thatch-later campaign). The same change after an
    ordinary register reply is a rename without a leave."""
    replaced = ('The `as` name "{old}" belongs to another project (none); registered a fresh identity for this '
                "project instead - use the name below from now on.\n")
    for prefix, fails in ((replaced.format(old=N_BOB), False), ("", True)):
        h = H(); base_world(h)
        h.call(60_000, "h1", "bob", "register", {"as": N_BOB}, True,
               f"{prefix}[registered] e-cho-00002\nsession_id: mcp_29818b326d6d")
        h.registered(60_000, "h1", "bob", "mcp_29818b326d6d", "e-cho-00002", how="explicit")
        h.registered(120_000, "h1", "bob", BOB, N_BOB, how="hook")
        v = verdicts(make_spec(policy="thatch-later"), h, db)["P6"]
        assert (v.status == "fail") == fails, (prefix, v.message)


@pytest.mark.rules("R10", "R9")
def test_p5_a_read_in_the_suppressed_sends_concurrent_dispatch_is_not_surely_before_it(tmp_path):
    """A send answered as a suppressed duplicate while its copy was read in the same second: a read another
    process ran in the send's own concurrent dispatch ran at once with it (the merge may list it first), so the
    copy may still have been unread when the send checked (seed 1121 of the thatch-later campaign). In serial
    dispatch that read came first and the suppression swallowed the message: P5 fails."""
    line = f"[from {N_ALICE}, Nov 29 00:00Z] {BODY}"
    suppressed = f"[sent] to {N_BOB} (ses_x)\n\nThe recipient is active.\n\nDUPLICATE: {DEDUP_REPLY_MARK}."
    for dispatch, fails in (("concurrent", False), ("serial", True)):
        h = H(); base_world(h)
        h.send(2_000, "h1", "alice", N_BOB, BODY)
        read = h.call(4_000, "h2", "bob", "read", {}, True,
                      f"[thatch] chat inbox: 1 message(s), now marked read.\n{INBOX_BEGIN}\n{line}\n{INBOX_END}")
        send = h.call(4_000, "h1", "alice", "send", {"to": N_BOB, "body": BODY}, True, suppressed)
        events = h.done()
        for e in (*read, *send):
            e["dispatch"] = read[0]["dispatch"]
        db = make_db(tmp_path / f"{dispatch}.db", messages=((ALICE, BOB, BODY, 2_000, 4_000, 0),))
        spec = make_spec(policy="thatch-later", dispatch=dispatch)
        v = {x.check: x for x in check_all(spec, events, db, RUN_INFO)}["P5"]
        assert (v.status == "fail") == fails, (dispatch, v.message)


@pytest.mark.rules("R26")
def test_p5_a_suppressed_sends_copy_that_prune_may_have_swept_is_no_loss(tmp_path):
    """R26: the unread copy a suppressed retry stands on is swept with its recipient's unread mail once prune
    deleted the recipient (seed 1126 of the thatch-later campaign: a week's machine sleep); with no time for a
    sweep, a copy missing from the database is a loss."""
    suppressed = f"[sent] to {N_BOB} (ses_x)\n\nThe recipient is active.\n\nDUPLICATE: {DEDUP_REPLY_MARK}."
    for end, fails in ((8 * 86_400_000, False), (60_000, True)):
        h = H(); base_world(h)
        h.call(4_000, "h1", "alice", "send", {"to": N_BOB, "body": BODY}, True, suppressed)
        h.phase(end, "end")
        v = verdicts(make_spec(policy="thatch-later"), h, make_db(tmp_path / f"{end}.db"))["P5"]
        assert (v.status == "fail") == fails, (end, v.message)


def test_offsets_count_utf16_units():
    """The design's offsets count UTF-16 units: a character outside the BMP is two."""
    assert index_at_units("ab\U0001F600cd", 2) == 2
    assert index_at_units("ab\U0001F600cd", 3) == 2  # inside the pair: back to its start
    assert index_at_units("ab\U0001F600cd", 4) == 3


MACHINERY_WORLD = [{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob"},
                                             {"id": "extract", "parent": "alice", "machinery": True,
                                              "joins": "idle"}]}]


def test_p14_a_machinery_child_in_the_directory_fails(tmp_path):
    h = H(); base_world(h)
    h.registered(90_000, "h1", "extract", "ses_extract", "o-pal-00001")
    v = verdicts(make_spec(processes=MACHINERY_WORLD, properties=INCLUDE), h, make_db(tmp_path / "t.db"))["P14"]
    assert v.status == "fail" and "machinery child extract is in the directory" in v.message


def test_p14_a_child_that_registered_explicitly_passes(tmp_path):
    h = H(); base_world(h)
    h.call(80_000, "h1", "extract", "register", {}, True, "registered")
    h.registered(80_000, "h1", "extract", "ses_extract", "o-pal-00001", how="explicit")
    v = verdicts(make_spec(processes=MACHINERY_WORLD, properties=INCLUDE), h, make_db(tmp_path / "t.db"))["P14"]
    assert v.status == "pass"


def test_p14_a_row_beaten_while_nobody_hosts_it_fails(tmp_path):
    h = H(); base_world(h)
    h.exit(100_000, "h1", "killed")
    h.sample(120_000, {"alice": ("ba-sil-00001", False, 90_000)})
    h.sample(180_000, {"alice": ("ba-sil-00001", False, 150_000)})
    v = verdicts(make_spec(properties=INCLUDE), h, make_db(tmp_path / "t.db"))["P14"]
    assert v.status == "fail" and "while no live process hosted it" in v.message


@pytest.mark.rules("R6", "R34")
def test_p14_a_touch_by_the_sessions_own_register_or_status_is_no_beat(tmp_path):
    """R6, R34: an explicit chat_register or chat_status refreshes the caller's last_seen wherever it is hosted;
    a row fresh from such a call while no process hosts it is no beat (seed 1055 of the thatch-later campaign: a
    session a `-c` resume did not open registered explicitly). Fresh at another moment still fails."""
    for tool, fails in (("register", False), ("status", False), ("list", True)):
        h = H(); base_world(h)
        h.exit(100_000, "h1", "killed")
        h.sample(120_000, {"alice": ("ba-sil-00001", False, 90_000)})
        h.call(150_000, "h2", "alice", tool, {}, True, "[registered] ba-sil-00001")
        h.sample(180_000, {"alice": ("ba-sil-00001", False, 150_000)})
        v = verdicts(make_spec(properties=INCLUDE), h, make_db(tmp_path / f"{tool}.db"))["P14"]
        assert (v.status == "fail") == fails, (tool, v.message)


@pytest.mark.rules("R1")
def test_p14_a_sub_agent_childs_inherited_row_is_not_the_designs_doing(tmp_path):
    """A 002-era row of a sub-agent child stands from before the run; the later design clears only a marked
    (machinery) session's row, so it stays, sampled or seen by its host (seeds 1144, 1145 of the thatch-later
    campaign). The same child showing up registered without such a row fails."""
    for legacy, fails in (([{"name": "ask", "session": "bob", "last_seen_ago": "7d1h"}], False), ([], True)):
        h = H(); base_world(h)
        h.sample(30_000, {"bob": ("ask", False, 1_000)})
        spec = make_spec(properties=INCLUDE, legacy=legacy,
                         processes=[{"id": "h1", "sessions": [{"id": "alice"}, {"id": "bob", "parent": "alice"}]}])
        v = verdicts(spec, h, make_db(tmp_path / f"{bool(legacy)}.db"))["P14"]
        assert (v.status == "fail") == fails, (legacy, v.message)


def test_p14_rows_beaten_by_their_live_host_pass(tmp_path):
    h = H(); base_world(h)
    h.status(2_000, "h1", "alice")
    h.sample(120_000, {"alice": ("ba-sil-00001", False, 90_000)})
    h.sample(180_000, {"alice": ("ba-sil-00001", False, 150_000)})
    v = verdicts(make_spec(properties=INCLUDE), h, make_db(tmp_path / "t.db"))["P14"]
    assert v.status == "pass" and v.judged == 1


def test_an_expected_failure_under_the_design_is_ok_and_named(tmp_path):
    h = H(); retried_send(h)
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, BODY, 60_000, None, 0), (ALICE, BOB, BODY, 62_000, None, 0)))
    spec = make_spec(properties=INCLUDE, expect_outcome={"fails": {"thatch": ["P12"]}})
    vs = verdicts(spec, h, db)
    assert vs["P12"].status == "expected-fail" and vs["P12"].ok and "expected under thatch" in vs["P12"].message


def test_an_expected_failure_that_held_fails_the_run(tmp_path):
    h = H(); retried_send(h)
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, BODY, 60_000, None, 0),))
    spec = make_spec(properties=INCLUDE, expect_outcome={"fails": {"thatch": ["P12"]}})
    vs = verdicts(spec, h, db)
    assert vs["P12"].status == "pass" and vs["outcome:P12"].status == "fail"


def test_under_another_design_an_expected_failure_is_a_failure(tmp_path):
    h = H(); retried_send(h)
    db = make_db(tmp_path / "t.db", messages=((ALICE, BOB, BODY, 60_000, None, 0), (ALICE, BOB, BODY, 62_000, None, 0)))
    spec = make_spec(policy="thatch-later", expect_outcome={"fails": {"thatch": ["P12"]}})
    assert verdicts(spec, h, db)["P12"].status == "fail"


def test_the_judges_join_a_split_body_back_as_thatch_core_splits_it():
    """P5 and P8 count a split batch as one message: replies.joined_parts undoes thatch_core's split."""
    from simulator.design import split_key
    from simulator.replies import joined_parts
    from thatch_core.later import split_body
    body = ("handoff: rows 1-4000 copied.\n\n" * 90) + "the end"
    parts = split_body(body, 2000)
    assert len(parts) > 1 and split_key(joined_parts(parts)) == split_key(body)
    assert joined_parts([body]) == body
