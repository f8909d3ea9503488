"""`cli_list` / `cli_tail` steps: typed arguments, and the real `thatch chat` entry point (R16, R28)."""

from __future__ import annotations

import pydantic
import pytest

from simulator.clock import START_EPOCH_MS
from simulator.harness.support import cli_argv, cli_output
from simulator.scenario.model import Step
from thatch_core.clock import iso
from thatch_core.db import open_db


def test_cli_args_are_typed_and_unknown_keys_refused():
    """A typo in a cli step is an error, not a silently ignored option."""
    assert Step.model_validate({"at": 0, "cli_tail": {"limit": 2, "grep": ["a", "b"], "who": "x"}}).args.limit == 2
    assert Step.model_validate({"at": 0, "cli_list": {"stale": "all"}}).args.stale == "all"
    with pytest.raises(pydantic.ValidationError):
        Step.model_validate({"at": 0, "cli_tail": {"limt": 2}})
    with pytest.raises(pydantic.ValidationError):
        Step.model_validate({"at": 0, "cli_list": {"stale": -1}})


@pytest.mark.rules("R28")
def test_tail_argv_repeats_flags_and_turns_durations_into_iso():
    """R28: list values repeat the flag; since/until durations count from the scenario start."""
    from freezegun import freeze_time

    with freeze_time(iso(START_EPOCH_MS + 180_000)):
        argv = cli_argv("cli_tail",
                        {"grep": ["a", "b"], "who": "bo", "since": "1m", "until": "2026-01-05T09:02:00Z", "limit": 0},
                        "/x.db", t_ms=180_000)
    assert argv == ["tail", "--once", "--db", "/x.db", "--limit", "0", "--grep", "a", "--grep", "b", "--who", "bo",
                    "--since", iso(START_EPOCH_MS + 60_000), "--until", "2026-01-05T09:02:00Z"]
    assert cli_argv("cli_list", {"stale": 2}, "/x.db") == ["list", "--db", "/x.db", "--color", "never", "--stale", "2"]


@pytest.mark.rules("R16", "R28")
def test_the_entry_point_runs_and_a_bad_filter_is_a_refusal(tmp_path):
    """R16, R28: list on an empty directory says so; a regex that does not compile exits 2 with the usage error."""
    db = tmp_path / "t.db"
    open_db(db).close()
    ok, text = cli_output(db, "cli_list", {})
    assert ok and text == "No registered sessions.\n"
    ok, text = cli_output(db, "cli_tail", {"grep": "("})
    assert not ok and "tail: bad filter" in text
