"""The kind tables: every action, fault and host kind is declared once, and every phase's table is complete.

simulator/scenario/kinds.py declares the kinds; the engine, the fake hosts, the
crash-point registry and exploration keep their own handler tables keyed by
them. These tests fail when a table misses a declared kind or names one that is
not declared, and when a host kind is spelled as a string outside the
declaration and the fake hosts.
"""

from __future__ import annotations

import ast
import dataclasses

import pytest

import repo
from simulator.child import crash_points
from simulator.engine.faults import FAULTS
from simulator.engine.orchestrator import ENGINE_ACTIONS
from simulator.explore.generator import ACTION_DRAWS, FAULT_DRAWS
from simulator.harness import HARNESSES
from simulator.scenario import kinds
from simulator.scenario.kinds import (
    ACTION_KEYS, CRASH_POINTS, EXPLORE_ACTIONS, EXPLORE_FAULTS, FAULT_KEYS, HOSTS, ORCHESTRATOR, STEPS, HostKind,
    harness_actions,
)
from simulator.scenario.model import Step


def test_every_host_kind_has_a_fake_host_and_every_fake_host_a_kind():
    assert list(HARNESSES) == list(HOSTS)
    assert {cls.kind for cls in HARNESSES.values()} == set(HOSTS)


@pytest.mark.parametrize("host_kind", list(HOSTS))
def test_each_fake_host_serves_exactly_the_actions_its_kind_accepts(host_kind):
    cls = HARNESSES[host_kind]
    bare = object.__new__(cls)  # the table is built from bound methods only
    assert set(cls.action_handlers(bare)) == harness_actions(host_kind)


def test_the_engine_carries_out_every_step_that_runs_in_the_orchestrator():
    assert sorted(FAULTS) == sorted(FAULT_KEYS)
    own = {k.key for k in STEPS.values() if k.runs == ORCHESTRATOR and not k.fault}
    assert set(ENGINE_ACTIONS) == own


def test_the_step_model_has_one_field_per_scripted_kind_holding_its_arguments_model():
    fields = {(f.alias or name): f for name, f in Step.model_fields.items() if name not in ("at", "name", "expect")}
    assert list(fields) == [*ACTION_KEYS, *FAULT_KEYS]
    for key, field in fields.items():
        assert STEPS[key].args in field.annotation.__args__, key
        assert field.description == STEPS[key].description


def test_the_crash_point_registry_matches_every_declared_point():
    assert set(crash_points.NAMED_POINTS) == {k for k, c in CRASH_POINTS.items() if not c.host_step}
    assert set(crash_points.HOST_POINTS) == {k for k, c in CRASH_POINTS.items() if c.host_step}


def test_exploration_draws_every_declared_family_and_only_declared_kinds():
    assert set(ACTION_DRAWS) == set(EXPLORE_ACTIONS)
    assert set(FAULT_DRAWS) == set(EXPLORE_FAULTS)
    assert all(STEPS[kind].fault for kind, _ in EXPLORE_FAULTS.values())
    families = {k.family for k in STEPS.values() if k.family is not None}
    assert families == set(EXPLORE_ACTIONS)


def test_every_trait_a_step_needs_is_a_boolean_host_trait():
    booleans = {f.name for f in dataclasses.fields(HostKind) if f.type in ("bool", bool)}
    needed = {k.needs for k in STEPS.values() if k.needs is not None}
    assert needed <= booleans, needed - booleans
    assert all(k.target in (kinds.SENDER, kinds.SESSION, kinds.PROCESS, kinds.MACHINE, kinds.ENGINE)
               for k in STEPS.values())


def test_every_fault_that_can_miss_says_why():
    silent = [k.key for k in STEPS.values() if k.fault and k.not_reached is None]
    assert silent == ["sleep"]  # a machine sleep always takes effect


def _host_kind_literals(path) -> list[tuple[int, str]]:
    """(line, text) of every string constant of `path` that is a host kind's name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in HOSTS]


def test_no_module_but_the_declaration_and_the_fake_hosts_spells_a_host_kind():
    own = {repo.ROOT / "simulator" / "scenario" / "kinds.py"}
    hosts = repo.ROOT / "simulator" / "harness"
    found = [f"{path.relative_to(repo.ROOT)}:{line}: {text!r}"
             for path in sorted((repo.ROOT / "simulator").rglob("*.py"))
             if path not in own and hosts not in path.parents for line, text in _host_kind_literals(path)]
    assert found == []


def test_the_host_kind_scan_finds_a_spelled_kind(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('KIND = "cursor"\n')
    assert _host_kind_literals(planted) == [(1, "cursor")]


def test_no_handler_is_found_by_building_its_name():
    built = [f"{p.relative_to(repo.ROOT)}" for p in (repo.ROOT / "simulator").rglob("*.py")
             if 'getattr(self, f"act_' in p.read_text(encoding="utf-8")
             or 'getattr(self, "op_"' in p.read_text(encoding="utf-8")]
    assert built == []


def test_the_label_argument_keys_are_the_label_fields_of_the_argument_models():
    """Validation and the planner check the labels under these keys: every model field spelled so is one."""
    keys = set(kinds.SESSION_ARG_KEYS + kinds.PROCESS_ARG_KEYS)
    spelled = {f.alias or name for k in STEPS.values() for name, f in k.args.model_fields.items()}
    assert keys <= spelled
    for k in STEPS.values():
        for name, f in k.args.model_fields.items():
            if (f.alias or name) in keys:
                assert "str" in str(f.annotation), (k.key, name)


def test_every_store_call_a_crash_may_name_is_a_store_method():
    """A `crash: {call: ...}` names a method of thatch_core's store (its statements are counted)."""
    from simulator.scenario.kinds import STORE_CALLS
    from thatch_core.store import ChatStore

    assert [c for c in STORE_CALLS if not callable(getattr(ChatStore, c, None))] == []
