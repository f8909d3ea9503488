"""Coverage-guided exploration: feature sets as data, their mutation, the corpus, measured runs."""

from __future__ import annotations

import json
import random
import shlex
import subprocess
import sys

from explorekit import subprocess_env
from simulator.explore.campaign import Settings, explore_command, generated, run_spec
from simulator.explore.generator import generate
from simulator.explore.guided import (
    Branches, Corpus, Entry, Guide, measured, mutate, swarm_arg, swarm_from_json, swarm_json,
)
from simulator.explore.swarm import ALWAYS_ON_HOSTS, SMALL, draw_swarm
from simulator.scenario.kinds import EXPLORE_ALWAYS_ACTIONS, EXPLORE_FAULTS, HOSTS, STEPS


def test_a_feature_set_round_trips_through_json_and_mutates_within_the_world_rules():
    for seed in range(40):
        swarm = draw_swarm(random.Random(seed))
        assert swarm_from_json(json.loads(json.dumps(swarm_json(swarm)))) == swarm
        child = mutate(swarm, random.Random(seed))
        assert child == mutate(swarm, random.Random(seed))  # a function of the generator
        assert set(ALWAYS_ON_HOSTS) <= set(child.hosts) and child.agents
        assert set(EXPLORE_ALWAYS_ACTIONS) <= set(child.actions)
        for kind in child.faults:
            assert any(HOSTS[h].has(STEPS[EXPLORE_FAULTS[kind][0]].needs) for h in child.hosts)


def test_a_given_feature_set_keeps_the_rest_of_the_seeds_world_and_the_rerun_command_names_it():
    swarm = mutate(draw_swarm(random.Random(3)), random.Random(9))
    gen = generate(3, SMALL, swarm=swarm)
    assert gen.forced and gen.swarm == swarm and gen == generate(3, SMALL, swarm=swarm)
    assert not generate(3, SMALL).forced
    command = explore_command(3, Settings(size=SMALL), swarm)
    given = shlex.split(command)[shlex.split(command).index("--swarm") + 1]
    assert swarm_arg(given) == swarm


def test_the_corpus_choice_is_a_function_of_the_seed_and_the_corpus():
    assert Corpus().choose(5) is None  # nothing learnt yet: the plain draw
    corpus = Corpus()
    for seed in range(3):
        corpus.add(Entry(seed, swarm_json(draw_swarm(random.Random(seed))), None, (f"a.py:{seed}>1",)))
    picks = [corpus.choose(seed) for seed in range(20)]
    assert picks == [corpus.choose(seed) for seed in range(20)]
    assert any(p is not None for p in picks) and any(p is None for p in picks)
    assert all(p[1] in (0, 1, 2) for p in picks if p is not None)
    assert all(p[0].dispatch == "serial" for s in range(20) for p in [corpus.choose(s, "serial")] if p)


def test_a_measured_run_has_the_unmeasured_runs_history_and_reports_branches():
    # Serial worlds: a concurrent one races by design, so its history differs run to run anyway.
    settings = Settings(size=SMALL, dispatch="serial")
    branches = Branches()
    total = branches.total()
    for seed in (0, 1):
        gen = generated(seed, settings)
        plain = run_spec(gen.spec, settings, keep="never")
        outcome, reached = measured(lambda spec=gen.spec: run_spec(spec, settings, keep="never"), branches)
        assert outcome.history == plain.history
        assert [(v.check, v.status) for v in outcome.verdicts] == [(v.check, v.status) for v in plain.verdicts]
        assert 0 < len(reached) < total
        assert all(":" in b and ">" in b for b in reached)


def test_the_guide_keeps_only_runs_with_new_branches_and_a_loaded_corpus_resumes(tmp_path):
    path = tmp_path / "corpus.jsonl"
    guide = Guide(guided=True, corpus_path=path, branches=Branches())
    swarm = draw_swarm(random.Random(0))
    assert guide.learn(0, swarm, frozenset({"x.py:1>2", "x.py:1>3"})) is not None
    assert guide.learn(1, swarm, frozenset({"x.py:1>2"})) is None
    assert guide.learn(2, swarm, frozenset({"x.py:1>2", "x.py:5>6"})).branches == ("x.py:5>6",)
    again = Corpus.load(path)
    assert [e.seed for e in again.entries] == [0, 2] and again.reached == guide.corpus.reached
    assert again.digest() == guide.corpus.digest()


