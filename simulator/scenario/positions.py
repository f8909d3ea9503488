"""Where each part of a scenario sits in its YAML file, and a scenario loaded with them.

The loader records the positions while it composes the file; the
cross-reference checks (`simulator.scenario.validate`) read them to put
file:line on every error, and `place_verdicts` puts the line of what each
verdict judges on it once a run of the file is judged (D-plugin-12).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

import yaml

from simulator.scenario.errors import KeyPath, ScenarioError, ScenarioSyntaxError
from simulator.scenario.model import Scenario
from simulator.result import Verdict
from simulator.scenario.replicas import to_template


@dataclass
class Positions:
    """Key path -> 1-based (line, column), for values and for the keys that name them.
    A path into a replicated block's copy is looked up at its template (`template_of`)."""

    values: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[KeyPath, tuple[int, int]] = field(default_factory=dict)
    template_of: dict[KeyPath, KeyPath] = field(default_factory=dict)

    def line_of(self, path: KeyPath) -> tuple[int, int]:
        """The key's line when the path ends in a key, else its value's; the nearest ancestor if absent."""
        path = to_template(path, self.template_of)
        while path:
            if path in self.keys:
                return self.keys[path]
            if path in self.values:
                return self.values[path]
            path = path[:-1]
        return self.values.get((), (1, 1))


@dataclass
class LoadedScenario:
    """A validated scenario with where it came from (for cross-reference checks and reports)."""

    spec: Scenario
    file: str
    positions: Positions
    data: dict[str, Any]


def node_mark(node: yaml.Node) -> tuple[int, int]:
    """A YAML node's 1-based (line, column)."""
    return node.start_mark.line + 1, node.start_mark.column + 1


def record_positions(node: yaml.Node, path: KeyPath, pos: Positions, file: str, errors: list[ScenarioError]) -> None:
    """Record where `node` and everything under it sits into `pos`; a duplicate key is an error
    (YAML would silently keep only the last one)."""
    pos.values[path] = node_mark(node)
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node.value)
            line = node_mark(key_node)[0]
            if key in seen:
                errors.append(ScenarioSyntaxError(
                    f"duplicate key `{key}` (first at line {seen[key]})", file=file, line=line,
                    key_path=path + (key,), hint="keep one; YAML would silently drop the first"))
                continue
            seen[key] = line
            pos.keys[path + (key,)] = node_mark(key_node)
            record_positions(value_node, path + (key,), pos, file, errors)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            record_positions(item, path + (index,), pos, file, errors)


def verdict_key_path(check: str, spec: Scenario) -> Optional[KeyPath]:
    """Where in the file the step or claim a verdict judges is written; None for what the scenario
    does not state one by one (a property judged by default, a policy's promise)."""
    kind, hash_sign, number = check.partition("#")
    if hash_sign:
        return _indexed_path(kind, int(number), spec) if number.isdigit() else None
    if check.startswith("reach:"):
        name = check[len("reach:"):]
        return ("reaches", spec.reaches.index(name)) if name in spec.reaches else None
    listed = spec.properties if isinstance(spec.properties, list) else []  # `all`, `{exclude}`: none by name
    return ("properties", listed.index(check)) if check in listed else None


def _indexed_path(kind: str, index: int, spec: Scenario) -> Optional[KeyPath]:
    """`expect#N`: the point expectation; `step#N`: the `expect:` of step N; `fault#N`: the fault step."""
    if kind == "expect":
        return ("expect", index) if index < len(spec.expect) else None
    if kind in ("step", "fault") and index < len(spec.steps):
        return ("steps", index, "expect") if kind == "step" else ("steps", index)
    return None


def place_verdicts(verdicts: Iterable[Verdict], loaded: LoadedScenario) -> None:
    """Set each verdict's `line` to that of the step or claim it judges in `loaded`'s file."""
    for verdict in verdicts:
        path = verdict_key_path(verdict.check, loaded.spec)
        if path is not None:
            verdict.line = loaded.positions.line_of(path)[0]
