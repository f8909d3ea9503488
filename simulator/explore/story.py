"""The story a found scenario tells: its world and timeline in words, and what broke.

A shrunk failure is committed as a scenario like any other, so it gets a
`story:` a person can read before the YAML: who runs where, what happens
when, and which property fails with the checker's own message.
"""

from __future__ import annotations

from typing import Any

from simulator.explore.plan import action_of
from simulator.explore.writer import spell_duration
from simulator.scenario.kinds import DEFAULT_HOST

MAX_TOLD_STEPS = 12


def _world(doc: dict[str, Any]) -> str:
    parts = []
    for p in doc["processes"]:
        if p.get("start") == "never":
            continue
        who = ", ".join(f"{s['id']} ({s.get('agent', {}).get('kind', 'reader')})" for s in p.get("sessions", ()))
        parts.append(f"{p['id']} ({p.get('kind', DEFAULT_HOST)}) hosts {who or 'no session'}")
    return "; ".join(parts)


def _crash_point(a: dict[str, Any]) -> str:
    when = a.get("when", "before")
    if a.get("call"):
        return f"{when} statement {a.get('statement')} of a {a['call']} call"
    if a.get("sql"):
        return f"{when} sql {a['sql']!r}"
    return f"after {a['after']}" if a.get("after") else str(a.get("before"))


def _interleaving(a: dict[str, Any]) -> str:
    pause = a.get("pause") or {}
    who = pause.get("session") or pause.get("process")
    calls = [f"{next(iter(c))} ({', '.join(str(v) for v in next(iter(c.values())).values() if isinstance(v, str))})"
             for c in a.get("run") or () if c]
    return (f"{who}'s next {pause.get('call')} call is to pause {pause.get('when', 'before')} its statement "
            f"{pause.get('statement')} while {' then '.join(calls)} run")


def _step(step: dict[str, Any]) -> str:
    action = action_of(step)
    a = step[action] if isinstance(step[action], dict) else {}
    at = spell_duration(step["at"])
    text = {
        "send": lambda: f"{a.get('from')} sends {a.get('to') or repr(a.get('to_raw'))} a message"
                        + (f" claiming to be {a['as']}" if a.get("as") else ""),
        "broadcast": lambda: f"{a.get('from')} broadcasts",
        "kill": lambda: f"{a.get('process')} is killed",
        "crash": lambda: f"a crash point is armed in {a.get('process')} ({_crash_point(a)}"
                         + (f", nth {a['nth']})" if "nth" in a else ")"),
        "config": lambda: f"{a.get('process')}'s config changes ("
                          + ", ".join(f"{k} {str(a[k]).lower()}" for k in ("enabled", "autoRegister") if k in a) + ")",
        "sleep": lambda: f"the machine sleeps for {spell_duration(a.get('for', 0))}",
        "stall": lambda: f"{a.get('process')}'s poll timer stalls for {spell_duration(a.get('for', 0))}",
        "lock": lambda: f"another writer holds the database lock for {spell_duration(a.get('for', 0))}",
        "resume": lambda: f"{a.get('session')} is resumed with {a.get('how', '-s')} in {a.get('process')}",
        "restart": lambda: f"the daemon {a.get('process')} restarts into {a.get('into')}",
        "fork": lambda: f"{a.get('session')}'s Claude Code session id forks",
        "interleave": lambda: _interleaving(a),
    }.get(action, lambda: f"{a.get('session') or a.get('process') or 'the CLI'} does `{action}`")()
    return f"at {at} {text}"


def tell(doc: dict[str, Any], check: str, title: str, message: str) -> str:
    """`story:` of a found scenario: the world, the timeline, the broken property."""
    steps = doc.get("steps", [])
    legacy = doc.get("legacy") or []
    old = f" It starts from a 002-era database with {len(legacy)} claimed name(s)." if legacy else ""
    told = [_step(s) for s in steps[:MAX_TOLD_STEPS]]
    if len(steps) > MAX_TOLD_STEPS:
        told.append(f"and {len(steps) - MAX_TOLD_STEPS} more steps")
    timeline = ("; ".join(told) + ".") if told else "Nothing is scripted."
    what = f"{check} ({title})" if title and title != check else check
    return f"{_world(doc)}.{old} {timeline[0].upper() + timeline[1:]} Then {what} fails: {message}"
