"""Load a YAML scenario file into a `model.Scenario`, with file:line errors.

The file is composed with PyYAML's node API (SafeLoader) so every key keeps
its line and column; the data is built from the same nodes and validated by
the pydantic model; every pydantic error is then turned back into a
`ScenarioError` that reads

    FILE:LINE: <key path>: <problem> — <what to write instead>

A file holds exactly ONE scenario. A leading `---` is fine, a second
document is an error (D-loader-1 in docs/decisions/loader.md): one file per
scenario keeps node ids, reports and `lint` output one-to-one with files.

Blocks with `replicas: N` are written out before the model validates
(`simulator.scenario.replicas`), and an error about a copy is reported at its
template. The model validates with durations required to carry their unit.
After the model validates, `simulator.scenario.validate` runs the cross-reference
checks (labels, time order, fault targets) with the same positions.
"""

from __future__ import annotations

import re
import types
import typing
from pathlib import Path
from typing import Any, Optional, Union

import yaml
from pydantic import BaseModel, ValidationError

from simulator.scenario.bounded_yaml import compose_documents, construct, max_file_bytes, read_scenario_text
from simulator.scenario.durations import UNITS_REQUIRED
from simulator.scenario.errors import (  # re-exported: the loader is where authors meet them
    MAX_REPORTED_ERRORS, BadValueError, CrossReferenceError, KeyPath, MissingFieldError, ScenarioError, ScenarioErrors,
    ScenarioSyntaxError, UnknownKeyError, did_you_mean, format_key_path, raise_errors,
)
from simulator.scenario import replicas
from simulator.scenario.labels import LABEL_PATTERN
from simulator.scenario.model import Agent, Process, Scenario, Session
from simulator.scenario.positions import LoadedScenario, Positions, node_mark, record_positions
from simulator.scenario.validate import check

__all__ = [
    "BadValueError", "CrossReferenceError", "KeyPath", "LoadedScenario", "MissingFieldError",
    "ScenarioError", "ScenarioErrors", "ScenarioSyntaxError", "UnknownKeyError", "format_key_path",
    "load_file", "load_scenario", "parse_scenario", "raise_errors",
]

SCHEMA_HEADER = "# yaml-language-server: $schema="
# The first line of a YAML file that lives among scenarios but is none (data, a fixture): the explicit exclusion,
# followed by its reason (`# thatch-sim: not a scenario — the explorer's seed list`).
EXCLUSION_MARK = "# thatch-sim: not a scenario"


def first_line(path: Path) -> str:
    """The file's first line (a byte order mark dropped), or "" when it cannot be read as text."""
    try:
        with Path(path).open(encoding="utf-8-sig") as f:
            return f.readline(1024).rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        return ""


def exclusion_reason(path: Path) -> Optional[str]:
    """Why a YAML file says it is no scenario (its first line is EXCLUSION_MARK, then the reason), else None."""
    line = first_line(path)
    if not line.startswith(EXCLUSION_MARK):
        return None
    return line[len(EXCLUSION_MARK):].strip(" \t—-:") or "no reason given"


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------


