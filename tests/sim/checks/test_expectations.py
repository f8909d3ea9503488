"""Point expectations: judged over the history up to their time (and the final db at `end`),
with `{label}` expanded to the session's assigned name."""

from __future__ import annotations

import re

import pytest

from historykit import ALICE, BOB, N_ALICE, N_BOB, RUN_INFO, H, base_world, make_db, make_spec
from simulator.checks.view import RunView
from simulator.checks.expectations import check_expectations


# bob's hook lines come from c1, a Claude Code host: a hook_line expectation needs its session declared there.
MCP_BOB = [{"id": "h1", "sessions": [{"id": "alice"}]},
           {"id": "c1", "kind": "claude-code", "sessions": [{"id": "bob"}]}]


def judge(expect, h, db, processes=None):
    spec = make_spec(expect=expect, processes=processes)
    return check_expectations(spec, RunView(spec, h.done(), db, RUN_INFO))


@pytest.fixture
def db(tmp_path):
    return make_db(tmp_path / "thatch.db", sessions=((ALICE, N_ALICE, "opencode", 0), (BOB, N_BOB, "opencode", 0)),
                   messages=((ALICE, BOB, "one", 10_000, 40_000, 0), (ALICE, BOB, "two", 50_000, None, 0)))


@pytest.fixture
def h():
    h = H(); base_world(h)
    h.wake(30_000, "h1", "bob")
    h.wake(60_000, "h1", "bob")
    h.sample(90_000, {"alice": (N_ALICE, False, 89_000), "bob": (N_BOB, True, 0)})
    h.call(100_000, "h1", "alice", "list", {}, True,
           f"Active (1):\n- {N_ALICE} (you, 0 unread)\n\nStale (1):\n- {N_BOB}")
    h.ev(110_000, "hook", "c1", "bob", hook="UserPromptSubmit",
         line=f"[thatch] chat: you are {N_BOB} (1 unread message(s) for you).", decision=None)
    h.ev(120_000, "hook", "c1", "bob", hook="Stop", line=f"[thatch] chat: 1 unread message for {N_BOB}",
         decision="block")
    return h


@pytest.mark.rules("R18", "R22")
def test_wakes_at_a_time_and_at_end(h, db):
    """R18, R22: wake counts up to a virtual time, inclusive, and at the end."""
    vs = judge([{"at": "30s", "wakes": {"session": "bob", "count": 1}},
                {"wakes": {"session": "bob", "min": 2, "max": 2}},
                {"at": "45s", "wakes": {"session": "bob", "count": 2}}], h, db)
    assert [v.status for v in vs] == ["pass", "pass", "fail"]
    assert vs[2].check == "expect#2" and "1 wakes" in vs[2].message and vs[2].witness[0]["kind"] == "wake"


@pytest.mark.rules("R16", "R14")
def test_roster_sections_and_text_with_label_expansion(h, db):
    """R16, R14: roster sections from the sample, text from the last chat_list, {label} expanded."""
    vs = judge([{"roster": {"session": "alice", "active": ["alice"], "stale": ["bob"]}},
                {"roster": {"session": "alice", "contains": "- {bob}"}},
                {"roster": {"session": "alice", "active": ["bob"]}},
                {"roster": {"session": "alice", "not_contains": "{alice}"}}], h, db)
    assert [v.status for v in vs] == ["pass", "pass", "fail", "fail"]
    assert N_ALICE in vs[3].message


@pytest.mark.rules("R16", "R35")
def test_a_stale_mcp_row_is_judged_in_the_active_section(db):
    """R16, R35: an mcp row's age only means between turns, so a stale sample of it
    counts as the Active section; a stale opencode row is the Stale section."""
    h = H(); base_world(h)
    h.sample(90_000, {"alice": (N_ALICE, True, 0), "bob": (N_BOB, True, 0, "mcp")})
    vs = judge([{"roster": {"session": "alice", "active": ["bob"], "stale": ["alice"]}},
                {"roster": {"session": "alice", "stale": ["bob"]}}], h, db)
    assert [v.status for v in vs] == ["pass", "fail"]
    assert "bob is not in alice's stale section" in vs[1].message


