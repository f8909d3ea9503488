"""The real suite's "chat name reclaim after reap" block, under the later design's name claims (D-later-5).

Seed 001 gives a pruned session a fresh name (R26, test_names.py keeps it);
the real code records a reaped row's name and gives it back to the same
session id. thatch_core records the claim when the row is minted rather than
when it is reaped (D-later-5), which the same-session outcome cannot tell apart.
"""

from __future__ import annotations

import pytest

from thatch_core.constants import AUTO_TTL_DAYS
from thatch_core.policy import Policy

CLAIMS = Policy(name_claims=True)


def reap(store, frozen):
    """Let the row go silent past the TTL and run the hourly prune."""
    frozen.tick(AUTO_TTL_DAYS * 86_400 + 86_400)
    return store.prune().pruned


@pytest.mark.rules("R2", "R26")
def test_reaped_session_reclaims_name(store, frozen):
    """
    "a reaped auto session reclaims its name; other sessions never do": the
    reaped session's id registering again gets its old name; another session
    never gets that name; a second reap and return still reclaims it (R2, R26).
    """
    name = store.register("ses_reap_me", project="/proj", policy=CLAIMS).name
    assert reap(store, frozen) == ("ses_reap_me",) and store.find(name) is None
    assert store.register("ses_reap_me", project="/proj", policy=CLAIMS).name == name
    assert store.register("ses_other", project="/proj", policy=CLAIMS).name != name
    reap(store, frozen)
    assert store.register("ses_reap_me", project="/proj", policy=CLAIMS).name == name
