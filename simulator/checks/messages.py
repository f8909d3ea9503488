"""Message properties: what was sent is stored once and read once (P5), broadcasts are all-or-nothing (P8)."""

from __future__ import annotations

from typing import Optional

from simulator.checks.faults import crash_cut_short
from simulator.checks.later import suppressed_unseen
from simulator.checks.registry import passed, prop, sample_row, skipped, verdict
from simulator.checks.mail import Shown, acting_identity, covered, may_act_as, shown_spans, unseen_from, whole_messages
from simulator.checks.view import Call, RunView
from simulator.design import MAIL_SWEEP_AGE_MS, STAMP_RESOLUTION_MS, inbox_stamp, split_key
from simulator.replies import BROADCAST, HELD, SENT
from simulator.events import CRASH, SAMPLE, Crash
from simulator.result import Verdict
from simulator.scenario.kinds import BEATING_ROW_KINDS, DEFAULT_ROW_KIND
from simulator.scenario.durations import format_duration as span




def _pruned_ids(view: RunView) -> set[str]:
    return {r["session_id"] for r in view.db["pruned"]}


def _ever_pruned(view: RunView) -> set[str]:
    """Labels that vanished from the directory without a leave or a fork (pruned,
    R26). A pruned session that registers again drops out of chat_pruned, but
    its unread mail may have been swept in between."""
    return {label for label, _prev, _s, _row in view.mail.vanishings()}


def _maybe_swept(view: RunView, label: str, call: Call, pruned: set[str], ever_pruned: set[str]) -> bool:
    """Could prune have swept `label`'s unread mail from `call` (R26)? Only mail older than the
    sweep age goes (its stamp may sit up to a second before the call), and only while its
    recipient is out of the directory: it was pruned, left, has no row at the end, or was
    silent long enough after the call to be pruned."""
    if view.t_end - call.t <= MAIL_SWEEP_AGE_MS - STAMP_RESOLUTION_MS:
        return False
    ids = view.names.ids.get(label, ())
    if label in ever_pruned or any(s in pruned for s in ids) or view.mail.leaves(label):
        return True
    if not any(r["session_id"] in ids for r in view.db["sessions"]):
        return True
    return call.result is not None and view.names.could_be_pruned(label, call.result, call.result, end=view.t_end)


def _read_crashes(view: RunView) -> list[Crash]:
    return [c for c in view.history.of(CRASH) if c.point == "read-stamp"]


def _accepted_sends(view: RunView) -> dict[tuple, list[Call]]:
    """Ok chat_send calls by (sender label, recipient, trimmed body)."""
    results: dict[tuple, list[Call]] = {}
    for c in view.mail.calls_of("send", ok=True):
        sent = c.outcome
        if sent.kind == HELD:
            continue  # held for the recipient's user: stored only if approved (checks/policies.py, Q2)
        if sent.suppressed:
            continue  # the later design stored nothing new: its unread twin is its row (P12 judges the retry)
        to = sent.to if sent.kind == SENT else c.to
        body = split_key(c.body) if sent.parts > 1 else c.body  # stored as parts
        # Recipients compare by label when known: a name can change after a leave.
        recipient = view.names.label_for_name(to) or view.names.label_of.get(to) or to.lower()
        results.setdefault((acting_identity(view, c), recipient,
                            body), []).append(c)
    return results


def _stored_sends(view: RunView) -> dict[tuple, list[dict]]:
    """Direct (not broadcast) db rows by (sender label, recipient, body)."""
    names = view.names.id_names()
    rows: dict[tuple, list[dict]] = {}
    for r, body in whole_messages(view):
        if not r["via_broadcast"]:
            to = view.names.label_of.get(r["to_session"]) or str(names.get(r["to_session"], r["to_session"])).lower()
            rows.setdefault((view.names.label_of.get(r["from_session"]), to, body), []).append(r)
    return rows


def _stored_as_claimed(view: RunView, calls: list[Call], key: tuple, rows: dict[tuple, list[dict]]) -> int:
    """Rows stored as another session the sends may have acted as (`may_act_as`)."""
    claimed = {label for c in calls for label in may_act_as(view, c)} - {key[0], None}
    return sum(len(rows.get((label, key[1], key[2]), [])) for label in claimed)


