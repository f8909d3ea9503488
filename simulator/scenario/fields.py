"""The field types the scenario language is built from: strict models, durations, message bodies.

Shared by the step arguments (simulator/scenario/kinds.py) and the rest of the
model (simulator/scenario/model.py), so both read one definition of what a
duration or a body may be written as.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Optional, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo, WithJsonSchema
from pydantic import model_validator

from simulator.scenario.durations import (
    UNITS_REQUIRED, duration_json_schema, parse_duration, parse_word_or_duration, refuse_bare_number,
)


class Strict(BaseModel):
    """Unknown keys are errors: a typo must never be silently ignored."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=False)


def _units_required(info: ValidationInfo) -> bool:
    """A scenario file must write every duration with its unit; Python callers may pass milliseconds."""
    return bool(info.context and info.context.get(UNITS_REQUIRED))


def _duration(value: Any, info: ValidationInfo) -> int:
    if _units_required(info):
        refuse_bare_number(value)
    return parse_duration(value)


# A duration field: parsed per field so a bad value is reported at its own key path.
DurationMs = Annotated[int, BeforeValidator(_duration), WithJsonSchema(duration_json_schema())]


def end_or_duration(value: Any, info: ValidationInfo) -> Any:
    """An expectation's `at`: a duration or `end`."""
    if _units_required(info):
        refuse_bare_number(value)
    return parse_word_or_duration(value, "end")


def never_or_duration(value: Any, info: ValidationInfo) -> Any:
    """A process's `start`: a duration or `never`."""
    if _units_required(info):
        refuse_bare_number(value)
    return parse_word_or_duration(value, "never")



MAX_REPEAT = 1_000_000


class RepeatedBody(Strict):
    """A long body written compactly: `repeat` written `times` times, between an optional `prefix` and `suffix`."""

    repeat: str = Field(..., min_length=1, description="The text to repeat (at least one character).")
    times: int = Field(..., ge=0, le=MAX_REPEAT, description=f"How many times to repeat it (0 .. {MAX_REPEAT:_}).")
    prefix: str = Field("", description="Text before the repeated part (e.g. blanks that the store trims).")
    suffix: str = Field("", description="Text after the repeated part.")

    def text(self) -> str:
        return self.prefix + self.repeat * self.times + self.suffix


def expand_body(body: Any) -> Any:
    """A step body as the tool receives it: a `{repeat, times}` mapping (or its
    model) expanded to the string; anything else unchanged."""
    if isinstance(body, RepeatedBody):
        return body.text()
    if isinstance(body, dict) and "repeat" in body:
        return RepeatedBody.model_validate(body).text()
    return body


_REPEAT_FORM = "{repeat: TEXT, times: N} (optional prefix, suffix)"


def _body(value: Any) -> Any:
    """A step body: a string, or a mapping checked as a RepeatedBody with one
    message that names the bad key (a plain union would report both branches)."""
    if value is None or isinstance(value, (str, RepeatedBody)):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"{value!r} is not a message body — write a string (quote it) or {_REPEAT_FORM}")
    try:
        return RepeatedBody.model_validate(value)
    except ValidationError as exc:
        # a typo first: it explains the rest
        err = sorted(exc.errors(), key=lambda e: e["type"] != "extra_forbidden")[0]
        key = ".".join(str(k) for k in err["loc"])
        if err["type"] == "extra_forbidden":
            raise ValueError(f"unknown key `{key}` in a repeated body — write {_REPEAT_FORM}") from None
        if err["type"] == "missing":
            raise ValueError(f"a repeated body needs `{key}` — write {_REPEAT_FORM}") from None
        if key == "times" and err["type"] in ("greater_than_equal", "less_than_equal"):
            raise ValueError(f"`times: {err.get('input')!r}` is out of range — "
                             f"write a whole number from 0 to {MAX_REPEAT}") from None
        if key == "repeat" and err["type"] == "string_too_short":
            raise ValueError("`repeat` is empty — write the text to repeat (at least one character)") from None
        raise ValueError(f"`{key}: {err.get('input')!r}` is not allowed — write {_REPEAT_FORM}: "
                         f"strings for repeat, prefix and suffix, a whole number 0 .. {MAX_REPEAT} for times") from None


StepBody = Annotated[Optional[Union[str, RepeatedBody]], BeforeValidator(_body)]

BODY_HELP = ("The message body: a string, or {repeat: TEXT, times: N} (optional prefix/suffix) for a long one; "
             "faker writes one from the seed when omitted.")


class EitherOr(Strict):
    """Arguments with two alternative fields: exactly one of them must be given."""

    # (one field, the other field, the message when both or neither are given)
    either_or: ClassVar[tuple[str, str, str]]

    @model_validator(mode="after")
    def _exactly_one_alternative(self) -> "EitherOr":
        first, second, message = self.either_or
        if (getattr(self, first) is None) == (getattr(self, second) is None):
            raise ValueError(message)
        return self