@pytest.mark.rules("R31", "R36")
def test_hook_line(h, db):
    """R31, R36: the last identity hook line of the session (or of a named hook), contains / equals / absent."""
    vs = judge([{"hook_line": {"session": "bob", "contains": "you are {bob}"}},
                {"at": "1m", "hook_line": {"session": "bob", "absent": True}},
                {"hook_line": {"session": "bob", "absent": True}},
                {"hook_line": {"session": "bob", "equals": "nope"}},
                {"hook_line": {"session": "bob", "hook": "Stop", "contains": "1 unread message"}}], h, db, MCP_BOB)
    assert [v.status for v in vs] == ["pass", "pass", "fail", "fail", "pass"]
    assert vs[2].witness[0]["kind"] == "hook"


@pytest.mark.rules("R5", "R6")
def test_registered_and_name_kept(h, db, tmp_path):
    """R5, R6: registered at a time (sample) and at the end (db); name_kept compares with the first name."""
    vs = judge([{"registered": {"session": "bob", "is": True, "name_kept": True}},
                {"at": "10s", "registered": {"session": "bob", "is": True}},
                {"registered": {"session": "carol", "is": True}}], h, db)
    assert [v.status for v in vs] == ["pass", "fail", "fail"]
    renamed = make_db(tmp_path / "r.db", sessions=((BOB, "e-cho-00009", "opencode", 0),))
    (v,) = judge([{"registered": {"session": "bob", "name_kept": True}}], h, renamed)
    assert v.status == "fail" and "e-cho-00009" in v.message


@pytest.mark.rules("R10", "R34")
def test_unread_at_end_and_at_a_time(h, db):
    """R10, R34: unread count from the final db, and at a virtual time from the stored stamps."""
    vs = judge([{"unread": {"session": "bob", "count": 1}}, {"at": "20s", "unread": {"session": "bob", "count": 1}},
                {"at": "55s", "unread": {"session": "bob", "count": 1}}, {"unread": {"session": "bob", "max": 0}}],
               h, db)
    assert [v.status for v in vs] == ["pass", "pass", "pass", "fail"]
    assert vs[3].witness and "db_row" in vs[3].witness[0]


@pytest.mark.rules("R9")
def test_step_reply_expectations_are_judged(h, db):
    """R9: a step's `expect:` is checked against its recorded tool-result (`step#<i>`),
    with `{label}` expanded; a step that left no reply fails instead of passing."""
    h.call(130_000, "h1", "alice", "send", {"to": "x"}, False,
           'No registered session named "x". Use chat_list to see who is available.', step=0)
    h.call(140_000, "h1", "alice", "send", {"to": N_BOB}, True, f"[sent] to {N_BOB} (ses_x)", step=1)
    steps = [
        {"at": "130s", "send": {"from": "alice", "to_raw": "x"}, "expect": {"ok": False, "contains": 'named "x"'}},
        {"at": "140s", "send": {"from": "alice", "to": "bob"},
         "expect": {"ok": True, "equals": "[sent] to {bob} (ses_x)"}},
        {"at": "141s", "send": {"from": "alice", "to": "bob"}, "expect": {"ok": True, "contains": "{bob}"}},
        {"at": "142s", "send": {"from": "alice", "to": "bob"}},
    ]
    spec = make_spec(steps=steps)
    vs = [v for v in check_expectations(spec, RunView(spec, h.done(), db, RUN_INFO)) if v.check.startswith("step#")]
    assert [(v.check, v.status) for v in vs] == [("step#0", "pass"), ("step#1", "pass"), ("step#2", "fail")]
    assert "no reply recorded" in vs[2].message
    spec = make_spec(steps=[{**steps[1], "expect": {"ok": False}}])
    h2 = H(); base_world(h2)
    h2.call(140_000, "h1", "alice", "send", {"to": N_BOB}, True, f"[sent] to {N_BOB} (ses_x)", step=0)
    (v,) = [v for v in check_expectations(spec, RunView(spec, h2.done(), db, RUN_INFO)) if v.check.startswith("step#")]
    assert v.status == "fail" and "ok=True" in v.message