def _stored_once(view: RunView, results: dict[tuple, list[Call]], pruned: set[str]) -> Optional[Verdict]:
    """Each accepted send has exactly one row, unless prune swept the recipient's mail."""
    rows = _stored_sends(view)
    for key, calls in results.items():
        got = rows.get(key, [])
        # Sends by others that may have acted as this sender (a claim R32 fell through to).
        claiming = sum(1 for k, cs in results.items() if k != key and k[1:] == key[1:]
                       for c in cs if key[0] in may_act_as(view, c))
        # A send whose process died in the call may have committed (a crash after its commit).
        in_flight = sum(1 for c in view.mail.calls if c.tool == "send" and c.result is None and c.body == key[2]
                        and key[0] in may_act_as(view, c))
        if len(got) > len(calls) + claiming + in_flight:
            return verdict(p5_no_loss, "fail",
                           f"{len(calls)} accepted send(s) from {key[0]} to {key[1]} stored {len(got)} times",
                           [w for c in calls[:3] for w in c.witness()] + [{"db_row": r} for r in got[:3]])
        if len(got) < len(calls):
            if any(_maybe_swept(view, key[1], c, pruned, _ever_pruned(view)) for c in calls):
                continue
            if len(got) + _stored_as_claimed(view, calls, key, rows) >= len(calls):
                continue
            return verdict(p5_no_loss, "fail",
                           f"{len(calls)} accepted send(s) from {key[0]} to {key[1]} but {len(got)} row(s) in the db",
                           [w for c in calls[:4] for w in c.witness()])
    return None


def _lines_of(read: Call, line: tuple[str, str]) -> int:
    """How many whole lines of a read show (stamp, body): a stored row's line (the stamp has minute resolution, so
    rows of one recipient with one body in one minute read alike)."""
    return sum(1 for m in read.outcome.messages if m.whole_line and (m.stamp, m.body) == line)


def _read_once(view: RunView, reads: list[Call], crashes: list[Crash]) -> Optional[Verdict]:
    """A row is returned by at most one read of its recipient's inbox, whoever called it (barring a
    read-stamp crash), and stamped once returned."""
    for r in view.db["messages"]:
        label = view.names.label_of.get(r["to_session"])
        line = (inbox_stamp(r["created_at"]), r["body"])
        # The strict identity: a broadcast gives every recipient a row of one body and one time,
        # so the caller's own copy would read as the claimed session's.
        seen = [c for c in reads if acting_identity(view, c) == label and _lines_of(c, line)]
        twins = sum(1 for x in view.db["messages"]
                    if x["to_session"] == r["to_session"] and (inbox_stamp(x["created_at"]), x["body"]) == line)
        if len(seen) > twins:
            a, b = seen[0], seen[twins]
            if not any(a.i < k.i < b.i for k in crashes):
                callers = sorted({str(c.session) for c in seen})
                return verdict(p5_no_loss, "fail", f"message #{r['id']} to {label} was read {len(seen)} times "
                               f"(by {', '.join(callers)}) with no crash in chat_read between",
                               a.witness() + b.witness())
        # Twins (one recipient, one body, one minute) read alike: a read returning one of them
        # stamped one of them, so the unstamped twin is lost only when more were returned than stamped.
        stamped = sum(1 for x in view.db["messages"] if x["to_session"] == r["to_session"] and x["read_at"]
                      and (inbox_stamp(x["created_at"]), x["body"]) == line)
        returned = sum(_lines_of(c, line) for c in seen)
        if seen and not r["read_at"] and not crashes and returned > stamped:
            return verdict(p5_no_loss, "fail",
                           f"message #{r['id']} to {label} was returned by chat_read but is not stamped read",
                           seen[0].witness())
    return None


def _stamped_rows_returned(view: RunView, reads: list[Call], crashes: list[Crash]) -> Optional[Verdict]:
    """A stamp nobody saw is mail lost in chat_read (stamped, never returned), and so is one whose only
    outputs the host clipped short of its end (the model never saw the rest). Not judged across a
    read-stamp crash or a read call of the recipient that never returned (it died mid-call)."""
    spans = shown_spans(view)
    for r in view.db["messages"]:
        label = view.names.label_of.get(r["to_session"])
        if not r["read_at"] or label is None or crashes:
            continue
        if any(c.result is None for c in view.mail.calls if c.tool == "read" and label in may_act_as(view, c)):
            continue
        mine = spans.get(r["id"], [])
        if mine and unseen_from(mine, len(str(r["body"] or ""))) is None:
            continue  # shown whole, or cut by the design's own page, whose marker says how to read on
        got = [c for c in reads if label in may_act_as(view, c)]
        if mine:
            return verdict(p5_no_loss, "fail", _clipped_story(view, r, label, mine),
                           [w for s in mine[:2] for w in s.call.witness()])
        return verdict(p5_no_loss, "fail", f"message #{r['id']} to {label} is stamped read at {r['read_at']} "
                       "but no chat_read of its recipient returned it",
                       [{"db_row": r}] + [w for c in got[-2:] for w in c.witness()])
    return None


