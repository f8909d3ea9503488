"""Messaging policies: thatch's design and the options a peer design offers instead.

thatch bounds a ping-pong loop at the receiver (at most 6 wake prompts per
recipient per rolling hour, R22), delivers every message to a registered
recipient, refuses unregistered senders (R8), and tells a sender whose
recipient is stale that the message will wait (R9). The peer product's
design (seed 003) answers the same problems with other options; each is one
field of :class:`Policy`, so a set of them can be composed and compared:

- ``sender_cap``: after N messages to the same session with no message from
  the sender's user in between, further sends to it are refused until the
  user writes again (None: no cap, thatch);
- ``inbound``: what a session does with incoming messages: ``accept``
  (deliver into its next turn, thatch), ``hold`` (park for its user's
  approval), ``refuse`` (decline everything and tell the sender), or ``auto``
  (unset: hold when the session bypasses permission checks, accept when it
  still asks for confirmation);
- ``repository_inbound``: a repository setting, which may only tighten;
- ``permissions`` / ``interactive``: how the host session runs, the inputs
  of the ``auto`` fallback; with nobody to review (not interactive), a
  message the fallback would have held is refused instead;
- ``unregistered``: a sender with no directory row is refused (thatch, R8) or
  held for approval;
- ``exited``: a send to a peer that has exited (stale harness, or left) is
  stored with a note (thatch) or refused with a reply saying so;
- ``dialog_expiry_ms``: the user's dialog expiry (None: never). Seed 003:
  ``never`` lifts the deadline of other dialogs but not of the approval
  prompt, which then waits the default five minutes
  (:func:`approval_expiry_ms`), so one unanswered prompt cannot keep every
  later message from asking;
- ``wake_cap``: thatch's receiver-side cap (None: none).

The real thatch's later design (docs/dev/features/cross-session-chat.md,
newer than seed 000) adds answers to incidents its users hit; each is an
option here too, off by default (:data:`LATER` has them all on; the logic
is :mod:`thatch_core.later`):

- ``retry_dedup_ms``: a send (or a broadcast's per-recipient batch) that
  repeats one still unread within this window is not stored again;
- ``machinery_markers``: the plugin's own children are marked durably and
  never auto-register;
- ``split_part_len`` / ``max_body_chars``: long bodies are split into parts
  instead of refused, under a larger whole-body cap;
- ``paged_reads``: chat_read clips each message to a page and pages through
  one message on request;
- ``name_claims``: a pruned auto row's own session gets its old name back;
- ``project_bound_as``: a claimed ``as`` must belong to the caller's project;
- ``mcp_project_env``: the MCP server reads ``THATCH_PROJECT_DIR`` first.

This module is the options and their pure logic; the tables and queries are
in :mod:`thatch_core.policy_store`. :data:`DEFAULT` is thatch's design
exactly: with it nothing here changes what the store, tools or poller do.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any, Callable

from thatch_core.constants import MAX_BODY_LEN, MAX_NUDGES_PER_HOUR

INBOUND = ("accept", "hold", "refuse", "auto")
REPOSITORY_INBOUND = ("hold", "refuse")
PERMISSIONS = ("ask", "bypass")
UNREGISTERED = ("refuse", "hold")
EXITED = ("note", "refuse")
DIALOG_EXPIRY_MS = 300_000
_STRICTNESS = {"accept": 0, "hold": 1, "refuse": 2}

# Where a session's standing inbound decision came from (the texts name it).
SOURCE_USER, SOURCE_REPOSITORY, SOURCE_FALLBACK = "user", "repository", "fallback"
# A hold that would have asked the user, refused because nobody is there to ask.
NOBODY_TO_REVIEW = "nobody-to-review"

# Held-message states (chat_held.state).
HELD, APPROVED, DECLINED, EXPIRED = "held", "approved", "declined", "expired"

# The tables of the policies, created with the rest of the schema (thatch_core.db).
# chat_inbound: what each hosted session does with incoming mail, published by its host.
# chat_held: messages parked for review; an approved one is copied into chat_messages.
# chat_send_counts: sends per (sender, recipient) since the sender's user last wrote.
POLICY_DDL = (
    "CREATE TABLE IF NOT EXISTS chat_inbound ("
    " session_id TEXT PRIMARY KEY, action TEXT NOT NULL, prompts INTEGER NOT NULL,"
    " source TEXT NOT NULL, unregistered TEXT NOT NULL, interactive INTEGER NOT NULL,"
    " expiry_ms INTEGER)",
    "CREATE TABLE IF NOT EXISTS chat_held ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, from_session TEXT NOT NULL, to_session TEXT NOT NULL,"
    " body TEXT NOT NULL, created_at TEXT NOT NULL, reason TEXT NOT NULL, deadline TEXT,"
    " state TEXT NOT NULL DEFAULT 'held', decided_at TEXT, message_id INTEGER)",
    "CREATE TABLE IF NOT EXISTS chat_send_counts ("
    " from_session TEXT NOT NULL, to_session TEXT NOT NULL, sent INTEGER NOT NULL,"
    " PRIMARY KEY (from_session, to_session))",
)


@dataclass(frozen=True)
class Policy:
    """One composition of the options (see the module docstring); the defaults are thatch's."""

    sender_cap: int | None = None
    inbound: str = "accept"
    repository_inbound: str | None = None
    permissions: str = "ask"
    interactive: bool = True
    unregistered: str = "refuse"
    exited: str = "note"
    dialog_expiry_ms: int | None = DIALOG_EXPIRY_MS
    wake_cap: int | None = MAX_NUDGES_PER_HOUR
    # The later design's options (thatch_core.later); None / False / MAX_BODY_LEN: seed 000's design.
    retry_dedup_ms: int | None = None
    machinery_markers: bool = False
    split_part_len: int | None = None
    max_body_chars: int = MAX_BODY_LEN
    paged_reads: bool = False
    name_claims: bool = False
    project_bound_as: bool = False
    mcp_project_env: bool = False

    @property
    def is_default(self) -> bool:
        return self == DEFAULT

    @property
    def later(self) -> frozenset[str]:
        """The later design's options that are on here (their field names)."""
        return frozenset(name for name in LATER_OPTIONS if getattr(self, name) != getattr(DEFAULT, name))

    @property
    def messaging_default(self) -> bool:
        """True when the seed-003 messaging options are thatch's (the later ones may differ)."""
        return replace(self, **{name: getattr(DEFAULT, name) for name in LATER_OPTIONS}) == DEFAULT

    @property
    def nudges_per_hour(self) -> int:
        """The poller's cap: none is a count no rolling hour reaches."""
        return self.wake_cap if self.wake_cap is not None else 1 << 62


