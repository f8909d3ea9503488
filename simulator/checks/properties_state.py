"""Properties P4-P10: liveness, no-loss, names, tombstones, broadcast, continuation, ping-pong.

Registered into `simulator.checks.properties.REGISTRY` on import (properties.py
imports this module at its end). Definitions and tolerances: docstrings here
and docs/decisions/properties.md.
"""

from __future__ import annotations

import math
import re
from typing import Optional

from simulator.checks.view import Incarnation, RunView
from simulator.result import Verdict
from simulator.checks.properties import (MAX_WAKES_PER_HOUR, passed, prop, rolling_excess, skipped, verdict,
                                  wakes_by_incarnation)
from thatch_core.mcp import HOOK_LINE_RE, mcp_session_id

NAME_RE = re.compile(r"^[a-z]+(-[a-z]+)*-\d{5,}$")
SECOND = 1_000  # stored stamps have second resolution


def _sample_row(sample: dict, label: str) -> dict:
    """The sample reduced to one session, for a short witness."""
    out = dict(sample)
    out["data"] = {"sessions": {label: sample["data"]["sessions"][label]}}
    return out


# ---------------------------------------------------------------------------
# P4 liveness
# ---------------------------------------------------------------------------

def _disturbed(view: RunView, proc: str, t: int) -> bool:
    """Inside (or a staleness period after) a sleep, a lock, or a caught store error of `proc`."""
    poll = view.poll_ms(proc)
    if view.asleep(t, slack=poll + SECOND):
        return True
    if any(a <= t <= b + view.stale_ms + poll for a, b in view.lock_windows()):
        return True
    return any(e["t"] <= t <= e["t"] + view.stale_ms + poll for e in view.of("store-error", proc=proc))


def _polls(view: RunView, inc: Incarnation, label: str) -> list[dict]:
    """Polls of `inc` that beat `label` (every poll when the event lists no hosted set), cached."""
    cache = view.__dict__.setdefault("_poll_cache", {})
    key = (id(inc), label)
    if key not in cache:
        cache[key] = [e for e in view.of("poll", proc=inc.proc) if view.inc_of(e) is inc
                      and ("hosted" not in e["data"] or label in (e["data"].get("hosted") or ()))]
    return cache[key]


def _last_before(events: list[dict], i: float) -> Optional[dict]:
    """The last event of an i-sorted list with position < i."""
    lo, hi = 0, len(events)
    while lo < hi:
        mid = (lo + hi) // 2
        if events[mid]["i"] < i:
            lo = mid + 1
        else:
            hi = mid
    return events[lo - 1] if lo else None


@prop("P4", "liveness", rules=("R14", "R15", "R35"))
def p4_liveness(view: RunView) -> Verdict:
    """An opencode session hosted by a live, awake, undisturbed process that has beaten it once never samples stale; one whose host died samples stale from death + 60 s + one poll interval on and not before its last beat + 60 s (mcp rows exempt)."""
    checked = 0
    for s in view.of("sample"):
        for label, row in (s["data"].get("sessions") or {}).items():
            if not row.get("registered") or row.get("host_kind", "opencode") != "opencode":
                continue
            live = [inc for inc in view.hosts(label, s["t"], s["i"], kinds=("opencode",)) if view.hosting(inc, label, s["t"])]
            if live:
                inc = live[-1]
                last = _last_before(_polls(view, inc, label), s["i"])
                if last is None or view.poll_ms(inc.proc) + SECOND >= view.stale_ms or _disturbed(view, inc.proc, s["t"]):
                    continue
                checked += 1
                if row.get("stale"):
                    return verdict(p4_liveness, "fail", f"{label} sampled stale at t={s['t']} though {inc.proc}#{inc.n} hosts it live "
                                   f"(last poll t={last['t']})", [_sample_row(s, label), last, inc.start_event])
                continue
            if view.hosts(label, s["t"], s["i"]):
                continue  # hosted live by a non-opencode process or out of grace: not judged
            dead = [inc for inc in view.incs if label in inc.sessions and inc.died and inc.end_i is not None and inc.end_i < s["i"]]
            if not dead:
                continue
            inc = dead[-1]
            last = _last_before(_polls(view, inc, label), inc.end_i)
            polls = [last] if last else []
            since_kill = s["t"] - inc.end_t
            if since_kill > view.stale_ms + view.poll_ms(inc.proc) + SECOND:
                checked += 1
                if not row.get("stale"):
                    return verdict(p4_liveness, "fail", f"{label} still sampled live at t={s['t']}, {since_kill} ms after its host "
                                   f"{inc.proc}#{inc.n} died", [inc.exit_event, _sample_row(s, label)])
            elif polls and row.get("stale") and s["t"] < polls[-1]["t"] + view.stale_ms - SECOND:
                if any(e["t"] >= polls[-1]["t"] - view.stale_ms for e in view.of("store-error", proc=inc.proc)) \
                        or view.asleep(polls[-1]["t"]) or not view.name_at(label, polls[-1]["i"]):
                    continue
                checked += 1
                return verdict(p4_liveness, "fail", f"{label} sampled stale at t={s['t']}, less than 60 s after its last beat "
                               f"(t={polls[-1]['t']}) by its dead host {inc.proc}#{inc.n}", [polls[-1], inc.exit_event, _sample_row(s, label)])
    if not checked:
        return skipped(p4_liveness, "no sample of a hosted or orphaned opencode session to judge")
    return passed(p4_liveness, f"{checked} sampled sessions consistent with their hosts")