def _clipped_story(view: RunView, r: dict, label: str, mine: list[Shown]) -> str:
    clip = max(len(s.call.text) for s in mine)
    return (f"message #{r['id']} to {label} is stamped read at {r['read_at']} but its host clipped the chat_read "
            f"outputs that returned it (to {clip} characters): the model saw characters 0-{covered(mine)} of its "
            f"{len(str(r['body'] or ''))}, with nothing telling it there was more; the rest was marked read unseen")


def _suppressed_unseen(view: RunView, pruned: set[str]) -> Optional[Verdict]:
    """A send answered as a suppressed duplicate is stored only as its unread copy: with none unread, it is lost,
    unless none is left because prune swept the recipient's unread mail (R26)."""
    ever = _ever_pruned(view)
    for c, copies in suppressed_unseen(view):
        label = view.names.label_for_name(c.to) or view.names.label_of.get(c.to)
        if not copies and label is not None and _maybe_swept(view, label, c, pruned, ever):
            continue
        seen = ", ".join(f"#{r['id']} read at {r['read_at']}" for r in copies) or "none stored"
        return verdict(p5_no_loss, "fail",
                       f"{c.session}'s send to {c.to} at t={span(c.t)} was answered as a suppressed duplicate, but no "
                       f"unread copy of it was in {c.to}'s inbox (copies: {seen}): the message reached nobody",
                       c.witness())
    return None


def _read_rows_kept(view: RunView, reads: list[Call], pruned: set[str]) -> Optional[Verdict]:
    """Every message a read returned is still in the db (R11), unless prune swept the inbox it drained: what its
    line showed opens a stored body addressed to a session the read may have acted as."""
    for c in reads:
        labels = may_act_as(view, c)
        ids = {sid for label in labels for sid in view.names.ids.get(label or "", ())}
        if ids & pruned:
            continue
        bodies = [str(r["body"] or "") for r in view.db["messages"]
                  if r["to_session"] in ids or view.names.label_of.get(r["to_session"]) in labels]
        gone = next((m for m in c.outcome.messages if not any(b.startswith(m.chars) for b in bodies)), None)
        if gone is not None:
            return verdict(p5_no_loss, "fail", f"a message {acting_identity(view, c)} read at t={span(c.t)} "
                           f"({gone.chars[:40]!r} from {gone.sender}) is gone from the db", c.witness())
    return None


@prop("P5")
def p5_no_loss(view: RunView) -> Verdict:
    """Every accepted send is stored exactly once, every message is read at most once and stamped read, and
    nothing vanishes but what prune sweeps."""
    pruned = _pruned_ids(view)
    results = _accepted_sends(view)
    reads = view.mail.calls_of("read", ok=True)
    crashes = _read_crashes(view)
    failure = (_stored_once(view, results, pruned) or _suppressed_unseen(view, pruned)
               or _read_once(view, reads, crashes) or _stamped_rows_returned(view, reads, crashes)
               or _read_rows_kept(view, reads, pruned))
    if failure is not None:
        return failure
    if not results and not reads:
        return skipped(p5_no_loss, "no accepted send and no read in the run")
    sends = sum(map(len, results.values()))
    return passed(p5_no_loss, f"{sends} sends stored once, {len(reads)} reads consistent", sends + len(reads))




def _rows_problem(view: RunView, c, recips: list[str], got: list[str], who, copies: int,
                  swept_sets: tuple) -> Optional[str]:
    """Why the rows a broadcast stored are not one per named recipient (up to `copies` when its host called it
    again), or None."""
    swept = 0
    for n in recips:
        label = who(n)
        k = got.count(label)
        if k == 0 and label not in view.names.ids:
            continue  # a name no event, sample or final row ties to a session: the count below judges it
        if k == 0 and _maybe_swept(view, label, c, *swept_sets):
            swept += 1
        elif not 1 <= k <= copies:
            want = "1" if copies == 1 else f"1 to {copies}: its host called it {copies} times"
            return f"broadcast by {c.session}: recipient {n} has {k} rows (want {want})"
    if not len(recips) - swept <= len(got) <= copies * (len(recips) - swept):
        return f"broadcast by {c.session} named {len(recips)} recipients but stored {len(got)} rows"
    return None


