"""The run's mail: who a call acts as, the stored messages whole, what the reads showed of each (P5, P12, P13).

A read's output is what its host handed the model (`text` of the tool-result:
on a clipping host its first `clip` characters, `clipped_from` the full
length). A message reached its reader only through those outputs, so the
judges ask, per stored row, which characters of its body some output showed:

- a drain (chat_read with no `message`) shows the rows it stamped read, in id
  order, each as one line whose body (after the line head's closing `] `) may
  be cut by the later design's page or by the host; the rows are found in the
  output one after another, so a repeated body never lends one row's text to
  another;
- a page (the later design's `message`/`offset`) shows one row from `offset`
  (counted in UTF-16 units) for as long as its output holds the body.

A piece counts only when it runs to the body's end, to the output's end (the
host's cut) or for a whole page (the design's cut, whose marker tells the
reader how to read on), never a chance overlap; a body is unseen from where
its pieces stop short with no such marker.
Nothing else here reads a header or a marker: the spans come from the stored
bodies and the call's own arguments, so a change of the design's page header
or clip marker text cannot move them.

Who a call acts as (the caller, or the session its `as` claims where the host
trusts or falls through to the claim, R32) is stated here too, since what a
read showed belongs to the inbox it drained.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from simulator.checks.view import Call, RunView
from simulator.design import (
    INBOX_BODY_OPEN, LATER_READ_PAGE_LEN, STAMP_RESOLUTION_MS, index_at_units, split_key, utf16_len,
)
from simulator.replies import joined_parts, part_count
from simulator.scenario.kinds import DEFAULT_HOST, HOSTS


def acting_identity(view: RunView, call: Call) -> Optional[str]:
    """The label a tool call acts as: the caller, except on Cursor, whose server
    trusts the claimed `as` (R32): a send claiming another session is stored as
    that session's mail, and a read claiming it drains that session's inbox."""
    claim = call.claim
    if claim and HOSTS[view.proc_kind.get(call.proc, DEFAULT_HOST)].trusts_as:
        return view.names.label_for_name(claim) or view.names.label_of.get(claim) or call.session
    return call.session


def may_act_as(view: RunView, call: Call) -> set[Optional[str]]:
    """Every label a tool call may have acted as: its acting identity, and on a host whose server
    does not trust `as` outright, the claimed session too, since R32 falls through to the claim
    when the anchors before it fail (no parent pid mapped within 600 s, the session env naming
    no row) (D-props-14)."""
    out = {acting_identity(view, call)}
    claim = call.claim
    if claim and not HOSTS[view.proc_kind.get(call.proc, DEFAULT_HOST)].trusts_as:
        out.add(view.names.label_for_name(claim) or view.names.label_of.get(claim))
    return out


# How a shown piece of a body ends: at the body's end, at the end of the output (the host cut it there, or the
# output ended: nothing after it told the reader there is more), or at the design's own page cut, whose clip
# marker follows in the output and says how to read on.
BODY_END, OUTPUT_END, PAGE_CUT = "body-end", "output-end", "page-cut"


@dataclass(frozen=True)
class Shown:
    """Characters [start, end) of one stored row's body, shown by one read call, and how the piece ends."""

    row_id: int
    call: Call
    start: int
    end: int
    cut: str

    @property
    def host_clipped(self) -> bool:
        """The host cut this call's output (so the model saw less than the chat returned)."""
        return bool(self.call.result is not None and self.call.result.clipped_from)


def _longest_from(body: str, start: int, text: str, after: int = 0) -> tuple[int, int]:
    """(length, where) of the longest piece body[start:start+k] that `text` holds at or after `after`."""
    lo, hi, where = 0, len(body) - start, after
    while lo < hi:
        mid = (lo + hi + 1) // 2
        at = text.find(body[start:start + mid], after)
        if at >= 0:
            lo, where = mid, at
        else:
            hi = mid - 1
    return lo, where


def _drained_by(view: RunView, call: Call) -> list[dict]:
    """The rows a drain stamped read: addressed to a label it may act as, stamped within the stamp
    resolution of its answer."""
    labels = may_act_as(view, call)
    out = []
    for r in view.db["messages"]:
        read_at = view.vt(r["read_at"]) if r["read_at"] else None
        if read_at is not None and abs(read_at - call.t) <= STAMP_RESOLUTION_MS \
                and view.names.label_of.get(r["to_session"]) in labels:
            out.append(r)
    return sorted(out, key=lambda r: r["id"])


