"""Identity properties: names (P6), leave tombstones (P7), continuation across a fork (P9)."""

from __future__ import annotations

from typing import Optional

from simulator.checks.registry import passed, prop, sample_row, skipped, verdict
from simulator.checks.view import RunView
from simulator.design import MAX_CONTINUATION_HOPS, NAME_RE, TOMBSTONE_TTL_MS, mcp_session_id, unrenamed
from simulator.replies import IDENTITY, decode_hook_line
from simulator.events import FORK, HOOK, REGISTERED, SAMPLE, Event, Hook, Leave, Registered, Sample
from simulator.result import Verdict
from simulator.scenario.durations import format_duration as span


def _legacy_name(view: RunView, label: str, name: str) -> bool:
    """`name` is the claimed name of `label`'s own 002-era row (`legacy:`), as
    migrated: case kept, or with the `-N` suffix a case clash gets (D-store-6)."""
    for row in getattr(view.spec, "legacy", None) or ():
        if row.session == label and row.name in (name, unrenamed(name)):
            return True
    return False


TURN_END_HOOKS = ("Stop", "stop")  # R36: they check mail; only the identity hooks ensure-register (R31)


def _chain_hops(view: RunView, label: str, hook: Hook) -> int:
    """Session-id forks of `label` since its identity was last anchored (an identity hook line
    printed or a registration observed) before `hook`: the continued-in records the hook's walk
    must follow back to the nearest registered (or tombstoned) ancestor."""
    anchors = [e.i for e in view.history.of(HOOK, REGISTERED, session=label) if e.i < hook.i
               and (isinstance(e, Registered) or (e.line and e.hook not in TURN_END_HOOKS))]
    since = anchors[-1] if anchors else -1
    return sum(1 for f in view.history.of(FORK, session=label) if since < f.i < hook.i)


def _unadopted_hooks(view: RunView, label: str) -> list[Hook]:
    """`label`'s identity hook lines that came after a fork chain longer than the walk may go
    (R33: at most 10 hops): there the conversation starts afresh under a new name."""
    return [h for h in view.history.of(HOOK, session=label) if decode_hook_line(h.line).kind == IDENTITY
            and _chain_hops(view, label, h) > MAX_CONTINUATION_HOPS]


def _replaced_claims(view: RunView) -> dict[str, set[str]]:
    """Label -> the names (lower case) chat_register handed it instead of a claimed `as` of another project
    (the later design, D-later-6): a fresh identity beside the one its host anchors, both registered, so the
    conversation goes by either from then on (D-later-sim-22)."""
    out: dict[str, set[str]] = {}
    for c in view.mail.calls_of("register", ok=True):
        if c.outcome.origin == "replaced" and c.outcome.name:
            out.setdefault(c.session, set()).add(c.outcome.name.lower())
    return out


@prop("P6")
def p6_names(view: RunView) -> Verdict:
    """Assigned names are well formed, unique case-insensitively, never shared by two sessions, kept while a
    session stays registered, and never reissued."""
    obs = view.names.name_observations()
    if not any(n for _, _, n in obs):
        return skipped(p6_names, "no session was ever registered")
    owner: dict[str, tuple[str, Event]] = {}
    last: dict[str, tuple[Optional[str], Event]] = {}
    twins = _replaced_claims(view)
    for e, label, name in obs:
        if name is None:
            last[label] = (None, e)
            continue
        if not NAME_RE.match(name) and not _legacy_name(view, label, name):
            return verdict(p6_names, "fail", f"{label}'s name {name!r} is not an assigned name (base-00001)", [e])
        key = name.lower()
        # a fork's older id (`fork.older_as`) hands its name on to the new id: one conversation's lineage
        if key in owner and view.lineage(owner[key][0]) != view.lineage(label):
            return verdict(p6_names, "fail", f"name {name!r} was seen on {owner[key][0]} and on {label}",
                           [owner[key][1], e])
        prev, pe = last.get(label, (None, None))
        held = twins.get(label, set())
        if (prev is not None and prev.lower() != key
                and not (key in held or (prev.lower() in held and owner.get(key, ("",))[0] == label))
                and not any(pe.i < x.i <= e.i for x in view.mail.leaves(label))
                and not any(pe.i < h.i <= e.i for h in _unadopted_hooks(view, label))
                and not view.names.could_be_pruned(label, pe, e)):
            return verdict(p6_names, "fail",
                           f"{label} changed name from {prev} to {name} without leaving the directory", [pe, e])
        if key in owner:
            # Its own old name again: fine on a reclaim, never after a leave (names are not reissued).
            left = [x for x in view.mail.leaves(label) if owner[key][1].i < x.i < e.i]
            if left:
                return verdict(p6_names, "fail", f"{label} left and came back under its old name {name}",
                               [owner[key][1], left[0], e])
        owner.setdefault(key, (label, e))
        last[label] = (name, e)
    for e in view.history.of(SAMPLE):
        seen: dict[str, str] = {}
        for label, row in e.sessions.items():
            if row.registered and row.name:
                if row.name.lower() in seen:
                    return verdict(p6_names, "fail",
                                   f"{seen[row.name.lower()]} and {label} share the name {row.name}", [e])
                seen[row.name.lower()] = label
    return passed(p6_names, f"{len(owner)} names, well formed, unique, kept and never reissued", len(owner))


