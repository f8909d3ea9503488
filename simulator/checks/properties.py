"""The run properties P1-P10: small registered checkers over a history and the final db.

Each checker is a function decorated with `@prop(pid, title, rules=...)`
whose docstring states the property in one sentence (the precise definitions
and their tolerances are in docs/decisions/properties.md). A checker gets a
`RunView` and returns a `Verdict`: "pass", "fail" (a short message and the few
events that break it), or "skipped" when the situation never occurred in the
run. `check_all` turns a skip of a property the scenario listed by name into
"not-reached" (Reach, not just pass), and adds the reach claims, the point
expectations and one verdict per fault step.

Safety properties (P1, P2, P5-P10) are judged over the whole run; the
progress parts of P3 and P4 only where the run gave the system a chance.
"""

from __future__ import annotations

from typing import Any, Callable

from simulator.checks.view import HOUR_MS, RENUDGE_MS, RunView, brief
from simulator.result import Verdict
from simulator.scenario.model import format_duration

MAX_WAKES_PER_HOUR = 6
WITNESS_MAX = 8

Checker = Callable[[RunView], Verdict]
REGISTRY: dict[str, tuple[str, tuple[str, ...], Checker]] = {}


def prop(pid: str, title: str, *, rules: tuple[str, ...] = ()) -> Callable[[Checker], Checker]:
    """Register a property checker under its P-id (refused twice, or without a docstring)."""
    def deco(fn: Checker) -> Checker:
        if pid in REGISTRY:
            raise ValueError(f"property {pid} is registered twice ({REGISTRY[pid][2].__name__} and {fn.__name__})")
        if not (fn.__doc__ or "").strip():
            raise ValueError(f"property {pid} ({fn.__name__}) needs a one-sentence docstring stating it")
        REGISTRY[pid] = (title, tuple(rules), fn)
        fn.pid, fn.title, fn.rules = pid, title, tuple(rules)  # type: ignore[attr-defined]
        return fn
    return deco


def verdict(fn: Any, status: str, message: str = "", witness: list[dict] | None = None) -> Verdict:
    wit = [brief(e) if "kind" in e else e for e in (witness or [])][:WITNESS_MAX]
    return Verdict(fn.pid, fn.title, status, message, fn.rules, wit)  # type: ignore[arg-type]


def passed(fn: Any, message: str) -> Verdict:
    return verdict(fn, "pass", message)


def skipped(fn: Any, message: str) -> Verdict:
    return verdict(fn, "skipped", message)


def rolling_excess(wakes: list[dict], cap: int = MAX_WAKES_PER_HOUR) -> list[dict] | None:
    """The first cap+1 wakes that fall inside one rolling hour, or None."""
    ts = sorted(wakes, key=lambda e: e["i"])
    for k in range(len(ts) - cap):
        if ts[k + cap]["t"] - ts[k]["t"] < HOUR_MS:
            return ts[k:k + cap + 1]
    return None


def wakes_by_incarnation(view: RunView, labels: set[str] | None = None) -> dict[tuple, list[dict]]:
    out: dict[tuple, list[dict]] = {}
    for w in view.of("wake"):
        if labels is not None and w.get("session") not in labels:
            continue
        inc = view.inc_of(w)
        out.setdefault((w.get("proc"), inc.n if inc else None, w.get("session")), []).append(w)
    return out


# ---------------------------------------------------------------------------
# P1, P2: who may wake a session, and how often
# ---------------------------------------------------------------------------

@prop("P1", "single-deliverer", rules=("R25", "R18"))
def p1_single_deliverer(view: RunView) -> Verdict:
    """Every wake is received by a live process hosting that session at that moment, and no two processes wake the same batch (two wakes of one session by different incarnations within 15 min, no read between, the second counting more messages than arrived since the first, the first incarnation still alive)."""
    wakes = view.of("wake")
    if not wakes:
        return skipped(p1_single_deliverer, "no wake prompt in the run")
    for w in wakes:
        inc = view.inc_of(w)
        hosted = w["data"].get("hosted", True)
        if not hosted or inc is None or w.get("session") not in inc.sessions or not inc.alive(w["t"], w["i"]):
            why = "data.hosted is false" if not hosted else f"{w.get('proc')} does not host {w.get('session')} then"
            wit = [w] + ([inc.start_event] if inc and inc.start_event else [])
            return verdict(p1_single_deliverer, "fail", f"wake of {w.get('session')} at t={w['t']} by a non-host: {why}", wit)
    reads = view.calls_of("read", ok=True)
    by_session: dict[str, list[dict]] = {}
    for w in wakes:
        by_session.setdefault(w.get("session"), []).append(w)
    for label, ws in by_session.items():
        for a, b in zip(ws, ws[1:]):
            ia, ib = view.inc_of(a), view.inc_of(b)
            if ia is ib or ia is None or ib is None:
                continue
            if b["t"] - a["t"] >= RENUDGE_MS or not ia.alive(b["t"], b["i"]):
                continue
            if any(c.session == label and a["i"] < c.i < b["i"] for c in reads):
                continue
            if int(b["data"].get("count") or 0) <= view.new_mail(label, a["i"], b["i"]):
                continue  # the second wake is for mail that arrived after the first: another batch
            return verdict(p1_single_deliverer, "fail",
                           f"{label} was woken by {ia.proc}#{ia.n} at t={a['t']} and by {ib.proc}#{ib.n} at t={b['t']} while both were alive: one batch, two deliverers", [a, b])
    return passed(p1_single_deliverer, f"{len(wakes)} wakes, each by the session's live host")


