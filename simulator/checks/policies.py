"""The messaging policies' promises, judged from the history and the final database (Q1-Q3).

A scenario (or `thatch-sim compare`) may run processes under options other
than thatch's design (simulator.scenario.policies). Each option makes a
promise of its own, stated here from the peer product's design (seed 003)
without reading thatch_core's policy code:

- Q1 sender-cap: under `sender_cap: N`, no session has a send to one peer
  accepted after N accepted sends to it with no message from its user in
  between, and none is refused by the cap before that;
- Q2 inbound: a send to a session is delivered, held or refused as that
  session's standing says (the `auto` fallback, a repository's tightening,
  nobody to review, unregistered senders); a held message reaches neither
  the recipient's inbox nor a read before its user approves it (never, when
  it is declined or expires); a refused one stores nothing;
- Q3 dropped-reported: a declined held message is reported to its sender as
  refused, one whose approval prompt ran out as expired (not refused), the
  expiry no earlier than the prompt's deadline and within one poll cycle of
  it; only a message whose prompt had a deadline expires.

They are judged only where a process runs under an option that makes the
promise; under thatch's design the list of verdicts is empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from simulator.checks.registry import Promise, judges, not_applicable, passed, prop, skipped, verdict
from simulator.checks.view import Call, RunView
from simulator.design import STAMP_RESOLUTION_MS
from simulator.replies import APPROVED, CAPPED, DECLINED, HELD, INBOUND_REFUSED, SENT, decode_notice
from simulator.events import USER_PROMPT
from simulator.result import Verdict
from simulator.scenario.model import Scenario
from simulator.scenario.policies import PolicyOptions, options_by_process
from simulator.scenario.durations import format_duration as span
from simulator.verdicts import PROMISE

_STRICT = {"accept": 0, "hold": 1, "refuse": 2}
_WORD = {"deliver": "delivered", "hold": "held", "refuse": "refused"}


# -- the rules, restated ---------------------------------------------------------------


@dataclass(frozen=True)
class Standing:
    """What a session does with a registered sender's mail, and whether a hold asks its user."""

    action: str
    prompts: bool


def standing(o: PolicyOptions) -> Standing:
    """Seed 003: unset (`auto`) holds when the session bypasses permission checks, else accepts;
    a hold the user configured parks without a prompt; a repository setting only tightens and
    its hold prompts; with nobody to review, a hold that would prompt is a refusal."""
    action, mine = (("hold" if o.permissions == "bypass" else "accept", False) if o.inbound == "auto"
                    else (o.inbound, True))
    if o.repository_inbound is not None and _STRICT[o.repository_inbound] > _STRICT[action]:
        action, mine = o.repository_inbound, False
    if action == "hold" and not mine and not o.interactive:
        action = "refuse"
    return Standing(action, prompts=not mine)


def expected_fate(o: PolicyOptions, sender_registered: bool) -> tuple[str, bool]:
    """(deliver | hold | refuse, does a hold prompt) for one message to a session under `o`."""
    st = standing(o)
    if st.action == "refuse":
        return "refuse", False
    if not sender_registered:
        if o.unregistered != "hold" or not o.interactive:
            return "refuse", False
        return "hold", True
    return ("hold", st.prompts) if st.action == "hold" else ("deliver", False)


# -- reading the run ---------------------------------------------------------------


def _recipient(view: RunView, c: Call) -> Optional[str]:
    to = c.to
    return view.names.label_for_name(to) or view.names.label_of.get(to)


def _registered_at(view: RunView, label: str, i: int) -> bool:
    """Was `label` in the directory at history position i (its last observation before it)?"""
    seen = [n for e, _, n in view.names.seen_as(label) if e.i < i]
    return bool(seen) and seen[-1] is not None


def _home(view: RunView, label: Optional[str], i: int) -> Optional[str]:
    """The process hosting `label` at history position i (its latest live incarnation)."""
    hosts = [inc for inc in view.hosting.incs
             if label in inc.sessions and inc.start_i <= i and (inc.end_i is None or i < inc.end_i)]
    return hosts[-1].proc if hosts else None


