"""The judges of the later design and of the startup path can fail: each case is a planted bug (a broken
store, runtime or reader) that the named property must catch, beside the same world run clean.

Each pair follows tests/e2e/test_property_failures.py: the real thatch_core classes pass the property,
the broken subclass injected through `overrides` fails it by name with a witness. The clipped part is a
reader's story rather than a store's bug: one incident scenario, failing by design.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

import repo
from simulator.api import run_scenario
from simulator.scenario.loader import load_file

from scenario_builders import act, assert_break, opencode, scenario, send, session
from thatch_core import clock
from thatch_core.later import READ_PAGE_LEN
from thatch_core.runtime import OpencodeRuntime
from thatch_core.store import ChatStore
from thatch_core.store_guard import marks


def _library(name: str):
    """A library scenario, its expected outcome taken off (the raw verdicts, not the gate's reading)."""
    spec = load_file(repo.ROOT / "scenarios" / name).spec
    return spec.model_copy(update={"expect_outcome": None})


# ---------------------------------------------------------------------------
# Broken variants
# ---------------------------------------------------------------------------

class FirstPageOnlyStore(ChatStore):
    """Paging one message serves only its first page's characters: whatever lies past them is never
    shown (breaks the later design's paged reads: every character of a message can be read)."""

    def message_for(self, session_id, message_id):
        item = super().message_for(session_id, message_id)
        return item if item is None else replace(item, body=item.body[:READ_PAGE_LEN - 100])


class ReadCopySuppressingStore(ChatStore):
    """Retry de-duplication that also swallows a resend whose earlier copy was already read (breaks the later
    design: a send is suppressed only while its copy is unread)."""

    def _unread_copy(self, from_session, to_session, parts, via_broadcast, window_ms):
        if window_ms is None:
            return False
        cutoff = clock.iso(clock.now_ms() - window_ms)
        return self.conn.execute(
            "SELECT 1 FROM chat_messages WHERE from_session = ? AND to_session = ? AND created_at >= ?"
            f" AND body IN ({marks(len(parts))}) LIMIT 1", (from_session, to_session, cutoff, *parts)).fetchone() \
            is not None


class StartupIgnoresConfigRuntime(OpencodeRuntime):
    """The `-s`/`-c` startup path reclaims its session whatever `chat.autoRegister` says (breaks R30)."""

    def _startup_session(self, cfg):
        return super()._startup_session(replace(cfg, auto_register=True))


class HalfReadStore(ChatStore):
    """chat_read stamps every unread row but returns none past the first (breaks R10)."""

    def read(self, session_id):
        items = super().read(session_id)
        return items[:1]


# ---------------------------------------------------------------------------
# P13: what the host showed, per part
# ---------------------------------------------------------------------------

@pytest.mark.rules("R10")
def test_p13_fails_when_a_clipped_part_is_paged_once(tmp_path):
    """P13 whole-message (R10): scenarios/incidents/clipped-part-later.yaml. Part 2 of 3 is paged once and its
    page is clipped by the host: its end never reaches the reader, though the same sentence does elsewhere."""
    r = run_scenario(_library("incidents/clipped-part-later.yaml"), run_dir=tmp_path / "run")
    v = r.verdict("P13")
    assert v.status == "fail" and "part 2 of 3" in v.message, v.message
    assert [e["kind"] for e in v.witness] == ["tool-call", "tool-result"]
    assert v.witness[0]["data"]["args"] == {"message": 2, "offset": 0}


@pytest.mark.rules("R10")
def test_p13_fails_when_a_page_never_shows_the_end_of_a_part(tmp_path):
    """P13 whole-message (R10): the clipped-read-later world pages every part twice, half a page apart; a store
    whose page serves only the first characters of a part loses each part's end and continuation marker."""
    good, bad = assert_break("P13", _library("incidents/clipped-read-later.yaml"), tmp_path, "part 1 of 3",
                             store=FirstPageOnlyStore)
    assert good.verdict("P13").judged == 3


# ---------------------------------------------------------------------------
# P5: a clipped read is named as one; a suppressed resend had an unread copy
# ---------------------------------------------------------------------------

@pytest.mark.rules("R10")
def test_p5_names_a_clipped_read_with_the_read_as_its_witness(tmp_path):
    """P5 no-loss (R10): under seed 000's design the clipping host cuts the one read that returned the handoff;
    P5 says so, with that read as its witness (no empty database-row line)."""
    r = run_scenario(_library("incidents/clipped-read.yaml"), run_dir=tmp_path / "run")
    v = r.verdict("P5")
    assert v.status == "fail" and "its host clipped the chat_read outputs that returned it" in v.message, v.message
    assert [e["kind"] for e in v.witness] == ["tool-call", "tool-result"]


@pytest.mark.rules("R10")
def test_p5_fails_when_a_read_returns_less_than_it_stamps(tmp_path):
    """P5 no-loss (R10): two messages, one read; a read that stamps both and returns the first loses the second,
    and P5 names the stamped row nobody was shown."""
    spec = scenario("p5-half-read", [opencode("h1", session("alice")), opencode("h2", session("bob", "silent"))],
                    [send("20s", "alice", "bob", "first"), send("21s", "alice", "bob", "second"),
                     act("40s", "read", session="bob")])
    assert_break("P5", spec, tmp_path, "no chat_read of its recipient returned it", store=HalfReadStore)


def read_then_resend(name: str = "read-then-resend-later"):
    """alice sends bob a note, bob reads it, and alice sends the same note 6 s after the first: within the later
    design's 10 s window, but the copy is read, so it must land again."""
    return scenario(name, [opencode("h1", session("alice", "silent")), opencode("h2", session("bob", "silent"))],
                    [send("30s", "alice", "bob", "the build is green"), act("33s", "read", session="bob"),
                     send("36s", "alice", "bob", "the build is green"), act("50s", "read", session="bob")],
                    policy="thatch-later")


@pytest.mark.rules("R9", "R10")
def test_p5_fails_when_a_resend_is_suppressed_after_its_copy_was_read(tmp_path):
    """P5 no-loss (R9, R10) on the later design: a de-duplication that ignores whether the copy was read
    swallows the resend, which then reaches nobody; the reply alone cannot tell, the inbox can."""
    good, bad = assert_break("P5", read_then_resend(), tmp_path, "no unread copy of it", store=ReadCopySuppressingStore)
    reads = [e["data"]["text"] for e in good.events("tool-result", session="bob") if e["data"]["tool"].endswith("read")]
    assert len(reads) == 2 and all("the build is green" in t for t in reads)


# ---------------------------------------------------------------------------
# P11: the startup path follows chat.autoRegister
# ---------------------------------------------------------------------------

def resume_with_auto_register_off(name: str = "resume-s-auto-register-off"):
    """bob's process runs with chat.autoRegister false; he joins by chat_register, his process is killed and
    `-s` resumes him into a process with the same config: its startup path must register nothing (R5, R30)."""
    off = {"autoRegister": False}
    return scenario(name, [
        opencode("h1", session("alice")),
        opencode("h2", session("bob", "silent"), config=off),
        opencode("h2b", config=off, start="never"),
    ], [act("20s", "register", session="bob"), act("1m", "kill", process="h2"),
        act("2m", "resume", session="bob", process="h2b", how="-s")], duration="3m")


@pytest.mark.rules("R5", "R30")
def test_p11_fails_when_a_resume_registers_with_auto_register_off(tmp_path):
    """P11 reply-model (R5, R30): a startup path that reclaims the `-s` session whatever the config says."""
    good, bad = assert_break("P11", resume_with_auto_register_off(), tmp_path, "chat.autoRegister false",
                             runtime=StartupIgnoresConfigRuntime)
    assert not [e for e in good.events("registered", session="bob") if e["data"].get("how") == "startup"]
    assert [e for e in bad.events("registered", session="bob") if e["data"].get("how") == "startup"]


# ---------------------------------------------------------------------------
# P14: a corpse row inherited from an older version goes at the child's first idle
# ---------------------------------------------------------------------------

class CorpseKeepingStore(ChatStore):
    """The idle path's cleanup deletes nothing: a marked session's corpse row stays (breaks the later design's
    machinery sessions)."""

    def drop_machinery_row(self, session_id):
        return False


@pytest.mark.rules("R1")
def test_p14_fails_when_a_corpse_row_outlives_the_childs_idle(tmp_path):
    """P14 no-machinery-rows (R1): scenarios/later/machinery-corpse-row-cleared.yaml. The inherited row stands
    until the child's first idle under markers; a store that keeps it there fails P14 by name."""
    assert_break("P14", _library("later/machinery-corpse-row-cleared.yaml"), tmp_path,
                 "machinery child extractor is in the directory", store=CorpseKeepingStore)