# ---------------------------------------------------------------------------
# P5 no-loss
# ---------------------------------------------------------------------------

_SENT_TO = re.compile(r"^Message sent to (\S+) \(")


def _pruned_ids(view: RunView) -> set[str]:
    return {r["session_id"] for r in view.db["pruned"]}


def _ever_pruned(view: RunView) -> set[str]:
    """Labels that vanished from the directory without a leave or a fork (pruned,
    R26). A pruned session that registers again drops out of chat_pruned, but
    its unread mail may have been swept in between."""
    return {label for label, _prev, _s, _row in view.vanishings()}


def _read_crashes(view: RunView) -> list[dict]:
    return [c for c in view.of("crash") if c["data"].get("point") == "read-stamp"]


def _send_sender(view: RunView, call) -> Optional[str]:
    """The label a send is stored from: the caller, except on Cursor, whose
    server trusts the claimed `as` (R32), so a claim naming another session
    is stored as that session's mail."""
    claim = call.args.get("as") if isinstance(call.args, dict) else None
    if claim and view.proc_kind.get(call.proc) == "cursor":
        return view.label_for_name(str(claim)) or call.session
    return call.session


@prop("P5", "no-loss", rules=("R9", "R10", "R11", "R26"))
def p5_no_loss(view: RunView) -> Verdict:
    """Every ok chat_send is stored exactly once (sender, recipient name, trimmed body) unless prune swept it; a message appears in at most one ok chat_read of its recipient unless a crash at read-stamp came between; a message seen by a read is still in the db, stamped read."""
    names = view.id_names()
    pruned = _pruned_ids(view)
    results: dict[tuple, list] = {}
    for c in view.calls_of("send", ok=True):
        m = _SENT_TO.match(c.text)
        to = m.group(1) if m else str(c.args.get("to", ""))
        # Recipients compare by label when known: a name can change after a leave.
        results.setdefault((_send_sender(view, c), view.label_for_name(to) or view.label_of.get(to) or to.lower(), c.body), []).append(c)
    rows: dict[tuple, list[dict]] = {}
    for r in view.db["messages"]:
        if not r["via_broadcast"]:
            to = view.label_of.get(r["to_session"]) or str(names.get(r["to_session"], r["to_session"])).lower()
            rows.setdefault((view.label_of.get(r["from_session"]), to, r["body"]), []).append(r)
    for key, calls in results.items():
        got = rows.get(key, [])
        if len(got) > len(calls):
            return verdict(p5_no_loss, "fail", f"{len(calls)} accepted send(s) from {key[0]} to {key[1]} stored {len(got)} times",
                           [w for c in calls[:3] for w in c.witness()] + [{"db_row": r} for r in got[:3]])
        if len(got) < len(calls):
            if any(sid in pruned for sid in view.ids.get(key[1], ())) or key[1] in _ever_pruned(view):
                continue
            return verdict(p5_no_loss, "fail", f"{len(calls)} accepted send(s) from {key[0]} to {key[1]} but {len(got)} row(s) in the db",
                           [w for c in calls[:4] for w in c.witness()])
    reads = view.calls_of("read", ok=True)
    crashes = _read_crashes(view)
    for r in view.db["messages"]:
        label = view.label_of.get(r["to_session"])
        needle = f" at {r['created_at']}: {r['body']}"
        seen = [c for c in reads if c.session == label and needle in c.text]
        twins = sum(1 for x in view.db["messages"] if x["to_session"] == r["to_session"] and x["created_at"] == r["created_at"] and x["body"] == r["body"])
        if len(seen) > twins:
            a, b = seen[0], seen[twins]
            if not any(a.i < k["i"] < b.i for k in crashes):
                return verdict(p5_no_loss, "fail", f"message #{r['id']} to {label} was read {len(seen)} times with no crash in chat_read between",
                               a.witness() + b.witness())
        if seen and not r["read_at"] and not crashes:
            return verdict(p5_no_loss, "fail", f"message #{r['id']} to {label} was returned by chat_read but is not stamped read", seen[0].witness())
    # The reverse direction: a stamp nobody saw is mail lost in chat_read
    # (stamped, never returned). Not judged across a read-stamp crash or a
    # read call of the recipient that never returned (it died mid-call).
    for r in view.db["messages"]:
        label = view.label_of.get(r["to_session"])
        if not r["read_at"] or label is None or crashes:
            continue
        if any(c.result is None for c in view.calls if c.tool == "read" and c.session == label):
            continue
        needle = f" at {r['created_at']}: {r['body']}"
        if not any(c.session == label and needle in c.text for c in reads):
            got = [c for c in reads if c.session == label]
            return verdict(p5_no_loss, "fail", f"message #{r['id']} to {label} is stamped read at {r['read_at']} "
                           "but no chat_read of its recipient returned it",
                           [{"db_row": r}] + [w for c in got[-2:] for w in c.witness()])
    present = {(r["to_session"], r["body"]) for r in view.db["messages"]}
    for c in reads:
        for line in re.findall(r"^from .+? at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ: (.*)$", c.text, re.M):
            if not any(sid for sid in view.ids.get(c.session or "", ()) if (sid, line) in present) \
                    and not any(b.startswith(line) for (sid, b) in present if view.label_of.get(sid) == c.session) \
                    and not any(sid in pruned for sid in view.ids.get(c.session or "", ())):
                return verdict(p5_no_loss, "fail", f"a message {c.session} read at t={c.t} is gone from the db", c.witness())
    if not results and not reads:
        return skipped(p5_no_loss, "no accepted send and no read in the run")
    return passed(p5_no_loss, f"{sum(map(len, results.values()))} sends stored once, {len(reads)} reads consistent")