def _is_retry(c) -> bool:
    return c.call is not None and c.call.retry is not None


def _retries_of(c, calls) -> int:
    """How many times a host called `c` again with identical arguments (a `retry` fault)."""
    return sum(1 for x in calls if _is_retry(x) and x.session == c.session and x.args == c.args and x.i > c.i)


@prop("P8")
def p8_broadcast(view: RunView) -> Verdict:
    """Each ok broadcast stored one row per named recipient and none for the sender or the skipped (only stale
    opencode rows), and one cut by a crash stored none."""
    names = view.names.id_names()
    pruned, ever_pruned = _pruned_ids(view), _ever_pruned(view)
    bcasts = [c for c in view.mail.calls_of("broadcast") if c.ok or c.result is None]
    if not bcasts:
        return skipped(p8_broadcast, "no broadcast in the run")
    samples = view.history.of(SAMPLE)
    for c in bcasts:
        if _is_retry(c):
            continue  # judged with the call it repeats: one more copy the design may or may not store (P12)
        copies = 1 + _retries_of(c, bcasts)
        mine = [r for r, body in whole_messages(view)  # a split batch counts once (the later design)
                if r["via_broadcast"] and view.names.label_of.get(r["from_session"]) == c.session
                and body in (c.body, split_key(c.body))]
        if c.result is None or not c.ok:
            crashed = any(crash_cut_short(k, "broadcast-insert") and k.proc == c.proc for k in view.history.of(CRASH))
            later = [x for x in bcasts if x is not c and x.ok and x.session == c.session and x.body == c.body]
            if c.result is None and crashed and mine and not later:
                return verdict(p8_broadcast, "fail", f"a broadcast by {c.session} cut by a crash left {len(mine)} rows",
                               c.witness() + [{"db_row": r} for r in mine[:3]])
            continue
        if c.outcome.kind != BROADCAST:
            continue
        recips, skipped_names = c.outcome.recipients, c.outcome.skipped
        def who(name_or_id: str) -> str:
            return (view.names.label_for_name(name_or_id) or view.names.label_of.get(name_or_id)
                    or str(names.get(name_or_id, name_or_id)).lower())
        got = [who(r["to_session"]) for r in mine]
        if c.session in got or any(who(n) in got for n in skipped_names):
            return verdict(p8_broadcast, "fail",
                           f"broadcast by {c.session} stored a row for the sender or a skipped session", c.witness())
        problem = _rows_problem(view, c, recips, got, who, copies, (pruned, ever_pruned))
        if problem is not None:
            return verdict(p8_broadcast, "fail", problem, c.witness())
        before = [s for s in samples if s.i < c.i]
        after = [s for s in samples if s.i > c.i]
        if before and after:
            b, a = before[-1].sessions, after[0].sessions
            for label, row in b.items():
                if label == c.session or not row.registered or label not in a or not a[label].registered:
                    continue
                name = row.name or ""
                # The row may not have existed at the broadcast's instant: pruned after a silence past
                # the auto-row TTL (R26) and made again (a fresh name) before the next sample.
                gone = a[label].name != name or view.names.could_be_pruned(label, before[-1], c.result)
                if row.host_kind == "mcp" and name not in recips and not gone:
                    return verdict(p8_broadcast, "fail",
                                   f"broadcast by {c.session} left out the mcp session {label} ({name})",
                                   [sample_row(before[-1], label), *c.witness()])
                if ((row.host_kind or DEFAULT_ROW_KIND) in BEATING_ROW_KINDS and row.stale
                        and a[label].last_seen == row.last_seen and name in recips):
                    return verdict(p8_broadcast, "fail",
                                   f"broadcast by {c.session} delivered to the stale opencode session {label} ({name})",
                                   [sample_row(before[-1], label), *c.witness()])
    return passed(p8_broadcast, f"{len(bcasts)} broadcasts all-or-nothing with the right recipients", len(bcasts))