def _cut(body: str, start: int, k: int, text: str, where: int) -> tuple[int, Optional[str]]:
    """(length, how it ends) of the piece a match of body[start:start+k] at `where` in `text` shows, the how None
    for a chance overlap (a piece ends its line or the output, and runs to the body's end, to the output's end,
    or for one whole page of the design)."""
    if not k:
        return k, None
    while k and text[where + k:where + k + 1] not in ("", "\n") and text[where + k - 1] == "\n":
        k -= 1  # the body's own line break matched the one that ends its line: the piece ends before it
    if not k or text[where + k:where + k + 1] not in ("", "\n"):
        return k, None  # the piece runs on into other text: not where this body's line or page ends
    if start + k == len(body):
        return k, BODY_END
    if where + k == len(text):
        return k, OUTPUT_END
    whole_page = utf16_len(body[start:start + k]) >= LATER_READ_PAGE_LEN - 1  # a pair at the cut backs off by one
    return k, (PAGE_CUT if whole_page else None)


def _drain_spans(view: RunView, call: Call) -> list[Shown]:
    """A drained row's line: its body follows the line head's closing `] `, the rows one after another. Where
    the lines name their rows (the later design's `id N`), only the rows named are looked for: two drains in one
    stamp second may meet parts whose shown text is alike, and a body found by content alone may be another's."""
    rows = _drained_by(view, call)
    named = {m.id for m in getattr(call.outcome, "messages", ()) if m.id is not None}
    if named:
        rows = [r for r in rows if r["id"] in named]
    out, cursor = [], 0
    for r in rows:
        body = str(r["body"] or "")
        whole = call.text.find(INBOX_BODY_OPEN + body + "\n", cursor)  # a whole line ends with its body
        if whole >= 0:
            out.append(Shown(r["id"], call, 0, len(body), BODY_END))
            cursor = whole + len(INBOX_BODY_OPEN) + len(body)
            continue
        k, where = _longest_from(INBOX_BODY_OPEN + body, 0, call.text, cursor)
        k -= len(INBOX_BODY_OPEN)
        where += len(INBOX_BODY_OPEN)
        k, cut = _cut(body, 0, k, call.text, where) if k > 0 else (k, None)
        if cut is not None:
            out.append(Shown(r["id"], call, 0, k, cut))
            cursor = where + k
    return out


def _page_spans(view: RunView, call: Call) -> list[Shown]:
    message, offset_arg = call.page or (None, None)
    try:
        row_id, offset = int(message), int(offset_arg or 0)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return []
    labels = may_act_as(view, call)
    row = next((r for r in view.db["messages"] if r["id"] == row_id
                and view.names.label_of.get(r["to_session"]) in labels), None)
    if row is None:
        return []
    body = str(row["body"] or "")
    start = index_at_units(body, max(offset, 0))
    k, where = _longest_from(body, start, call.text)
    k, cut = _cut(body, start, k, call.text, where)
    return [Shown(row_id, call, start, start + k, cut)] if cut is not None else []


def shown_spans(view: RunView) -> dict[int, list[Shown]]:
    """Row id -> the spans of its body the ok reads' outputs showed, in call order."""
    out: dict[int, list[Shown]] = {}
    for call in view.mail.calls_of("read", ok=True):
        for s in (_page_spans(view, call) if call.page else _drain_spans(view, call)):
            out.setdefault(s.row_id, []).append(s)
    return out


def unseen_from(spans: list[Shown], length: int) -> Optional[int]:
    """Where the characters of a body its reader was neither shown nor told how to read begin: the reach of the
    spans from its start, when that stops short of the end at no design page cut (whose marker says how to read
    on); None when it was shown whole or the reader was told."""
    reach = covered(spans)
    if reach >= length or any(s.end == reach and s.cut == PAGE_CUT for s in spans):
        return None
    return reach


def covered(spans: list[Shown]) -> int:
    """How far from the body's start the spans reach without a gap."""
    reach = 0
    for s in sorted(spans, key=lambda s: s.start):
        if s.start > reach:
            break
        reach = max(reach, s.end)
    return reach


def whole_messages(view: RunView) -> list[tuple[dict, str]]:
    """(row, body) per stored message; a split batch (the later design: `(message 1 of N)` and the N-1 rows
    after it, same sender and recipient) is one message, its first row with the `split_key` of the body its
    parts join to (each cut dropped its blank line and the whitespace around it)."""
    rows = sorted(view.db["messages"], key=lambda r: r["id"])
    by_id = {r["id"]: r for r in rows}
    out, inside = [], set()
    for r in rows:
        if r["id"] in inside:
            continue
        n = part_count(r["body"])
        batch = [by_id.get(r["id"] + k) for k in range(n)] if n else []
        if n and all(b is not None and (b["from_session"], b["to_session"]) == (r["from_session"], r["to_session"])
                     for b in batch):
            inside.update(b["id"] for b in batch)
            out.append((r, split_key(joined_parts([b["body"] for b in batch]))))
        else:
            out.append((r, r["body"]))
    return out
