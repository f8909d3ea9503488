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
from typing import Any, Callable, Optional

from freezegun import api as freezegun_api

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
    """Build one throwaway Faker here, kept until a child takes its copy (`take_faker`).

    Its provider modules get imported and faker's provider-class lookup
    (an lru_cache on the Factory) filled, so a child's own `Faker()` costs
    ~1 ms instead of ~20-40 ms (measured). Building it draws nothing from
    any random generator: the children's seeded output is unchanged.
    """
    if "faker" in _spare:
        return
    try:
        _spare["faker"] = faker.Faker()
    except Exception:  # pragma: no cover - only speed is at stake
        pass


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
    with getrusage). Most modules hold none: only those that do need a visit
    (D-speed-harness-6). What a module holds comes from freezegun's own cache,
    filled here, when the cache knows the module as it is now; else (an alias
    whose `__name__` another module's entry holds) from the module itself.
    Found again when the loaded modules changed since the last scan, or on
    `rescan` (each run's `preload`).
    """
    if rescan or _scanned["for"] != _loaded_key():
        cache = getattr(freezegun_api, "_GLOBAL_MODULES_CACHE", None)
        if not isinstance(cache, dict):  # pragma: no cover
            return dict(sys.modules)
        for _ in range(3):  # reading a module's attributes may import more (pydantic's lazy names)
            key = _loaded_key()
            _warm_freezegun_cache()
            if _loaded_key() == key:
                break
        _scanned["modules"] = {name: module for name, module in list(sys.modules.items())
                               if module is not None and _holds_time_function(module, cache)}
        _scanned["for"] = _loaded_key()
    return _scanned["modules"]


def _holds_time_function(module: ModuleType, cache: dict) -> bool:
    entry = cache.get(getattr(module, "__name__", None))
    if entry is not None and str(entry[0]).startswith(f"{id(module)}-"):
        return bool(entry[1])
    real_ids = getattr(freezegun_api, "_real_time_object_ids", None)
    if real_ids is None:  # pragma: no cover
        return True
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore")
        try:
            return any(id(value) in real_ids for _, value in freezegun_api._get_module_attributes(module))
        except Exception:  # pragma: no cover - a module that resists dir(): let freezegun decide
            return True


def scanned_hash(visit: dict[str, ModuleType], real_hash: Callable[[ModuleType], str]) -> Callable[[ModuleType], str]:
    """In a child: freezegun's module attribute hash (its cache check), taken from the parent's scan
    for the modules `visit` lists instead of a `dir()` of each (~130 page faults a child, measured).
    The scan ran on these very module objects (same ids) at this run's start or since; a name one of
    them bound after the scan, and before the fork, would go unseen (D-speed-harness-6)."""
    cache = freezegun_api._GLOBAL_MODULES_CACHE

    def hash_of(module: ModuleType) -> str:
        known = cache.get(getattr(module, "__name__", None))
        if known is not None and visit.get(module.__name__) is module and str(known[0]).startswith(f"{id(module)}-"):
            return known[0]
        return real_hash(module)

    return hash_of


def modules_for_freezer() -> Optional[dict[str, ModuleType]]:
    """In a child: what the parent's `freezer_modules` found, when its modules are still those the
    parent had at the fork (None: visit them all)."""
    return _scanned["modules"] if _scanned["for"] == _loaded_key() else None
