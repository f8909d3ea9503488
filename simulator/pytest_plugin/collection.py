"""Which YAML files are scenarios: collection is opt-in (D-plugin-2).

The plugin is installed into an environment, so it sees every project's
YAML files; it claims only those that say they are scenarios:
- a file whose first line is the schema comment naming `scenario.schema.json`
  (what `thatch-sim new` writes and `thatch-sim lint` requires);
- a file under a glob or directory of the ini key `sim_scenario_paths`;
- a file named on the command line, wherever it lives, so the printed rerun
  command works for any file.

Under a directory of the ini key `sim_scenario_roots` no YAML file drops out
silently (D-plugin-13): a file there that is none of the above collects as one
`<file>::missing-schema-comment` item that errors with what to write, and a
file whose first line is the exclusion mark (`# thatch-sim: not a scenario —
WHY`) collects as one `<file>::not-a-scenario` item, skipped with its reason.
A file with the exclusion mark is never run, wherever it is.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Iterable

import pytest

from simulator.scenario.loader import EXCLUSION_MARK, SCHEMA_HEADER, exclusion_reason, first_line
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
    first = first_line(path)  # a byte order mark before the comment is fine
    if not first.startswith(SCHEMA_HEADER):
        return False
    return first[len(SCHEMA_HEADER):].strip().rsplit("/", 1)[-1] == SCHEMA_PATH.name


def _listed_in_ini(path: Path, config: pytest.Config, key: str = "sim_scenario_paths") -> bool:
    try:
        posix = path.relative_to(config.rootpath).as_posix()
    except ValueError:
        return False
    for pattern in config.getini(key):
        pattern = pattern.strip().rstrip("/")
        if pattern and (fnmatch.fnmatch(posix, pattern) or posix.startswith(pattern + "/")):
            return True
    return False


def is_scenario_file(path: Path, config: pytest.Config) -> bool:
    if path.suffix not in SUFFIXES:
        return False
    return (path.resolve() in config.stash[NAMED_FILES] or _listed_in_ini(path, config)
            or declares_scenario_schema(path))


def is_under_root(path: Path, config: pytest.Config) -> bool:
    """Is the YAML file under an ini `sim_scenario_roots` directory, where every YAML file must say what it is?"""
    return path.suffix in SUFFIXES and _listed_in_ini(path, config, "sim_scenario_roots")


def schema_comment_for(path: Path) -> str:
    """The schema comment a scenario file at `path` starts with (the schema relative to its directory)."""
    return SCHEMA_HEADER + Path(os.path.relpath(SCHEMA_PATH.absolute(), path.absolute().parent)).as_posix()


def missing_comment_problem(path: Path) -> tuple[str, str]:
    """(problem, what to write) for a YAML file under a scenario root that says neither what it is nor why not."""
    return ("no schema comment on the first line: without it this file would silently never run",
            f"start it with `{schema_comment_for(path)}`, or, if it is no scenario, with "
            f"`{EXCLUSION_MARK} — <why>`")


def yaml_files(roots: Iterable[Path]) -> list[Path]:
    """Every .yaml/.yml file under the given directories (or the files themselves), sorted."""
    out: list[Path] = []
    for root in roots:
        out += [root] if root.is_file() else [p for p in root.rglob("*") if p.suffix in SUFFIXES and p.is_file()]
    return sorted(out)


def unaccounted(files: Iterable[Path], run: set[str], shown=str) -> list[str]:
    """What is wrong with each file neither run (its shown path among `run`) nor excluded by its first line."""
    out = []
    exclude = f"or exclude it with the first line `{EXCLUSION_MARK} — <why>`"
    for path in files:
        if shown(path) in run or exclusion_reason(path) is not None:
            continue
        if declares_scenario_schema(path):
            out.append(f"{shown(path)}: neither run nor excluded: pytest never collected it (norecursedirs, --ignore "
                       f"or a conftest's collect_ignore?) — let pytest collect it, {exclude}")
        else:
            out.append(f"{shown(path)}: neither run nor excluded: it has no schema comment — start it with "
                       f"`{schema_comment_for(path)}`, {exclude}")
    return out
