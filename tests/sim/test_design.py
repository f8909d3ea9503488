"""The simulator's own statement of the design's numbers and formats (simulator/design.py).

The checkers and the engine's sampler judge thatch_core with these, so each is
held here against the design's text (docs/rules.md, the decision records) and
against fixed examples worked out by hand, never against thatch_core: a wrong
threshold, id derivation or line format in the system under test must not be
able to move the yardstick it is judged by.
"""

from __future__ import annotations

import re

import pytest

import repo
from simulator import design
from simulator.replies import IDENTITY, LEFT, OTHER, HookLine, decode_hook_line


def rule_text(rid: str) -> str:
    """The statement of rule `rid` in docs/rules.md (the design's rule texts)."""
    text = (repo.ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    m = re.search(rf"^### {rid}\n\n(.+?)\n", text, re.M)
    assert m, f"{rid} is not in docs/rules.md"
    return m.group(1)


# --- numbers: each one as the rule text states it ------------------------------------

@pytest.mark.rules("R14", "R13", "R15", "R18", "R22", "R33", "R7", "R26")
@pytest.mark.parametrize("rid, pattern, value, unit", [
    ("R14", r"two intervals \((\d+) s\)", "STALE_MS", design.SECOND_MS),
    ("R13", r"default (\d+) s", "DEFAULT_POLL_MS", design.SECOND_MS),
    ("R15", r"for up to (\d+) h", "DEFAULT_REHOST_GRACE_MS", design.HOUR_MS),
    ("R18", r"more than (\d+) min ago", "RENUDGE_MS", design.MINUTE_MS),
    ("R22", r"at most (\d+) wake prompts per recipient per rolling hour", "MAX_WAKES_PER_HOUR", 1),
    ("R33", r"at most (\d+) hops", "MAX_CONTINUATION_HOPS", 1),
    ("R33", r"in the final (\d+) bytes of a transcript", "CONTINUATION_TAIL_BYTES", 1),
    ("R33", r"reads at most (\d+) sibling transcripts", "MAX_SCANNED_TRANSCRIPTS", 1),
    ("R7", r"age out after (\d+) days", "TOMBSTONE_TTL_MS", 24 * design.HOUR_MS),
    ("R26", r"auto rows silent for (\d+) days", "AUTO_ROW_TTL_MS", 24 * design.HOUR_MS),
    ("R26", r"unread mail older than (\d+) days", "MAIL_SWEEP_AGE_MS", 24 * design.HOUR_MS),
])
def test_each_number_is_the_one_the_rule_states(rid, pattern, value, unit):
    """R14, R13, R15, R18, R22, R33, R7, R26: simulator/design.py says what the rule text says."""
    m = re.search(pattern, rule_text(rid))
    assert m, f"{rid} no longer states {pattern!r}: restate {value} from its new text"
    assert getattr(design, value) == int(m.group(1)) * unit


def test_the_units_are_what_they_say():
    assert (design.SECOND_MS, design.MINUTE_MS, design.HOUR_MS) == (1_000, 60_000, 3_600_000)
    assert design.STAMP_RESOLUTION_MS == design.SECOND_MS  # stamps are written as %Y-%m-%dT%H:%M:%SZ


# --- staleness (R14) ---------------------------------------------------------------

@pytest.mark.rules("R14")
@pytest.mark.parametrize("last_seen, now, stale", [
    (0, 0, False),
    (0, 59_999, False),
    (0, 60_000, False),      # exactly two intervals: still fresh
    (0, 60_001, True),       # more than 60 s since the last beat
    (100_000, 30_000, False),  # a beat stamped after "now" (clock skew) is fresh
    (None, 0, True),         # no readable beat at all
])
def test_is_stale_on_fixed_examples(last_seen, now, stale):
    """R14: stale = more than 60 s since the last beat."""
    assert design.is_stale(last_seen, now) is stale


# --- the MCP id (R31) --------------------------------------------------------------

@pytest.mark.rules("R31")
def test_mcp_session_id_is_the_prefix_and_twelve_hex_of_sha256():
    """R31: mcp_<sha256(host session id)[:12]>, checked on the FIPS 180-2 example
    (sha256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad)."""
    assert design.mcp_session_id("abc") == "mcp_ba7816bf8f01"
    assert design.mcp_session_id("") == "mcp_e3b0c44298fc"  # sha256 of nothing: e3b0c442 98fc1c14...
    assert "`mcp_<sha256(host session id)[:12]>`" in rule_text("R31")


@pytest.mark.rules("R31")
def test_mcp_session_id_hashes_the_lower_cased_host_id():
    """R31: the host session id is lower-cased before hashing, as the real thatch's
    mcpSessionID does: "ABC" is the same conversation as "abc"."""
    assert design.mcp_session_id("ABC") == "mcp_ba7816bf8f01"
    assert "lower-cased" in rule_text("R31")


@pytest.mark.rules("R31")
def test_a_chat_id_is_an_opencode_id_or_an_mcp_id_and_anything_else_is_hashed():
    """R31: the chat keeps opencode's own `ses_...` ids (docs/history.md) and `mcp_...` ids as they
    are; a host session id (uuid-shaped) is what gets hashed into an mcp id."""
    history = (repo.ROOT / "docs" / "history.md").read_text(encoding="utf-8")
    assert f"(`{design.OPENCODE_ID_PREFIX}…` for opencode" in history
    assert design.CHAT_ID_PREFIXES == ("ses_", "mcp_")
    assert "ses_0123".startswith(design.CHAT_ID_PREFIXES)
    assert design.mcp_session_id("abc").startswith(design.CHAT_ID_PREFIXES)
    assert not "4f1c9a2e-0b7d-4c3e-9a51-2d6e8f0a1b3c".startswith(design.CHAT_ID_PREFIXES)


# --- the hook line (R31, R36, D-real-text-8) ------------------------------------------

def _documented_hook_lines() -> list[str]:
    """The identity lines as the decision record spells them (D-real-text-8), NAME and N as placeholders."""
    text = (repo.ROOT / "docs" / "decisions" / "real.md").read_text(encoding="utf-8")
    m = re.search(r"^### D-real-text-8\n.*?(?=^#)", text, re.S | re.M)
    assert m, "D-real-text-8 is gone"
    lines = re.findall(r"`(\[thatch\] chat: you are NAME [^`]+|\(N unread message\(s\) for you\)\.)`",
                       " ".join(m.group(0).split()))
    assert len(lines) == 2, "D-real-text-8 no longer quotes both identity lines"
    return [lines[0], lines[0].replace("(no unread mail for you).", lines[1])]


@pytest.mark.rules("R31", "R36")
def test_the_hook_line_grammar_reads_the_documented_line():
    """R31, R36: the line printed at session start and on every prompt names the assigned name and
    the unread count (seed 000); D-real-text-8 records the real wording, and replies.decode_hook_line
    reads both forms back, with or without the project's other sessions after it."""
    empty, with_mail = _documented_hook_lines()
    assert decode_hook_line(empty.replace("NAME", "ba-sil-00042")) == HookLine(IDENTITY, "ba-sil-00042", 0)
    filled = with_mail.replace("NAME", "ba-sil-00042").replace("(N ", "(3 ")
    assert decode_hook_line(filled + " Others in this project with unread mail: ky-rie-00002 (1).") == \
        HookLine(IDENTITY, "ba-sil-00042", 3)


@pytest.mark.rules("R7", "R31")
def test_the_hook_line_grammar_does_not_read_other_lines():
    """R7, R31: the leave line and a mail reminder carry no identity to read back."""
    assert decode_hook_line(
        design.LEAVE_LINE_PREFIX + ' (chat_unregister) and will not receive mail. To rejoin as this conversation, '
        'pass as: "mcp_ba7816bf8f01".') == HookLine(LEFT)
    for line in ("You have 2 unread chat messages from ba-sil-00001.",
                 "[thatch] chat: you are ba-sil-00001 (two unread message(s) for you).",
                 "[thatch] chat: 2 unread messages for ba-sil-00001 from ky-rie-00002."):
        assert decode_hook_line(line) == HookLine(OTHER), line


# --- names (R2) ----------------------------------------------------------------------

@pytest.mark.rules("R2")
@pytest.mark.parametrize("name, ok", [
    ("basil-00001", True), ("ba-sil-00001", True), ("ba-sil-123456", True),   # counters never wrap
    ("ba-sil-0001", False), ("Ba-sil-00001", False), ("basil", False), ("ba_sil-00001", False), ("-00001", False),
])
def test_assigned_names_on_fixed_examples(name, ok):
    """R2: a lowercase pool base of one or more words and a counter of five or more digits."""
    assert bool(design.NAME_RE.match(name)) is ok


@pytest.mark.rules("R2")
@pytest.mark.parametrize("name, claimed", [("Alice-2", "Alice"), ("alice", "alice"), ("build-bot-7-3", "build-bot-7")])
def test_a_renamed_case_twin_reads_back_as_its_claimed_name(name, claimed):
    """D-store-6: the migration renames the later 002-era case twins NAME-2, NAME-3..."""
    assert design.unrenamed(name) == claimed


# --- the continued-in record (R33) ---------------------------------------------------

@pytest.mark.rules("R33")
def test_the_continued_in_record_is_the_one_the_rule_states():
    """R33: the record type and key are the rule's; the fake host writes them with the old id
    beside them, and the type string is the one docs/transcripts.md shows."""
    assert '`{"type":"continued-in","continuedInSessionId":"<new id>"}`' in rule_text("R33")
    assert (design.CONTINUED_IN_TYPE, design.CONTINUED_IN_KEY) == ("continued-in", "continuedInSessionId")
    assert design.continued_in_record("old", "new") == {
        "type": "continued-in", "sessionId": "old", "continuedInSessionId": "new"}
    doc = (repo.ROOT / "docs" / "transcripts.md").read_text(encoding="utf-8")
    assert '{"type":"continued-in","sessionId":"<old host id>","continuedInSessionId":"<new host id>"}' in doc


@pytest.mark.rules("R33")
@pytest.mark.parametrize("content, target", [
    (b'{"type":"user"}\n{"type":"continued-in","continuedInSessionId":"B"}\n', "B"),
    (b'{"type":"continued-in","continuedInSessionId":"B"}\n\n  \n', "B"),        # blank lines after it
    (b'{"type":"continued-in","continuedInSessionId":"B"}\n{"type":"user"}\n', None),  # not the last line
    (b'{"type":"system","subtype":"continued_in","continuedInSessionId":"B"}\n', None),
    (b'{"type":"continued-in","continuedInSessionId":""}\n', None),
    (b'{"type":"continued-in","continuedInSessionId":7}\n', None),
    (b'{"type":"continued-in","contin', None),                                    # torn
    (b"x" * 9000 + b'\n{"type":"continued-in","continuedInSessionId":"B"}\n', "B"),  # long file, short last line
    (b'{"type":"continued-in","continuedInSessionId":"B","pad":"' + b"x" * 4100 + b'"}\n', None),  # cut by the tail
    (b"", None),
])
def test_continued_in_target_on_fixed_examples(tmp_path, content, target):
    """R33: only the last non-empty line within the final 4096 bytes counts."""
    path = tmp_path / "old.jsonl"
    path.write_bytes(content)
    assert design.continued_in_target(path) == target
    assert design.continued_in_target(tmp_path / "missing.jsonl") is None
