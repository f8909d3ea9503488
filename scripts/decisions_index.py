"""Regenerate docs/decisions.md, the index of every decision record.

A record lives in the file its prefix names (`D-loader-3` and `D-loader-9` in
docs/decisions/loader.md, `D-real-text-2` in real.md: the word after `D-`),
and reads

    ### D-loader-3

    Status: accepted

    The text: why, what was weighed, ...

The status is `accepted` (with `; ...` naming a part another record replaced)
or `superseded by D-...` (or, rarely, by what replaced it). The index gives
one line per record, linking it. Run after adding or editing a record:

    python scripts/decisions_index.py           # rewrite docs/decisions.md
    python scripts/decisions_index.py --check   # exit 1 when it is stale
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "docs" / "decisions"
INDEX = ROOT / "docs" / "decisions.md"
RECORD_HEADING = re.compile(r"^### (D-([a-z]+)(?:-[a-z]+)*-[A-Z]?\d+)$")
# A decision written the old way, as a paragraph of its own: `D-x-N: ...` or `**D-x-N: headline.**`.
UNHEADED = re.compile(r"^\**(D-[a-z]+(?:-[a-z]+)*-[A-Z]?\d+)\**[:.]")
STATUS = re.compile(r"^Status: (accepted(?:; .+)?|superseded .+)$")
HEADLINE_CHARS = 110


@dataclass(frozen=True)
class Record:
    ident: str
    path: Path
    status: str
    headline: str

    @property
    def anchor(self) -> str:
        return self.ident.lower()


class RecordError(ValueError):
    """A decision file that breaks the record layout."""


def _headline(body: str) -> str:
    """The bold headline, else the first sentence, cut to one index line."""
    flat = " ".join(body.split())
    bold = re.match(r"^\*\*(.+?)\*\*", flat)
    text = bold.group(1) if bold else flat
    text = text.replace("e.g.", "e\0g\0").replace("i.e.", "i\0e\0")
    text = re.split(r"(?<=[a-z0-9`)][.!?])\s(?=[A-Z`*(])", text, maxsplit=1)[0]
    text = text.replace("\0", ".").rstrip(".:")
    if len(text) > HEADLINE_CHARS:
        text = text[:HEADLINE_CHARS].rsplit(" ", 1)[0]
        if text.count("`") % 2:  # never leave a code span open
            text = text[:text.rindex("`")].rstrip()
        text += " ..."
    return text


def _paragraphs_under(lines: list[str]) -> list[str]:
    """The paragraphs (each flattened to one line) up to the next heading."""
    paragraphs, current = [], []
    for text in [*lines, ""]:
        if text.startswith("#") or not text.strip():
            if current:
                paragraphs.append(" ".join(" ".join(current).split()))
                current = []
            if text.startswith("#"):
                break
        else:
            current.append(text)
    return paragraphs


def records_of(path: Path) -> list[Record]:
    """Every record of one decision file, checked against the layout."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found = []
    for number, line in enumerate(lines):
        heading = RECORD_HEADING.match(line)
        if not heading:
            if line.startswith("### D-"):
                raise RecordError(f"{path.name}:{number + 1}: `{line}` is no record heading (### D-<prefix>-<n>)")
            unheaded = UNHEADED.match(line)
            if unheaded and (number == 0 or not lines[number - 1].strip()):
                raise RecordError(f"{path.name}:{number + 1}: {unheaded.group(1)} opens a paragraph; write it as a "
                                  f"record: `### {unheaded.group(1)}`, a blank line, `Status: accepted`")
            continue
        if heading.group(2) != path.stem:
            raise RecordError(f"{path.name}:{number + 1}: {heading.group(1)} belongs in {heading.group(2)}.md")
        paragraphs = _paragraphs_under(lines[number + 1:])
        status = paragraphs[0] if paragraphs else ""
        matched = STATUS.match(status)
        if not matched:
            raise RecordError(
                f"{path.name}:{number + 1}: {heading.group(1)} needs `Status: accepted` or"
                f" `Status: superseded by D-...` right under its heading, not {status[:60]!r}")
        body = paragraphs[1] if len(paragraphs) > 1 else ""
        found.append(Record(heading.group(1), path, matched.group(1), _headline(body)))
    return found


def all_records() -> list[Record]:
    found = [record for path in sorted(RECORDS.glob("*.md")) for record in records_of(path)]
    seen: dict[str, Record] = {}
    for record in found:
        if record.ident in seen:
            raise RecordError(f"{record.ident} is recorded twice")
        seen[record.ident] = record
    return found


def _title(path: Path) -> str:
    first = path.read_text(encoding="utf-8").splitlines()[0]
    return first.lstrip("# ").removeprefix("Decisions: ").strip()


def _entry(record: Record) -> str:
    line = f"- [{record.ident}](decisions/{record.path.name}#{record.anchor}): {record.headline}"
    if record.status.startswith("superseded"):
        successors = re.findall(r"D-[a-z]+(?:-[a-z]+)*-[A-Z]?\d+", record.status)
        said = "superseded by " + " and ".join(successors) if successors else record.status.split("(")[0].strip()
        line += f" *({said})*"
    return line


def render() -> str:
    lines = [
        "# Decisions",
        "",
        "Every choice the design and its sources (`docs/rules.md`) leave open, with",
        "its reason, is one record in `docs/decisions/`, in the file its prefix",
        "names (`D-loader-3` in `decisions/loader.md`), with its status: `accepted`",
        "or `superseded by D-...`. This page is generated from them",
        "(`python scripts/decisions_index.py`); a test fails when it is stale.",
        "",
    ]
    by_file: dict[Path, list[Record]] = {}
    for record in all_records():
        by_file.setdefault(record.path, []).append(record)
    for path, records in by_file.items():
        lines += [f"## [{_title(path)}](decisions/{path.name})", ""]
        lines += [_entry(record) for record in records]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        if INDEX.read_text(encoding="utf-8") != text:
            print("docs/decisions.md is stale: run python scripts/decisions_index.py", file=sys.stderr)
            return 1
        return 0
    INDEX.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
