"""A Scenario as the YAML a person would write: durations with units, steps one line each.

`scenario_yaml` is the inverse of the loader (every library scenario and
every generated one loads back equal): only the keys that were given are
written (a default the author did not write stays unwritten: `crash.nth`
means something else when given), durations as `5m30s`, and each step's
arguments, agents and windows as one flow mapping. `document` is the same
scenario as plain data with durations in milliseconds, the form the
shrinker edits. `short_hash` names a scenario by its content.
"""

from __future__ import annotations

import hashlib
import os
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, WithJsonSchema

from simulator.scenario.durations import duration_json_schema
from simulator.scenario.loader import SCHEMA_HEADER
from simulator.scenario.model import Scenario
from simulator.scenario.schema import SCHEMA_PATH

_DURATION_SCHEMAS = [duration_json_schema(), duration_json_schema("never"), duration_json_schema("end")]
# Mappings written on one line: a step's arguments, an agent, a window, a body.
_FLOW_PARENTS = ("steps", "agent", "busy", "compacting", "aborted", "body", "legacy", "config", "expect")


class _Flow(dict):
    """A mapping the dumper writes in flow style (`{from: alice, to: bob}`)."""


class _FlowList(list):
    """A list of scalars the dumper writes on one line (`rules: [R7, R17]`)."""


class _Dumper(yaml.SafeDumper):
    """Block style for the world, flow style for what `_Flow` and `_FlowList` mark."""


_Dumper.add_representer(
    _Flow, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=True))
_Dumper.add_representer(_FlowList, lambda d, data: d.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True))


def _marks_duration(metadata: Any) -> bool:
    return any(isinstance(m, WithJsonSchema) and m.json_schema in _DURATION_SCHEMAS for m in metadata)


def _is_duration(info: Any) -> bool:
    """A duration field, optional ones included (`Optional[DurationMs]` keeps its marks inside)."""
    if _marks_duration(info.metadata):
        return True
    inner = [a for a in typing.get_args(info.annotation) if typing.get_origin(a) is typing.Annotated]
    return any(_marks_duration(a.__metadata__) for a in inner)


_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1))


def spell_duration(ms: int) -> str:
    """A duration as an author writes it: units largest first (`7m45s`, `1d2h`, `0s`)."""
    parts = []
    for unit, size in _UNITS:
        if ms >= size:
            parts.append(f"{ms // size}{unit}")
            ms %= size
    return "".join(parts) or "0s"


def _written(model: BaseModel, millis: bool) -> dict[str, Any]:
    """The fields the author gave, by their YAML key; durations as text unless `millis`."""
    out: dict[str, Any] = {}
    for name, info in type(model).model_fields.items():
        if name not in model.model_fields_set:
            continue
        value = getattr(model, name)
        if _is_duration(info) and isinstance(value, int) and not millis:
            value = spell_duration(value)
        out[info.alias or name] = _value(value, millis)
    return out


def _value(value: Any, millis: bool) -> Any:
    if isinstance(value, BaseModel):
        return _written(value, millis)
    if isinstance(value, list):
        return [_value(v, millis) for v in value]
    if isinstance(value, dict):
        return {k: _value(v, millis) for k, v in value.items()}
    return value


def document(spec: Scenario) -> dict[str, Any]:
    """The scenario as plain data (what its YAML says, durations in ms): loads back equal."""
    return _written(spec, millis=True)


def _flowed(data: Any, parent: str = "") -> Any:
    """Mark the mappings written on one line: everything below a step's action key, agents, windows."""
    if isinstance(data, list):
        if data and all(isinstance(v, (str, int)) for v in data):
            return _FlowList(data)
        return [_flowed(v, parent) for v in data]
    if not isinstance(data, dict):
        return data
    if parent == "steps":  # a step: `at` on its own line, its action's arguments flowed
        return {k: (_Flow(v) if isinstance(v, dict) else v) for k, v in data.items()}
    if parent in _FLOW_PARENTS:
        return _Flow(data)
    return {k: _flowed(v, k) for k, v in data.items()}


def scenario_yaml(spec: Scenario, *, comments: tuple[str, ...] = (), schema_from: Path | None = None) -> str:
    """The YAML text of `spec`; `comments` go on top, below the schema line when `schema_from`
    (the directory the file will live in) is given."""
    head = []
    if schema_from is not None:
        head.append(SCHEMA_HEADER + os.path.relpath(SCHEMA_PATH.absolute(), Path(schema_from).absolute()))
    head += [f"# {line}".rstrip() for c in comments for line in c.splitlines()]
    body = yaml.dump(_flowed(_written(spec, millis=False)), Dumper=_Dumper, sort_keys=False,
                     allow_unicode=True, width=110, default_flow_style=False)
    return "\n".join(head + [body.rstrip("\n")]) + "\n"


def short_hash(spec: Scenario) -> str:
    """Eight hex digits naming the scenario's content (its name and story left out)."""
    data = _written(spec, millis=True)
    data.pop("name", None)
    data.pop("story", None)
    return hashlib.sha256(repr(data).encode("utf-8")).hexdigest()[:8]
