"""The reference model's prediction of each tool reply (P11), one function per tool.

Each judge computes the set of reply classes the allowed states give (ok,
or which refusal), fails on a class outside it, then checks what the reply
says against what the model knows, and applies the call's effect to the
model. See `simulator.checks.model` for the state and its uncertainty.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from simulator.checks.model import Box, Model
from simulator.checks.view import Call
from simulator.design import MAX_BODY_CHARS, MCP_ID_PREFIX, NAME_RE
from simulator.replies import (
    BROADCAST, DISABLED, EMPTY_BODY, EMPTY_INBOX, FRAMED, LEFT, NOT_REGISTERED, OTHER, REGISTERED, SELF, SENT, TOO_LONG,
    UNKNOWN_TO, UNREGISTERED, Outcome,
)

# A messaging policy's answer to a send or a broadcast (held, capped, exited, refused inbound): one class here.
POLICY = "policy"

# Characters the store refuses in a body on grounds of its own (controls, lone surrogates): not modeled.
_ODD_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


def body_class(body: Any) -> Optional[str]:
    """`empty`, `too_long` or `ok` for a body (R9); None when the model does not judge it."""
    if not isinstance(body, str) or _ODD_CHARS.search(body):
        return None
    trimmed = body.strip()
    if not trimmed:
        return EMPTY_BODY
    units = len(trimmed.encode("utf-16-le")) // 2
    if len(trimmed) <= MAX_BODY_CHARS < units:
        return None  # characters outside the BMP: one or two to a count, either may be meant
    return TOO_LONG if len(trimmed) > MAX_BODY_CHARS else "ok"


def send_class(o: Outcome) -> str:
    """The class of a send or broadcast reply: its kind, a messaging policy's answers as one class."""
    return POLICY if o.policy else o.kind


def regs(m: Model, sid: Optional[str], racy: bool) -> set[bool]:
    """The registered states `sid` may be in during the call."""
    if sid is None:
        return {False}
    known = m.reg.get(sid)
    return {True, False} if known is None or racy else {known}


def judge(m: Model, c: Call, allowed: set[str], cls: str, what: str) -> bool:
    """Fail a reply whose class is outside `allowed` ("other" is never judged: a store failure, a
    crashed server, an argument the model does not state)."""
    if cls == OTHER:
        return False
    m.judged += 1
    if cls not in allowed:
        m.surprise(f"{what} of {c.session} (step {c.step})", " or ".join(sorted(allowed)) or "nothing",
                   f"{cls}: {c.text[:160]!r}", c.witness())
        return False
    return True


def pre_body(enabled: set[bool], body: Any, allowed: set[str]) -> bool:
    """The refusals every send and broadcast meets first (R29, R9); True when the call gets further."""
    if False in enabled:
        allowed.add(DISABLED)
    if True not in enabled:
        return False
    bc = body_class(body)
    if bc is None:
        allowed.update((EMPTY_BODY, TOO_LONG))
        return True
    if bc != "ok":
        allowed.add(bc)
        return False
    return True


def check_senders(m: Model, c: Call, entries: list[tuple[str, str]]) -> None:
    """R32: a drained message shows the name of the session that sent it. The model knows the
    sender only where a Claude Code call acted as its anchored conversation (a claimed `as`
    changes nothing there); it judges those while the sender's row is registered under one name
    (the inbox shows the sender's current name, and an id once the row is gone)."""
    if m.loose:
        return
    for shown, body in entries:
        sids = m.senders.get(body)
        if not sids or None in sids or body in m.ghosts or any(m.reg.get(sid) is not True for sid in sids):
            continue
        names = {m.names[sid].lower() for sid in sids if sid in m.names}
        if not names or any(m.legacy_twin(n) for n in names):
            continue
        m.judged += 1
        if shown.lower() not in names:
            m.surprise(f"the sender of {body[:40]!r} in chat_read by {c.session} (step {c.step})",
                       f"from {' or '.join(sorted(names))}: the Claude Code call acted as its anchored "
                       "conversation, whatever name it claimed (R32)", f"from {shown}", c.witness())


def recipients_of(m: Model, to: Any, ident: Optional[str], racy: bool) -> set[str]:
    """The classes a send by `ident` (registered) to `to` may end in (R9): resolved by name
    (case-insensitively) then id; unknown, oneself, or sent."""
    rcpts = m.by_name(str(to), unregistered=racy)
    out: set[str] = set()
    if racy or not any(m.reg.get(r) is True for r in rcpts):
        out.add(UNKNOWN_TO)
    for r in rcpts:
        out.add(SELF if r == ident else SENT)
    if not rcpts and m.may_be_unknown_row(str(to)):
        out.update((SENT, SELF))
    if m.loose:
        out.add(POLICY)
    return out


