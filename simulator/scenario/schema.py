"""The JSON Schema of the scenario language, generated from `model.Scenario`.

The committed `scenario.schema.json` next to this file is what editors load
(every scenario file starts with `# yaml-language-server: $schema=<relative
path to it>`); tests/sim/scenario/test_loader.py fails when it drifts from the model.
Regenerate with `python -m simulator schema --write`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from simulator.scenario.model import Scenario

SCHEMA_PATH = Path(__file__).with_name("scenario.schema.json")


def scenario_schema() -> dict[str, Any]:
    """The schema as a dict, keyed by the YAML spellings (aliases such as `from`, `register`)."""
    schema = Scenario.model_json_schema(by_alias=True)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "thatch-chat-scenario", **schema}


def schema_text() -> str:
    """The exact text of the committed file (stable key order, trailing newline)."""
    return json.dumps(scenario_schema(), indent=2, ensure_ascii=False) + "\n"


def write_schema(path: Path = SCHEMA_PATH) -> Path:
    path.write_text(schema_text(), encoding="utf-8")
    return path
