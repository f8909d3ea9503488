"""Imports and caches the orchestrator fills once so every fork inherits them.

A fork inherits loaded modules and warm caches for free; a child paying for
them itself (importing faker, building a Faker,
scanning modules for freezegun) cost ~0.1 s each (measured), which dominated
short runs with many processes. Nothing here draws from a random generator
or changes what a child does: only speed is at stake.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from types import ModuleType
from typing import Any, Optional

from freezegun import api as freezegun_api

_warmed: set[str] = set()


def preload(overrides: dict[str, Any]) -> None:
    """Import what every child would import on its own before forking it."""
    # The harnesses and the whole of thatch_core are loaded already (simulator.api binds them
    # before it builds the orchestrator); what is left is what they import on first use.
    names = ["_strptime"] + (["faker"] if "harness" not in overrides else [])
    loaded = {name: _import(name) for name in names}
    if loaded.get("faker") is not None:
        _warm_faker(loaded["faker"])
    freezer_modules(rescan=True)  # once per run: a run may have changed what a module holds


def _import(name: str) -> Optional[ModuleType]:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _warm_faker(faker: ModuleType) -> None:
    """Build one throwaway Faker here, once per orchestrator process.

    Its provider modules get imported and faker's provider-class lookup
    (an lru_cache on the Factory) filled, so a child's own `Faker()` costs
    ~1 ms instead of ~20-40 ms (measured). Building it draws nothing from
    any random generator: the children's seeded output is unchanged.
    """
    if "faker" in _warmed:
        return
    try:
        _spare["faker"] = faker.Faker()
    except Exception:  # pragma: no cover - only speed is at stake
        return
    _warmed.add("faker")


# The warm-up's Faker, never drawn from: each forked child may take its copy once (`take_faker`).
_spare: dict[str, Any] = {}


def take_faker() -> Any:
    """In a child: the Faker built before the fork, or None when there is none left.

    Building one in a child writes into memory it shares with the parent (~460
    page faults, measured) besides the build itself; the inherited one, seeded
    by the taker (`seed_instance`, as a fresh one would be), draws the same
    (D-speed-harness-6). Taken once per process: no two takers share one.
    """
    return _spare.pop("faker", None)


def _warm_freezegun_cache() -> None:
    """Fill freezegun's per-module attribute cache here, without freezing anything.

    Every child starts a freezer, which scans all loaded modules for time
    functions; with the cache inherited through the fork that start costs
    ~10 ms instead of ~40 ms (measured). Private freezegun API: a change
    there only costs speed.
    """
    warm = getattr(freezegun_api, "_get_cached_module_attributes", None)
    if warm is None:  # pragma: no cover
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")  # dir() of some modules warns; freezegun silences it too
        for module in list(sys.modules.values()):
            if module is None or getattr(module, "__name__", None) in (None, "datetime", "time"):
                continue
            try:
                warm(module)
            except Exception:  # pragma: no cover - a module that resists dir()
                pass


# What `freezer_modules` found, and the loaded modules it was found for.
_scanned: dict[str, Any] = {"for": None, "modules": {}}


def _loaded_key() -> tuple:
    """Which modules are loaded, cheaply: their number and the last one imported (an insert-ordered dict)."""
    return len(sys.modules), next(reversed(sys.modules), None)


def freezer_modules(rescan: bool = False) -> dict[str, ModuleType]:
    """The loaded modules a child's freezer start has to visit, found here before a fork.

    freezegun's start visits every loaded module (~600) for time functions to
    patch; a child doing so writes to each module's pages it shares with this
    process, which the kernel then copies (~1,300 page faults a child, measured
    with getrusage). Most modules hold none: by freezegun's own cache, filled
    here, only the modules that hold one, or that the cache does not know as
    they are now, need a visit (D-speed-harness-6). Found again when the loaded
    modules changed since the last scan, or on `rescan` (each run's `preload`).
    """
    key = _loaded_key()
    if rescan or _scanned["for"] != key:
        _warm_freezegun_cache()
        cache = getattr(freezegun_api, "_GLOBAL_MODULES_CACHE", None)
        if not isinstance(cache, dict):  # pragma: no cover
            return dict(sys.modules)
        _scanned["modules"] = {
            name: module for name, module in list(sys.modules.items())
            if module is not None and (name not in cache or cache[name][1]
                                       or not str(cache[name][0]).startswith(f"{id(module)}-"))}
        _scanned["for"] = key
    return _scanned["modules"]


def modules_for_freezer() -> Optional[dict[str, ModuleType]]:
    """In a child: what the parent's `freezer_modules` found, when its modules are still those the
    parent had at the fork (None: visit them all)."""
    return _scanned["modules"] if _scanned["for"] == _loaded_key() else None
