"""The reference model's property (P11): every reply and the rows the run leaves, as predicted.

`follow` (simulator.checks.model_follow) judges each reply while it runs;
here the final database is judged against what the model knows at the end:

- a row the model is sure is registered (or gone) is there (or not);
- an exact inbox's unread rows are the mail the model holds (R10, R34);
- every stamped (`read_at`) row was returned by a read of its recipient:
  a read stamps exactly the rows it selected (R10);
- a status call touched the caller's `last_seen` (R34): no later sample or
  final row shows an older one;
- a leave the model is sure of left its tombstone, unless an explicit
  register cleared it or 7 days passed (R7);
- an auto row's topic is its session's last title once an idle event
  followed it (R3); a 002-era row keeps its topic (R3).
"""

from __future__ import annotations

from typing import Optional

from simulator.checks.model import Model, Surprise, modeled
from simulator.checks.model_follow import follow
from simulator.checks.registry import Promise, passed, prop, verdict
from simulator.checks.view import RunView
from simulator.design import STAMP_RESOLUTION_MS, TOMBSTONE_TTL_MS, topic_of_title, unrenamed
from simulator.events import CRASH, FORK, PROCESS_START, SAMPLE, STATUS
from simulator.scenario.kinds import HOSTS

MODELED = Promise(modeled)


@prop("P11", promise=MODELED)
def reply_model(view: RunView) -> "verdict":
    """Every tool reply and every row the run leaves is one the reference model of docs/rules.md
    allows (several where the design leaves a choice open)."""
    m = follow(view)
    judge_rows(m)
    if m.surprises:
        lines = [s.line() for s in m.surprises[:5]]
        more = f" (+{len(m.surprises) - 5} more)" if len(m.surprises) > 5 else ""
        wit = [e for s in m.surprises[:4] for e in s.events[:2]]
        return verdict(reply_model, "fail", "; ".join(lines) + more, wit, judged=max(1, m.judged))
    return passed(reply_model, f"{m.judged} replies and rows judged by the model", m.judged)


def judge_rows(m: Model) -> None:
    if m.loose:
        return
    rows(m)
    read_stamps(m)
    status_touches(m)
    tombstones(m)
    topics(m)


def rows(m: Model) -> None:
    """The directory and the unread mail at the end, where the model is sure."""
    db = m.view.db
    present = {r["session_id"] for r in db["sessions"]}
    unread: dict[str, int] = {}
    for msg in db["messages"]:
        if msg["read_at"] is None:
            unread[msg["to_session"]] = unread.get(msg["to_session"], 0) + 1
    for sid, state in m.reg.items():
        if state is None:
            continue
        m.judged += 1
        if state != (sid in present):
            m.surprise(f"final row of {m.view.names.label_of.get(sid, sid)}", "registered" if state else "no row",
                       "registered" if sid in present else "no row")
    # A forked Claude Code session's ids are one conversation: its mail may move from the old
    # id to the new one when the new id first acts (R33), so they are counted together.
    forked = {e.session for e in m.view.history.of(FORK)}
    counted: dict[str, list[str]] = {}
    for sid in m.boxes:
        label = m.view.names.label_of.get(sid)
        counted.setdefault(f"label:{label}" if label in forked else sid, []).append(sid)
    for sids in counted.values():
        bounds = [m.boxes[sid].bounds(bool(m.ghosts)) for sid in sids]
        lo, hi = sum(b[0] for b in bounds), sum(b[1] for b in bounds)
        n = sum(unread.get(sid, 0) for sid in sids)
        m.judged += 1
        if not lo <= n <= hi:
            m.surprise(f"unread rows of {m.view.names.label_of.get(sids[0], sids[0])} at the end",
                       f"{lo}" + ("" if lo == hi else " or more"), str(n))


def read_stamps(m: Model) -> None:
    """A stamped row was returned by a read of its recipient (the stamp is scoped, R10)."""
    left = {label: list(bodies) for label, bodies in m.returned.items()}
    for msg in m.view.db["messages"]:
        if msg["read_at"] is None:
            continue
        label = m.view.names.label_of.get(msg["to_session"], msg["to_session"])
        if label in m.blurred_reads or label not in m.view.names.ids:
            continue
        bodies = left.get(label, [])
        m.judged += 1
        if msg["body"] in bodies:
            bodies.remove(msg["body"])
        else:
            m.surprise(f"read stamp of message #{msg['id']} to {label}",
                       "stamped only when a read returned it", f"read_at {msg['read_at']}, never returned")


