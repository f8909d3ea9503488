"""A thatch checkout for the tests that drive the real code: $THATCH_SRC, else the seed-002 checkout
extracted from ../shared/seeds beside the repository. Without either they are not run, and say so;
with THATCH_REQUIRE_CHECKOUT=1 (.ci/run sets it) that is a failure, so CI cannot pass without them."""

from __future__ import annotations

import os

import pytest

from simulator.sut import SutError, parse_sut
from simulator.sut.seed_checkout import checkout_for_tests

NOT_RUN = "not run: no thatch checkout (set THATCH_SRC)"


@pytest.fixture(scope="session")
def checkout(tmp_path_factory):
    found = checkout_for_tests(tmp_path_factory.mktemp("checkout"))
    if found is None:
        if os.environ.get("THATCH_REQUIRE_CHECKOUT") == "1":
            pytest.fail(NOT_RUN + ", and THATCH_REQUIRE_CHECKOUT=1 requires one")
        pytest.skip(NOT_RUN)
    try:
        return parse_sut(str(found))
    except SutError as exc:
        pytest.fail(str(exc))
