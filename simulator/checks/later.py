"""The later design's properties (P12-P14), judged from the history and the final database.

The real thatch's later design (its cross-session-chat design doc, newer than
seed 000) answers three incidents; each property states what the answer
promises, in the simulator's own words, without reading thatch_core:

- P12 retry-lands-once (retry de-duplication): a send (or a broadcast's
  batch to one recipient) that the host calls again with identical arguments
  within the design's window lands at most once while its first copy is
  still unread;
- P13 whole-message (split bodies, paged reads): a split batch is all or
  nothing (the "(message 1 of N)" part and N-1 more, every part but the last
  ending "(continued in next message)"), and every character of every
  message its reader read reached it through the tool outputs it saw (on a
  clipping host: no longer than the clip);
- P14 no-machinery-rows (machinery sessions): no plugin-made machinery child
  or sub-agent child is in the directory unless it joined by an explicit
  register, and no polled row stays fresh (its heartbeat advancing) while no
  live process hosts its session.

Each is judged where a process runs under the later option that makes its
promise (`Promise`), or on any design when a scenario includes it
(`properties: {include: [...]}`).
"""

from __future__ import annotations

from typing import Optional

from simulator.checks.registry import Promise, passed, prop, sample_row, skipped, verdict
from simulator.checks.mail import Shown, acting_identity, covered, may_act_as, shown_spans, unseen_from, whole_messages
from simulator.checks.view import Call, RunView
from simulator.design import LATER_DEDUP_MS, PART_CONTINUED, STAMP_RESOLUTION_MS, split_key
from simulator.replies import part_count
from simulator.events import REGISTERED, SAMPLE, STATUS, Sample, SampleRow
from simulator.result import Verdict
from simulator.scenario.kinds import BEATING_ROW_KINDS
from simulator.scenario.policies import options_by_process

RETRY_DEDUP = Promise(lambda o: o.retry_dedup_ms is not None)
SPLIT_BODIES = Promise(lambda o: o.split_part_len is not None)
MACHINERY = Promise(lambda o: o.machinery_markers)
SEND_TOOLS = ("send", "broadcast")


# -- P12 ----------------------------------------------------------------------------------------


def _window_ms(view: RunView, proc: Optional[str]) -> int:
    """The retry window of the sending process's design (the later design's when it has none)."""
    options = options_by_process(view.spec).get(proc) if view.spec is not None else None
    return (options.retry_dedup_ms if options is not None and options.retry_dedup_ms else LATER_DEDUP_MS)


def retried_calls(view: RunView) -> list[tuple[Call, list[Call]]]:
    """(the original call, the host's retries of it) for every send or broadcast a `retry` fault repeated:
    the original is the session's latest earlier call of the same tool with identical arguments."""
    out: dict[int, tuple[Call, list[Call]]] = {}
    for c in view.mail.calls:
        if c.tool not in SEND_TOOLS or c.call is None or c.call.retry is None:
            continue
        earlier = [o for o in view.mail.calls if o.call is not None and o.i < c.i and o.tool == c.tool
                   and o.session == c.session and o.proc == c.proc and o.args == c.args
                   and o.call.retry is None]
        if earlier:
            first = earlier[-1]
            out.setdefault(first.i, (first, []))[1].append(c)
    return list(out.values())


def _landed(view: RunView, first: Call, last: Call) -> dict[str, list[dict]]:
    """Recipient session id -> the copies of the call's body stored from its sender between the first call and
    the last retry (a split batch counts once, by its first row, when its parts join to the whole body: another
    body that only opens with the same page is no copy, D-later-9)."""
    senders = set(view.names.ids.get(first.session or "", ()))
    body = first.body.strip()
    out: dict[str, list[dict]] = {}
    for r, whole in whole_messages(view):
        created = view.vt(r["created_at"])
        if r["from_session"] not in senders or created is None:
            continue
        if not first.t - STAMP_RESOLUTION_MS <= created <= last.t + STAMP_RESOLUTION_MS:
            continue
        if str(whole or "").strip() == body or (part_count(r["body"]) and whole == split_key(body)):
            out.setdefault(r["to_session"], []).append(r)
    return out