@pytest.mark.rules("R20")
def test_wakes_text_of_the_last_wake(db):
    """R20: `wakes: {contains | not_contains}` looks in the text of the last wake by then
    ({label} expanded), so a scenario can pin the deduplicated senders and the count."""
    h = H(); base_world(h)
    h.sample(20_000, {"alice": (N_ALICE, False, 19_000), "bob": (N_BOB, False, 19_000)})
    h.ev(30_000, "wake", "h1", "bob", senders=[N_ALICE], count=2, hosted=True,
         text=f"[thatch] Chat: 2 unread messages from {N_ALICE}.\nCall thatch_chat_read to read your inbox.")
    vs = judge([{"wakes": {"session": "bob", "count": 1, "contains": "2 unread messages from {alice}."}},
                {"wakes": {"session": "bob", "not_contains": "{alice}, {alice}"}},
                {"wakes": {"session": "bob", "contains": "3 unread"}},
                {"at": "10s", "wakes": {"session": "bob", "contains": "unread"}}], h, db)
    assert [v.status for v in vs] == ["pass", "pass", "fail", "fail"]
    assert "lacks '3 unread'" in vs[2].message and "no wake" in vs[3].message


@pytest.mark.rules("R27")
def test_echoes_count_select_and_exclude(db):
    """R27: `echoes` counts a session's `[chat]` bubbles by a time; `contains` selects the bubbles holding
    the text (at least one, or count/min/max of them), `not_contains` must be in none; {label} expanded."""
    h = H(); base_world(h)
    h.sample(20_000, {"alice": (N_ALICE, False, 19_000), "bob": (N_BOB, False, 19_000)})
    h.ev(30_000, "echo", "h1", "alice", text=f"[chat] {N_ALICE} registered in the session directory")
    h.ev(40_000, "echo", "h1", "alice", text=f"[chat] to {N_BOB}: hello")
    h.ev(90_000, "echo", "h1", "alice", text="[chat] broadcast to 1 session: bye")
    vs = judge([
        {"at": "40s", "echoes": {"session": "alice", "count": 2}},                           # 0 pass
        {"echoes": {"session": "alice", "min": 3, "max": 3}},                                # 1 pass
        {"echoes": {"session": "alice", "contains": "to {bob}: hello"}},                     # 2 pass
        {"echoes": {"session": "alice", "contains": "[chat]", "count": 3}},                  # 3 pass
        {"at": "1m", "echoes": {"session": "alice", "contains": "broadcast"}},               # 4 fail: not yet
        {"echoes": {"session": "alice", "not_contains": "{alice} registered in the"}},       # 5 fail
        {"echoes": {"session": "bob", "count": 0, "not_contains": "[chat]"}},                # 6 pass
        {"echoes": {"session": "alice", "max": 1}},                                          # 7 fail
    ], h, db)
    assert [v.status for v in vs] == ["pass", "pass", "pass", "pass", "fail", "fail", "pass", "fail"]
    assert vs[4].message == "alice got 0 echoes containing 'broadcast' by 1m, want at least 1"
    assert vs[5].message.startswith(f"alice got an echo containing '{N_ALICE} registered in the' by end: ")
    assert vs[5].witness[0]["kind"] == "echo"
    assert vs[7].message == "alice got 3 echoes by end, want at most 1"


def test_unknown_expectation_key_fails_the_verdict(h, db):
    """A scenario built in Python skips the loader: an unknown key still fails its verdict, never passes silently."""
    vs = judge([{"wakes": {"session": "bob", "cuont": 1}}, {"unread": {"session": "bob", "count": "one"}}], h, db)
    assert [(v.status, v.message) for v in vs] == [
        ("fail", "wakes.cuont: unknown key `cuont` in a `wakes` expectation — did you mean `count`?"),
        ("fail", "unread.count: 'one' is not allowed here — write a whole number, 0 or more"),
    ]


@pytest.mark.rules("R31")
def test_hook_line_not_contains(h, db):
    """R31: `hook_line: {not_contains}` on the last identity line, and as a filter in the counting form."""
    vs = judge([{"hook_line": {"session": "bob", "not_contains": "left the directory"}},
                {"hook_line": {"session": "bob", "not_contains": "{bob}"}},
                {"hook_line": {"session": "bob", "not_contains": "{bob}", "count": 0}}], h, db, MCP_BOB)
    assert [v.status for v in vs] == ["pass", "fail", "pass"]


