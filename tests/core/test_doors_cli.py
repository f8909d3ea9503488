"""`thatch-core`'s own parts: the project name, the database and config
paths, and command lines a hook must survive (the doors themselves are in
test_doors.py and tests/e2e/test_doors_real.py)."""
from __future__ import annotations

import io
import subprocess

import pytest

from thatch_core.__main__ import config_source, db_path, hook_main, main
from thatch_core.git import detect_project, project_from_remote


@pytest.mark.parametrize("url, want", [
    ("git@github.com:sysread/thatch.git", "sysread/thatch"),
    ("https://github.com/sysread/thatch", "sysread/thatch"),
    ("https://gitlab.example.com/group/sub/repo.git/", "group/sub/repo"),
    ("ssh://git@github.com/owner/repo.git", "owner/repo"),
    ("git://example.org/owner/repo", "owner/repo"),
    ("/srv/git/repo.git", None),
])
def test_project_from_remote(url, want):
    assert project_from_remote(url) == want


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_detect_project_remote_then_repository_then_directory(tmp_path):
    plain = tmp_path / "plain-dir"
    plain.mkdir()
    assert detect_project(plain) == "plain-dir"
    repo = tmp_path / "shop-api"
    (repo / "sub").mkdir(parents=True)
    _git(repo, "init", "-q")
    assert detect_project(repo / "sub") == "shop-api"
    _git(repo, "remote", "add", "origin", "git@github.com:acme/shop.git")
    assert detect_project(repo / "sub") == "acme/shop"


def test_db_path_order_and_config_beside_it(tmp_path):
    env = {"THATCH_DB": "/e/db", "THATCH_DB_PATH": "/p/db", "XDG_CONFIG_HOME": "/x"}
    assert db_path({"--db": "/flag/db"}, env) == "/flag/db"
    assert db_path({}, env) == "/e/db"
    assert db_path({}, {"THATCH_DB_PATH": "/p/db"}) == "/p/db"
    assert db_path({}, {"XDG_CONFIG_HOME": "/x"}) == "/x/thatch/thatch.db"
    assert str(config_source({}, str(tmp_path / "t.db")).path) == str(tmp_path / "config.json")
    assert str(config_source({"--config": "/c.json"}, "/d/t.db").path) == "/c.json"


class _Pipe(io.BytesIO):
    def isatty(self):
        return False

    @property
    def buffer(self):
        return self


@pytest.mark.rules("R31")
@pytest.mark.parametrize("argv", [[], ["Stop", "extra"], ["Stop", "--db"], ["Stop", "--bogus"]])
def test_a_bad_hook_command_line_is_one_stderr_line_exit_0(argv):
    """R31: a bad hook command line is one stderr line and exit 0."""
    out, err = io.StringIO(), io.StringIO()
    assert hook_main(argv, stdin=_Pipe(b"{}"), stdout=out, stderr=err) == 0
    assert out.getvalue() == "" and err.getvalue().count("\n") == 1


def test_an_unknown_command_prints_the_usage(capsys):
    assert main(["frobnicate"]) == 2
    assert "thatch-core mcp" in capsys.readouterr().err
