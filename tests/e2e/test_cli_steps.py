"""`cli_list` / `cli_tail` steps: typed arguments, and the real `thatch chat` entry point (R16, R28)."""

from __future__ import annotations

import time

import pydantic
import pytest

from simulator.clock import START_EPOCH_MS
from simulator.harness.support import cli_argv, cli_output
from simulator.scenario.model import Step
from thatch_core.clock import iso
from thatch_core.db import open_db


def test_cli_args_are_typed_and_unknown_keys_refused():
    """A typo in a cli step is an error, not a silently ignored option; so are the old
    `grep` / `who`, a limit below 1 and a duration bound that is not whole minutes."""
    step = Step.model_validate({"at": 0, "cli_tail": {"limit": 2, "match": ["a", "b"], "from": "x", "to": "y"}})
    assert (step.args.limit, step.args.sender, step.args.to) == (2, "x", "y")
    assert Step.model_validate({"at": 0, "cli_tail": {"limit": "all"}}).args.limit == "all"
    assert Step.model_validate({"at": 0, "cli_list": {"stale": "all"}}).args.stale == "all"
    for bad in ({"limt": 2}, {"grep": "a"}, {"who": "x"}, {"limit": 0}, {"since": "90s"}):
        with pytest.raises(pydantic.ValidationError):
            Step.model_validate({"at": 0, "cli_tail": bad})
    with pytest.raises(pydantic.ValidationError):
        Step.model_validate({"at": 0, "cli_list": {"stale": -1}})


@pytest.mark.rules("R28")
def test_tail_argv_repeats_match_and_turns_durations_into_local_minutes():
    """R28: a list of patterns repeats --match; since/until durations count from the
    scenario start and are written as the CLI reads them (local "YYYY-MM-DD HH:MM")."""
    from freezegun import freeze_time

    with freeze_time(iso(START_EPOCH_MS + 180_000)):
        argv = cli_argv("cli_tail",
                        {"match": ["a", "b"], "from": "bo", "to": "al", "since": "1m", "until": "2026-01-05 09:02",
                         "limit": "all"}, "/x.db", t_ms=180_000)
    local = time.strftime("%Y-%m-%d %H:%M", time.localtime(START_EPOCH_MS // 1000 + 60))
    assert argv == ["tail", "--once", "--db", "/x.db", "--limit", "all", "--match", "a", "--match", "b",
                    "--from", "bo", "--to", "al", "--since", local, "--until", "2026-01-05 09:02"]
    assert cli_argv("cli_list", {"stale": 2}, "/x.db") == ["list", "--db", "/x.db", "--stale", "2"]


@pytest.mark.rules("R16", "R28")
def test_the_entry_point_runs_and_a_bad_filter_is_a_refusal(tmp_path):
    """R16, R28: list on an empty directory says so; a regex that does not compile
    exits 1 with the CLI's own error line."""
    db = tmp_path / "t.db"
    open_db(db).close()
    ok, text = cli_output(db, "cli_list", {})
    assert ok and text.startswith("No sessions registered.")
    ok, text = cli_output(db, "cli_tail", {"match": "("})
    assert not ok and text == 'error: --match is not a valid regular expression: "("\n'
