"""The registry of judges: each property (P-id) and policy promise (Q-id) of the catalogue
(simulator/verdicts.py) as a small registered checker, and running the properties.

Each checker is a function decorated with `@prop(id)`, which takes its title and rules from the
catalogue (refusing an id it does not list, a judge other than the one it names, a second
registration or a missing docstring), and whose docstring states the property in one sentence (the precise definitions
and their tolerances are in docs/decisions/props.md). A checker gets a
`RunView` and returns a `Verdict`: "pass", "fail" (a short message and the few
events that break it), or "skipped" when the situation never occurred in the
run, with `judged`: how many things (messages, wakes, samples, names...) it
actually judged. `check_properties` turns a property the scenario listed by
name that judged nothing (skipped, or a pass over nothing) into "not-reached"
(Reach, not just pass).

Each property also declares which designs make its promise (`Promise`: a
test of one process's policy options, and the words for it); where no
process of the run runs under options that make it, the verdict is
"not-applicable" (counted and shown, never a failure), and a checker that
judges per process (P2, P10) judges only the processes that make it
(`promised_procs`). The policies' promises (Q1-Q3) declare theirs the same way.

Safety properties (P1, P2, P5-P10) are judged over the whole run; the
progress parts of P3 and P4 only where the run gave the system a chance.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from simulator.checks.view import RunView, brief
from simulator.events import Event, Sample
from simulator.result import Verdict
from simulator.scenario.model import Scenario
from simulator.scenario.policies import PolicyOptions, options_by_process
from simulator.verdicts import CATALOGUE


@dataclass(frozen=True)
class Promise:
    """Which designs make a property's promise: `made_by` one process's options (the catalogue's `applies`
    says it in words)."""

    made_by: Callable[[PolicyOptions], bool]


EVERY_DESIGN = Promise(lambda o: True)

WITNESS_MAX = 8

Checker = Callable[[RunView], Verdict]
REGISTRY: dict[str, tuple[str, tuple[str, ...], Checker]] = {}


def prop(pid: str, *, promise: Promise = EVERY_DESIGN) -> Callable[[Checker], Checker]:
    """Register the judge of catalogue entry `pid` (refused for an id the catalogue does not list, a judge other
    than the one it names, twice, or without a docstring), with the designs that make its promise."""
    def deco(fn: Checker) -> Checker:
        entry = CATALOGUE.get(pid)
        if entry is None:
            raise ValueError(f"{pid} ({fn.__name__}) is not in the catalogue of verdicts (simulator/verdicts.py)")
        if f"{fn.__module__}:{fn.__name__}" != entry.judge:
            raise ValueError(f"{pid}'s judge is {entry.judge} in the catalogue, not {fn.__module__}:{fn.__name__}")
        if pid in REGISTRY:
            raise ValueError(f"{pid} is registered twice ({REGISTRY[pid][2].__name__} and {fn.__name__})")
        if not (fn.__doc__ or "").strip():
            raise ValueError(f"{pid} ({fn.__name__}) needs a one-sentence docstring stating it")
        REGISTRY[pid] = (entry.title, entry.rules, fn)
        fn.pid, fn.title, fn.rules, fn.promise = pid, entry.title, entry.rules, promise  # type: ignore[attr-defined]
        return fn
    return deco


def judges(family: str) -> list[Any]:
    """The registered judges of one catalogue family, in catalogue order."""
    return [REGISTRY[e.id][2] for e in CATALOGUE.values() if e.family == family and e.id in REGISTRY]


def promised_procs(fn: Any, spec: Any) -> frozenset[str]:
    """The processes of `spec` whose options make the promise of the checker `fn`."""
    return frozenset(p for p, o in options_by_process(spec).items() if fn.promise.made_by(o))


def not_applicable(fn: Any, spec: Any) -> Verdict | None:
    """The verdict of a promise no process of the run makes, else None (judge it)."""
    if promised_procs(fn, spec):
        return None
    policies = sorted({o.describe() for o in options_by_process(spec).values()})
    return Verdict(fn.pid, fn.title, "not-applicable",
                   f"not applicable: made by {CATALOGUE[fn.pid].applies}, and no process runs under such options "
                   f"(policy in force: {'; '.join(policies) or 'none'})", fn.rules)


def verdict(fn: Checker, status: str, message: str = "", witness: list[dict] | None = None, judged: int = 1) -> Verdict:
    """A verdict of the registered checker `fn`, with at most WITNESS_MAX witness events.
    `judged` defaults to 1 for a failure: the thing that broke it was judged."""
    wit = [brief(e) if isinstance(e, Event) or "kind" in e else e for e in (witness or [])][:WITNESS_MAX]
    return Verdict(fn.pid, fn.title, status, message, fn.rules, wit, judged)  # type: ignore[attr-defined,arg-type]


def passed(fn: Checker, message: str, judged: int) -> Verdict:
    """A pass over `judged` things (0: it passed over nothing; listed by name, that is not reached)."""
    return verdict(fn, "pass", message, judged=judged)


def skipped(fn: Checker, message: str) -> Verdict:
    return verdict(fn, "skipped", message, judged=0)


def sample_row(sample: Sample, label: str) -> dict:
    """The sample reduced to one session, for a short witness."""
    return replace(sample, sessions={label: sample.sessions[label]}).as_dict()


def check_properties(spec: Scenario, view: RunView) -> list[Verdict]:
    """One verdict per property the scenario checks, in its order."""
    listed = spec.lists_properties()  # `all` and `{exclude: [...]}` claim nothing one by one
    out = []
    for pid in spec.checked_properties():
        title, rules, fn = REGISTRY[pid]
        # `properties: {include: [...]}` judges a property on any design ("would this have been caught?").
        na = None if pid in spec.included_properties() else not_applicable(fn, spec)
        if na is not None:
            out.append(na)
            continue
        try:
            v = fn(view)
        except Exception as exc:  # noqa: BLE001 - a checker bug must show as a failure, not kill the report
            v = Verdict(pid, title, "fail", f"checker error: {type(exc).__name__}: {exc}", rules)
        if listed and (v.status == "skipped" or (v.status == "pass" and not v.judged)):
            v.status = "not-reached"
            v.message = f"listed in properties: but nothing to check ({v.message})"
        out.append(v)
    return out
