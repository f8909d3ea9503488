"""Where things are, for tests that read repository files or run commands from its root."""

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
INVALID_SCENARIOS = TESTS / "invalid_scenarios"
FAILING_SCENARIOS = TESTS / "failing_scenarios"
SCHEMA = ROOT / "simulator" / "scenario" / "scenario.schema.json"
