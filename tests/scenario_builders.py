"""Python-level scenarios for tests: small builders over `simulator.scenario.model.Scenario`.

A test that needs a whole run (real forked harnesses, the real WAL database,
the real checkers) builds its scenario here instead of in a YAML file, so it
can run the same world twice: once with the real thatch_core classes and
once with a deliberately broken variant injected through `overrides`
(`{"store": ..., "poller": ..., "runtime": ...}`, applied by
simulator/harness/support.py `make_store` and opencode.py's poller swap).

Every builder returns a validated `Scenario`; `run` executes one in its own
directory under the test's tmp_path. Nothing here is random: the scenario's
seed (default 0) drives names, ids and bodies.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from simulator.api import run_scenario
from simulator.result import RunResult
from simulator.scenario.model import Scenario


# ---------------------------------------------------------------------------
# Small pieces
# ---------------------------------------------------------------------------

def session(label: str, agent: Any = "reader", **fields: Any) -> dict:
    """A session entry (`agent` is a kind or a full agent dict)."""
    return {"id": label, "agent": agent, **fields}


def opencode(label: str, *sessions: dict, project: Optional[str] = "web", **fields: Any) -> dict:
    """An opencode process hosting `sessions` (none and `start="never"` for a resume/restart target)."""
    return {"id": label, "kind": "opencode", "project": project, "sessions": list(sessions), **fields}


def claude_code(label: str, *sessions: dict, project: Optional[str] = "web", **fields: Any) -> dict:
    """A Claude Code host process (hooks and MCP server are real child processes)."""
    return {"id": label, "kind": "claude-code", "project": project, "sessions": list(sessions), **fields}


def cursor(label: str, *sessions: dict, project: Optional[str] = "web", **fields: Any) -> dict:
    """A Cursor workspace process: its conversations share one MCP server that trusts a claimed `as`."""
    return {"id": label, "kind": "cursor", "project": project, "sessions": list(sessions), **fields}


def send(at: str, frm: str, to: str, body: str) -> dict:
    return {"at": at, "send": {"from": frm, "to": to, "body": body}}


def act(at: str, action: str, **args: Any) -> dict:
    """Any other step: `act("30s", "unregister", session="alice")`."""
    return {"at": at, action: args}


def scenario(name: str, processes: list[dict], steps: list[dict] = (), *, duration: str = "2m",
             drain: str = "30s", **fields: Any) -> Scenario:
    """A validated Scenario (properties: all, seed 0 unless given)."""
    return Scenario.model_validate({"name": name, "duration": duration, "drain": drain,
                                    "processes": processes, "steps": list(steps), **fields})


def run(spec: Scenario, run_dir: Path, **overrides: Any) -> RunResult:
    """Run `spec` for real in `run_dir`; keyword arguments are the overrides."""
    return run_scenario(spec, run_dir=Path(run_dir), overrides=overrides or None, wall_timeout_s=60)


def explain(result: RunResult, check: Optional[str] = None) -> str:
    """A failure message: the error, then the verdicts that matter."""
    lines = [f"{result.scenario} seed={result.seed} run_dir={result.run_dir}"]
    if result.error:
        lines.append(f"error: {result.error}")
    for v in result.verdicts:
        if v.check == check or not v.ok:
            lines.append(f"{v.check} {v.status}: {v.message}")
    return "\n".join(lines)


def assert_break(check: str, spec: Scenario, tmp_path: Path, why: str, **broken: Any) -> tuple[RunResult, RunResult]:
    """Run `spec` clean (must pass `check` and be ok overall), then with `broken`
    (must fail `check` with a witness whose message mentions `why`)."""
    good = run(spec, tmp_path / "real")
    assert good.ok, explain(good, check)
    assert good.verdict(check).status == "pass", explain(good, check)
    bad = run(spec, tmp_path / "broken", **broken)
    assert bad.error is None, explain(bad, check)
    v = bad.verdict(check)
    assert v.status == "fail", explain(bad, check)
    assert v.witness, f"{check} failed without a witness: {v.message}"
    assert why in v.message, f"{check} failed for another reason: {v.message}"
    return good, bad


# ---------------------------------------------------------------------------
# The worlds the property-failure tests use
# ---------------------------------------------------------------------------

def two_tabs(name: str, steps: list[dict] = (), *, bob_agent: Any = "reader", **fields: Any) -> Scenario:
    """alice and bob, each in its own opencode process."""
    return scenario(name, [opencode("h1", session("alice")), opencode("h2", session("bob", bob_agent))],
                    steps, **fields)


def crash_at_stamp_then_resume(name: str = "crash-at-stamp-then-resume") -> Scenario:
    """The scenarios/delivery/crash-between-wake-and-stamp.yaml world in Python:
    bob's harness dies just before stamping delivered_at; `-s` resumes bob."""
    return scenario(name, [
        opencode("h1", session("alice")),
        opencode("h2", session("bob", "silent")),
        opencode("h2-resumed", start="never"),
    ], [
        act("30s", "crash", process="h2", before="delivered-stamp"),
        send("1m", "alice", "bob", "is the release green?"),
        act("4m", "resume", session="bob", process="h2-resumed", how="-s"),
    ], duration="10m", drain="5m", seed=7, reaches=["re-nudge"], rules=["R5", "R21", "R23"])


