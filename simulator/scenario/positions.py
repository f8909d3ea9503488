"""Where each part of a scenario sits in its YAML file, and a scenario loaded with them.

The loader records the positions while it composes the file; the
cross-reference checks (`simulator.scenario.validate`) read them to put
file:line on every error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from simulator.scenario.errors import KeyPath, ScenarioError, ScenarioSyntaxError
from simulator.scenario.model import Scenario
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
