"""Generated runs never fail on correct code, and a seed's serial history is the same every time.

A failure here is a bug in the generator (it drew a world the design gives
no single right outcome) or a false alarm of a checker: the failing seed,
check and message are in the assertion, and
`python -m simulator explore --seed S --size small` reruns it (`--print` shows the scenario).
100 small worlds in chunks, so xdist spreads them (about half a minute of
two cores in all: marked slow). 100, not more: the main job explores 200
default-size worlds besides, and this suite must stay quick enough to run
many times in a row on a loaded machine.
"""

from __future__ import annotations

import pytest

from simulator.explore.campaign import Settings, confirmed, determinism_problem, generated, run_spec
from simulator.explore.swarm import SMALL

SEEDS = 100
CHUNK = 25
DETERMINISM_EVERY = 5     # every 5th seed also runs twice and compares its histories


@pytest.mark.slow
@pytest.mark.parametrize("first", range(0, SEEDS, CHUNK), ids=lambda s: f"seeds-{s}-{s + CHUNK - 1}")
def test_generated_runs_pass_on_correct_code(first, tmp_path):
    drawn = Settings(size=SMALL, work=tmp_path)                            # the dispatch each seed draws
    serial = Settings(size=SMALL, work=tmp_path, check_determinism=True)   # forces serial dispatch
    problems = []
    for seed in range(first, first + CHUNK):
        gen = generated(seed, drawn)
        outcome = run_spec(gen.spec, drawn)
        findings, _ = confirmed(gen.spec, outcome, drawn)  # an engine error must come back on a rerun
        problems += [f"seed {seed}: {f.check}: {f.message.splitlines()[0]}" for f in findings]
        if seed % DETERMINISM_EVERY == 0:
            spec = generated(seed, serial).spec
            once = outcome if gen.spec.dispatch == "serial" else run_spec(spec, serial)
            diff = determinism_problem(spec, once, serial) if once.history else None
            if diff:
                problems.append(f"seed {seed}: history differs between two serial runs: {diff}")
    assert problems == []