# ---------------------------------------------------------------------------
# P6 names, P7 tombstones
# ---------------------------------------------------------------------------

def _legacy_name(view: RunView, label: str, name: str) -> bool:
    """`name` is the claimed name of `label`'s own 002-era row (`legacy:`), as
    migrated: case kept, or with the `-N` suffix a case clash gets (D-store-6)."""
    for row in getattr(view.spec, "legacy", None) or ():
        if row.session == label and re.fullmatch(re.escape(row.name) + r"(-\d+)?", name):
            return True
    return False


@prop("P6", "names", rules=("R2", "R5", "R6"))
def p6_names(view: RunView) -> Verdict:
    """Assigned names match ^[a-z]+(-[a-z]+)*-\\d{5,}$, are unique case-insensitively, never belong to two sessions, stay the same while a session stays registered (reclaim, resume, rehost) and are never reissued: a session that left and came back gets a name never seen before."""
    obs = view.name_observations()
    if not any(n for _, _, n in obs):
        return skipped(p6_names, "no session was ever registered")
    owner: dict[str, tuple[str, dict]] = {}
    last: dict[str, tuple[Optional[str], dict]] = {}
    for e, label, name in obs:
        if name is None:
            last[label] = (None, e)
            continue
        if not NAME_RE.match(name) and not _legacy_name(view, label, name):
            return verdict(p6_names, "fail", f"{label}'s name {name!r} is not an assigned name (base-00001)", [e])
        key = name.lower()
        if key in owner and owner[key][0] != label:
            return verdict(p6_names, "fail", f"name {name!r} was seen on {owner[key][0]} and on {label}", [owner[key][1], e])
        prev, pe = last.get(label, (None, None))
        if prev is not None and prev.lower() != key and not any(pe["i"] < x["i"] <= e["i"] for x in view.leaves(label)):
            return verdict(p6_names, "fail", f"{label} changed name from {prev} to {name} without leaving the directory", [pe, e])
        if key in owner:
            # Its own old name again: fine on a reclaim, never after a leave (names are not reissued).
            left = [x for x in view.leaves(label) if owner[key][1]["i"] < x["i"] < e["i"]]
            if left:
                return verdict(p6_names, "fail", f"{label} left and came back under its old name {name}", [owner[key][1], left[0], e])
        owner.setdefault(key, (label, e))
        last[label] = (name, e)
    for e in view.of("sample"):
        seen: dict[str, str] = {}
        for label, row in (e["data"].get("sessions") or {}).items():
            if row.get("registered") and row.get("name"):
                if row["name"].lower() in seen:
                    return verdict(p6_names, "fail", f"{seen[row['name'].lower()]} and {label} share the name {row['name']}", [e])
                seen[row["name"].lower()] = label
    return passed(p6_names, f"{len(owner)} names, well formed, unique, kept and never reissued")


