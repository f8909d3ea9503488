"""The scenario errors: one root, `ScenarioError`, whose text is

    FILE:LINE: <key path>: <problem> — <what to write instead>

raised by the loader (`simulator.scenario.loader`) and the cross-reference checks
(`simulator.scenario.validate`), shown by `lint`, the CLI and the pytest plugin.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Optional, Union

KeyPath = tuple[Union[str, int], ...]


class ScenarioError(Exception):
    """A scenario that cannot run, located in its file: FILE:LINE: key path: problem — fix."""

    def __init__(self, problem: str, *, file: str = "<scenario>", line: Optional[int] = None,
                 column: Optional[int] = None, key_path: KeyPath = (), hint: str = "") -> None:
        self.problem, self.file, self.line, self.column = problem, file, line, column
        self.key_path, self.hint = tuple(key_path), hint
        super().__init__(self.format())

    def format(self) -> str:
        where = f"{self.file}:{self.line}" if self.line is not None else self.file
        text = f"{where}: {format_key_path(self.key_path) + ': ' if self.key_path else ''}{self.problem}"
        return f"{text} — {self.hint}" if self.hint else text

    def __str__(self) -> str:
        return self.format()

    @property
    def errors(self) -> list["ScenarioError"]:
        """Every single error this exception stands for (itself, or a group's members)."""
        return [self]


class ScenarioSyntaxError(ScenarioError):
    """The file is not well-formed YAML, or not one scenario mapping."""


class UnknownKeyError(ScenarioError):
    """A key the scenario language does not have (usually a typo)."""


class MissingFieldError(ScenarioError):
    """A required field is absent."""


class BadValueError(ScenarioError):
    """A value of the wrong type or form (a bad duration, an unknown kind, a bad id)."""


class CrossReferenceError(ScenarioError):
    """A label, time or target that does not fit the rest of the scenario."""


class ScenarioErrors(ScenarioError):
    """Several errors in one file, reported together (one per line)."""

    def __init__(self, errors: list[ScenarioError]) -> None:
        self._errors = list(errors)
        first = self._errors[0]
        super().__init__(first.problem, file=first.file, line=first.line, column=first.column,
                         key_path=first.key_path, hint=first.hint)

    def format(self) -> str:
        return "\n".join(e.format() for e in self._errors)

    @property
    def errors(self) -> list[ScenarioError]:
        return list(self._errors)


# A file with thousands of mistakes (a generated one, a paste gone wrong) is
# reported by its first ones: the rest usually repeat them.
MAX_REPORTED_ERRORS = 50


def raise_errors(errors: list[ScenarioError]) -> None:
    """Raise the one error, or a group (at most MAX_REPORTED_ERRORS and a count of the rest), or nothing."""
    if len(errors) > MAX_REPORTED_ERRORS:
        rest = errors[MAX_REPORTED_ERRORS:]
        errors = errors[:MAX_REPORTED_ERRORS] + [ScenarioError(
            f"{len(rest)} more errors from here on, not shown", file=rest[0].file, line=rest[0].line,
            hint="fix the ones above and check the file again")]
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise ScenarioErrors(errors)


def format_key_path(path: KeyPath) -> str:
    """("steps", 3, "send", "to") -> "steps[3].send.to"; () -> "(scenario)"."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(scenario)"


def did_you_mean(word: str, choices: Sequence[str], *, listing: Optional[str] = None,
                 case_insensitive: bool = False) -> Optional[str]:
    """The hint for a misspelt `word`: "did you mean `x`?" (then "(listing)" when
    given), x the closest of `choices` (a same-letters match first when
    `case_insensitive`); None when no choice is close: the caller says what to write."""
    close = [c for c in choices if c.lower() == word.lower()] if case_insensitive else []
    close = close or difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if not close:
        return None
    return f"did you mean `{close[0]}`?" + (f" ({listing})" if listing is not None else "")
