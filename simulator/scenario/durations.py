"""Durations in the scenario language: `90s`, `15m`, `5m30s` (a bare integer of milliseconds from Python only).

The parser, the shortest spelling used in messages and reports, the help text
every duration field's description repeats, and the JSON Schema editors check
duration fields with.
"""

from __future__ import annotations

import re
from typing import Any, Optional

# One or more `<number><unit>` parts, units largest first, each at most once
# (`5m30s`, `2h10m`, `1d2h`, `1m500ms`): the lookahead makes "at least one part".
_PART = r"\d+(?:\.\d+)?\s*"
_DURATION = re.compile(
    rf"^\s*(?=\d)(?:({_PART})d\s*)?(?:({_PART})h\s*)?(?:({_PART})m(?!s)\s*)?(?:({_PART})s\s*)?(?:({_PART})ms\s*)?$"
)
_UNIT_MS = {"ms": 1, "s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_PART_UNITS = ("d", "h", "m", "s", "ms")  # the regex's groups, in order
DURATION_HELP = "a number with a unit: 500ms, 90s, 15m, 2h, 7d, or units combined largest first: 5m30s, 2h10m, 1d2h"


def parse_duration(value: Any) -> int:
    """Milliseconds from `90s`, `15m`, `2h`, `7d`, `500ms`, a compound `5m30s` (or a bare integer of ms)."""
    # Messages follow the loader's "problem — what to write instead" shape.
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration — write {DURATION_HELP}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a duration cannot be negative ({value!r}) — write {DURATION_HELP}")
        return value
    if isinstance(value, str):
        match = _DURATION.match(value)
        if match:
            total = sum(float(n) * _UNIT_MS[u] for n, u in zip(match.groups(), _PART_UNITS) if n is not None)
            if total == float("inf"):  # so many digits the float overflows; the world's limits are in bounds.py
                raise ValueError(f"{value[:40]!r} is far too long a duration — write at most a few days, e.g. 7d")
            return round(total)
    raise ValueError(f"{value!r} is not a duration — write {DURATION_HELP}")


# The validation-context key under which a scenario file's durations must carry
# their unit (the loader sets it; Python callers may pass integer milliseconds).
UNITS_REQUIRED = "units_required"


def refuse_bare_number(value: Any) -> None:
    """A duration written without its unit in a scenario file: `at: 90` would
    silently be 90 ms. Zero is the same in every unit and stays allowed."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        raise ValueError(f"{value} has no unit — write `{value}s` or `{value}ms` "
                         f"(a bare number would silently mean {value} ms)")


def parse_word_or_duration(value: Any, word: str) -> Any:
    """`word` itself (`end`, `never`), or the milliseconds of a duration."""
    if value == word:
        return value
    try:
        return parse_duration(value)
    except ValueError:
        raise ValueError(f"{value!r} is neither a duration nor `{word}` — write `{word}` or {DURATION_HELP}") from None


def format_duration(ms: int) -> str:
    """A duration (or a time into the run) as the language spells it, whole units largest first: `6m50s`,
    `1h`, `1m30s250ms`, `0s`. The one formatter of every message, verdict title and report text."""
    ms = int(ms)
    if ms < 0:
        return "-" + format_duration(-ms)
    parts = []
    for unit in ("d", "h", "m", "s", "ms"):
        n, ms = divmod(ms, _UNIT_MS[unit])
        if n:
            parts.append(f"{n}{unit}")
    return "".join(parts) or "0s"


def duration_json_schema(word: Optional[str] = None) -> dict[str, Any]:
    """The JSON Schema of a duration field, or of a `word`-or-duration field when
    `word` is given: what the validators accept, so editors do not flag `2m`."""
    # A number needs its unit in a file; only 0 (the same in every unit) may be bare.
    shapes: list[dict[str, Any]] = [{"type": "string", "pattern": _DURATION.pattern}, {"const": 0}]
    return {"anyOf": ([{"const": word}] if word is not None else []) + shapes}