# R7/R26: the hourly prune removes tombstones older than 7 days, after which
# a session may auto-register again (under a fresh name, which P6 checks).
TOMBSTONE_TTL_MS = 7 * 86_400_000


@prop("P7", "tombstones", rules=("R7", "R17"))
def p7_tombstones(view: RunView) -> Verdict:
    """After an ok leave (unregister, session.deleted, greenlit exit) of a session, no later sample or registration shows it registered until its own ok explicit chat_register, or until its tombstone aged out (more than 7 days after the leave)."""
    leaves = view.leaves()
    if not leaves:
        return skipped(p7_tombstones, "no session left the directory")
    for leave in leaves:
        label = leave.get("session")
        back = next((e["i"] for e in view.explicit_registers(label) if e["i"] > leave["i"]), None)
        for e, lab, name in view.name_observations():
            if lab == label and name and e["i"] > leave["i"] and (back is None or e["i"] < back) \
                    and not (leave["kind"] == "leave" and e["t"] == leave["t"]) \
                    and e["t"] - leave["t"] <= TOMBSTONE_TTL_MS:
                if e["kind"] == "registered" and e["data"].get("how") == "explicit":
                    continue
                wit = [leave, _sample_row(e, label) if e["kind"] == "sample" else e]
                return verdict(p7_tombstones, "fail", f"{label} left at t={leave['t']} but shows registered as {name} at t={e['t']} "
                               "without an explicit chat_register", wit)
    return passed(p7_tombstones, f"{len(leaves)} leaves stuck")


# ---------------------------------------------------------------------------
# P8 broadcast, P9 continuation, P10 ping-pong
# ---------------------------------------------------------------------------

_BCAST = re.compile(r"^Broadcast sent to (\d+) sessions?(?:: (.*?))?\.(?: Skipped \d+ stale: (.*)\.)?$", re.S)


def _names_list(text: Optional[str]) -> list[str]:
    return [n.strip() for n in (text or "").split(",") if n.strip()]


@prop("P8", "broadcast", rules=("R12", "R35"))
def p8_broadcast(view: RunView) -> Verdict:
    """Each ok broadcast stored exactly one via_broadcast row per named recipient and none for the sender or skipped sessions; only stale opencode rows are skipped (mcp rows always receive); a broadcast cut by a crash left zero rows."""
    names = view.id_names()
    pruned = _pruned_ids(view)
    bcasts = [c for c in view.calls_of("broadcast") if c.ok or c.result is None]
    if not bcasts:
        return skipped(p8_broadcast, "no broadcast in the run")
    samples = view.of("sample")
    for c in bcasts:
        mine = [r for r in view.db["messages"] if r["via_broadcast"] and view.label_of.get(r["from_session"]) == c.session and r["body"] == c.body]
        if c.result is None or not c.ok:
            crashed = any(k["data"].get("point") == "broadcast-insert" and k.get("proc") == c.proc for k in view.of("crash"))
            later = [x for x in bcasts if x is not c and x.ok and x.session == c.session and x.body == c.body]
            if c.result is None and crashed and mine and not later:
                return verdict(p8_broadcast, "fail", f"a broadcast by {c.session} cut by a crash left {len(mine)} rows", c.witness() + [{"db_row": r} for r in mine[:3]])
            continue
        m = _BCAST.match(c.text)
        if not m:
            continue
        recips, skipped_names = _names_list(m.group(2)), _names_list(m.group(3))
        def who(name_or_id: str) -> str:
            return view.label_for_name(name_or_id) or view.label_of.get(name_or_id) or str(names.get(name_or_id, name_or_id)).lower()
        got = [who(r["to_session"]) for r in mine]
        if c.session in got or any(who(n) in got for n in skipped_names):
            return verdict(p8_broadcast, "fail", f"broadcast by {c.session} stored a row for the sender or a skipped session", c.witness())
        for n in recips:
            label = who(n)
            k = got.count(label)
            if k != 1 and not (k == 0 and any(s in pruned for s in view.ids.get(label, ()))):
                return verdict(p8_broadcast, "fail", f"broadcast by {c.session}: recipient {n} has {k} rows (want 1)", c.witness())
        if len(got) != len(recips):
            return verdict(p8_broadcast, "fail", f"broadcast by {c.session} named {len(recips)} recipients but stored {len(got)} rows", c.witness())
        before = [s for s in samples if s["i"] < c.i]
        after = [s for s in samples if s["i"] > c.i]
        if before and after:
            b, a = before[-1]["data"]["sessions"], after[0]["data"]["sessions"]
            for label, row in b.items():
                if label == c.session or not row.get("registered") or not a.get(label, {}).get("registered"):
                    continue
                name = row.get("name") or ""
                if row.get("host_kind") == "mcp" and name not in recips:
                    return verdict(p8_broadcast, "fail", f"broadcast by {c.session} left out the mcp session {label} ({name})", [_sample_row(before[-1], label), *c.witness()])
                if row.get("host_kind", "opencode") == "opencode" and row.get("stale") and a[label].get("last_seen") == row.get("last_seen") and name in recips:
                    return verdict(p8_broadcast, "fail", f"broadcast by {c.session} delivered to the stale opencode session {label} ({name})", [_sample_row(before[-1], label), *c.witness()])
    return passed(p8_broadcast, f"{len(bcasts)} broadcasts all-or-nothing with the right recipients")