LATER_OPTIONS = ("retry_dedup_ms", "machinery_markers", "split_part_len", "max_body_chars", "paged_reads",
                 "name_claims", "project_bound_as", "mcp_project_env")
DEFAULT = Policy()
# The later design: every later option at the real thatch's value.
LATER = Policy(retry_dedup_ms=10_000, machinery_markers=True, split_part_len=2000, max_body_chars=20_000,
               paged_reads=True, name_claims=True, project_bound_as=True, mcp_project_env=True)


def _positive_or_none(v: Any) -> bool:
    return v is None or (type(v) is int and v >= 1)

# config.json key (camelCase, like the other chat switches) -> (field, allowed values or a check).
_CONFIG_KEYS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "senderCap": ("sender_cap", lambda v: v is None or (type(v) is int and v >= 1)),
    "inbound": ("inbound", lambda v: v in INBOUND),
    "repositoryInbound": ("repository_inbound", lambda v: v is None or v in REPOSITORY_INBOUND),
    "permissions": ("permissions", lambda v: v in PERMISSIONS),
    "interactive": ("interactive", lambda v: isinstance(v, bool)),
    "unregistered": ("unregistered", lambda v: v in UNREGISTERED),
    "exited": ("exited", lambda v: v in EXITED),
    "dialogExpiryMs": ("dialog_expiry_ms", lambda v: v is None or (type(v) is int and v >= 1)),
    "wakeCap": ("wake_cap", lambda v: v is None or (type(v) is int and v >= 1)),
    "retryDedupMs": ("retry_dedup_ms", _positive_or_none),
    "machineryMarkers": ("machinery_markers", lambda v: isinstance(v, bool)),
    "splitPartLen": ("split_part_len", _positive_or_none),
    "maxBodyChars": ("max_body_chars", lambda v: type(v) is int and v >= 1),
    "pagedReads": ("paged_reads", lambda v: isinstance(v, bool)),
    "nameClaims": ("name_claims", lambda v: isinstance(v, bool)),
    "projectBoundAs": ("project_bound_as", lambda v: isinstance(v, bool)),
    "mcpProjectEnv": ("mcp_project_env", lambda v: isinstance(v, bool)),
}