def display_path(path: Path | str) -> str:
    """The path as messages show it: relative to the working directory when under it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def load_scenario(path: Path | str, *, display: Optional[str] = None, cross_check: bool = True) -> Scenario:
    """Read, validate and cross-check one scenario file; raise ScenarioError (or a group) if it is wrong."""
    return load_file(path, display=display, cross_check=cross_check).spec


def load_file(path: Path | str, *, display: Optional[str] = None, cross_check: bool = True) -> LoadedScenario:
    """Like `load_scenario`, keeping the positions and raw data."""
    file = display or display_path(path)
    text = read_scenario_text(path, file=file)
    return parse_scenario(text, file=file, cross_check=cross_check)


def parse_scenario(text: str, *, file: str = "<scenario>", cross_check: bool = True) -> LoadedScenario:
    """Parse YAML text holding one scenario; see the module docstring for the error format.

    Whatever the text holds, the only exception is a ScenarioError for this
    file (D-loader-8): a failure the checks below did not foresee is reported
    as one too, so one bad file never stops a lint or a pytest session.
    """
    try:
        return _parse(text, file, cross_check)
    except ScenarioError:
        raise
    except Exception as exc:  # noqa: BLE001 - the promise above; the type names the failure
        raise ScenarioSyntaxError(f"the loader cannot read this file ({type(exc).__name__}: {str(exc)[:200]})",
                                  file=file, line=1, hint="simplify the file; please report this input") from None


def _parse(text: str, file: str, cross_check: bool) -> LoadedScenario:
    if len(text) > max_file_bytes():
        raise ScenarioSyntaxError(f"the text is over the limit of {max_file_bytes()} bytes", file=file, line=1,
                                  hint="a scenario is a few kilobytes: split it into several files")
    loader, root = _compose(text, file)
    pos = Positions()
    errors: list[ScenarioError] = []
    record_positions(root, (), pos, file, errors)
    raise_errors(errors)
    data = construct(loader, root, file)
    if not isinstance(data, dict):
        raise ScenarioSyntaxError(f"the file holds a {type(data).__name__}, not a scenario", file=file,
                                  line=node_mark(root)[0],
                                  hint="write a mapping with name, duration, processes and steps")
    expansion = replicas.expand(data)  # `replicas: N` blocks written out; errors name the template
    raise_errors(replicas.problems_as_errors(expansion.problems, file, pos.line_of))
    data, pos.template_of = expansion.data, expansion.template_of
    try:
        spec = Scenario.model_validate(data, context={UNITS_REQUIRED: True})
    except ValidationError as exc:
        raise_errors(replicas.in_template_terms(convert_errors(exc, data, pos, file), pos.template_of))
        raise  # unreachable: a ValidationError always has at least one error
    loaded = LoadedScenario(spec=spec, file=file, positions=pos, data=data)
    if cross_check:
        raise_errors(replicas.in_template_terms(check(loaded), pos.template_of))
    return loaded


def _compose(text: str, file: str) -> tuple[Any, yaml.Node]:
    loader, docs = compose_documents(text, file)
    if not docs:
        raise ScenarioSyntaxError("the file holds no scenario", file=file, line=1,
                                  hint="write name, duration, processes and steps "
                                       "(`python -m simulator new NAME` scaffolds one)")
    if len(docs) > 1:
        raise ScenarioSyntaxError("a second YAML document (`---`) in the file", file=file, line=node_mark(docs[1])[0],
                                  hint="write one scenario per file")
    return loader, docs[0]


# ---------------------------------------------------------------------------
# pydantic errors -> ScenarioError
# ---------------------------------------------------------------------------


def _unwrap(tp: Any, key: Union[str, int, None] = None) -> Any:
    """The model or list type inside Annotated/Optional/Union wrappers; where a union
    holds both, the one the next `key` fits (an index: the list; a name: the model)."""
    while True:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
        elif origin in (Union, types.UnionType):
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            lists = [a for a in args if typing.get_origin(_unwrap(a)) is list]
            models = [a for a in args if _is_model(_unwrap(a))]
            first, second = (models, lists) if isinstance(key, str) else (lists, models)
            tp = (first or second or args)[0]
        else:
            return tp


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _fields_by_key(model: type[BaseModel]) -> dict[str, Any]:
    return {(info.alias or name): info for name, info in model.model_fields.items()}


def _resolve(path: KeyPath) -> tuple[Optional[type[BaseModel]], Any]:
    """(model owning the last key, its FieldInfo) for a key path, or (None, None)."""
    tp: Any = Scenario
    owner, info = None, None
    for part in path:
        tp = _unwrap(tp, part)
        if isinstance(part, int):
            if typing.get_origin(tp) is not list:
                return None, None
            tp = typing.get_args(tp)[0]
            owner, info = None, None
        else:
            if not _is_model(tp) or part not in _fields_by_key(tp):
                return None, None
            owner, info = tp, _fields_by_key(tp)[part]
            tp = info.annotation
    return owner, info


def _model_at(path: KeyPath) -> Optional[type[BaseModel]]:
    if not path:
        return Scenario
    owner, info = _resolve(path)
    if info is None:
        # a list item: resolve the list then take its item type
        if path and isinstance(path[-1], int):
            _, list_info = _resolve(path[:-1])
            if list_info is not None:
                item = _unwrap(list_info.annotation)
                if typing.get_origin(item) is list:
                    tp = _unwrap(typing.get_args(item)[0])
                    return tp if _is_model(tp) else None
        return None
    tp = _unwrap(info.annotation, "key")  # a key follows: the mapping branch of a union
    return tp if _is_model(tp) else None


def _normalize(loc: tuple, data: Any, missing: bool) -> tuple[KeyPath, bool]:
    """Map a pydantic loc onto the YAML's own keys, dropping union branch tags."""
    path: list[Union[str, int]] = []
    cur, union = data, False
    for part in loc:
        if isinstance(cur, dict) and part in cur:
            path.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            path.append(part)
            cur = cur[part]
        elif isinstance(cur, dict) and missing and part == loc[-1]:
            path.append(part)
        elif isinstance(part, str) and (not isinstance(cur, dict) or _is_branch_tag(part)):
            union = union or _is_branch_tag(part)
            if not isinstance(cur, (dict, list)):
                break  # a value rewritten by a before-validator (a bare agent kind): stop at the key
        else:
            break
    return tuple(path), union


