"""Filing a shrunk failure: `scenarios/found/<property>-<short hash>.yaml`.

The file is a scenario like any in the library: the schema line, a
comment block (how it was found, the seed, the property it breaks and its
message, how far it shrank, the commands that rerun it), then the YAML.
`write_found` loads the written file back with the loader (so it lints
clean: a file that would not load is a bug here, raised at once) and
returns the spec as loaded, for the caller to rerun alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from simulator.sut import sut_from_env
from simulator.sut.capabilities import capabilities_of
from simulator.explore.shrink import Shrunk
from simulator.explore.story import tell
from simulator.explore.writer import scenario_yaml, short_hash
from simulator.scenario.loader import load_file
from simulator.scenario.model import Scenario


@dataclass(frozen=True)
class FoundFile:
    """A written failure: where it is and the scenario as loaded from it."""

    path: Path
    spec: Scenario
    rerun: str


def found_name(check: str, digest: str) -> str:
    """The scenario name of a found file (names are unique across the library)."""
    return f"found-{check.lower()}-{digest}"


def _header(seed: int, check: str, message: str, shrunk: Shrunk, rerun: str, explore: str) -> tuple[str, ...]:
    (p0, s0, t0), (p1, s1, t1) = shrunk.before, shrunk.after
    return (
        f"Found by `python -m simulator explore` from seed {seed}: it breaks {check}.",
        f"{check}: {message}",
        f"Shrunk from {p0} processes, {s0} sessions, {t0} steps to {p1}, {s1}, {t1} ({shrunk.runs} runs).",
        f"rerun: {rerun}",
        f"the generated original: {explore}",
    )


def write_found(shrunk: Shrunk, *, seed: int, check: str, title: str, message: str, rules: tuple[str, ...],
                out: Path, explore_command: str, lives_in: Path | None = None) -> FoundFile:
    """Write the shrunk scenario under `out`; return where and the spec loaded back from it.

    `lives_in`: the directory the file is meant for when `out` only stages it (an explored item on an
    xdist worker stages it; the controller writes it there): its schema line and rerun command name that.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    home = Path(lives_in) if lives_in is not None else out
    digest = short_hash(shrunk.spec)
    path = out / f"{check.lower()}-{digest}.yaml"
    doc = {**shrunk.doc, "name": found_name(check, digest),
           "story": tell(shrunk.doc, check, title, message.splitlines()[0] if message else check),
           "seed": seed}
    # The rules it exercises on the system it failed on: a rule whose behaviour that system lacks would
    # make the file not applicable there (simulator/sut/capabilities.py).
    caps = capabilities_of(sut_from_env())
    rules = [r for r in dict.fromkeys(rules or ()) if not caps.missing_for_rules([r])]
    if rules:
        doc["rules"] = rules
    spec = Scenario.model_validate(_ordered(doc))
    rerun = f"python -m simulator run {(home / path.name).as_posix()}" + ("" if caps.core else f" --sut {caps.sut}")
    comments = _header(seed, check, message.splitlines()[0] if message else check, shrunk, rerun, explore_command)
    path.write_text(scenario_yaml(spec, comments=comments, schema_from=home), encoding="utf-8")
    return FoundFile(path=path, spec=load_file(path).spec, rerun=rerun)


def _ordered(doc: dict) -> dict:
    """Top-level keys in the model's order (the YAML reads name, story, rules, seed, ... as in the library)."""
    order = list(Scenario.model_fields)
    aliases = {info.alias or name: name for name, info in Scenario.model_fields.items()}
    return dict(sorted(doc.items(), key=lambda kv: order.index(aliases.get(kv[0], kv[0]))
                       if aliases.get(kv[0], kv[0]) in order else len(order)))