def judge_send(m: Model, c: Call, enabled: set[bool], racy: bool) -> None:
    ids, certain = m.identities(c)
    allowed: set[str] = set()
    body_ok = pre_body(enabled, c.body_arg, allowed)
    if True in enabled:
        for ident in ids:
            states = regs(m, ident, racy)
            if False in states:
                allowed.add(UNREGISTERED)  # R9 orders neither refusal first: a bad body or the caller's
            if body_ok and True in states:
                allowed |= recipients_of(m, c.to, ident, racy)
    cls = send_class(c.outcome)
    if cls == OTHER:
        m.ghosts.add(c.body)
        return
    if not judge(m, c, allowed, cls, "chat_send reply") or cls != SENT:
        return
    to, id12 = c.outcome.to, c.outcome.to_id12
    ident = m.acting(ids, racy)
    if ident and ident[:12] == id12:
        m.surprise(f"chat_send to {to}", "a refusal (to oneself)", f"sent to the caller's own id {id12}", c.witness())
    sure = [sid for sid in m.by_name(c.to) if m.reg.get(sid) is True]
    if not racy and len(sure) == 1 and (sure[0][:12] != id12 or to.lower() != m.names.get(sure[0], to).lower()):
        m.surprise(f"chat_send of {c.session} (step {c.step})",
                   f"sent to {m.names.get(sure[0])} ({sure[0][:12]})", f"sent to {to} ({id12})", c.witness())
    m.note_sender(c.body, m.anchored(c))
    targets = [sid for sid in m.by_name(to) if sid[:12] == id12] or [sid for sid in m.reg if sid[:12] == id12]
    if len(targets) == 1 and not m.loose:
        m.deliver(targets[0], c.body, not racy)
    else:
        m.ghosts.add(c.body)


def judge_broadcast(m: Model, c: Call, enabled: set[bool], racy: bool) -> None:
    ids, certain = m.identities(c)
    allowed: set[str] = set()
    body_ok = pre_body(enabled, c.body_arg, allowed)
    if True in enabled:
        for ident in ids:
            states = regs(m, ident, racy)
            if False in states:
                allowed.add(UNREGISTERED)  # R9 orders neither refusal first
            if body_ok and True in states:
                allowed.add(BROADCAST)
        if m.loose and body_ok:
            allowed.add(POLICY)
    cls = send_class(c.outcome)
    if cls == OTHER:
        m.ghosts.add(c.body)
        return
    m.note_sender(c.body, None)
    if judge(m, c, allowed, cls, "chat_broadcast reply") and cls == BROADCAST:
        broadcast_reply(m, c, ids, racy)


def broadcast_reply(m: Model, c: Call, ids: list[Optional[str]], racy: bool) -> None:
    """Who a broadcast reached and skipped (R12, R35): never the sender, every other registered row
    either way, a stale opencode row skipped, an mcp row never; one message per recipient."""
    got, skipped = c.outcome.recipients, c.outcome.skipped
    both = {n.lower() for n in got} | {n.lower() for n in skipped}
    ident = m.acting(ids, racy)
    senders = {ident} if ident else set(ids)
    me = m.names.get(ident or "")
    if me and me.lower() in both and not m.legacy_twin(me):
        m.surprise("chat_broadcast fan-out", "every registered session but the sender", f"it reached {me}",
                   c.witness())
    for name in skipped:
        if any(sid.startswith(MCP_ID_PREFIX) for sid in m.by_name(name)) and not m.legacy_twin(name):
            m.surprise("chat_broadcast skips", "an mcp row always receives (R35)", f"{name} skipped as stale",
                       c.witness())
    if not racy and not m.loose:
        for sid, state in m.reg.items():
            name = m.names.get(sid)
            if state is True and sid not in senders and name and name.lower() not in both \
                    and not m.renamed_twin_in(name, both):
                m.surprise("chat_broadcast fan-out", f"{name} among the recipients or the skipped",
                           f"recipients: {', '.join(got) or '(none)'}", c.witness())
            if state is False and name and name.lower() in {n.lower() for n in got} and not m.by_name(name):
                m.surprise("chat_broadcast fan-out", f"no mail for {name} (not registered)",
                           f"recipients: {', '.join(got)}", c.witness())
    for name in got:
        sids = m.by_name(name)
        if len(sids) == 1 and not m.loose:
            m.deliver(sids[0], c.body, not racy)
        else:
            m.ghosts.add(c.body)


