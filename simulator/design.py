"""The design's numbers and formats, stated by the simulator itself.

The checkers and the engine's samplers judge thatch_core against these, so
they are written here from the design (docs/rules.md), never imported from
thatch_core: a wrong threshold, id derivation or line format there must
not move its own yardstick.
"""

from __future__ import annotations

import hashlib
import re

SECOND_MS = 1_000
MINUTE_MS = 60_000
HOUR_MS = 3_600_000

# R14: stale = no beat for two intervals; exactly 60 s is still fresh.
STALE_MS = 60_000
# R14: one beat every 30 s (two missed beats make a session stale), unless a scenario says otherwise.
DEFAULT_POLL_MS = 30_000
# R22: at most 6 wakes per recipient per rolling hour, per process lifetime.
MAX_WAKES_PER_HOUR = 6
# R18: unread mail delivered more than 15 minutes ago needs a wake again.
RENUDGE_MS = 15 * MINUTE_MS
# R15: a restarted daemon re-hosts the dead one's sessions for up to 24 h (overridable).
DEFAULT_REHOST_GRACE_MS = 86_400_000
# R33: a continuation chain is walked at most 10 hops to a registered ancestor.
MAX_CONTINUATION_HOPS = 10

# R31: an MCP-host conversation's chat id.
MCP_ID_PREFIX = "mcp_"

# R31/R36: the hook line printed at session start and on every prompt.
HOOK_LINE_RE = re.compile(r"^thatch chat: you are (?P<name>\S+) \((?P<unread>\d+) unread\)")


def mcp_session_id(host_session_id: str) -> str:
    """`mcp_` + the first 12 hex digits of sha256(host session id) (R31)."""
    return MCP_ID_PREFIX + hashlib.sha256(host_session_id.encode("utf-8")).hexdigest()[:12]


def is_stale(last_seen_ms: int | None, now_ms: int) -> bool:
    """More than 60 s since the last beat; no readable beat at all counts as stale (R14)."""
    return last_seen_ms is None or now_ms - last_seen_ms > STALE_MS