def policy_from_config(raw: Any, log: Callable[[str], None]) -> Policy:
    """`chat.policy` of the config file as a Policy. A wrong value falls back to
    thatch's for that option, loudly; an unknown key is named and ignored."""
    if raw is None:
        return DEFAULT
    if not isinstance(raw, dict):
        log(f"[thatch] config chat.policy should be an object, got {raw!r}; using thatch's design")
        return DEFAULT
    changes = {}
    for key, value in raw.items():
        if key not in _CONFIG_KEYS:
            log(f"[thatch] config chat.policy.{key} is not a policy option; ignored")
            continue
        name, ok = _CONFIG_KEYS[key]
        if ok(value):
            changes[name] = value
        else:
            log(f"[thatch] config chat.policy.{key} cannot be {value!r}; using {getattr(DEFAULT, name)!r}")
    return replace(DEFAULT, **changes)


def policy_to_config(policy: Policy) -> dict[str, Any]:
    """The options that differ from thatch's, in the config file's shape."""
    by_field = {name: key for key, (name, _) in _CONFIG_KEYS.items()}
    return {by_field[f.name]: getattr(policy, f.name) for f in fields(Policy)
            if getattr(policy, f.name) != getattr(DEFAULT, f.name)}


@dataclass(frozen=True)
class Standing:
    """What a session does with incoming mail, as its host publishes it (a chat_inbound row).

    ``action``: accept, hold or refuse for a registered sender; ``prompts``: a
    hold asks the user at once (a prompt that expires) rather than parking the
    message for a later review; ``source``: user, repository or fallback.
    """

    action: str
    prompts: bool
    source: str
    unregistered: str
    interactive: bool
    expiry_ms: int | None


def standing_of(policy: Policy) -> Standing:
    """The session's standing decision under `policy`.

    A hold the user configured is their standing instruction: parked without
    a prompt. A hold from the permission-mode fallback or a repository setting
    is a question put to the user: it prompts. With nobody to review (not
    interactive), a hold that would prompt is a refusal, so the sender is told
    at once; a value the user configured is honoured even there.
    """
    if policy.inbound == "auto":
        action = "hold" if policy.permissions == "bypass" else "accept"
        source = SOURCE_FALLBACK
    else:
        action, source = policy.inbound, SOURCE_USER
    repo = policy.repository_inbound
    if repo is not None and _STRICTNESS[repo] > _STRICTNESS[action]:
        action, source = repo, SOURCE_REPOSITORY
    prompts = source != SOURCE_USER
    if action == "hold" and prompts and not policy.interactive:
        action, source = "refuse", NOBODY_TO_REVIEW
    return Standing(action, prompts, source, policy.unregistered, policy.interactive, approval_expiry_ms(policy))


def approval_expiry_ms(policy: Policy) -> int:
    """How long an approval prompt waits: the dialog expiry, or its default when that is `never`
    (seed 003: `never` removes the deadline of other dialogs, not this one's)."""
    return DIALOG_EXPIRY_MS if policy.dialog_expiry_ms is None else policy.dialog_expiry_ms


@dataclass(frozen=True)
class Disposition:
    """What happens to one incoming message: deliver, hold or refuse, and why."""

    action: str
    reason: str = ""
    prompts: bool = False


DELIVER = Disposition("deliver")


