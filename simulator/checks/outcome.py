"""A scenario meant to fail under a design: `expect_outcome: {fails: {thatch: [P12]}}`.

An incident reproduced under the design that shipped it fails the property
that catches it, by name; the gate must stay green all the same. Under the
named design each listed property must fail: its verdict becomes
`expected-fail` (ok: the incident was caught), and one that held instead
fails as `outcome:<P-id>` (the story no longer reproduces the incident).
Under any other design nothing changes: every property must hold as usual.
A run on a real thatch checkout (--sut) is under the design `checkout`, the
checkout's own, whatever the scenario's options say.
"""

from __future__ import annotations

from typing import Optional

from simulator.result import Verdict
from simulator.scenario.model import Scenario
from simulator.scenario.policies import POLICY_SETS, scenario_options


def design_name(spec: Scenario) -> Optional[str]:
    """The named set the scenario runs under (None: options of its own)."""
    options = scenario_options(spec)
    return next((name for name, o in POLICY_SETS.items() if o == options), None)


def expected_outcome(spec: Scenario, verdicts: list[Verdict], *, design: Optional[str] = None) -> list[Verdict]:
    """`verdicts` with the failures the scenario expects under its design marked as expected; `design`
    names it when the scenario does not decide it (a real checkout runs its own: `checkout`)."""
    outcome = getattr(spec, "expect_outcome", None)
    name = design or design_name(spec)
    expected = list(outcome.fails.get(name, ())) if outcome is not None and name is not None else []
    if not expected:
        return verdicts
    out = list(verdicts)
    for pid in expected:
        v = next((v for v in out if v.check == pid), None)
        if v is not None and v.status == "fail":
            v.status = "expected-fail"
            v.message = f"expected under {name} (the incident, caught): {v.message}"
            continue
        shown = v.status if v is not None else "not judged"
        out.append(Verdict(f"outcome:{pid}", f"{pid} fails under {name}", "fail",
                           f"the scenario expects {pid} to fail under {name} (the incident it reproduces), "
                           f"but it was {shown}"))
    return out
