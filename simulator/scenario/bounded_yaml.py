"""Reading a scenario file's YAML within bounds: size, nesting, alias expansion.

A scenario file is input anyone may hand to `lint`, `run` or a pytest
session, so reading one must cost little whatever it holds. The bounds, each
refused with a `ScenarioSyntaxError` at file:line (D-loader-8):

- the file's size: at most `max_file_bytes()` (1 MB unless the environment
  variable `THATCH_SIM_MAX_SCENARIO_BYTES` says otherwise), checked before
  the file is read, and only a regular file is read at all;
- the nesting depth: at most `MAX_DEPTH` levels (a scenario nests about six);
- alias expansion: aliases (`*name`) may be used, but the document they
  expand to holds at most `MAX_NODES` values and `MAX_TEXT_CHARS` characters
  of text, and an alias inside the collection it names (a cycle) is refused;
- construction: a tag, date, merge key or number PyYAML cannot build is
  refused at its own line instead of escaping as a Python exception.

Files up to `PURE_PYTHON_MAX_CHARS` are parsed by PyYAML's Python parser
(the wording of its syntax errors is the one authors see); larger ones by
libyaml's parser, several times faster, with the same composer and checks.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.resolver import Resolver

from simulator.scenario.errors import ScenarioSyntaxError

MAX_FILE_BYTES_ENV = "THATCH_SIM_MAX_SCENARIO_BYTES"
DEFAULT_MAX_FILE_BYTES = 1_000_000
MAX_DEPTH = 50
MAX_NODES = 50_000
MAX_TEXT_CHARS = 10_000_000
PURE_PYTHON_MAX_CHARS = 65_536

_SPLIT = "a scenario is far smaller (at most 100 processes and 2000 steps): split it into several files"


def max_file_bytes() -> int:
    """The size limit of a scenario file: `THATCH_SIM_MAX_SCENARIO_BYTES`, or 1 MB when unset
    or not a positive integer."""
    raw = os.environ.get(MAX_FILE_BYTES_ENV, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else DEFAULT_MAX_FILE_BYTES


def read_scenario_text(path: Path | str, *, file: str, max_bytes: Optional[int] = None) -> str:
    """The text of a scenario file (a leading UTF-8 BOM dropped), or a ScenarioSyntaxError
    when it is not a readable regular file of UTF-8 text within the size limit."""
    limit = max_file_bytes() if max_bytes is None else max_bytes
    path = Path(path)
    try:
        if path.exists() and not path.is_file():
            raise ScenarioSyntaxError("not a regular file", file=file, line=1, hint="give a scenario .yaml file")
        size = path.stat().st_size
        if size > limit:
            raise ScenarioSyntaxError(f"the file is {size} bytes, over the limit of {limit} bytes", file=file, line=1,
                                      hint=f"{_SPLIT} (the limit is set by {MAX_FILE_BYTES_ENV})")
        with path.open("rb") as handle:
            raw = handle.read(limit + 1)
    except (OSError, ValueError) as exc:  # ValueError: a path holding a NUL byte
        raise ScenarioSyntaxError(f"cannot read the file ({exc})", file=file,
                                  hint="give a readable UTF-8 .yaml file") from None
    if len(raw) > limit:  # grew since the stat
        raise ScenarioSyntaxError(f"the file is over the limit of {limit} bytes", file=file, line=1, hint=_SPLIT)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise ScenarioSyntaxError(f"not UTF-8 text (byte 0x{raw[exc.start]:02x} cannot start a character here)",
                                  file=file, line=line, hint="save the file as UTF-8") from None


def _refusal(problem: str, mark: Any, file: str, hint: str) -> ScenarioSyntaxError:
    return ScenarioSyntaxError(problem, file=file, line=mark.line + 1 if mark is not None else None, hint=hint)


def _check_encodable(node: yaml.ScalarNode, file: str) -> None:
    """A `\\udc80` escape makes half a character, which no file, database or history line can hold."""
    try:
        node.value.encode("utf-8")
    except UnicodeEncodeError as exc:
        escape = node.value[exc.start].encode("unicode_escape").decode("ascii")
        raise _refusal(f"the text holds {escape}, half of a surrogate pair, which is no character",
                       node.start_mark, file,
                       "write the character itself, or one \\U escape for it (\\U0001F600)") from None


_FLATTEN = "a scenario nests a few levels (steps[3].send.body): flatten it"


class _Bounds:
    """The composer and constructor half of a bounded loader (mixed into a parser class)."""

    def _init_bounds(self, file: str) -> None:
        self._file = file
        self._depth = 0
        self._open_anchors: set[str] = set()
        # The document as expanded so far: every node composed is in it once, and every alias
        # adds again the whole value it names, so the running total only grows and the first
        # event past a limit is where the file goes wrong.
        self._values = 0
        self._chars = 0
        self._anchored: dict[str, tuple[int, int]] = {}  # anchor -> (values, characters) of its value
        self._aliases = 0

    def compose_node(self, parent: Any, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            self._aliases += 1
            if event.anchor in self._open_anchors:
                raise _refusal(f"the alias `*{event.anchor}` is inside the collection it names (a recursive alias)",
                               event.start_mark, self._file, "write the value out: a scenario cannot hold a cycle")
            node = Composer.compose_node(self, parent, index)  # an undefined alias is PyYAML's error
            self._grow(*self._anchored[event.anchor], event.start_mark)
            return node
        if self._depth >= MAX_DEPTH:
            raise _refusal(f"the YAML nests deeper than {MAX_DEPTH} levels", event.start_mark, self._file, _FLATTEN)
        anchor, before = event.anchor, (self._values, self._chars)
        self._depth += 1
        if anchor is not None:
            self._open_anchors.add(anchor)
        try:
            node = Composer.compose_node(self, parent, index)
        finally:
            self._depth -= 1
            self._open_anchors.discard(anchor)
        if isinstance(node, yaml.ScalarNode):
            if not node.value.isascii():
                _check_encodable(node, self._file)
            self._grow(1, len(node.value), node.start_mark)
        else:
            self._grow(1, 0, node.start_mark)
        if anchor is not None:
            self._anchored[anchor] = (self._values - before[0], self._chars - before[1])
        return node

    def _grow(self, values: int, chars: int, mark: Any) -> None:
        self._values += values
        self._chars += chars
        if self._values <= MAX_NODES and self._chars <= MAX_TEXT_CHARS:
            return
        what = f"{MAX_NODES} values" if self._values > MAX_NODES else f"{MAX_TEXT_CHARS} characters of text"
        if self._aliases:
            raise _refusal(f"YAML aliases expand the file to more than {what}", mark, self._file,
                           "each alias copies the whole value it names: reuse small values only; " + _SPLIT)
        raise _refusal(f"the file holds more than {what}", mark, self._file, _SPLIT)

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return SafeConstructor.construct_object(self, node, deep=deep)
        except (ValueError, OverflowError, TypeError) as exc:
            shown = node.value if isinstance(node, yaml.ScalarNode) else node.tag
            shown = shown if len(shown) <= 40 else shown[:40] + "..."
            reason = str(exc).split(";")[0]  # Python's own advice after the `;` is for programmers
            raise _refusal(f"the YAML value `{shown}` cannot be read ({reason})", node.start_mark, self._file,
                           "write it as plain text (quote it) or a plain number") from None


class _PythonLoader(_Bounds, yaml.SafeLoader):
    def __init__(self, text: str, file: str) -> None:
        yaml.SafeLoader.__init__(self, text)
        self._init_bounds(file)


_FAST_PARSER = getattr(getattr(yaml, "_yaml", None), "CParser", None) if yaml.__with_libyaml__ else None

if _FAST_PARSER is not None:
    class _FastLoader(_Bounds, Composer, _FAST_PARSER, SafeConstructor, Resolver):
        """libyaml's event parser under PyYAML's composer: the events come from C, the nodes and checks from here."""

        def __init__(self, text: str, file: str) -> None:
            _FAST_PARSER.__init__(self, text)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            self._init_bounds(file)


def bounded_loader(text: str, file: str) -> Any:
    """A SafeLoader-like reader of `text` that enforces the bounds of this module."""
    if len(text) > PURE_PYTHON_MAX_CHARS and _FAST_PARSER is not None:
        return _FastLoader(text, file)
    return _PythonLoader(text, file)


_SYNTAX_HINT = ("check the indentation and the `key: value` form of this line and the one above; "
                "quote values that contain `: ` or start with a special character")


def compose_documents(text: str, file: str) -> tuple[Any, list[yaml.Node]]:
    """(the loader, the non-empty documents of `text`, up to the second one), YAML errors as ScenarioSyntaxError."""
    docs: list[yaml.Node] = []
    try:
        loader = bounded_loader(text, file)  # PyYAML's reader checks every character here
        while len(docs) < 2 and loader.check_node():
            node = loader.get_node()
            if node is not None:
                docs.append(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        if "nesting depth" in problem:  # PyYAML >= 6.0.4 bounds flow nesting in its scanner, before our composer
            raise _refusal(f"the YAML nests deeper than {MAX_DEPTH} levels", mark, file, _FLATTEN) from None
        raise ScenarioSyntaxError(f"YAML syntax: {problem}", file=file, line=mark.line + 1 if mark else None,
                                  hint=_SYNTAX_HINT) from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow (a NUL, a control character)
        line = text[:exc.position].count("\n") + 1 if isinstance(exc.position, int) else 1
        char = exc.character if isinstance(exc.character, str) else chr(exc.character)
        raise ScenarioSyntaxError(f"YAML syntax: the character U+{ord(char):04X} is not allowed in YAML", file=file,
                                  line=line, hint="remove it, or write it as an escape in a double-quoted string "
                                                  "(\"\\t\")") from None
    except yaml.YAMLError as exc:
        raise ScenarioSyntaxError(f"YAML syntax: {exc}", file=file, line=1, hint="fix the YAML") from None
    return loader, docs


def construct(loader: Any, root: yaml.Node, file: str) -> Any:
    """The Python data of a composed document; a value PyYAML cannot build is a ScenarioSyntaxError at its line."""
    try:
        return loader.construct_document(root)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise ScenarioSyntaxError(f"YAML: {problem}", file=file, line=mark.line + 1 if mark else None,
                                  hint="a scenario holds plain strings, numbers, lists and mappings: "
                                       "drop the `!!tag` or `<<` merge, or quote the value") from None