@prop("P7")
def p7_tombstones(view: RunView) -> Verdict:
    """After an ok leave, a session shows registered again only after its own ok explicit chat_register."""
    leaves = view.mail.leaves()
    if not leaves:
        return skipped(p7_tombstones, "no session left the directory")
    for leave in leaves:
        label = leave.session
        back = next((e.i for e in view.mail.explicit_registers(label) if e.i > leave.i), None)
        for e, lab, name in view.names.name_observations():
            if lab == label and name and e.i > leave.i and (back is None or e.i < back) \
                    and not (isinstance(leave, Leave) and e.t == leave.t) \
                    and e.t - leave.t <= TOMBSTONE_TTL_MS:
                if isinstance(e, Registered) and e.how == "explicit":
                    continue
                wit = [leave, sample_row(e, label) if isinstance(e, Sample) else e]
                return verdict(p7_tombstones, "fail",
                               f"{label} left at t={span(leave.t)} but shows registered as {name} "
                               f"at t={span(e.t)} "
                               "without an explicit chat_register", wit)
    return passed(p7_tombstones, f"{len(leaves)} leaves stuck", len(leaves))


@prop("P9")
def p9_continuation(view: RunView) -> Verdict:
    """After a session-id fork within 10 hops of its last anchor the session keeps its name and mail; past 10 hops
    it starts afresh under a new name."""
    checked = 0
    for f in view.history.of(FORK):
        label = f.session
        before = view.names.name_at(label, f.i) if label else None
        nxt = next((h for h in view.history.of(HOOK, session=label)
                    if h.i > f.i and decode_hook_line(h.line).kind == IDENTITY), None)
        if before is None or nxt is None:
            continue
        if any(f.i < leave.i < nxt.i for leave in view.mail.leaves(label)):
            continue  # it left in between: what its next line says is R7's to judge (P7), not the fork's
        if view.names.could_be_pruned(label, f, nxt):
            continue  # silent past the auto-row TTL in between: prune may have deleted the row (R26)
        checked += 1
        shown = decode_hook_line(nxt.line).name
        hops = _chain_hops(view, label, nxt)
        if hops > MAX_CONTINUATION_HOPS:
            if shown.lower() == before.lower():
                return verdict(p9_continuation, "fail",
                               f"{label}'s hook line after a chain of {hops} forks still says {before}: "
                               f"the walk stops at {MAX_CONTINUATION_HOPS} hops, so nothing may be adopted",
                               [f, nxt], checked)
            continue
        if shown.lower() != before.lower():
            return verdict(p9_continuation, "fail",
                           f"{label} was {before} before the fork but its next hook line says {shown}",
                           [f, nxt], checked)
        old = mcp_session_id(f.old_host_id) if f.old_host_id else None
        left = [r for r in view.db["messages"] if old and r["to_session"] == old]
        if left:
            return verdict(p9_continuation, "fail",
                           f"{len(left)} message(s) still addressed to {label}'s pre-fork id {old}",
                           [f, nxt, {"db_row": left[0]}], checked)
    if not checked:
        return skipped(p9_continuation, "no fork followed by a hook line")
    return passed(p9_continuation, f"{checked} forks carried name and mail "
                  f"(or, past {MAX_CONTINUATION_HOPS} hops, started afresh)", checked)