def _is_branch_tag(part: str) -> bool:
    """A pydantic union branch name in an error's loc (`list[...]`, `int`, a model's
    CamelCase class name), never a YAML key (the language's keys are lowercase)."""
    return "[" in part or part in ("int", "str", "bool") or (part[:1].isupper() and part.isidentifier())


_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]*$"


def _value_error(err: dict, path: KeyPath, file: str, pos: Positions) -> ScenarioError:
    kind, msg, value = err["type"], err["msg"], err.get("input")
    line = pos.line_of(path)[0]
    _, info = _resolve(path)
    desc = (info.description or "").rstrip(".") if info is not None else ""
    if kind == "value_error":
        text = msg.removeprefix("Value error, ")
        problem, _, hint = text.partition(" — ")
        return BadValueError(problem, file=file, line=line, key_path=path, hint=hint)
    if kind == "literal_error":
        choices = re.findall(r"'([^']*)'", err.get("ctx", {}).get("expected", ""))
        listing = ", ".join(choices)
        hint = did_you_mean(str(value), choices, listing=f"one of: {listing}") or f"write one of: {listing}"
        return BadValueError(f"{value!r} is not allowed here", file=file, line=line, key_path=path, hint=hint)
    if kind == "string_pattern_mismatch":
        pattern = err.get("ctx", {}).get("pattern", "")
        if pattern == _NAME_PATTERN:
            hint = "write kebab-case: lowercase letters, digits and dashes (e.g. rename-collision)"
        elif pattern == LABEL_PATTERN:
            hint = "write a label: a letter, then letters, digits, `_` or `-` (e.g. alice, h1)"
        else:
            hint = f"write a value matching {pattern}"
        return BadValueError(f"{value!r} has the wrong form", file=file, line=line, key_path=path, hint=hint)
    if kind == "too_short":
        return BadValueError("the list is empty", file=file, line=line, key_path=path,
                             hint=f"write at least one item ({desc})" if desc else "write at least one item")
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return BadValueError(f"expected a mapping, got {value!r}", file=file, line=line, key_path=path,
                             hint="write `key: value` lines indented under it" + (f" ({desc})" if desc else ""))
    if kind == "list_type":
        return BadValueError(f"expected a list, got {value!r}", file=file, line=line, key_path=path,
                             hint="write `- item` lines indented under it" + (f" ({desc})" if desc else ""))
    problem = msg[0].lower() + msg[1:] + f", got {value!r}"
    ctx = err.get("ctx") or {}
    if kind == "greater_than_equal":
        hint = f"write {ctx.get('ge')} or more"
    else:
        hint = f"the field takes: {desc[0].lower() + desc[1:]}" if desc else "see docs/authoring-scenarios.md"
    return BadValueError(problem, file=file, line=line, key_path=path, hint=hint)