@prop("P12", promise=RETRY_DEDUP)
def p12_retry_lands_once(view: RunView) -> Verdict:
    """A send (or a broadcast's batch to one recipient) that its host calls again with identical arguments within
    the design's window lands at most once while its first copy is unread (the later design's retry
    de-duplication)."""
    groups = retried_calls(view)
    if not groups:
        return skipped(p12_retry_lands_once, "no host retried a send or a broadcast")
    judged = 0
    for first, retries in groups:
        window = _window_ms(view, first.proc)
        inside = [r for r in retries if r.t - first.t <= window]
        if not inside:
            continue
        judged += 1
        last = inside[-1]
        for to, rows in _landed(view, first, last).items():
            rows.sort(key=lambda r: r["id"])
            read_at = view.vt(rows[0]["read_at"]) if rows[0]["read_at"] else None
            again = view.vt(rows[-1]["created_at"]) or 0
            if len(rows) > 1 and (read_at is None or read_at > again):
                return verdict(p12_retry_lands_once, "fail",
                               f"{first.session}'s {first.tool} of {first.body[:40]!r} landed {len(rows)} times in "
                               f"{view.names.label_of.get(to, to)}'s inbox after {len(inside)} retr"
                               f"{'y' if len(inside) == 1 else 'ies'} by its host, the first copy still unread "
                               f"(message ids {', '.join(str(r['id']) for r in rows)})",
                               first.witness() + [w for r in inside for w in r.witness()])
    if not judged:
        return skipped(p12_retry_lands_once, "every retry came after the design's window")
    return passed(p12_retry_lands_once, f"{judged} retried call(s) landed at most once each", judged)


def _read_before(view: RunView, r: dict, call: Call, spans: dict[int, list[Shown]]) -> bool:
    """Row `r` was surely read before `call`: stamped a second or more earlier, or shown by a read
    answered before the call was made (a stamp in the call's own second with no such read may be after).
    A read another process ran in the call's own concurrent dispatch ran at once with it, whatever order
    the merge gave their events, so it is not surely before."""
    read_at = view.vt(r["read_at"]) if r["read_at"] else None
    if read_at is None:
        return False
    opened = call.call if call.call is not None else call.event
    wave = opened.dispatch if getattr(view.spec, "dispatch", "serial") == "concurrent" else None
    return read_at < call.t - STAMP_RESOLUTION_MS or any(
        s.call.i < opened.i and not (s.call.proc != call.proc and s.call.event.dispatch == wave)
        for s in spans.get(r["id"], []))


def _copies(view: RunView, call: Call) -> list[list[dict]]:
    """Every stored copy (a split one as its rows) of a send's body from its sender to its recipient,
    made before the call, within the sending process's retry window."""
    to = call.to
    recipient, sender = view.names.label_for_name(to) or view.names.label_of.get(to), acting_identity(view, call)
    by_id = {r["id"]: r for r in view.db["messages"]}
    parts, window = _part_numbers(view), _window_ms(view, call.proc)
    out = []
    for r, body in whole_messages(view):
        created = view.vt(r["created_at"])
        if (body not in (call.body, split_key(call.body)) or created is None
                or view.names.label_of.get(r["from_session"]) != sender
                or view.names.label_of.get(r["to_session"]) != recipient
                or not call.t - window - STAMP_RESOLUTION_MS <= created <= call.t):
            continue
        n = parts.get(r["id"], (1, 1))[1]
        out.append([by_id[r["id"] + k] for k in range(n) if r["id"] + k in by_id])
    return out


def suppressed_unseen(view: RunView) -> list[tuple[Call, list[dict]]]:
    """Every send the chat answered as a suppressed duplicate while no unread copy of it stood in its
    recipient's inbox (the later design suppresses a retry only while its copy is unread), with the copies
    already read, in call order."""
    suppressed = [c for c in view.mail.calls_of("send", ok=True) if c.outcome.suppressed]
    spans = shown_spans(view) if suppressed else {}
    out = []
    for c in suppressed:
        copies = _copies(view, c)
        if not any(not _read_before(view, r, c, spans) for rows in copies for r in rows):
            out.append((c, [r for rows in copies for r in rows]))
    return out


# -- P13 ----------------------------------------------------------------------------------------


