"""What a scenario run gives back: verdicts, the history, where the files are."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Optional

from simulator.history import History

# not-applicable: the policy in force does not make the property's promise (never a failure).
# expected-fail: a failure the scenario expects under its design (an incident reproduced, caught).
Status = Literal["pass", "fail", "not-reached", "skipped", "not-applicable", "expected-fail"]


# The one verdict of a scenario its system under test cannot be judged on (simulator/sut/capabilities.py).
SUT_CHECK = "sut"


@dataclass
class Verdict:
    """The outcome of one check (a property, a reach claim, a point expectation, a fault)."""

    check: str                      # "P3", "Q1", "reach:re-nudge", "expect#2", "step#3", "fault#4"
    title: str                      # "at-least-once"
    status: Status
    message: str = ""               # one or two sentences: what was expected, what happened
    rules: tuple[str, ...] = ()     # R-ids the check stands for
    witness: list[dict[str, Any]] = field(default_factory=list)  # the few events that break it
    judged: int = 0                 # a property's count of what it judged (messages, wakes, samples...): 0 = nothing
    # The 1-based line, in the scenario file, of the step or claim it judges; set from the loaded
    # file's positions after the run (`place_verdicts`), so a Python-built scenario's stay None.
    line: Optional[int] = None

    @property
    def ok(self) -> bool:
        return self.status in ("pass", "skipped", "not-applicable", "expected-fail")


@dataclass
class RunResult:
    scenario: str
    seed: int
    run_dir: Path
    db_path: Path
    history_path: Path
    history: list[dict[str, Any]]    # the lines of history.jsonl, as written
    verdicts: list[Verdict]          # properties, reach claims, expectations, faults: all of them
    wall_s: float = 0.0
    virtual_ms: int = 0
    dispatches: int = 0
    error: Optional[str] = None      # a harness/engine error that stopped the run
    sut: str = "thatch-core"         # the system under test's name (simulator.sut.Sut.name)
    # The same events decoded once into records (simulator.history.History): what the judges,
    # the report and compare read. A hand-made result may leave it out; `typed` decodes then.
    records: Optional[History] = None

    @property
    def typed(self) -> History:
        """The run's events as records."""
        if self.records is None:
            self.records = History.decode(self.history)
        return self.records

    @property
    def ok(self) -> bool:
        return self.error is None and all(v.ok for v in self.verdicts)

    @property
    def unjudged(self) -> Optional[Verdict]:
        """The `sut` verdict of a scenario its system could not be judged on (not run there), else None."""
        return self.verdicts[0] if [v.check for v in self.verdicts] == [SUT_CHECK] else None

    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.ok]

    def verdict(self, check: str) -> Verdict:
        return next(v for v in self.verdicts if v.check == check)

    def events(self, kind: Optional[str] = None, session: Optional[str] = None,
               proc: Optional[str] = None) -> list[dict[str, Any]]:
        return [
            e for e in self.history
            if (kind is None or e["kind"] == kind)
            and (session is None or e.get("session") == session)
            and (proc is None or e.get("proc") == proc)
        ]

    def summary_json(self) -> str:
        return json.dumps(
            {
                "scenario": self.scenario,
                "seed": self.seed,
                "ok": self.ok,
                "error": self.error,
                "wall_s": round(self.wall_s, 3),
                "virtual_ms": self.virtual_ms,
                "dispatches": self.dispatches,
                "verdicts": [asdict(v) | {"witness": v.witness[:10]} for v in self.verdicts],
            },
            indent=2,
            default=str,
        )
