"""Words of the simulator's own language are spelled once.

The author's label (`simulator/scenario/labels.py`) and the chat id prefixes
(`simulator/design.py`, R31) are each written in one module and built or
imported everywhere else: a second copy of the label's character class or a
bare `"ses_"` / `"mcp_"` literal drifts from the first the day one of them
changes. A text scan of every module under simulator/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import repo

SIMULATOR = repo.ROOT / "simulator"
LABEL_HOME = SIMULATOR / "scenario" / "labels.py"
PREFIX_HOME = SIMULATOR / "design.py"
# The label's character classes, in a plain or a raw string.
LABEL_CLASS = re.compile(r"\[A-Za-z0-9_-\]|\[A-Za-z\]\[")
# A string literal that starts or ends with a chat id prefix ("ses_...", f"mcp_{...}", "... mcp_").
PREFIX_LITERAL = re.compile(r"""[rbfu]?["'](?:ses|mcp)_|(?<![\w])(?:ses|mcp)_["']""")


def offenders(pattern: re.Pattern, home: Path, root: Path = SIMULATOR) -> list[str]:
    """`path:line` of every match of `pattern` in a module under `root` other than `home`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path == home:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(root)}:{n}")
    return found


def test_the_label_pattern_is_spelled_only_in_its_home():
    assert offenders(LABEL_CLASS, LABEL_HOME) == [], "build it from simulator.scenario.labels"
    assert LABEL_CLASS.search(LABEL_HOME.read_text(encoding="utf-8")), "the home itself must hold the pattern"


@pytest.mark.rules("R31")
def test_chat_id_prefixes_are_written_only_in_the_design_module():
    """R31: the MCP id prefix (and opencode's own `ses_`) come from simulator/design.py by name."""
    assert offenders(PREFIX_LITERAL, PREFIX_HOME) == [], "use design.OPENCODE_ID_PREFIX / MCP_ID_PREFIX"


def test_the_scans_see_what_they_forbid(tmp_path):
    """Each scan finds a copy in every spelling it refuses, and nothing in an identifier or prose."""
    (tmp_path / "home.py").write_text('X = r"^[A-Za-z][A-Za-z0-9_-]*$"\n')
    (tmp_path / "bad.py").write_text("\n".join([
        'A = re.compile(r"\\{([A-Za-z][A-Za-z0-9_-]*)\\}")',
        "B = '[A-Za-z0-9_-]+'",
        'C = "ses_" + hex_digits',
        "D = sid.startswith(('ses_', 'mcp_'))",
        'E = f"mcp_{digest[:12]}"',
        'F = "a mcp_"',
        "mcp_session_id(sid)  # an mcp_ id: `ses_...` ids stay as they are",
        'G = "[A-Z][a-z]*"',
    ]) + "\n")
    assert offenders(LABEL_CLASS, tmp_path / "home.py", tmp_path) == ["bad.py:1", "bad.py:2"]
    assert offenders(PREFIX_LITERAL, tmp_path / "home.py", tmp_path) == ["bad.py:3", "bad.py:4", "bad.py:5", "bad.py:6"]
