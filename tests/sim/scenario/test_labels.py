"""The author's label in each of its forms (simulator/scenario/labels.py), all read by one rule."""

from __future__ import annotations

import re

import pytest

from simulator.scenario.labels import BLOCK_LABEL_PATTERN, LABEL_PATTERN, LABEL_PLACEHOLDER
from simulator.scenario.model import Scenario

LABELS = ["alice", "h1", "laptop-tab", "bob_2", "A"]
NOT_LABELS = ["", "1h", "-a", "_a", "a b", "a.b", "w{i}", "{alice}", "é"]


@pytest.mark.parametrize("text", LABELS)
def test_every_form_reads_a_label(text):
    assert re.fullmatch(LABEL_PATTERN, text) and re.fullmatch(BLOCK_LABEL_PATTERN, text)
    assert LABEL_PLACEHOLDER.fullmatch("{" + text + "}").group(1) == text


@pytest.mark.parametrize("text", NOT_LABELS)
def test_no_form_reads_what_is_not_a_label(text):
    assert not re.fullmatch(LABEL_PATTERN, text)
    assert not LABEL_PLACEHOLDER.fullmatch("{" + text + "}")


def test_a_replicated_block_may_write_i_after_the_first_letter():
    assert [t for t in ("w{i}", "w{i}x{i}", "{i}w", "w{j}", "w{i") if re.fullmatch(BLOCK_LABEL_PATTERN, t)] == [
        "w{i}", "w{i}x{i}"]


def test_placeholders_in_a_text_name_their_labels():
    assert LABEL_PLACEHOLDER.findall("ask {alice} and {laptop-tab}, not {1x} or {a b}") == ["alice", "laptop-tab"]


def test_the_model_and_its_schema_take_the_label_from_the_one_module():
    """A process or session id is checked by the whole-label pattern and published with the block form."""
    schema = Scenario.model_json_schema()["$defs"]
    assert schema["Process"]["properties"]["id"]["pattern"] == BLOCK_LABEL_PATTERN
    assert schema["Session"]["properties"]["id"]["pattern"] == BLOCK_LABEL_PATTERN
    with pytest.raises(ValueError, match="string_pattern_mismatch|should match pattern"):
        Scenario.model_validate({"name": "x", "duration": "1m", "processes": [{"id": "1h"}]})
