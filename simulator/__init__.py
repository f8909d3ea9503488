"""The simulated world around thatch_core: harness processes, virtual clock, faults, history."""

from simulator.scenario.model import Scenario


def run_scenario(*args, **kwargs):
    """Run a scenario (see simulator.api.run_scenario); imported lazily to keep `import simulator` light."""
    from simulator.api import run_scenario as _run

    return _run(*args, **kwargs)


__all__ = ["Scenario", "run_scenario"]
