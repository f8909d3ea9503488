"""R27: transcript echo bubbles, checked on a real run of scenarios/surfaces/echo-bubbles.yaml.

The scenario language has no expectation over `echo` events yet, so this test
runs the scenario file and pins the exact bubbles: one per successful
register/send/read/broadcast, none for list, status, unregister, an empty read
or any refused call.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simulator.api import run_scenario
from simulator.loader import load_scenario

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "surfaces" / "echo-bubbles.yaml"


@pytest.mark.rules("R27")
def test_echo_bubbles_only_for_successful_conversational_calls(tmp_path):
    """R27: echo for register/send/read/broadcast only, never for failed calls."""
    spec = load_scenario(SCENARIO)
    result = run_scenario(spec, run_dir=tmp_path / "run")
    assert result.error is None
    names = {e["session"]: e["data"]["name"] for e in result.history if e["kind"] == "registered"}
    echoes = [(e["session"], e["data"]["text"]) for e in result.history if e["kind"] == "echo"]
    alice, bob = names["alice"], names["bob"]
    assert echoes == [
        ("alice", f"[chat] registered as {alice}"),
        ("alice", f"[chat] -> {bob}: draft is up for review"),
        ("alice", "[chat] broadcast to 2 sessions: comments close at noon"),
        ("bob", f"[chat] read 2 messages:\nfrom {alice} at 2026-01-05T09:01:00Z: draft is up for review\n"
                f"from {alice} at 2026-01-05T09:02:00Z: comments close at noon"),
    ]
    # Every refusal in the story really happened (so "no bubble" is not vacuous).
    refused = [e for e in result.history if e["kind"] == "tool-result" and not e["data"]["ok"]]
    assert len(refused) == 4
