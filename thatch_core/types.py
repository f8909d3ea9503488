"""Frozen result types of the store (the contract in docs/api-contract.md)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SessionRow:
    """One directory row of ``chat_sessions``."""

    session_id: str
    name: str
    topic: str | None
    project: str | None
    host_kind: str
    auto: bool
    worktree: str | None
    registered_at: str
    last_seen: str


@dataclass(frozen=True)
class RegisterResult:
    """Outcome of ``ChatStore.register``.

    ``drawn``: a fresh name was minted; ``reclaimed``: an existing row kept
    its name; ``tombstoned``: a leave tombstone refused the registration;
    ``rejoined``: an explicit registration cleared a leave tombstone (so
    ``name`` is a fresh one).
    """

    ok: bool
    session_id: str
    name: str | None = None
    drawn: bool = False
    reclaimed: bool = False
    tombstoned: bool = False
    topic: str | None = None
    error: str | None = None
    rejoined: bool = False
    # The later design's name claims: a pruned session got its old name back.
    claimed: bool = False


@dataclass(frozen=True)
class SendResult:
    """Outcome of ``ChatStore.send``; ``recipient_stale`` is ``is_stale`` at send time."""

    ok: bool
    error: str | None = None
    message_id: int | None = None
    recipient: SessionRow | None = None
    recipient_stale: bool = False
    # A messaging policy decided the outcome (thatch_core.policy): the held
    # message's id and the reply that says so; None under thatch's design.
    held_id: int | None = None
    reply: str | None = None
    # The later design (thatch_core.later): every stored part's id, and a retry
    # that stored nothing because an identical copy is still unread.
    message_ids: tuple[int, ...] = ()
    suppressed: bool = False
    parts: int = 1


@dataclass(frozen=True)
class BroadcastResult:
    """Outcome of ``ChatStore.broadcast``: recipient and skipped display names."""

    ok: bool
    error: str | None = None
    recipients: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    message_ids: tuple[int, ...] = ()
    # Recipients whose inbound policy held or refused the message (thatch_core.policy).
    held: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    # The later design: recipients whose identical copy is still unread (counted as delivered,
    # nothing stored again), and how many parts each recipient got.
    suppressed: tuple[str, ...] = ()
    parts: int = 1


@dataclass(frozen=True)
class InboxItem:
    """A message as the reader sees it; ``from_name`` is already rendered."""

    id: int
    from_session: str
    from_name: str
    body: str
    created_at: str


@dataclass(frozen=True)
class StatusResult:
    """``chat_status``: registered flag plus pending and total inbox counts."""

    registered: bool
    name: str | None = None
    pending: int = 0
    total: int = 0


@dataclass(frozen=True)
class NotificationRow:
    """A message due a wake prompt; ``from_name`` is None for a departed sender."""

    id: int
    to_session: str
    from_session: str
    from_name: str | None


@dataclass(frozen=True)
class FeedRow:
    """One ``chat tail`` feed row; ``from_``/``to`` are rendered participants,
    ``from_topic``/``to_topic`` their directory rows' topics (None without a row)."""

    id: int
    from_: str
    to: str
    from_session: str
    to_session: str
    via_broadcast: bool
    body: str
    created_at: str
    read_at: str | None
    from_topic: str | None = None
    to_topic: str | None = None


@dataclass(frozen=True)
class PruneResult:
    """One prune pass: pruned session ids, expired tombstone ids, swept mail count."""

    pruned: tuple[str, ...] = ()
    expired_tombstones: tuple[str, ...] = ()
    swept_messages: int = 0


@dataclass(frozen=True)
class ReviewResult:
    """A user's approve / decline of a held message (thatch_core.policy)."""

    ok: bool
    text: str
    held_id: int | None = None
    message_id: int | None = None