def test_every_dict_expectation_documents_the_keys_it_reads():
    """Each dict-typed expectation's field description names every key expectations.py reads."""
    from simulator.scenario.expectation_keys import EXPECTATION_KEYS
    from simulator.scenario.model import Expectation

    for kind, keys in EXPECTATION_KEYS.items():
        desc = Expectation.model_fields[kind].description
        missing = [k for k in keys if not re.search(rf"\b{k}\b", desc)]
        assert missing == [], f"{kind}: description lacks {missing}"
    # and the key table covers every key the judges read (`arg["k"]`, `arg.get("k")`, `"k" in arg`)
    import simulator.checks.expectations as judges

    source = open(judges.__file__, encoding="utf-8").read()
    read = set(re.findall(r"""arg\[["'](\w+)["']\]|arg\.get\(["'](\w+)""", source))
    read = {a or b for a, b in read} | set(re.findall(r'"(\w+)" in arg\b', source))
    assert read - set().union(*EXPECTATION_KEYS.values()) == set()


def test_a_failing_matches_shows_its_placeholder_expanded(h, db):
    """A step reply's and a hook line's failing `matches` print the pattern with `{label}` expanded to the name
    it was compared with, not the placeholder."""
    h.call(140_000, "h1", "alice", "send", {"to": N_BOB}, True, f"Message sent to {N_BOB} (active).", step=0)
    spec = make_spec(steps=[{"at": "140s", "send": {"from": "alice", "to": "bob"},
                             "expect": {"matches": "^Message sent to {bob} \\(stale\\)"}}])
    (v,) = [v for v in check_expectations(spec, RunView(spec, h.done(), db, RUN_INFO)) if v.check.startswith("step#")]
    assert v.status == "fail" and f"does not match '^Message sent to {N_BOB} \\\\(stale\\\\)'" in v.message
    (v,) = judge([{"hook_line": {"session": "bob", "matches": "^you are {bob}"}}], h, db, MCP_BOB)
    assert v.status == "fail" and f"does not match '^you are {N_BOB}'" in v.message


@pytest.mark.rules("R9", "R31")
def test_each_text_key_names_its_failure(h, db):
    """A hook line, a `replies` body and a step's `expect:` say which text key failed and how, `{label}`
    expanded; of two failing keys a hook line names `matches` before `not_contains`, a reply the other way."""
    line = f"[thatch] chat: you are {N_BOB} (1 unread message(s) for you)."
    for step in range(4):
        h.call(140_000, "h1", "alice", "send", {"to": N_BOB}, True, f"[sent] to {N_BOB} (ses_x)", step=step)
    steps = [{"at": "140s", "send": {"from": "alice", "to": "bob"}, "expect": expect}
             for expect in ({"equals": "[sent] to {alice}"}, {"contains": "held"}, {"not_contains": "{bob}"},
                            {"matches": "^held", "not_contains": "sent"})]
    spec = make_spec(steps=steps, processes=MCP_BOB, expect=[
        {"hook_line": {"session": "bob", key: want}} for key, want in (
            ("equals", "nope"), ("contains", "{alice}"), ("not_contains", "you are {bob}"), ("matches", "^nope"))]
        + [{"hook_line": {"session": "bob", "matches": "^nope", "not_contains": "you are"}},
           {"replies": {"step": 0, "contains": "{alice}"}},
           {"replies": {"step": 0, "matches": "^held", "not_contains": "sent"}}])
    got = [v.message for v in check_expectations(spec, RunView(spec, h.done(), db, RUN_INFO))]
    reply = f"[sent] to {N_BOB} (ses_x)"
    assert got == [f"hook line {line!r} != 'nope'", f"hook line {line!r} lacks {N_ALICE!r}",
                   f"hook line {line!r} contains 'you are {N_BOB}'", f"hook line {line!r} does not match '^nope'",
                   f"hook line {line!r} does not match '^nope'",
                   f"reply {reply!r} fails contains: {N_ALICE!r}", f"reply {reply!r} fails not_contains: 'sent'",
                   f"reply {reply!r} != '[sent] to {N_ALICE}'", f"reply {reply!r} lacks 'held'",
                   f"reply {reply!r} contains {N_BOB!r}", f"reply {reply!r} contains 'sent'"]