def judge_read(m: Model, c: Call, enabled: set[bool], racy: bool) -> None:
    ids, certain = m.identities(c)
    allowed = {DISABLED} if False in enabled else set()
    if True in enabled:
        for ident in ids:
            states = regs(m, ident, racy)
            if False in states:
                allowed.add(UNREGISTERED)
            if True in states:
                allowed.update((EMPTY_INBOX, FRAMED))
    cls = c.outcome.kind
    if cls == OTHER:
        for sid in ids:
            if sid:
                m.box(sid).blur()
        m.blurred_reads.add(c.session or "")
        return
    if not judge(m, c, allowed, cls, "chat_read reply") or cls not in (EMPTY_INBOX, FRAMED):
        return
    entries = [(msg.sender, msg.body) for msg in c.outcome.messages] if cls == FRAMED else []
    bodies = [body for _, body in entries]
    check_senders(m, c, entries)
    for sid in ids:
        if sid:
            m.returned.setdefault(m.view.names.label_of.get(sid, sid), []).extend(bodies)
    m.returned.setdefault(c.session or "", []).extend(bodies)
    ident = m.acting(ids, racy)
    if ident is not None and m.reg.get(ident) is not False:
        drain(m, c, ident, bodies, strict=not racy and m.reg.get(ident) is True)
    else:
        pending = m.pending_bodies(c)
        for sid in ids:
            if sid:
                box = m.box(sid)
                for body, k in zip(bodies, take(box, bodies)):
                    if k < 0 and body in pending:
                        m.consumed[(sid, body)] = m.consumed.get((sid, body), 0) + 1
                box.blur()
                box.exact = False


def take(box: Box, bodies: list[str]) -> list[int]:
    """Remove the returned bodies from `box` (each the first unmatched message of that body, in
    order); the positions matched, -1 for a body the box did not hold."""
    used: list[int] = []
    for body in bodies:
        k = next((k for k, msg in enumerate(box.msgs) if k not in used and msg.body == body), -1)
        used.append(k)
    box.msgs = [msg for k, msg in enumerate(box.msgs) if k not in used]
    return used


def drain(m: Model, c: Call, sid: str, bodies: list[str], strict: bool) -> None:
    """A read by a certain identity (R10): every certain unread message, oldest first, and nothing
    the model did not see arrive (unless the box is inexact, a cut send may have landed, or a send
    still open committed before the read)."""
    box = m.box(sid)
    before = list(box.msgs)
    used = take(box, bodies)
    where = f"chat_read by {c.session} (step {c.step})"
    pending = m.pending_bodies(c)
    for body, k in zip(bodies, used):
        if k < 0 and body in pending:
            m.consumed[(sid, body)] = m.consumed.get((sid, body), 0) + 1
        elif k < 0 and box.exact and body not in m.ghosts:
            m.surprise(where, "only the unread mail: " + _short([x.body for x in before]),
                       f"it returned {body[:60]!r}", c.witness())
    left = [msg.body for msg in box.msgs if msg.certain]
    if not strict:
        return
    if left:
        m.surprise(where, "all unread mail: " + _short([x.body for x in before]),
                   f"it left {_short(left)} unread", c.witness())
    picked = [k for k in used if k >= 0 and before[k].certain]
    if picked != sorted(picked) and getattr(m.view.spec, "dispatch", "serial") != "concurrent":
        m.surprise(where, "oldest first: " + _short([before[k].body for k in sorted(picked)]),
                   _short([before[k].body for k in picked]), c.witness())


def _short(bodies: list[str]) -> str:
    return "[" + ", ".join(repr(b[:40]) for b in bodies[:6]) + (", ..." if len(bodies) > 6 else "") + "]"


def mail_count(m: Model, c: Optional[Call], sid: str, pending: int, what: str, events: list[Any]) -> None:
    """An unread count a reply states (R34, R31) against the model's inbox of `sid`."""
    lo, hi = m.box(sid).bounds(bool(m.ghosts) or bool(m.pending))
    m.judged += 1
    if not lo <= pending <= hi:
        want = str(lo) if lo == hi else f"{lo} or more" if hi == float("inf") else f"{lo} to {int(hi)}"
        m.surprise(what, f"{want} unread", f"{pending} unread", events)