def status_touches(m: Model) -> None:
    """chat_status touches last_seen (R34): what a later database read shows is no older."""
    for sid, touches in m.touches.items():
        label = m.view.names.label_of.get(sid)
        t, result = max(touches, key=lambda x: x[0])
        seen: list[tuple[Optional[int], str]] = []
        for e in m.view.history.of(SAMPLE):
            row = e.sessions.get(label or "")
            if e.i > result.i and row is not None and row.registered and row.session_id in (sid, None):
                seen.append((m.view.vt(row.last_seen), f"sample at {e.t} ms"))
                break
        final = next((r for r in m.view.db["sessions"] if r["session_id"] == sid), None)
        if final is not None:
            seen.append((m.view.vt(final["last_seen"]), "the final row"))
        for when, where in seen:
            if when is None:
                continue
            m.judged += 1
            if when < t - STAMP_RESOLUTION_MS:
                m.surprise(f"last_seen of {label} after chat_status at {t} ms", f"at least {t} ms",
                           f"{when} ms ({where})", [result])


def tombstones(m: Model) -> None:
    """A sure leave leaves its tombstone (R7) until an explicit register or the 7-day TTL."""
    have = {r["session_id"] for r in m.view.db["tombstones"]}
    for sid, e in m.leaves:
        if m.tomb.get(sid) is not True or m.view.t_end - e.t >= TOMBSTONE_TTL_MS:
            continue
        m.judged += 1
        if sid not in have:
            m.surprise(f"tombstone of {m.view.names.label_of.get(sid, sid)}", "a leave tombstone", "none", [e])


def topics(m: Model) -> None:
    """R3: an auto row's topic follows its last title once an idle event came after it, in the same
    host process; a 002-era row keeps its topic."""
    view = m.view
    titles: dict[str, tuple[int, str]] = {}
    for idx, step in enumerate(view.steps):
        if step.action == "title" and idx not in view.disturbances.dropped:
            titles[step.args.session] = (view.disturbances.landed(idx, step.at), str(step.args.title))
    # 002-era names that differ only in case are one group: the migration to the NOCASE column
    # keeps every twin but renames the later ones NAME-2, NAME-3... (D-store-6), so a row may
    # carry any topic of its group, never one from outside it.
    legacy: dict[str, set] = {}
    for r in getattr(view.spec, "legacy", []) or []:
        legacy.setdefault(r.name.lower(), set()).add(r.topic)
    for row in view.db["sessions"]:
        label = view.names.label_of.get(row["session_id"])
        if not row.get("auto"):  # a 002-era file no process opened has no `auto` column
            group = legacy.get(unrenamed(row["name"].lower()))
            if group and group != {None}:
                m.judged += 1
                if row["topic"] not in group:
                    want = " or ".join(sorted(repr(t) for t in group))
                    m.surprise(f"topic of 002-era row {row['name']}", want, repr(row["topic"]))
            continue
        if label in titles and refreshed(view, label, titles[label][0]):
            want = topic_of_title(titles[label][1])
            m.judged += 1
            if want is not None and row["topic"] != want:
                m.surprise(f"topic of {label}", repr(want), repr(row["topic"]))


def refreshed(view: RunView, label: str, at: int) -> bool:
    """Did an idle event of `label` follow its title step at `at` in the opencode process the step
    retitled, with no idle event in another process hosting it then (which refreshes the topic from
    the title it holds), no later start of a process hosting it (which reads a title of its own), and
    at least one such idle whose refresh no crash could have cut?"""
    if any(label in e.sessions or e.resumed == label for e in view.history.of(PROCESS_START) if e.t >= at):
        return False
    # A session step goes to the process started last among those hosting the session (a `-c`
    # that opens the newest session in a second process takes it over); the older tab keeps its
    # own title and refreshes the topic from it on its own idle events: the new title is sure to
    # be the topic only when the retitled tab is the one that went idle.
    started = [inc for inc in view.hosting.incs if label in inc.sessions and inc.start_t <= at]
    titled = max(started, key=lambda inc: inc.start_i) if started else None
    if titled is None or not HOSTS[titled.kind].polls or not titled.alive(at):
        return False
    # Only a change of status is recorded, and a compaction's start or end is recorded as a status
    # event too: an idle event is one whose status was not idle before in that process.
    # The refresh runs at the idle event's instant: a crash of that process inside a refresh_topic
    # call then (this session's or another's going idle with it) may have cut it before its commit.
    cut = {(id(view.hosting.inc_of(c)), c.t) for c in view.history.of(CRASH) if c.call == "refresh_topic"}
    before: dict[int, Optional[str]] = {}
    refreshers: set[int] = set()
    sure = False
    for e in view.history.of(STATUS, session=label):
        inc = view.hosting.inc_of(e)
        status, prev = e.status, before.get(id(inc))
        before[id(inc)] = status
        if (e.t > at and status == "idle" and prev != "idle" and inc is not None
                and HOSTS[inc.kind].polls and inc.alive(at)):
            refreshers.add(id(inc))
            sure = sure or (inc is titled and (id(inc), e.t) not in cut)
    return refreshers == {id(titled)} and sure


__all__ = ["reply_model", "Surprise"]
