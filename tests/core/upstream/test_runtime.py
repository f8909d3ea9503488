"""The real suite's "wake gate" block, the parts thatch_core models.

The real gate consults the runtime's status map and, for a session absent
from it, opencode's live status list. thatch_core's client protocol has no
live status fetch: its gate is the status map (fed by session.status events,
with the startup and re-hosted sessions counted idle) and the compacting
flag. The two cases about the live fetch are listed in README.md.
"""

from __future__ import annotations

import pytest

from thatch_core.config import ChatConfig, StaticConfig
from thatch_core.runtime import OpencodeRuntime

from opencodekit import FakeClient


@pytest.fixture
def runtime(store, tmp_path):
    rt = OpencodeRuntime(store, FakeClient(), directory=str(tmp_path), project="p",
                         config_source=StaticConfig(ChatConfig()), pid=4242,
                         cmdline_reader=lambda pid: ("opencode",), state_dir=tmp_path / "state",
                         log=lambda message: None)
    rt.start()
    yield rt
    rt.dispose()


@pytest.mark.rules("R19")
def test_known_busy_or_retry_rejects(runtime):
    """
    "known busy/retry rejects without fetching": a session whose last known
    status is busy, or retry, is not deliverable; thatch_core's gate never
    fetches anything, so the known status alone decides (R19).
    """
    runtime.on_session_status("ses_busy", "busy")
    assert runtime.can_deliver("ses_busy") is False
    runtime.on_session_status("ses_retry", "retry")
    assert runtime.can_deliver("ses_retry") is False
    runtime.on_session_status("ses_idle", "idle")
    assert runtime.can_deliver("ses_idle") is True


@pytest.mark.rules("R19")
def test_compacting_fails_closed(runtime):
    """
    "compacting fails closed; server failure fails closed": an idle session
    that is compacting is not deliverable until compaction ends (R19). The
    server-failure half has no counterpart: thatch_core's gate asks no server.
    """
    runtime.on_session_status("ses_c", "idle")
    runtime.on_compacting("ses_c", True)
    assert runtime.can_deliver("ses_c") is False
    runtime.on_compacting("ses_c", False)
    assert runtime.can_deliver("ses_c") is True
