"""Every case of the real tests/chat.test.ts is ported once or listed once.

The titles below are the real suite's, block by block. Each must open the
docstring of exactly one test in this package (in double quotes) or head
exactly one item of README.md's "Cases not modelled" list, and nothing here
may name a title the real suite does not have.
"""

from __future__ import annotations

import ast
import collections
import re
from pathlib import Path

HERE = Path(__file__).parent

REAL_TITLES = (
    # file level
    "departed participants render with the shared unknown convention",
    # ChatStore via ThatchDB
    "register assigns a slug-counter name and creates the directory row",
    "a title-less registration draws a pool slug as the base",
    "the same base handed to two sessions yields distinct counters",
    "a legacy row holding a drawn name makes the next draw bump the counter",
    "pruning an auto row never reissues its name; counters only grow",
    "prune removes dead mail addressed to pruned sessions, keeps history",
    "topics are optional, sanitized to one roster line, and set at registration",
    "refreshAutoTopic updates auto rows only",
    "generated names satisfy the charset and never shadow session IDs",
    "re-registering is idempotent and keeps the assigned name",
    "find resolves by name or session id; misses return null",
    "unregister removes the row but keeps message history",
    "send validates endpoints",
    "an identical resend within the dedupe window lands one row, outside it lands two",
    "a retried broadcast suppresses per-recipient duplicates and keeps the recipient list",
    "broadcast reaches every other fresh session, skipping stale ones",
    "read drains the inbox oldest-first and stamps messages read",
    # chat body auto-split
    "a body within the part budget passes through as one undecorated part",
    "splits at a paragraph boundary and decorates first and non-final parts",
    "three-plus parts: only the first carries the prefix, only the last lacks the suffix",
    "a hard cut never splits a surrogate pair",
    "BMP multibyte text splits on UTF-16 units without corruption",
    "an oversized send lands every part in order, reported in the result",
    "a retried split send suppresses the whole batch",
    "an identical resend within the window delivers again once the first was read",
    "a split batch retry stays suppressed until EVERY part was read (partial-read edge)",
    "identical chunks inside one body never suppress each other",
    "a split send that fails partway leaves no rows (one-transaction batch)",
    "empty-after-trim refusal reports the attempted length",
    "the whole-body ceiling refuses with the attempted count; parts derive at the ceiling",
    "an oversized broadcast delivers every part to every live recipient",
    # chat read clip and paging
    "the drain clips long bodies with a marker that names characters",
    "paging windows are deterministic and name the unit",
    "chat_read pages one message by id without marking anything read",
    # assigned names
    "slugifyTitle lowercases, hyphenates, and caps at 32",
    "isDefaultSessionTitle flags opencode placeholders",
    "counters are per base and never shared across bases",
    "a null base draws a pool slug, still counter-suffixed",
    "prune deletes auto rows but keeps counters (name never reissued)",
    # roster age and checkout kind
    "humanAge renders human-readable buckets",
    "registration records the checkout kind; default rows read as unknown",
    "register reports created vs existing",
    "heartbeat refreshes last_seen",
    # chatLiveness and roster split
    "stale is two missed beats: one late beat is still fresh",
    "mcp rows are turn-driven: idle is the normal between-prompts state",
    "splitChatRoster separates stale opencode rows; mcp rows are always active",
    "sortChatRoster orders by project, then most recently seen; unknown project last",
    "splitChatRoster staleCapMs hides stale rows older than the cap and reports the count",
    # wake gate
    "map-absent session falls through to the live check and wakes",
    "known busy/retry rejects without fetching",
    "the live status map is authoritative: busy fails closed, absent means idle",
    "compacting fails closed; server failure fails closed",
    # chat name-collation migration
    "a case-sensitive legacy table is rebuilt with NOCASE uniqueness",
    # chat delivery selection
    "undelivered unread messages are pending; delivered ones are not",
    "read messages are never pending",
    "delivered-but-unread messages re-queue once the re-nudge window passes",
    "pending selection only covers the given sessions",
    "unregistering stops wake selection for kept-but-unread mail",
    # staleness
    "isStale flips on heartbeat age",
    "heartbeat refreshes last_seen for hosted sessions only",
    # chat identity directory binding
    "setup: register an alpha-project identity",
    "same-project as claim resolves; cross-project is refused",
    "a session-ID-based as claim is bound by the same rule",
    "a claimed row with a null project is refused (fail safe)",
    "an anchor miss falls through to `as` and is bound",
    "chat_register reclaim: same project confirms, cross project registers fresh",
    # chat transcript echo text
    "register echoes the claimed name; failures stay silent",
    "send echoes the resolved recipient name with a clipped body",
    "read echoes the inbox; empty inbox stays silent",
    "broadcast echoes the fan-out count with a clipped body",
    "list and unregister never echo",
    "chat_send surfaces the duplicate-suppression note on a retried send",
    "chat_send reports a split delivery so a caller cannot mistake it for one message",
    "every chat tool's real success output is a chatEchoText parse target",
    # name pool invariants
    "every pool name satisfies the shared charset",
    "no two pool names collide case-insensitively",
    # chat tail diff
    "new rows emit sent events; broadcast rows keep their recipient and set the flag",
    "topics ride through to sent and read events",
    "a row's read_at appearing emits a read event exactly once",
    "a message inserted and read between polls emits only its sent line",
    "JSONL rendering: one JSON object per event, sent and read distinct, linked by id",
    # ChatPoller
    "poll heartbeats hosted sessions",
    "messages wait while the gate is closed, then deliver when idle",
    "split parts arrive as ONE grouped nudge, not one per part",
    "delivery failure leaves messages pending",
    "unhosted sessions are never delivered to",
    "the nudge rate cap stops repeated wake prompts",
    "the cap counts a nudge even when the delivered_at stamp fails",
    "re-nudges fire after the renudge window passes",
    "senders deduplicate across a batch",
    "a departed sender renders as unknown in the wake prompt",
    "the poller's hourly sweep prunes stale auto rows",
    "start/stop/dispose manage the timer",
    # chat tail time bounds
    "date-only parses as local midnight; HH:MM parses in local time",
    "malformed and impossible values are rejected",
    # chat tail row filter
    "match regexes AND together and test the body only",
    "from/to substrings match rendered names case-insensitively",
    "since/until form a half-open window on created_at",
    "absent bounds keep every row that passes the other filters",
    "broadcast rows match their real recipient; departed participants match their rendered strings",
    # chat tail backlog
    "limit renders the last N rows and counts the elided rest",
    "a null limit keeps everything and elides nothing",
    "already-read messages emit their read event in the snapshot, in time order",
    "filters shrink the feed before the limit applies",
    "state seeds from every feed row, matching or not",
    "a rendered-name flip in follow mode resurfaces no sent events",
    "follow diffs over the seeded state re-emit no sent events",
    "a new matching row in follow mode emits, a non-matching one does not",
    # host-pid identity anchor
    "records and resolves a fresh mapping when the session exists",
    "stale mappings are ignored (pid reuse hazard)",
    "mapping to a pruned session resolves to null",
    "re-registration under the same session id revives the mapping",
    # continuation adoption
    "continuedInTarget reads the hand-off record from the file tail",
    "scanPredecessorTranscript finds the sibling handing off to this session",
    "resolveRegisteredPredecessor walks to the nearest registered ancestor",
    "continueSession moves the identity, mail, anchors, and tombstone",
    "continueSession with no old row is a no-op",
    # chat name reclaim after reap
    "a reaped auto session reclaims its name; other sessions never do",
)

