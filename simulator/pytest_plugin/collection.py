"""Which YAML files are scenarios: collection is opt-in (D-plugin-2).

The plugin is installed into an environment, so it sees every project's
YAML files; it claims only those that say they are scenarios:
- a file whose first line is the schema comment naming `scenario.schema.json`
  (what `thatch-sim new` writes and `thatch-sim lint` requires);
- a file under a glob or directory of the ini key `sim_scenario_paths`;
- a file named on the command line, wherever it lives, so the printed rerun
  command works for any file.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

from simulator.scenario.loader import SCHEMA_HEADER
from simulator.scenario.schema import SCHEMA_PATH

SUFFIXES = (".yaml", ".yml")
NAMED_FILES = pytest.StashKey[frozenset]()


def named_files(config: pytest.Config) -> frozenset:
    """The YAML files named on the command line (a `FILE::name` argument names FILE), resolved."""
    found = set()
    for arg in config.args:
        path = Path(arg.split("::", 1)[0])
        if path.suffix in SUFFIXES:
            found.add((config.invocation_params.dir / path).resolve())
    return frozenset(found)


def declares_scenario_schema(path: Path) -> bool:
    """Whether the file's first line is the schema comment pointing at a `scenario.schema.json`."""
    try:
        with path.open(encoding="utf-8-sig") as f:  # -sig: a byte order mark before the comment is fine
            first = f.readline(1024)
    except (OSError, UnicodeDecodeError):
        return False
    if not first.startswith(SCHEMA_HEADER):
        return False
    return first[len(SCHEMA_HEADER):].strip().rsplit("/", 1)[-1] == SCHEMA_PATH.name


def _listed_in_ini(path: Path, config: pytest.Config) -> bool:
    try:
        posix = path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return False
    for pattern in config.getini("sim_scenario_paths"):
        pattern = pattern.strip().rstrip("/")
        if pattern and (fnmatch.fnmatch(posix, pattern) or posix.startswith(pattern + "/")):
            return True
    return False


def is_scenario_file(path: Path, config: pytest.Config) -> bool:
    if path.suffix not in SUFFIXES:
        return False
    return (path.resolve() in config.stash[NAMED_FILES] or _listed_in_ini(path, config)
            or declares_scenario_schema(path))
