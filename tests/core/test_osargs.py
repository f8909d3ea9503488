"""The OS-level command line and the -s / -c startup target (R5)."""

import os
import subprocess
import sys

import pytest

from thatch_core.osargs import parse_startup_target, read_cmdline


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
        (["opencode", "-s", "--continue"], ("continue", None)),
        (["opencode", "--", "-s", "ses_abc"], None),
        (["opencode", "run", "hello"], None),
        ([], None),
    ],
)
def test_parse_startup_target(argv, target):
    """R5: -s/--session <id>, --session=<id> name a session; -c/--continue asks
    for the newest top-level one; an explicit id wins."""
    assert parse_startup_target(argv) == target


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