def test_a_guided_campaign_writes_its_corpus_and_branches_over_time(tmp_path):
    out = tmp_path / "found"
    cmd = [sys.executable, "-m", "simulator", "explore", "--seed", "0", "--runs", "3", "--size", "small", "--guided",
           "--no-shrink", "--out", str(out), "--json", str(tmp_path / "s.json")]
    done = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    coverage = json.loads((tmp_path / "s.json").read_text())["coverage"]
    assert [row[0] for row in coverage["timeline"]] == [1, 2, 3] and coverage["branches"] > 0
    assert (out / "coverage.csv").read_text().splitlines()[0] == "runs,wall_s,branches"
    entries = Corpus.load(out / "corpus.jsonl").entries
    assert entries and entries[0].seed == 0 and len(Corpus.load(out / "corpus.jsonl").reached) == coverage["branches"]
    assert "thatch_core branches reached (guided)" in done.stdout
    again = [*cmd[:5], "3", cmd[6], "1", *cmd[8:]]  # seed 3, one run, the same --out
    resumed = subprocess.run(again, env=subprocess_env(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads((tmp_path / "s.json").read_text())["coverage"]["resumed_from"] == len(entries)


def test_shard_summaries_and_corpora_merge_into_one(tmp_path):
    from simulator.explore.campaign import merge_summaries
    a = {"runs": 3, "failing_runs": 1, "seeds": [0, 6], "explore_s": 30.0, "judged": {"P1": 2},
         "faults_fired": {"kill": 1}, "failures": [{"seed": 3, "check": "P2"}], "first_failure_s": 12.0}
    b = {"runs": 2, "failing_runs": 0, "seeds": [1, 4], "explore_s": 30.0, "judged": {"P1": 1, "P3": 1},
         "faults_fired": {"kill": 2}, "failures": [], "first_failure_s": None}
    merged = merge_summaries([a, b])
    assert merged["runs"] == 5 and merged["seeds"] == [0, 6] and merged["faults_fired"] == {"kill": 3}
    assert merged["judged"]["P1"] == 3 and "P1" not in merged["never_judged"] and "P2" in merged["never_judged"]
    assert merged["failures"] == [{"seed": 3, "check": "P2"}] and merged["first_failure_s"] == 12.0
    swarm = swarm_json(draw_swarm(random.Random(0)))
    for name, seed, branches in (("a.jsonl", 0, ("x:1>2", "x:3>4")), ("b.jsonl", 1, ("x:1>2", "x:5>6"))):
        (tmp_path / name).write_text(json.dumps(Entry(seed, swarm, None, branches).as_json()) + "\n")
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    cmd = [sys.executable, "-m", "simulator", "explore", "--merge", *(str(tmp_path / n) for n in
                                                                     ("a.json", "b.json", "a.jsonl", "b.jsonl")),
           "--out", str(tmp_path / "all"), "--json", str(tmp_path / "all.json")]
    done = subprocess.run(cmd, env=subprocess_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr  # a shard failed
    assert json.loads((tmp_path / "all.json").read_text())["corpus"]["branches"] == 3
    entries = Corpus.load(tmp_path / "all" / "corpus.jsonl").entries
    assert [(e.seed, e.branches) for e in entries] == [(0, ("x:1>2", "x:3>4")), (1, ("x:5>6",))]


def test_the_comparison_table_reads_branches_at_even_checkpoints():
    from simulator.explore.campaign import Summary
    from simulator.explore.report import compare_table
    plain, guided = Summary(runs=3), Summary(runs=4)
    plain.coverage = {"timeline": [[1, 10.0, 100], [2, 25.0, 150], [3, 61.0, 160]], "of": 800}
    guided.coverage = {"timeline": [[1, 5.0, 90], [2, 20.0, 170], [3, 40.0, 175], [4, 59.0, 190]], "of": 800}
    table = compare_table(plain, guided, budget_s=60.0, runs=None, steps=3).splitlines()
    assert table[0].startswith("| mode | branches at 20s | branches at 40s | branches at 60s | at the end | runs |")
    assert table[2] == "| plain swarm | 100 | 150 | 150 | 160 (61s) | 3 | 0 | - |"
    assert table[3] == "| guided | 170 | 175 | 190 | 190 (59s) | 4 | 0 | - |"
