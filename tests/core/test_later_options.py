"""The later design's options: the options themselves, the preset and the config keys.

thatch_core.policy holds them beside the messaging policies; LATER is the
real thatch's later design, DEFAULT seed 000's (every later option off).
"""

from __future__ import annotations

from dataclasses import fields

from thatch_core.constants import MAX_BODY_LEN
from thatch_core.policy import DEFAULT, LATER, LATER_OPTIONS, Policy, policy_from_config, policy_to_config


def test_every_later_option_is_off_by_default_and_on_in_the_preset():
    assert DEFAULT.later == frozenset() and DEFAULT.is_default and DEFAULT.messaging_default
    assert LATER.later == frozenset(LATER_OPTIONS) and LATER.messaging_default and not LATER.is_default
    assert (DEFAULT.retry_dedup_ms, DEFAULT.split_part_len, DEFAULT.max_body_chars) == (None, None, MAX_BODY_LEN)
    assert (LATER.retry_dedup_ms, LATER.split_part_len, LATER.max_body_chars) == (10_000, 2000, 20_000)
    assert set(LATER_OPTIONS) <= {f.name for f in fields(Policy)}


def test_the_preset_round_trips_through_the_config_file_shape():
    raw = policy_to_config(LATER)
    assert raw == {"retryDedupMs": 10_000, "machineryMarkers": True, "splitPartLen": 2000, "maxBodyChars": 20_000,
                   "pagedReads": True, "nameClaims": True, "projectBoundAs": True, "mcpProjectEnv": True}
    assert policy_from_config(raw, print) == LATER


def test_a_bad_later_value_keeps_seed_000s_loudly():
    said = []
    got = policy_from_config({"retryDedupMs": 0, "splitPartLen": "big", "maxBodyChars": -1, "pagedReads": 1,
                              "nameClaims": True}, said.append)
    assert got == Policy(name_claims=True) and len(said) == 4


def test_a_seed_003_option_beside_a_later_one_is_not_messaging_default():
    both = Policy(sender_cap=3, paged_reads=True)
    assert not both.messaging_default and both.later == {"paged_reads"}