def _sends(view: RunView) -> list[Call]:
    return [c for c in view.mail.calls_of("send") if c.result is not None]


def _rows(view: RunView, sender: Optional[str], to: Optional[str], body: str) -> list[dict]:
    return [r for r in view.db["messages"] if r["body"] == body and view.names.label_of.get(r["from_session"]) == sender
            and view.names.label_of.get(r["to_session"]) == to]


@dataclass(frozen=True)
class Review:
    """The user's review of a held message: the approve or decline call, and its decision."""

    call: Call
    decision: str   # APPROVED or DECLINED


@dataclass
class HeldSend:
    """A send its recipient held, with what became of it (from the review replies and notices)."""

    call: Call
    to: str
    row: Optional[dict]
    promised_ms: Optional[int]
    review: Optional[Review] = None
    notice: Optional[dict] = None   # the notice row its sender got
    dropped: Optional[str] = None   # what the notice says became of it: expired or refused


def held_sends(view: RunView) -> list[HeldSend]:
    """Every held send in order, matched to its held row (by sender, recipient and body, in
    order), the user's review of it and the notice its sender got."""
    rows = sorted(view.db["held"], key=lambda r: r["id"])
    used: set[int] = set()
    reviews = {c.outcome.held: Review(c, c.outcome.kind) for c in view.mail.calls if c.tool in ("approve", "decline")
               and c.outcome.kind in (APPROVED, DECLINED)}
    notices = {n.held: (r, n) for r in view.db["messages"] for n in [decode_notice(r["body"])] if n}
    out = []
    for c in _sends(view):
        if not c.ok or c.outcome.kind != HELD:
            continue
        to = _recipient(view, c)
        row = next((r for r in rows if r["id"] not in used and r["body"] == c.body
                    and view.names.label_of.get(r["from_session"]) == c.session
                    and view.names.label_of.get(r["to_session"]) == to), None)
        h = HeldSend(c, to, row, c.outcome.held_wait_ms)
        if row is not None:
            used.add(row["id"])
            h.review = reviews.get(row["id"])
            h.notice, notice = notices.get(row["id"], (None, None))
            h.dropped = notice.outcome if notice else None
        out.append(h)
    return out


# -- Q1 ----------------------------------------------------------------------------------


@prop("Q1", promise=Promise(lambda o: o.sender_cap is not None))
def q1_sender_cap(view: RunView, options: dict[str, PolicyOptions]) -> Verdict:
    """Under `sender_cap: N` a session gets at most N sends to one peer accepted between its user's prompts, and
    the cap refuses none before that."""
    counts: dict[tuple, list[Call]] = {}
    judged = 0
    prompts = [("prompt", e.i, e) for e in view.history.of(USER_PROMPT)]
    events = sorted(prompts + [("send", c.i, c) for c in _sends(view)],
                    key=lambda x: x[1])
    for kind, _i, item in events:
        if kind == "prompt":
            for key in [k for k in counts if k[0] == item.session]:
                counts.pop(key)
            continue
        c: Call = item
        cap = options.get(c.proc).sender_cap if c.proc in options else None
        if cap is None:
            continue
        key = (c.session, _recipient(view, c))
        sent = counts.setdefault(key, [])
        refused = c.outcome.kind == CAPPED
        judged += 1
        if c.ok and len(sent) >= cap:
            return verdict(q1_sender_cap, "fail",
                           f"{c.session} had send #{len(sent) + 1} to {key[1]} accepted at t={span(c.t)} "
                           f"with no user prompt since its last {cap} (cap {cap})",
                           [w for s in sent[-2:] + [c] for w in s.witness()])
        if refused and len(sent) < cap:
            return verdict(q1_sender_cap, "fail", f"{c.session}'s send to {key[1]} at t={span(c.t)} was refused "
                           "by the cap "
                           f"after only {len(sent)} sends since its user last wrote (cap {cap})", c.witness())
        if c.ok:
            sent.append(c)
    if not judged:
        return skipped(q1_sender_cap, "no send by a session under a sender cap")
    return passed(q1_sender_cap, f"{judged} sends under a sender cap, none past it", judged)