def crash_between_two_batches(name: str = "crash-between-two-batches") -> Scenario:
    """Two recipients in one harness: it dies just before its second
    delivered stamp (carol's), then bob and carol are each resumed with `-s`.

    With the real poller that crash sits between carol's wake and her stamp,
    so carol must be re-nudged. A stamp-before-prompt poller stamps every
    batch before prompting any: the same crash then leaves bob's batch
    stamped but never woken, and its 15-minute re-nudge would come after the
    run ends (duration 6m + drain 2m)."""
    return scenario(name, [
        opencode("h1", session("alice")),
        opencode("h2", session("bob", "silent"), session("carol", "silent")),
        opencode("h2-bob", start="never"),
        opencode("h2-carol", start="never"),
    ], [
        act("30s", "crash", process="h2", before="delivered-stamp", nth=2),
        send("40s", "alice", "bob", "is the release green?"),
        send("45s", "alice", "carol", "can you review #12?"),
        act("4m", "resume", session="bob", process="h2-bob", how="-s"),
        act("4m", "resume", session="carol", process="h2-carol", how="-s"),
    ], duration="6m", drain="2m", reaches=["re-nudge"], rules=["R5", "R21", "R23"])


def crash_at_wake_prompt(when: str, name: Optional[str] = None) -> Scenario:
    """bob's harness dies at the wake prompt, `before` it reaches him or `after`
    it did (and before the poller stamps it); `-s` resumes bob at 4m. The run
    ends at 15m, before the 15-minute re-nudge of a batch stamped at 1m (R18)."""
    return scenario(name or f"crash-{when}-wake-prompt", [
        opencode("h1", session("alice")),
        opencode("h2", session("bob", "silent")),
        opencode("h2-resumed", start="never"),
    ], [
        act("30s", "crash", process="h2", **{when: "wake-prompt"}),
        send("1m", "alice", "bob", "is the release green?"),
        act("4m", "resume", session="bob", process="h2-resumed", how="-s"),
    ], duration="10m", drain="5m", seed=7, rules=["R21", "R23"],
        reaches=["re-nudge"] if when == "after" else [])


def leave_then_crash_after_commit(name: str = "leave-then-crash-after-commit") -> Scenario:
    """alice's greenlit exit leaves the directory and her harness dies right
    after the leave's transaction commits; `-s` resumes her at 1m and she types
    at 2m. The leave must stick (R7): its tombstone committed with it."""
    return scenario(name, [
        opencode("h1", session("alice")),
        opencode("h2", session("bob")),
        opencode("h1-resumed", start="never"),
    ], [
        act("20s", "crash", process="h1", after="unregister"),
        act("30s", "exit", session="alice"),
        act("1m", "resume", session="alice", process="h1-resumed", how="-s"),
        act("2m", "prompt", session="alice", text="carry on"),
    ], duration="3m", drain="1m", rules=["R7"])


def idle_inside_wake_prompt(events: str = "synchronous", name: Optional[str] = None) -> Scenario:
    """h2 hosts silent bob, carol and dave; carol's and dave's first turns end
    together at 45s. alice mails bob at 40s, so carol's idle flush wakes bob,
    and with `events: synchronous` dave's idle is handed to the runtime inside
    that wake prompt: the poller is re-entered while it delivers (R24)."""
    return scenario(name or f"idle-inside-wake-prompt-{events}", [
        opencode("h1", session("alice")),
        opencode("h2", session("bob", "silent"), session("carol", start="25s"), session("dave", start="25s"),
                 events=events),
    ], [send("40s", "alice", "bob", "is the release green?")],
        duration="3m", drain="1m", seed=3, rules=["R24", "R19"],
        reaches=["event-in-wake"] if events == "synchronous" else [],
        expect=[{"at": "50s", "wakes": {"session": "bob", "count": 1}}])
