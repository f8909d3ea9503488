"""The catalogue of verdicts (simulator/verdicts.py) is the one list: every entry has its registered judge, the
registry refuses what the catalogue does not say, and the docs and the other phases read it."""

from __future__ import annotations

import importlib
import re

import pytest

import repo
import simulator.checks  # noqa: F401 - registers every judge
from simulator.checks.registry import REGISTRY, prop
from simulator.verdicts import CATALOGUE, FAMILIES, POLICY_PROMISE_IDS, PROPERTY_IDS


def _resolve(ref: str):
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


def test_every_entry_is_registered_under_the_judge_it_names():
    assert set(REGISTRY) == set(CATALOGUE)
    for pid, entry in CATALOGUE.items():
        title, rules, fn = REGISTRY[pid]
        assert _resolve(entry.judge) is fn and (title, rules) == (entry.title, entry.rules), pid


def test_every_family_names_a_judge_that_exists():
    for family in FAMILIES:
        assert callable(_resolve(family.judge)), family.name


def test_the_registry_refuses_an_id_or_a_judge_the_catalogue_does_not_list():
    with pytest.raises(ValueError, match=r"^P99 \(p99_judge\) is not in the catalogue"):
        @prop("P99")
        def p99_judge(view):
            """A property nobody declared."""
    with pytest.raises(ValueError, match=r"^P5's judge is simulator\.checks\.messages:p5_no_loss"):
        @prop("P5")
        def another_no_loss(view):
            """A second judge of P5."""


def test_ids_are_read_from_the_catalogue():
    """The P- and Q-ids every phase validates against are the catalogue's, in its order."""
    from simulator.scenario import model
    assert model.PROPERTY_IDS is PROPERTY_IDS and model.POLICY_PROMISE_IDS is POLICY_PROMISE_IDS
    assert PROPERTY_IDS == tuple(f"P{n}" for n in range(1, len(PROPERTY_IDS) + 1))


def test_docs_rules_lists_every_property_with_its_title():
    """docs/rules.md's property table has a row per catalogue property, opening with its title."""
    text = (repo.ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| (P\d+) \| ([a-z-]+):", text, re.M))
    assert rows == {e.id: e.title for e in CATALOGUE.values() if e.id in PROPERTY_IDS}
