"""The authoring guide's examples are the language as it is: every point-expectation
fragment holds only what its kind takes, every process fragment writes out, and
every library scenario the guide names exists and loads."""

from __future__ import annotations

import re

import yaml

import repo
from simulator.scenario.expectation_keys import expectation_body_problems
from simulator.scenario.loader import load_file
from simulator.scenario.model import Expectation
from simulator.scenario.replicas import expand

GUIDE = repo.ROOT / "docs" / "authoring-scenarios.md"


def yaml_blocks() -> list[dict]:
    out = []
    for block in re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(encoding="utf-8"), re.S):
        data = yaml.safe_load(block)
        if isinstance(data, dict):
            out.append(data)
    return out


def test_every_expectation_in_the_guide_is_one_lint_accepts():
    """Each item under an `expect:` in the guide validates, its body included (units required)."""
    items = [item for block in yaml_blocks() for item in block.get("expect") or []]
    assert len(items) >= 20
    for item in items:
        exp = Expectation.model_validate(item)
        assert expectation_body_problems(exp.kind, getattr(exp, exp.kind), units_required=True) == [], item


def test_every_process_fragment_in_the_guide_writes_out():
    """The guide's `processes:` fragments (replicas included) expand without a problem."""
    fragments = [block for block in yaml_blocks() if isinstance(block.get("processes"), list)]
    assert any("replicas" in str(block) for block in fragments)
    for block in fragments:
        assert expand(block).problems == [], block


def test_every_scenario_the_guide_names_exists_and_loads():
    """A library path (`scenarios/<theme>/<name>.yaml` of an existing theme) the guide
    points at as a whole story; its illustrations (`scenarios/basic/x.yaml`) are not files."""
    found = re.finditer(r"scenarios/([a-z0-9_-]+)/[a-z0-9_-]+\.yaml", GUIDE.read_text(encoding="utf-8"))
    paths = sorted({m.group(0) for m in found if (repo.ROOT / "scenarios" / m.group(1)).is_dir()})
    assert "scenarios/broadcast/broadcast-to-replicated-tabs.yaml" in paths
    for rel in paths:
        load_file(repo.ROOT / rel)