def _batch_problem(view: RunView) -> Optional[tuple[str, list[dict]]]:
    """A split batch stored in part: fewer or more than its N parts, or a part without its continuation marker."""
    rows = sorted(view.db["messages"], key=lambda r: r["id"])
    by_id = {r["id"]: r for r in rows}
    for r in rows:
        n = part_count(r["body"])
        if n is None:
            continue
        batch = [by_id.get(r["id"] + k) for k in range(n)]
        batch = [b for b in batch if b is not None and b["from_session"] == r["from_session"]
                 and b["to_session"] == r["to_session"]]
        if len(batch) != n:
            return (f"message {r['id']} opens a batch of {n} parts but {len(batch)} were stored", [])
        for b in batch[:-1]:
            if not str(b["body"]).rstrip().endswith(PART_CONTINUED):
                return (f"part {b['id']} of the batch at message {r['id']} does not say it continues", [])
    return None


def _part_numbers(view: RunView) -> dict[int, tuple[int, int]]:
    """Row id -> (k, N) for the k-th part of a split batch of N."""
    by_id = {r["id"]: r for r in view.db["messages"]}
    out: dict[int, tuple[int, int]] = {}
    for r in by_id.values():
        n = part_count(r["body"])
        if n is not None:
            out.update({r["id"] + k: (k + 1, n) for k in range(n) if r["id"] + k in by_id})
    return out


def _died_reading(view: RunView, label: str) -> bool:
    """A read of `label`'s inbox never returned: what it stamped reached nobody, and P5 judges that."""
    return any(c.result is None and label in may_act_as(view, c) for c in view.mail.calls if c.tool == "read")


def _unseen_story(view: RunView, r: dict, label: str, mine: list[Shown], part: Optional[tuple[int, int]]) -> str:
    body = str(r["body"] or "")
    got = covered(mine)
    what = f"part {part[0]} of {part[1]} (message #{r['id']}" if part else f"message #{r['id']} ("
    clipped = [s for s in mine if s.host_clipped]
    how = (f" (its host clipped {len(clipped)} of those outputs, to {max(len(s.call.text) for s in clipped)} "
           "characters)" if clipped else "")
    return (f"{label} read {what}{', ' if part else ''}{len(body)} characters) but the outputs it was shown held "
            f"only characters 0-{got} of it{how}: {body[got:got + 30]!r}... never reached it")


@prop("P13", promise=SPLIT_BODIES)
def p13_whole_message(view: RunView) -> Verdict:
    """A split batch is stored all or nothing, and every character of every message (every part) its reader read
    reached the reader through the tool outputs its host showed it, clip included (the later design's split
    bodies and paged reads)."""
    problem = _batch_problem(view)
    if problem is not None:
        return verdict(p13_whole_message, "fail", problem[0], problem[1])
    spans, parts = shown_spans(view), _part_numbers(view)
    judged = 0
    for r in sorted(view.db["messages"], key=lambda r: r["id"]):
        label = view.names.label_of.get(r["to_session"])
        mine = spans.get(r["id"], [])
        if not r["read_at"] or label is None or (not mine and _died_reading(view, label)):
            continue
        judged += 1
        if unseen_from(mine, len(str(r["body"] or ""))) is not None:
            reads = [s.call for s in mine] or view.mail.calls_of("read", label)
            return verdict(p13_whole_message, "fail", _unseen_story(view, r, label, mine, parts.get(r["id"])),
                           [w for c in reads[:3] for w in c.witness()])
    if not judged:
        return skipped(p13_whole_message, "no message was read")
    return passed(p13_whole_message, f"{judged} read message(s) reached their readers whole", judged)


# -- P14 ----------------------------------------------------------------------------------------


def _machinery(view: RunView) -> set[str]:
    return {s.id for p in getattr(view.spec, "processes", []) for s in p.sessions if getattr(s, "machinery", False)}


def _joined_explicitly(view: RunView, label: str, i: int) -> bool:
    return any(e.i <= i for e in view.mail.explicit_registers(label))


def _inherited_until(view: RunView, label: str) -> float:
    """Up to which history position a child's row inherited from before the run (a `legacy:` row of its own, a
    corpse an older version left) may stand: its first status event in a process with machinery markers, whose
    idle path deletes a marked session's row; for ever when no such event comes (nothing of the design touched
    it, and for a sub-agent child, whose row no path of the design clears: only a marked session's is); -1 for a
    child with no inherited row."""
    if not any(getattr(r, "session", None) == label for r in getattr(view.spec, "legacy", None) or []):
        return -1
    if label not in _machinery(view):
        return float("inf")
    options = options_by_process(view.spec)
    return next((e.i for e in view.history.of(STATUS, session=label)
                 if getattr(options.get(e.proc), "machinery_markers", False)), float("inf"))