@prop("P2", "rate-cap", rules=("R22",))
def p2_rate_cap(view: RunView) -> Verdict:
    """Per process incarnation and session, at most 6 wake prompts fall in any rolling hour (a window of < 3,600,000 ms)."""
    groups = wakes_by_incarnation(view)
    if not groups:
        return skipped(p2_rate_cap, "no wake prompt in the run")
    for (proc, n, label), ws in groups.items():
        over = rolling_excess(ws)
        if over:
            return verdict(p2_rate_cap, "fail", f"{label} got {len(over)} wakes from {proc}#{n} within one hour "
                           f"(t={over[0]['t']}..{over[-1]['t']}), cap {MAX_WAKES_PER_HOUR}", over)
    return passed(p2_rate_cap, f"{sum(map(len, groups.values()))} wakes, none over the cap")


# ---------------------------------------------------------------------------
# P3: at-least-once (progress, judged at the end of the drain)
# ---------------------------------------------------------------------------

def _grace(view: RunView, label: str, proc: str | None) -> int:
    """How long a deliverable message may legitimately wait: two poll cycles and a turn."""
    agent = view.agents.get(label)
    turn = int(getattr(agent, "turn", 20_000) or 0)
    return 2 * view.poll_ms(proc) + turn + 1_000


def _busy_at_end(view: RunView, label: str, limit: int) -> bool:
    agent = view.agents.get(label)
    windows = list(getattr(agent, "busy", []) or []) + list(getattr(agent, "compacting", []) or [])
    return any(w.until > limit for w in windows)


def _created_t(view: RunView, msg: dict, sends: dict) -> int | None:
    """Virtual creation time of a db row: its stamp (second resolution), else its send/broadcast call."""
    stamped = view.vt(msg["created_at"])
    if stamped is not None:
        return stamped
    key = (view.label_of.get(msg["from_session"]), msg["body"])
    return sends[key][0] if sends.get(key) else None


def send_times(view: RunView) -> dict[tuple, list[int]]:
    out: dict[tuple, list[int]] = {}
    for c in view.calls:
        if c.tool in ("send", "broadcast") and c.call is not None:
            out.setdefault((c.session, c.body), []).append(c.call["t"])
    return out