@prop("P9", "continuation", rules=("R33",))
def p9_continuation(view: RunView) -> Verdict:
    """After a session-id fork the session's next hook line shows the name it had before, and no mail is left addressed to the old identity."""
    forks = view.of("fork")
    checked = 0
    for f in forks:
        label = f.get("session")
        before = view.name_at(label, f["i"]) if label else None
        nxt = next((h for h in view.of("hook", session=label) if h["i"] > f["i"] and HOOK_LINE_RE.match(str(h["data"].get("line") or ""))), None)
        if before is None or nxt is None:
            continue
        checked += 1
        shown = HOOK_LINE_RE.match(nxt["data"]["line"]).group("name")
        if shown.lower() != before.lower():
            return verdict(p9_continuation, "fail", f"{label} was {before} before the fork but its next hook line says {shown}", [f, nxt])
        old = mcp_session_id(f["data"]["old_host_id"]) if f["data"].get("old_host_id") else None
        left = [r for r in view.db["messages"] if old and r["to_session"] == old]
        if left:
            return verdict(p9_continuation, "fail", f"{len(left)} message(s) still addressed to {label}'s pre-fork id {old}", [f, nxt, {"db_row": left[0]}])
    if not checked:
        return skipped(p9_continuation, "no fork followed by a hook line")
    return passed(p9_continuation, f"{checked} forks carried name and mail")


@prop("P10", "ping-pong-bounded", rules=("R22",))
def p10_ping_pong(view: RunView) -> Verdict:
    """Ping-pong sessions get at most 6 wakes per process incarnation per rolling hour, and each pair exchanges at most (6 x hours x incarnations + non-wake turns, summed over both sides) x seeds + seeds messages, seeds being the scripted sends and broadcasts of the pair."""
    pp = {label for label, a in view.agents.items() if getattr(a, "kind", "") == "ping-pong"}
    if not pp:
        return skipped(p10_ping_pong, "no ping-pong agent in the scenario")
    for (proc, n, label), ws in wakes_by_incarnation(view, pp).items():
        over = rolling_excess(ws)
        if over:
            return verdict(p10_ping_pong, "fail", f"ping-pong {label} got {len(over)} wakes from {proc}#{n} within one hour", over)
    hours = max(1, math.ceil(max(view.t_end, 1) / 3_600_000))
    pairs: dict[frozenset, list[dict]] = {}
    for r in view.db["messages"]:
        a, b = view.label_of.get(r["from_session"]), view.label_of.get(r["to_session"])
        if a in pp or b in pp:
            pairs.setdefault(frozenset((a, b)), []).append(r)
    for pair, msgs in pairs.items():
        seeds = sum(1 for st in view.steps if st.action in ("send", "broadcast") and st.args.sender in pair)
        budget = 0
        for label in pair:
            incs = max(1, sum(1 for inc in view.incs if label in inc.sessions))
            turns = [e for e in view.of("turn-start", session=label) if e["data"].get("cause") != "wake"]
            budget += MAX_WAKES_PER_HOUR * hours * incs + len(turns)
        bound = budget * max(1, seeds) + seeds
        if len(msgs) > bound:
            return verdict(p10_ping_pong, "fail", f"pair {sorted(map(str, pair))} exchanged {len(msgs)} messages, bound {bound}",
                           [{"db_row": r} for r in msgs[-4:]])
    return passed(p10_ping_pong, f"{len(pp)} ping-pong sessions within the cap")