def _child_in_directory(view: RunView) -> Optional[Verdict]:
    machinery = _machinery(view)
    inherited = {label: _inherited_until(view, label) for label in view.children}
    for e in view.history.of(REGISTERED, SAMPLE):
        rows = e.sessions if isinstance(e, Sample) else {e.session: SampleRow(registered=True)}
        for label, row in rows.items():
            if label not in inherited or not row.registered:
                continue
            if e.i <= inherited[label]:
                continue  # the inherited row, sampled or seen by its host as the session's registration
            if not _joined_explicitly(view, label, e.i):
                what = "the plugin's machinery child" if label in machinery else "the sub-agent child"
                wit = sample_row(e, label) if isinstance(e, Sample) else e
                return verdict(p14_no_machinery_rows, "fail",
                               f"{what} {label} is in the directory (it never registered explicitly)", [wit])
    return None


def _hosted_at_beat(view: RunView, label: str, beat: Optional[int], sample: Sample) -> bool:
    """Some process hosted `label` when its row was beaten: at the beat's stamp (second resolution), not at the
    sample that saw it, since a host may die after its beat (a kill at a poll's own instant)."""
    if beat is None:
        hosting = view.hosting
        return any(hosting.is_hosting(inc, label, sample.t) for inc in hosting.hosts(label, sample.t, sample.i))
    return any(label in inc.sessions and inc.start_t <= beat + STAMP_RESOLUTION_MS
               and (inc.end_t is None or inc.end_t >= beat) and view.hosting.is_hosting(inc, label, beat)
               for inc in view.hosting.incs)


def _own_touches(view: RunView) -> dict[Optional[str], list[int]]:
    """label -> the times of the session's own ok chat_register and chat_status calls, which touch its row
    (R6, R34) wherever the call comes from."""
    out: dict[Optional[str], list[int]] = {}
    for c in view.mail.calls:
        if c.tool in ("register", "status") and c.result is not None and c.ok:
            out.setdefault(c.session, []).append(c.t)
    return out


def _touched_by_its_call(touches: list[int], beat: Optional[int]) -> bool:
    """The row's new `last_seen` is the stamp of one of the session's own touches (`_own_touches`): a
    touch, not a host's beat."""
    return beat is not None and any(abs(t - beat) <= STAMP_RESOLUTION_MS for t in touches)


def _fresh_without_host(view: RunView) -> tuple[Optional[Verdict], int]:
    last: dict[str, tuple[Sample, SampleRow]] = {}
    touches = _own_touches(view)
    judged = 0
    for e in view.history.of(SAMPLE):
        for label, row in e.sessions.items():
            if not row.registered or row.host_kind not in BEATING_ROW_KINDS:
                last.pop(label, None)
                continue
            before = last.get(label)
            last[label] = (e, row)
            if before is None or not row.last_seen or row.last_seen == before[1].last_seen:
                continue
            beat = view.vt(row.last_seen)
            if _touched_by_its_call(touches.get(label, []), beat):
                continue
            judged += 1
            if not _hosted_at_beat(view, label, beat, e):
                return verdict(p14_no_machinery_rows, "fail",
                               f"{label}'s row was beaten (last_seen {before[1].last_seen} -> "
                               f"{row.last_seen}) while no live process hosted it",
                               [sample_row(before[0], label), sample_row(e, label)]), judged
    return None, judged


@prop("P14", promise=MACHINERY)
def p14_no_machinery_rows(view: RunView) -> Verdict:
    """No plugin-made machinery child or sub-agent child is ever in the directory unless it registered explicitly,
    and no polled row's heartbeat advances while no live process hosts its session (the later design's machinery
    sessions)."""
    found = _child_in_directory(view)
    if found is not None:
        return found
    found, judged = _fresh_without_host(view)
    if found is not None:
        return found
    if not judged and not view.children:
        return skipped(p14_no_machinery_rows, "no child session and no beaten row to judge")
    return passed(p14_no_machinery_rows, f"no child in the directory; {judged} heartbeat(s) came from a live host",
                  max(judged, len(view.children)))