# -- Q2 ----------------------------------------------------------------------------------


def _fate_of(c: Call) -> Optional[str]:
    """deliver / hold / refuse as the reply says; None for a reply no policy explains (a typo'd name...)."""
    if c.ok:
        return {HELD: "hold", SENT: "deliver"}.get(c.outcome.kind)
    return "refuse" if c.outcome.kind == INBOUND_REFUSED else None


def _wrong_fate(view: RunView, options: dict[str, PolicyOptions], c: Call) -> Optional[Verdict]:
    """A send whose recipient's standing says one fate and whose reply says another."""
    to = _recipient(view, c)
    home = _home(view, to, c.i)
    if to is None or home not in options or c.outcome.kind == CAPPED:
        return None
    registered = _registered_at(view, c.session, c.i)
    if not registered and not c.ok and c.outcome.kind != INBOUND_REFUSED and options[home].unregistered != "hold":
        return None  # thatch's own refusal of an unregistered sender (R8)
    want, prompts = expected_fate(options[home], registered)
    got = _fate_of(c)
    if got is None or got == want:
        if got == "hold" and prompts is False and c.outcome.held_wait_ms is not None:
            return verdict(q2_inbound, "fail",
                           f"{c.session}'s message to {to} was held with a prompt that expires, but "
                           f"{to}'s hold is its user's own standing instruction (parked, no prompt)", c.witness())
        return None
    who = "an unregistered sender" if not registered else c.session
    return verdict(q2_inbound, "fail", f"a send by {who} to {to} at t={span(c.t)} was {_WORD[got]}, "
                   f"but {to}'s standing "
                   f"({home}: {options[home].describe()}) says {_WORD[want]}", c.witness())


def _leak(view: RunView, h: HeldSend) -> Optional[Verdict]:
    """A held message in the recipient's inbox or one of its reads before approval (ever, if never approved)."""
    c = h.call
    approved = h.review if h.review and h.review.decision == APPROVED else None
    until = approved.call.i if approved else float("inf")
    direct = sum(1 for s in _sends(view) if s.session == c.session and s.ok and s.body == c.body
                 and _recipient(view, s) == h.to and _fate_of(s) == "deliver")
    rows = _rows(view, c.session, h.to, c.body)
    early = [r for r in rows
             if approved is None or (view.vt(r["created_at"]) or 0) < approved.call.t - STAMP_RESOLUTION_MS]
    if len(early) > direct or len(rows) > direct + (1 if approved else 0):
        when = "before its user approved it" if approved else "though its user never approved it"
        return verdict(q2_inbound, "fail", f"{c.session}'s held message to {h.to} is in {h.to}'s inbox {when}",
                       c.witness() + [{"db_row": r} for r in rows[:3]])
    seen = [r for r in view.mail.calls_of("read", h.to, ok=True)
            if r.i < until and any(m.chars.startswith(c.body) for m in r.outcome.messages)]
    if len(seen) > direct:
        return verdict(q2_inbound, "fail",
                       f"{h.to} read {c.session}'s held message at t={span(seen[-1].t)} before its user approved it",
                       c.witness() + seen[-1].witness())
    return None


def _refused_stored(view: RunView, c: Call) -> Optional[Verdict]:
    to = _recipient(view, c)
    accepted = sum(1 for s in _sends(view)
                   if s.session == c.session and s.ok and s.body == c.body and _recipient(view, s) == to)
    rows = _rows(view, c.session, to, c.body)
    if len(rows) > accepted:
        return verdict(q2_inbound, "fail", f"{c.session}'s send to {to} was refused at t={span(c.t)} but stored",
                       c.witness() + [{"db_row": rows[0]}])
    return None


def _gates_inbound(o: PolicyOptions) -> bool:
    """Options other than thatch's accept-registered, refuse-unregistered inbound rule."""
    return not (o.inbound == "accept" and o.repository_inbound is None and o.unregistered == "refuse")


def _can_hold(o: PolicyOptions) -> bool:
    """Options under which some message is held for its user."""
    return standing(o).action == "hold" or (o.unregistered == "hold" and o.interactive)