QUOTED = re.compile(r'^"([^"]+)"')


def _flat(text: str) -> str:
    return " ".join(text.split())


def docstring_titles() -> dict[str, str]:
    """Test node -> the quoted title opening its docstring (None when it has none)."""
    out = {}
    for path in sorted(HERE.glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                m = QUOTED.match(_flat(ast.get_docstring(node) or ""))
                out[f"{path.name}::{node.name}"] = m.group(1) if m else None
    return out


def readme_titles() -> list[str]:
    text = (HERE / "README.md").read_text(encoding="utf-8")
    section = text.split("## Cases not modelled", 1)[1]
    items = re.split(r"\n- ", "\n" + section.strip())
    return [m.group(1) for m in (QUOTED.match(_flat(i)) for i in items if i.strip()) if m]


def test_real_titles_are_distinct():
    """The catalogue itself lists each real title once (119 cases)."""
    assert len(REAL_TITLES) == len(set(REAL_TITLES)) == 119


def test_every_test_names_a_real_case():
    """Every test in this package opens its docstring with a real title."""
    titles = docstring_titles()
    assert titles, "no ported tests found"
    assert [node for node, title in titles.items() if title is None] == []
    assert sorted(t for t in titles.values() if t not in REAL_TITLES) == []


def test_every_real_case_named_exactly_once():
    """Each real title is named by exactly one docstring or README item, and the README names only real titles."""
    readme = readme_titles()
    assert sorted(t for t in readme if t not in REAL_TITLES) == []
    counts = collections.Counter(list(docstring_titles().values()) + readme)
    assert {t: counts[t] for t in REAL_TITLES if counts[t] != 1} == {}
