"""The OS-level command line and the -s / -c startup target (R5)."""

import os
import subprocess
import sys

import pytest

from thatch_core.osargs import continues_last_session, parse_startup_target, read_cmdline, startup_session_id


@pytest.mark.rules("R5")
@pytest.mark.parametrize(
    "argv, target",
    [
        (["opencode", "-s", "ses_abc"], ("session", "ses_abc")),
        (["bun", "/x/opencode", "--session", "ses_abc"], ("session", "ses_abc")),
        (["opencode", "--session=ses_abc"], ("session", "ses_abc")),
        (["opencode", "-c"], ("continue", None)),
        (["opencode", "--continue", "--model", "m"], ("continue", None)),
        (["opencode", "-c", "-s", "ses_abc"], ("session", "ses_abc")),
        (["opencode", "-s"], None),
        (["opencode", "-s", "-c"], ("session", "-c")),
        (["opencode", "--session="], None),
        (["opencode", "-s", "--continue"], ("session", "--continue")),
        (["opencode", "--", "-s", "ses_abc"], ("session", "ses_abc")),
        (["opencode", "-s", "ses_a", "-s", "ses_b"], ("session", "ses_a")),
        (["opencode", "--session=", "-s", "ses_b"], None),
        (["opencode", "-s", "-c", "ses_b"], ("session", "-c")),
        (["opencode", "-c", "--continue=false"], ("continue", None)),
        (["opencode", "--continue=false", "-c"], None),
        (["opencode", "--continue=yes"], ("continue", None)),
        (["opencode", "-s", "", "-c"], ("continue", None)),
        (["opencode", "run", "hello"], None),
        ([], None),
    ],
)
def test_parse_startup_target(argv, target):
    """R5: -s/--session <id>, --session=<id> name a session; -c/--continue asks
    for the newest top-level one; an explicit id wins."""
    assert parse_startup_target(argv) == target


@pytest.mark.rules("R5")
def test_the_first_session_flag_takes_whatever_follows_it():
    """R5: as the real src/os-args.ts reads the command line (D-real-host-3):
    the first session flag decides and takes the next argument whatever it looks
    like (a flag, a `--`), names nothing at the end of the line, and only then
    does `-c` count; the first continue flag decides, `--continue=false` negates."""
    assert startup_session_id(["opencode", "-s", "--model"]) == "--model"
    assert startup_session_id(["opencode", "-s", "--"]) == "--"
    assert startup_session_id(["opencode", "-s"]) is None
    assert startup_session_id(["opencode", "-s", "", "--session=ses_x"]) is None
    assert startup_session_id(["opencode", "--session=ses_x", "-s", "ses_y"]) == "ses_x"
    assert continues_last_session(["opencode", "--continue=false", "--continue"]) is False
    assert continues_last_session(["opencode", "--continue=0"]) is True
    assert parse_startup_target(["opencode", "-s"]) is None
    assert parse_startup_target(["opencode", "-c", "-s"]) == ("continue", None)


@pytest.mark.rules("R5")
def test_read_cmdline_of_a_real_child_process():
    """R5: the command line comes from the OS for a pid (here a real child)."""
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()", "-s", "ses_child"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert child.stdout.readline().strip() == "ready"  # exec finished: argv is final
        argv = read_cmdline(child.pid)
        assert argv[-2:] == ["-s", "ses_child"]
        assert parse_startup_target(argv) == ("session", "ses_child")
    finally:
        child.stdin.close()
        child.wait(timeout=5)


def test_read_cmdline_own_pid_and_missing_pid():
    """Our own pid reads back our argv; a pid that does not exist reads as []."""
    assert read_cmdline(os.getpid())
    assert read_cmdline(2**22 + 12345) == []