@prop("Q2", promise=Promise(_gates_inbound))
def q2_inbound(view: RunView, options: dict[str, PolicyOptions]) -> Verdict:
    """Every send to a session under a policy is delivered, held or refused as its standing says; a held message
    stays unseen until its user approves it, and a refused one stores nothing."""
    judged = 0
    for c in _sends(view):
        failure = _wrong_fate(view, options, c)
        if failure is None and not c.ok and c.outcome.kind in (INBOUND_REFUSED, CAPPED):
            failure = _refused_stored(view, c)
        if failure is not None:
            return failure
        judged += _home(view, _recipient(view, c), c.i) in options
    held = held_sends(view)
    for h in held:
        failure = _leak(view, h)
        if failure is not None:
            return failure
    if not judged:
        return skipped(q2_inbound, "no send to a session under a policy")
    return passed(q2_inbound, f"{judged} sends met their recipient's standing; "
                  f"{len(held)} held, none seen before approval", judged)


# -- Q3 ----------------------------------------------------------------------------------


def _dropped_problem(view: RunView, h: HeldSend) -> Optional[str]:
    """What is wrong with how a held message ended (None: approved, or dropped and reported as promised)."""
    c, review, notice = h.call, h.review, h.notice
    poll = view.hosting.poll_ms(_home(view, h.to, c.i))
    if review and review.decision == DECLINED:
        if h.dropped != "refused":
            return (f"{c.session}'s held message to {h.to} was declined at t={span(review.call.t)} "
                    "but its sender was not told it was refused")
        return None
    if h.dropped == "expired":
        if h.promised_ms is None:
            return f"{c.session}'s held message to {h.to} expired, but it was parked for review with no deadline"
        at, due = view.vt(notice["created_at"]), c.t + h.promised_ms
        if at is not None and not (due - STAMP_RESOLUTION_MS <= at <= due + poll + STAMP_RESOLUTION_MS):
            return (f"{c.session}'s held message to {h.to} expired at t={span(at)}, "
                    f"not within a poll cycle after its deadline t={span(due)}")
        return None
    if notice is not None:
        return f"{c.session}'s held message to {h.to} was reported refused though its user never declined it"
    if review is None and h.promised_ms is not None and view.t_end > c.t + h.promised_ms + poll + STAMP_RESOLUTION_MS:
        return (f"{c.session}'s held message to {h.to} had a prompt that ran out at t={span(c.t + h.promised_ms)}, "
                "but it was neither dropped nor reported by the end")
    return None


@prop("Q3", promise=Promise(_can_hold))
def q3_dropped_reported(view: RunView, options: dict[str, PolicyOptions]) -> Verdict:
    """A declined held message is reported to its sender as refused, and one whose approval prompt ran out as
    expired, within one poll cycle of its deadline."""
    held = held_sends(view)
    if not held:
        return skipped(q3_dropped_reported, "no message was held")
    for h in held:
        problem = _dropped_problem(view, h)
        if problem is not None:
            wit = (h.call.witness() + (h.review.call.witness() if h.review else [])
                   + ([{"db_row": h.notice}] if h.notice else []))
            return verdict(q3_dropped_reported, "fail", problem, wit)
    ended = sum(1 for h in held if h.review or h.notice)
    return passed(q3_dropped_reported, f"{len(held)} held messages, {ended} reviewed or expired as promised", len(held))


def check_policies(spec: Optional[Scenario], view: RunView) -> list[Verdict]:
    """The policies' verdicts: none when every process runs thatch's design."""
    options = {p: o for p, o in options_by_process(spec).items() if not o.is_thatch}
    if not options:
        return []
    out = []
    for fn in judges(PROMISE):
        na = not_applicable(fn, spec)
        if na is not None:
            out.append(na)
            continue
        try:
            out.append(fn(view, options))
        except Exception as exc:  # noqa: BLE001 - a checker bug shows as a failure, not a crash
            out.append(Verdict(fn.pid, fn.title, "fail", f"checker error: {type(exc).__name__}: {exc}", ()))  # type: ignore[attr-defined]
    return out