def disposition(standing: Standing | None, *, sender_registered: bool) -> Disposition:
    """The recipient's decision for one message. No published standing is
    thatch's design: registered senders are delivered, unregistered refused (R8)."""
    if standing is None:
        return DELIVER if sender_registered else Disposition("refuse", "unregistered")
    if standing.action == "refuse":
        return Disposition("refuse", standing.source)
    if not sender_registered:
        # Whatever the permission mode: an address no registered session owns
        # is a trust question for the user, unless nobody is there to ask.
        if standing.unregistered != "hold":
            return Disposition("refuse", "unregistered")
        if not standing.interactive:
            return Disposition("refuse", NOBODY_TO_REVIEW)
        return Disposition("hold", "unregistered", prompts=True)
    if standing.action == "hold":
        return Disposition("hold", standing.source, prompts=standing.prompts)
    return DELIVER


def cap_reached(sent: int, policy: Policy) -> bool:
    """True when one more send to the same peer would exceed the sender cap."""
    return policy.sender_cap is not None and sent >= policy.sender_cap


def is_user_message(parts: Any) -> bool:
    """A prompt the user typed: text that no host or plugin marked synthetic
    (a wake prompt is synthetic; a transcript echo is filtered by the caller)."""
    if not isinstance(parts, (list, tuple)) or not parts:
        return False
    texts = [p for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    return bool(texts) and not any(p.get("synthetic") for p in texts)


# -- texts -------------------------------------------------------------------


def span(ms: int) -> str:
    """`60s`, `5m`, `1h` (the largest whole unit)."""
    for unit, size in (("h", 3_600_000), ("m", 60_000), ("s", 1_000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def excerpt(body: str, limit: int = 40) -> str:
    """The first line of a body, shortened for a notice or a review line."""
    line = body.strip().splitlines()[0] if body.strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def held_text(name: str, d: Disposition, expiry_ms: int | None) -> str:
    """The send's reply when the recipient holds the message; `expiry_ms` when
    its approval prompt has a deadline (None: it waits for a review)."""
    why = " (you are not registered, so its user is asked)" if d.reason == "unregistered" else ""
    if expiry_ms is not None:
        wait = f"; if nobody answers within {span(expiry_ms)} it expires and you are told"
    else:
        wait = "; it waits until its user reviews it"
    return f"Message to {name} is held for its user's approval{why}: its agent sees it only once approved{wait}."


def refused_text(name: str, d: Disposition) -> str:
    """The send's reply when the recipient refuses the message (nothing is stored)."""
    if d.reason == NOBODY_TO_REVIEW:
        return f"Not delivered: {name} runs with nobody to review held messages, so it refused this one instead."
    where = " (a repository setting)" if d.reason == SOURCE_REPOSITORY else ""
    return f"Not delivered: {name} refuses messages from other sessions{where}."


def cap_text(name: str, cap: int) -> str:
    return (f"Not sent: you have sent {name} {cap} message{'s' if cap != 1 else ''} since your user last wrote; "
            "further sends to it are refused until your user writes again.")


def exited_text(name: str, *, left: bool) -> str:
    why = "it left the chat" if left else "its harness stopped beating"
    return f"Not sent: {name} has exited ({why}); nothing was delivered."


def notice_body(held_id: int, to_name: str, body: str, outcome: str, expiry_ms: int | None) -> str:
    """The message a sender receives when its held message is declined or expires."""
    what = f'your held message #{held_id} to {to_name} ("{excerpt(body)}")'
    if outcome == EXPIRED:
        waited = f"within {span(expiry_ms)}" if expiry_ms is not None else "in time"
        return f"[chat notice] {what} expired: nobody reviewed it {waited}, so it was dropped (not refused)."
    return f"[chat notice] {what} was refused by its user and dropped."


def review_text(decision: str, held_id: int, sender: str) -> str:
    """The reply of a user's approve / decline of one held message."""
    if decision == APPROVED:
        return f"Approved held message #{held_id} from {sender}: it is delivered on the next turn."
    return f"Declined held message #{held_id} from {sender}: it was dropped and the sender told it was refused."


NOTHING_HELD = "No held message to review."