def judge_status(m: Model, c: Call, enabled: set[bool], racy: bool) -> None:
    ids, certain = m.identities(c)
    allowed = {DISABLED} if False in enabled else set()
    if True in enabled:
        for ident in ids:
            states = regs(m, ident, racy)
            allowed.update((REGISTERED if s else NOT_REGISTERED) for s in states)
    text, status = c.text, c.outcome
    cls = status.kind
    if not judge(m, c, allowed, cls, "chat_status reply") or cls != REGISTERED:
        return
    pending, total = status.pending, status.total
    if pending > total:
        m.surprise(f"chat_status of {c.session}", "pending at most the total", text[:120], c.witness())
    ident = m.acting(ids, racy)
    if ident is not None and not racy:
        name = m.names.get(ident)
        if name and name.lower() != status.name.lower():
            m.surprise(f"chat_status of {c.session}", f"registered as {name}", text[:120], c.witness())
        mail_count(m, c, ident, pending, f"chat_status of {c.session} (step {c.step})", c.witness())
    named = [s for s in ids if s and m.names.get(s, "").lower() == status.name.lower()]
    for sid in [ident] if ident else named:
        m.touches.setdefault(sid, []).append((c.call.t if c.call else c.t, c.result))


def judge_register(m: Model, c: Call, enabled: set[bool], racy: bool) -> None:
    """chat_register (R2, R6): a registered caller keeps its name, one that left gets a fresh name,
    a new one draws a fresh name; a fresh name was never held by anyone before."""
    reg = c.outcome
    if reg.kind != REGISTERED:
        judge(m, c, {DISABLED} if False in enabled else {REGISTERED}, DISABLED if reg.kind == DISABLED else OTHER,
              "chat_register reply")
        if reg.kind != DISABLED:
            for sid in m.identities(c)[0]:
                m.know(sid, None)
        return
    judge(m, c, {REGISTERED} if True in enabled else {DISABLED}, REGISTERED, "chat_register reply")
    name, sid, origin = reg.name, reg.session_id, reg.origin
    state = None if racy or sid is None else m.reg.get(sid)
    where = f"chat_register of {c.session} (step {c.step})"
    kept_as = m.names.get(sid, name)
    if state is True and (origin != "kept" or (name.lower() != kept_as.lower()
                                               and not m.renamed_twin_in(kept_as, {name}))):
        m.surprise(where, f"kept name {m.names.get(sid)}", f"{origin}: {name}", c.witness())
    elif state is False and origin == "kept":
        m.surprise(where, "a fresh name (the session was not registered)", f"kept: {name}", c.witness())
    elif state is False and not racy and m.tomb.get(sid) is not None and origin is not None:
        want = "rejoined" if m.tomb.get(sid) else "drawn"
        if origin != want:
            m.surprise(where, f"origin {want}", f"origin {origin}", c.witness())
    if origin in ("rejoined", "drawn"):
        fresh_name(m, c, name, where)
    m.know(sid, True, name, c.session)
    m.tomb[sid or ""] = False


def fresh_name(m: Model, c: Call, name: str, where: str) -> None:
    """A freshly minted name (R2): of the pool's shape and never held before, by anyone."""
    m.judged += 1
    if not NAME_RE.match(name):
        m.surprise(where, "an assigned name (pool base and a counter)", name, c.witness())
    holder = m.owner.get(name.lower())
    if holder is not None:
        m.surprise(where, "a name never held before (names are never reissued)",
                   f"{name}, held before by {holder}", c.witness())


def judge_unregister(m: Model, c: Call, enabled: set[bool], racy: bool) -> None:
    ids, certain = m.identities(c)
    allowed = {DISABLED} if False in enabled else set()
    if True in enabled:
        for ident in ids:
            states = regs(m, ident, racy)
            allowed.update((LEFT if s else NOT_REGISTERED) for s in states)
            if ident is None:
                allowed.add(UNREGISTERED)
    cls = c.outcome.kind
    if cls == OTHER:
        for sid in ids:
            m.know(sid, None)
            m.tomb[sid or ""] = None
        return
    judge(m, c, allowed, cls, "chat_unregister reply")
    if cls in (LEFT, NOT_REGISTERED):  # a leave writes its tombstone even with no row (seed 000)
        for sid in ids:
            if sid and (certain or m.reg.get(sid) is not False):
                m.know(sid, False if certain else None)
                m.tomb[sid] = True if certain else None
                if certain:
                    m.leaves.append((sid, c.result))
