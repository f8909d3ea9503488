"""Timing and size constants of cross-session chat (seeds/000 "Defaults").

One module so the poller, the store, the tools and the CLI agree on what
"stale", "due for a re-nudge" and "too long" mean.
"""

from __future__ import annotations

import os

POLL_INTERVAL_MS = 30_000
# Two missed beats, not one, so a single late poll cycle does not flap the roster.
STALE_MS = 2 * POLL_INTERVAL_MS
RENUDGE_MINUTES = 15
MAX_NUDGES_PER_HOUR = 6
NUDGE_WINDOW_MS = 3_600_000
AUTO_TTL_DAYS = 7
TOMBSTONE_TTL_DAYS = 7
PRUNE_INTERVAL_MS = 3_600_000
HOST_PID_FRESH_S = 600
MAX_BODY_LEN = 10_000
MAX_TOPIC_LEN = 80
TAIL_DEFAULT_LIMIT = 20
CONTINUATION_MAX_HOPS = 10
# Cursor's own `loop_limit` for the stop hook, as thatch's Cursor hooks config sets it:
# Cursor, not the hook, stops a chain of consecutive follow-ups there.
CURSOR_FOLLOWUP_CAP = 3
CLI_STALE_DAYS_DEFAULT = 1
ECHO_CLIP = 200
# The read echo clips the whole framed inbox, so it gets a longer budget than a body.
READ_ECHO_CLIP = 1500

DAY_MS = 86_400_000
REHOST_GRACE_ENV = "THATCH_CHAT_REHOST_GRACE_MINUTES"
_REHOST_GRACE_DEFAULT_MS = 86_400_000


def rehost_grace_ms(environ: "os._Environ[str] | dict[str, str] | None" = None) -> int:
    """The rehost grace window, honouring ``THATCH_CHAT_REHOST_GRACE_MINUTES``.

    A missing, empty, non-numeric or negative override falls back to the
    24 h default rather than failing a daemon start over a typo.
    """
    env = os.environ if environ is None else environ
    raw = (env.get(REHOST_GRACE_ENV) or "").strip()
    try:
        minutes = float(raw)
    except ValueError:
        return _REHOST_GRACE_DEFAULT_MS
    if minutes < 0 or minutes != minutes:  # NaN check
        return _REHOST_GRACE_DEFAULT_MS
    return int(minutes * 60_000)


# Read once at import, like the TypeScript module constant; call
# rehost_grace_ms() to re-read the environment.
REHOST_GRACE_MS = rehost_grace_ms()