def convert_errors(exc: ValidationError, data: dict, pos: Positions, file: str) -> list[ScenarioError]:
    """Every pydantic error as a ScenarioError, one per key path, in file order."""
    entries = []
    for err in exc.errors():
        path, union = _normalize(err["loc"], data, err["type"] == "missing")
        entries.append((path, union, err))
    # A value that fits no branch of a union yields one error per branch: keep the
    # deepest ones (a bad item inside the list branch), merge the rest into one.
    deeper = {q[:k] for q, u, _ in entries if u for k in range(len(q))}  # proper prefixes of union paths
    entries = [(p, u, e) for p, u, e in entries if not (u and p in deeper)]
    # Only the first MAX_REPORTED_ERRORS are shown (raise_errors): the rest get a plain placeholder,
    # so a file with thousands of mistakes costs no "did you mean" search for each.
    entries.sort(key=lambda entry: pos.line_of(entry[0])[0])
    out: dict[KeyPath, ScenarioError] = {}
    for path, union, err in entries:
        if len(out) > MAX_REPORTED_ERRORS and path not in out:
            out[path] = ScenarioError(err["type"], file=file, line=pos.line_of(path)[0], key_path=path)
            continue
        if path in out:
            if union:  # several branches failed at the same spot: say what the field takes
                _, info = _resolve(path)
                desc = (info.description or "").rstrip(".") if info is not None else "see the schema"
                out[path] = BadValueError(f"{err.get('input')!r} is not allowed here", file=file,
                                          line=pos.line_of(path)[0], key_path=path,
                                          hint=f"write {desc[0].lower() + desc[1:]}")
            continue
        out[path] = _one_error(err, path, file, pos)
    # A misspelt required key is one mistake: its "did you mean" says it, so drop the "missing" it causes.
    meant = {e.key_path[:-1] + (e.hint.split("`")[1],) for e in out.values()
             if isinstance(e, UnknownKeyError) and e.hint.startswith("did you mean `")}
    kept = [e for e in out.values() if not (isinstance(e, MissingFieldError) and e.key_path in meant)]
    return sorted(kept, key=lambda e: (e.line or 0, format_key_path(e.key_path)))


# The nested objects an author most often mixes up: where a key of each lives (a key on the wrong one
# gets "it belongs on the process" rather than a list of the keys the wrong object takes).
_PLACES: tuple[tuple[str, type[BaseModel]], ...] = (
    ("the scenario (top level)", Scenario), ("the process (`processes[i]`)", Process),
    ("the session (`processes[i].sessions[j]`)", Session), ("the agent (`processes[i].sessions[j].agent`)", Agent),
)


def _proper_place(key: str, path: KeyPath) -> Optional[str]:
    """Where `key` belongs when it is a key of another of the nested objects than the one it is on."""
    here = _model_at(path[:-1])
    for where, model in _PLACES:
        if model is not here and key in _fields_by_key(model):
            return f"`{key}` belongs on {where}: move it there"
    return None


def _one_error(err: dict, path: KeyPath, file: str, pos: Positions) -> ScenarioError:
    kind = err["type"]
    if kind == "extra_forbidden" and path:
        key = str(path[-1])
        model = _model_at(path[:-1])
        allowed = list(_fields_by_key(model)) if model else []
        hint = did_you_mean(key, allowed) or _proper_place(key, path) or f"write one of: {', '.join(allowed)}"
        if key == "between" and len(path) == 3 and path[0] == "expect":  # beside the body, where `at` goes
            hint = ("move `between` inside the expectation, into its body: `<kind>: {..., between: [from, until]}` "
                    "(`at` is the key that goes beside it)")
        return UnknownKeyError(f"unknown key `{key}`", file=file, line=pos.line_of(path)[0], key_path=path, hint=hint)
    if kind == "missing" and path:
        key = str(path[-1])
        _, info = _resolve(path)
        desc = (info.description or "").rstrip(".") if info is not None else ""
        return MissingFieldError(f"missing required field `{key}`", file=file, line=pos.line_of(path[:-1])[0],
                                 key_path=path,
                                 hint=f"add `{key}:`, {desc[0].lower() + desc[1:]}" if desc else f"add `{key}:`")
    return _value_error(err, path, file, pos)
