"""Loading scenario text in tests: the error lines a load gives, [] when it loads."""

from __future__ import annotations

import textwrap

from simulator.scenario.errors import ScenarioError
from simulator.scenario.loader import ScenarioErrors, parse_scenario


def error_lines(world: str, extra: str = "", file: str = "w.yaml") -> list[str]:
    """The formatted errors of `world` plus `extra` (YAML appended at top level, dedented)."""
    try:
        parse_scenario(world + textwrap.dedent(extra), file=file)
    except ScenarioErrors as exc:
        return [e.format() for e in exc.errors]
    except ScenarioError as exc:
        return [exc.format()]
    return []
