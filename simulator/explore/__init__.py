"""Exploration: seeded swarm generation of whole scenarios, shrinking of failures to scenario files.

The parts, in the order a seed goes through them:
- `swarm`: which feature families one run turns on (hosts, agents, windows,
  actions, faults and their rates, dispatch), and the world's size bounds;
- `generator`: one seed -> one valid `Scenario`, drawn through one
  `random.Random` (faker included), planned against `plan`;
- `plan`: the world model a timeline must fit (who runs, who hosts whom);
  the generator and the shrinker share it;
- `judge`: run one scenario, read its failing properties and its figures;
- `shrink`: greedy delta debugging while the same check fails on the same seed;
- `writer`, `story`, `found`: the YAML (the loader's inverse), its story, the
  file under scenarios/found/;
- `determinism`: two serial runs of a seed, the first differing event;
- `campaign`, `progress`, `report`: many seeds, a budget, a progress bar, the summary;
- `guided`: coverage guidance: thatch_core's branches measured per run, a
  corpus of the runs that reached new ones, feature sets drawn from it;
- `cli`: `python -m simulator explore`.

The pytest side (`--sim-explore N`) is simulator/pytest_plugin/explore.py.
Nothing here imports thatch_core: a run goes through `simulator.api.run_scenario`.
"""
