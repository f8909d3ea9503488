"""The event kinds: docs/history.md's catalog and simulator/events.py declare the same kinds and fields,
the recorder refuses anything undeclared, and a real run emits only declared events."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import repo
from simulator import events
from simulator.api import run_scenario
from simulator.history import ORCHESTRATOR, Recorder, read_events
from simulator.scenario.loader import load_file

DOC = repo.ROOT / "docs" / "history.md"
# Which side records the kinds each table lists (its `##` heading).
SIDES = {"Orchestrator events": ORCHESTRATOR, "Engine additions": ORCHESTRATOR, "Harness events": "harness"}
# A first-cell token: a kind (`wake`), or one field of a kind (`run-end.partial?`, `sample.sessions.<label>.x`).
TOKEN = re.compile(r"^(?P<kind>[a-z]+(?:-[a-z]+)*)(?:\.(?P<field>[a-z_]+)(?P<rest>[^?]*)(?P<opt>\?)?)?$")
CELL = re.compile(r"(?<!\\)\|")


def top_level_fields(shape: str) -> dict[str, bool]:
    """`{a, b?: x, c: {d, e}}` -> {a: False, b: True, c: False}: each top-level field, True when optional."""
    parts, depth, cur = [], 0, ""
    for ch in shape.strip()[1:-1]:
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = {}
    for part in parts:
        m = re.match(r"\s*([a-z_]+)(\?)?", part)
        if m:
            out[m.group(1)] = bool(m.group(2))
    return out


def catalog(text: str) -> tuple[dict[str, str], dict[str, dict[str, bool]]]:
    """(kind -> side, kind -> {field: optional}) as the catalog's tables state them."""
    sides: dict[str, str] = {}
    fields: dict[str, dict[str, bool]] = {}
    side = None
    for line in text.splitlines():
        if line.startswith("## "):
            side = SIDES.get(line[3:].split("(")[0].strip())
            continue
        if side is None or not line.startswith("|"):
            continue
        cells = [c.strip() for c in CELL.split(line.strip())[1:]]  # a row may end without its `|`
        if len(cells) < 2:
            continue

        tokens = [m for m in (TOKEN.match(t) for t in re.findall(r"`([^`]*)`", cells[0])) if m]
        for m in tokens:
            if m.group("field"):  # one field of a kind documented above (or a part of one: `rest`)
                known, name = fields.setdefault(m.group("kind"), {}), m.group("field")
                known[name] = known.get(name, False) or (bool(m.group("opt")) and not m.group("rest"))


        kinds = [m.group("kind") for m in tokens if not m.group("field")]
        for kind in kinds:
            sides.setdefault(kind, side)
        shapes = [s for s in re.findall(r"`([^`]*)`", cells[1]) if s.startswith("{")]
        assert not shapes or len(shapes) == len(kinds), f"a row whose shapes do not match its kinds: {line}"
        for kind, shape in zip(kinds, shapes):
            known = fields.setdefault(kind, {})
            for name, optional in top_level_fields(shape).items():
                known[name] = known.get(name, False) or optional

    return sides, fields


def declared(kind: str) -> dict[str, bool]:
    return events.declared_fields(events.EVENT_KINDS[kind])


def test_the_catalog_reader_reads_shapes_and_field_rows():
    assert top_level_fields('{target, how?: "-s"/"-c", argv?: [a, b], sessions: {label: id}, opens?: x (y, z)}') == {
        "target": False, "how": True, "argv": True, "sessions": False, "opens": True}
    sides, fields = catalog("## Harness events\n| kind | data |\n| --- | --- |\n"
                            "| `a` / `b` | `{x, y?}` / `{}` |\n| `a.z?` | more |\n## Other\n| `c` | `{q}` |\n")
    assert sides == {"a": "harness", "b": "harness"}
    assert fields == {"a": {"x": False, "y": True, "z": True}, "b": {}}


def test_the_catalog_documents_exactly_the_declared_kinds_on_each_side():
    sides, _ = catalog(DOC.read_text(encoding="utf-8"))
    assert {k for k, s in sides.items() if s == ORCHESTRATOR} == set(events.ORCHESTRATOR_EVENTS)
    assert {k for k, s in sides.items() if s != ORCHESTRATOR} == set(events.HARNESS_EVENTS)
    assert set(sides) == set(events.EVENT_KINDS)


def test_every_kind_documents_its_declared_fields_required_and_optional_alike():
    _, fields = catalog(DOC.read_text(encoding="utf-8"))
    assert set(fields) == set(events.EVENT_KINDS)  # every kind states its data, `{}` included
    assert {k: fields[k] for k in events.EVENT_KINDS} == {k: declared(k) for k in events.EVENT_KINDS}