@prop("P3", "at-least-once", rules=("R18", "R19", "R20", "R21", "R23"))
def p3_at_least_once(view: RunView) -> Verdict:
    """At the end of the drain every unread message to a registered session hosted by a live opencode process got a wake at or after its creation (unless that host's hourly cap is full or the run left no time), and every crash at delivered-stamp is followed by another wake of that session once a live process hosts it again."""
    registered = {r["session_id"] for r in view.db["sessions"]}
    sends = send_times(view)
    checked = 0
    end = view.t_end
    for m in view.db["messages"]:
        label = view.label_of.get(m["to_session"])
        if label is None or m["read_at"] or m["to_session"] not in registered:
            continue
        hosts = [h for h in view.incs if label in h.sessions and h.kind == "opencode" and h.start_t <= end
                 and (h.end_t is None or h.reason == "end")]
        if not hosts or view.asleep(end):
            continue
        host = hosts[-1]
        if not view.hosting(host, label, end):
            continue  # a rehosted session that aged out of the grace: nobody delivers to it (R15)
        created = _created_t(view, m, sends)
        limit = end - _grace(view, label, host.proc)
        if created is None or created > limit or _busy_at_end(view, label, limit) or host.start_t > limit:
            continue
        checked += 1
        cap_ws = [w for w in view.of("wake", session=label, proc=host.proc)
                  if view.inc_of(w) is host and w["t"] > end - HOUR_MS]
        if len(cap_ws) >= MAX_WAKES_PER_HOUR:
            continue
        if not any(w["t"] >= created for w in view.of("wake", session=label)):
            sent = [c for c in view.calls if c.call is not None and abs(c.call["t"] - created) < 1_000 and c.body == m["body"]]
            wit = [w for c in sent[:1] for w in c.witness()] + ([host.start_event] if host.start_event else [])
            return verdict(p3_at_least_once, "fail",
                           f"message #{m['id']} to {label} (created t={created}) is unread at the end and no wake came after it, "
                           f"though {host.proc}#{host.n} hosted {label} live", wit)
    for crash in view.of("crash"):
        if crash["data"].get("point") != "delivered-stamp":
            continue
        prior = [w for w in view.of("wake", proc=crash.get("proc")) if w["i"] < crash["i"] and view.inc_of(w) is view.inc_of(crash)]
        label = crash.get("session") or (prior[-1].get("session") if prior else None)
        if label is None:
            continue
        checked += 1
        rehost = next((inc for inc in view.incs if label in inc.sessions and inc.start_i > crash["i"]), None)
        live = [inc for inc in view.hosts(label, crash["t"], crash["i"]) if inc.proc != crash.get("proc")]
        first = rehost.start_t if rehost else (crash["t"] if live else None)
        host_proc = rehost.proc if rehost else (live[0].proc if live else None)
        if first is None or first > end - _grace(view, label, host_proc):
            continue  # no live host again in time: the run never gave it a chance
        if any(w["i"] > crash["i"] for w in view.of("wake", session=label)):
            continue
        if any(c.i > crash["i"] and "BEGIN UNTRUSTED" in c.text for c in view.calls_of("read", label, ok=True)):
            continue  # the batch was read another way
        if label not in {view.label_of.get(s) for s in registered}:
            continue
        wit = prior[-1:] + [crash] + ([rehost.start_event] if rehost and rehost.start_event else [])
        return verdict(p3_at_least_once, "fail",
                       f"{label}'s wake at t={prior[-1]['t'] if prior else '?'} lost its stamp to a crash, and no re-nudge came "
                       f"though a live process hosted {label} again from t={first}", wit)
    if not checked:
        return skipped(p3_at_least_once, "no deliverable unread mail at the end and no crash at delivered-stamp")
    return passed(p3_at_least_once, f"{checked} obligations met")


# P4-P10 live in their own module; importing it registers them.
from simulator.checks import properties_state  # noqa: E402,F401


# ---------------------------------------------------------------------------
# Running everything
# ---------------------------------------------------------------------------

def check_properties(spec: Any, view: RunView) -> list[Verdict]:
    listed = spec.properties != "all"
    out = []
    for pid in spec.checked_properties():
        title, rules, fn = REGISTRY[pid]
        try:
            v = fn(view)
        except Exception as exc:  # noqa: BLE001 - a checker bug must show as a failure, not kill the report
            v = Verdict(pid, title, "fail", f"checker error: {type(exc).__name__}: {exc}", rules)
        if listed and v.status == "skipped":
            v.status = "not-reached"
            v.message = f"listed in properties: but nothing to check ({v.message})"
        out.append(v)
    return out


def check_faults(spec: Any, view: RunView) -> list[Verdict]:
    """One verdict per fault step: fired, or not-reached."""
    fired = {e["data"].get("step"): e for e in view.of("fault-fired")}
    not_fired = {e["data"].get("step"): e for e in view.of("fault-not-fired")}
    out = []
    for idx, step in enumerate(spec.steps):
        if not step.is_fault:
            continue
        where = f"step {idx} ({step.name + ', ' if step.name else ''}{step.action} at {format_duration(step.at)})"
        title = f"{step.action} fault"
        if idx in fired and idx not in not_fired:
            out.append(Verdict(f"fault#{idx}", title, "pass", f"{where} took effect: {fired[idx]['data'].get('detail', '')}",
                               (), [brief(fired[idx])]))
        else:
            wit = [brief(not_fired[idx])] if idx in not_fired else []
            out.append(Verdict(f"fault#{idx}", title, "not-reached", f"{where} never took effect", (), wit))
    return out


def check_all(spec: Any, history: list[dict[str, Any]], db_path: Any, run_info: dict | None = None) -> list[Verdict]:
    """Every verdict of a run: properties, reach claims, point expectations, faults."""
    from simulator.checks.expectations import check_expectations
    from simulator.checks.reach import check_reaches

    view = RunView(spec, history, db_path, run_info)
    return (check_properties(spec, view) + check_reaches(spec, view)
            + check_expectations(spec, view) + check_faults(spec, view))