@pytest.mark.rules("R34")
def test_a_prompt_can_expect_its_hooks_to_print_nothing(db):
    """R34: `expect: {silent: true}` on a prompt passes when its hooks ran and printed nothing (a disabled host),
    fails when one printed a line or crashed, or when no hook ran; `silent: false` wants a line."""
    def verdict_for(silent, *lines, decision=None):
        h = H(); base_world(h)
        for line in lines:
            h.ev(60_000, "hook", "c1", "bob", hook="UserPromptSubmit", line=line, decision=decision)
        spec = make_spec(processes=MCP_BOB, steps=[{"at": "60s", "prompt": {"session": "bob"},
                                                     "expect": {"silent": silent}}])
        (v,) = [v for v in check_expectations(spec, RunView(spec, h.done(), db, RUN_INFO))
                if v.check.startswith("step#")]
        return v
    assert verdict_for(True, None).status == "pass"
    said = verdict_for(True, f"thatch chat: you are {N_BOB}")
    assert said.status == "fail" and "printed 'thatch chat: you are" in said.message
    assert "crashed" in verdict_for(True, None, decision="crashed").message
    assert "no hook ran" in verdict_for(True).message
    assert verdict_for(False, f"thatch chat: you are {N_BOB}").status == "pass"
    assert verdict_for(False, None).status == "fail"


def _judged(expect, h, db, processes=None, steps=None):
    spec = make_spec(expect=expect, processes=processes, steps=steps)
    return [v.status for v in check_expectations(spec, RunView(spec, h.done(), db, RUN_INFO))]


@pytest.mark.rules("R9", "R36", "R26", "R31")
def test_replies_hooks_turn_ends_prunes_and_host_ids(h, db):
    """R9 a step's replies by index or name (a retry's several), R36 hook runs by decision and turn ends in
    a window, R26 what each prune pass removed, R31 the host id a session goes by and its server's."""
    h.ev(130_000, "tool-result", "h1", "alice", tool="thatch_chat_send", ok=True, text="Not stored again", step=1)
    h.ev(131_000, "tool-result", "h1", "alice", tool="thatch_chat_send", ok=True, text="Not stored again", step=1)
    h.ev(140_000, "turn-end", "c1", "bob")
    h.ev(150_000, "hook", "c1", "bob", hook="Stop", line=None, decision=None)
    h.ev(150_000, "turn-end", "c1", "bob")
    h.ev(160_000, "prune", "h1", None, pruned=[BOB], expired_tombstones=[], swept=2)
    h.ev(170_000, "mcp-server", "c1", "bob", env={"CLAUDE_CODE_SESSION_ID": "ABC-123"})
    h.ev(180_000, "fork", "c1", "bob", old_host_id="ABC-123", new_host_id="abc-123")
    steps = [{"at": "1m", "name": "first", "send": {"from": "alice", "to": "bob"}},
             {"at": "2m", "name": "again", "retry": {"session": "alice", "tool": "send"}}]
    assert _judged([
        {"replies": {"step": "again", "contains": "Not stored again", "count": 2}},
        {"replies": {"step": 1, "ok": True}},
        {"replies": {"step": "first", "ok": True}},                       # never replied: fails
        {"hooks": {"session": "bob", "hook": "Stop", "decision": "block", "count": 1}},
        {"hooks": {"session": "bob", "hook": "Stop", "decision": "none", "count": 1}},
        {"hooks": {"session": "bob", "contains": "unread message for", "count": 1}},
        {"turn_ends": {"session": "bob", "count": 2, "between": ["2m", "3m"]}},
        {"turn_ends": {"session": "bob", "count": 1}},                     # two ended: fails
        {"prunes": {"pruned": "bob", "count": 1, "swept": 2}},
        {"prunes": {"pruned": "alice", "count": 0}},
        {"prunes": {"pruned": "bob", "count": 1, "swept": 1}},             # swept 2: fails
        {"host_id": {"session": "bob", "is": "abc-123", "server": "ABC-123"}},
        {"at": "2m55s", "host_id": {"session": "bob", "is": "abc-123"}},   # before the fork: fails
    ], h, db, MCP_BOB, steps) == ["pass", "pass", "fail", "pass", "pass", "pass", "pass", "fail", "pass", "pass",
                                  "fail", "pass", "fail"]