def test_each_kind_has_one_constant_named_after_it():
    constants = {v: n for n, v in vars(events).items() if n.isupper() and isinstance(v, str)}
    assert {k: constants.get(k) for k in events.EVENT_KINDS} == {
        k: k.upper().replace("-", "_") for k in events.EVENT_KINDS}


@pytest.mark.parametrize("kind, data, problem", [
    ("wakes", {}, "undeclared event kind 'wakes'"),
    (events.WAKE, {"senders": [], "count": 0, "text": ""}, "missing fields ['hosted']"),
    (events.POLL, {"hosted": [], "now": 1.0}, "undeclared fields ['now']"),
    (events.RUN_START, {"scenario": "s", "seed": 1, "dispatch_mode": "serial", "epoch_ms": 0}, "undeclared event kind"),
])
def test_a_harness_recorder_refuses_an_undeclared_event_and_writes_nothing(tmp_path, kind, data, problem):
    rec = Recorder.for_process(tmp_path, "h1")
    with pytest.raises(events.UndeclaredEvent, match=re.escape(problem)):
        rec.emit(kind, "alice", **data)
    rec.close()
    assert read_events(rec.path) == [] and not rec.has_emitted(kind)


def test_optional_fields_may_be_left_out_and_the_orchestrator_takes_only_its_kinds(tmp_path):
    rec = Recorder.for_process(tmp_path, "h1")
    rec.emit(events.TOOL_RESULT, "alice", tool="thatch_chat_read", ok=True, text="")
    rec.emit(events.TOOL_RESULT, "alice", tool="thatch_chat_read", ok=True, text="", step=2)
    assert [e["data"].get("step", "absent") for e in read_events(rec.path)] == ["absent", 2]
    orch = Recorder.for_process(tmp_path, ORCHESTRATOR)
    orch.emit(events.RUN_END)
    with pytest.raises(events.UndeclaredEvent):
        orch.emit(events.POLL, hosted=[])


def test_a_test_double_may_lift_the_check(tmp_path):
    rec = Recorder.for_process(tmp_path, "h1")
    rec.strict = False
    rec.emit("clock", now=1.0)
    assert read_events(rec.path)[0]["kind"] == "clock"


def test_a_scenario_run_emits_only_declared_kinds_and_fields(tmp_path):
    spec = load_file(str(repo.ROOT / "scenarios" / "guide" / "laptop-lid.yaml")).spec
    result = run_scenario(spec, run_dir=Path(tmp_path) / "run")
    assert result.error is None
    seen = set()
    for e in result.history:
        side = events.ORCHESTRATOR_FIELDS if e["proc"] == ORCHESTRATOR else events.HARNESS_FIELDS
        events.check(e["kind"], e["data"], side)
        seen.add(e["kind"])
    assert len(seen) >= 20  # a run of many kinds: processes, faults, sleeps, hooks, wakes, tools
    # Decoded once into records, every line keeps all it said: the record writes the line back.
    assert [r.as_dict() for r in result.typed] == result.history
    assert {type(r).__name__ for r in result.typed} >= {"ProcessStart", "Sample", "Hook", "Wake", "ToolResult"}


def test_a_record_is_frozen_and_names_its_fields():
    wake = events.decode({"i": 4, "t": 90_000, "dispatch": 7, "proc": "h1", "session": "bob", "kind": "wake",
                          "data": {"senders": ["ba-sil-00001"], "count": 1, "text": "...", "hosted": True}})
    assert isinstance(wake, events.Wake) and (wake.kind, wake.count, wake.hosted, wake.place) == (
        "wake", 1, True, "h1/bob")
    with pytest.raises(AttributeError):
        wake.count = 2  # type: ignore[misc]


def test_a_left_out_optional_field_is_absent_and_stays_out_of_the_line():
    result = events.decode({"kind": "tool-result", "data": {"tool": "chat_read", "ok": True, "text": ""}})
    assert result.step is None and "step" not in result.as_dict()["data"]
    # process-start.opens: null says "opens no session", which is not "not a resume that opens one"
    opens_none = events.decode({"kind": "process-start", "data": {"target": "h1", "opens": None}})
    plain = events.decode({"kind": "process-start", "data": {"target": "h1"}})
    assert opens_none.opens is None and plain.opens is events.ABSENT
    assert opens_none.as_dict()["data"]["opens"] is None and "opens" not in plain.as_dict()["data"]


def test_an_undeclared_kind_decodes_as_written():
    e = events.decode({"kind": "clock", "data": {"now": 1.0}, "t": 3})
    assert (e.kind, e.data(), e.t) == ("clock", {"now": 1.0}, 3)
