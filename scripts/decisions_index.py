"""Regenerate docs/decisions.md: the index of every decision in docs/decisions/*.md.

Each area file holds the full decisions (`**D-<area>-N: headline.** why ...`);
the index lists every headline under its area so a reader can scan all the
choices the seeds leave open in one page. Run after editing an area file:

    python scripts/decisions_index.py
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
AREAS = ROOT / "docs" / "decisions"
OUT = ROOT / "docs" / "decisions.md"
# A decision starts a paragraph: `**D-area-N: headline.**` or `D-area-N: headline.`
DECISION = re.compile(r"^\**(D-[A-Za-z]+(?:-[A-Za-z0-9]+)+)\**[:.]?\s*(.*)$")


def decisions(text: str) -> list[tuple[str, str]]:
    """(id, first sentence) of every decision paragraph."""
    found = []
    for paragraph in re.split(r"\n\s*\n", text):
        flat = " ".join(paragraph.split())
        match = DECISION.match(flat)
        if match:
            body = match.group(2).replace("**", "")
            # Abbreviations end no sentence.
            body = body.replace("e.g.", "e\0g\0").replace("i.e.", "i\0e\0")
            sentence = re.split(r"(?<=[a-z0-9`)][.!?])\s(?=[A-Z`*(])", body, maxsplit=1)[0]
            found.append((match.group(1), sentence.replace("\0", ".").rstrip(".:")))
    return found


def area_title(text: str, path: Path) -> str:
    first = text.splitlines()[0] if text else path.stem
    return first.lstrip("# ").strip() or path.stem


def main() -> None:
    lines = [
        "# Decisions",
        "",
        "Every choice the design and its sources (`docs/rules.md`) leave open, with",
        "the reason, lives in one file per area under `docs/decisions/`. This page",
        "is their index (regenerate it with `python scripts/decisions_index.py`).",
        "",
    ]
    for path in sorted(AREAS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        lines += [f"## [{area_title(text, path)}](decisions/{path.name})", ""]
        for ident, headline in decisions(text):
            lines.append(f"- **{ident}**: {headline}")
        lines.append("")
    OUT.write_text("\n".join(lines), encoding="utf-8")


if __name__ == "__main__":
    main()
