"""The decision records keep their layout and the generated index stays current.

One record per id, in the file its prefix names, each with a status right
under its heading (scripts/decisions_index.py states the layout).
"""

from __future__ import annotations

import importlib.util
import re
import sys
import pytest

import repo

ROOT = repo.ROOT
RECORDS = ROOT / "docs" / "decisions"
LONGEST_PROSE_LINE = 100


def _index_module():
    if "decisions_index" not in sys.modules:
        spec = importlib.util.spec_from_file_location("decisions_index", ROOT / "scripts" / "decisions_index.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up by name
        spec.loader.exec_module(module)
    return sys.modules["decisions_index"]


def test_the_index_is_generated_from_the_records():
    index = _index_module()
    assert (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8") == index.render(), (
        "docs/decisions.md is stale: run python scripts/decisions_index.py")


def test_every_record_has_a_status_and_its_successors_exist():
    records = _index_module().all_records()
    idents = {record.ident for record in records}
    assert len(records) > 300
    for record in records:
        assert record.status.startswith(("accepted", "superseded")), record.ident
        for successor in re.findall(r"D-[a-z]+(?:-[a-z]+)*-[A-Z]?\d+", record.status):
            assert successor in idents, f"{record.ident}'s status names {successor}, which has no record"


def test_the_index_links_each_record_once():
    text = (ROOT / "docs" / "decisions.md").read_text(encoding="utf-8")
    for record in _index_module().all_records():
        assert text.count(f"(decisions/{record.path.name}#{record.anchor})") == 1, record.ident


@pytest.mark.parametrize("path", sorted(RECORDS.glob("*.md")), ids=lambda path: path.name)
def test_prose_is_wrapped(path):
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.startswith("|"):  # a table row cannot wrap
            assert len(line) <= LONGEST_PROSE_LINE, f"{path.name}:{number} is {len(line)} characters"


@pytest.mark.parametrize(
    ("text", "refusal"),
    [
        ("### D-store-1\n\nThe text.\n", "needs `Status: accepted`"),
        ("### D-mcp-1\n\nStatus: accepted\n\nThe text.\n", "D-mcp-1 belongs in mcp.md"),
        ("### D-store-1\n\nStatus: maybe\n\nThe text.\n", "needs `Status: accepted`"),
        ("**D-store-2: a headline.** Status: in force. The text.\n", "D-store-2 opens a paragraph"),
    ],
)
def test_a_broken_record_is_refused_with_its_place(tmp_path, text, refusal):
    index = _index_module()
    path = tmp_path / "store.md"
    path.write_text("# Decisions: the store\n\n" + text, encoding="utf-8")
    with pytest.raises(index.RecordError, match=re.escape(refusal)):
        index.records_of(path)
