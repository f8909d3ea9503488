"""The run report: one self-contained HTML page per scenario run, plus its data.

`write_run_report(result, out_dir)` writes

- `history.jsonl` — a byte copy of the run's merged history (or the in-memory
  history serialised the same way when the file is gone);
- `summary.json`  — `RunResult.summary_json()`;
- `index.html`    — header, verdict table, witness legend and the timeline as
  a sequence diagram (`svg`). Inline CSS and inline SVG only: no
  script, no font or stylesheet fetched, so the file can be attached to a CI
  run and opened offline years later.

The page is a column of sections, each drawn by its own function and joined
by `render_html`.

The pytest plugin calls this when a scenario fails (or when asked to).
"""

from __future__ import annotations

import shutil
from html import escape
from pathlib import Path
from typing import Any, Callable, Optional

from simulator.events import Event
from simulator.history import History, encode_event
from simulator.report.lanes import Layout, fmt_data, fmt_span, fmt_t
from simulator.report.outcomes import DECLINED, EXPIRED, HELD, PARKED, REFUSED, SUPPRESSED
from simulator.report.svg import (C_BUSY, C_FRESH, C_MSG, C_STALE, C_UNREG, C_WAKE, C_WITNESS,
                                  render_timeline, swatch)
from simulator.result import RunResult

SLICE_AROUND = 3  # history events shown on either side of each witness in the text slice

CSS = """
body{font-family:"DejaVu Sans","Liberation Sans",Arial,sans-serif;margin:0;color:#1f2328;background:#fff;font-size:13px}
header{padding:14px 20px 8px;border-bottom:1px solid #d0d7de}
h1{font-size:19px;margin:0 0 6px}
h2{font-size:14px;margin:14px 0 6px}
.pill{display:inline-block;padding:1px 10px;border-radius:10px;\
color:#fff;font-weight:bold;font-size:13px;vertical-align:2px}
.pill.ok{background:#1a7f37}.pill.bad{background:#cf222e}
.meta{color:#57606a}.meta b{color:#1f2328}
section{padding:0 20px}
table.v{border-collapse:collapse;margin:4px 0 6px;max-width:1300px}
table.v td,table.v th{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}
table.v th{background:#f6f8fa}
tr.fail td{background:#ffebe9}tr.not-reached td{background:#fff8c5}
td.st{font-weight:bold;white-space:nowrap}
tr.fail td.st{color:#cf222e}tr.not-reached td.st{color:#9a6700}tr.pass td.st{color:#1a7f37}
a.wl{color:#fff;background:#e5000b;border-radius:3px;padding:0 4px;\
text-decoration:none;font-weight:bold;font-size:11px;margin-right:3px}
.key{color:#57606a;margin:4px 0 8px}.key span{margin-right:14px;white-space:nowrap}
.sw{display:inline-block;width:14px;height:9px;margin-right:4px;vertical-align:0}
.scroll{overflow:auto;max-height:88vh;border-top:1px solid #d0d7de;border-bottom:1px solid #d0d7de}
.sticky{position:sticky;top:0;z-index:2;background:#fff;border-bottom:1px solid #d0d7de;width:max-content}
svg text{font-family:"DejaVu Sans","Liberation Sans",Arial,sans-serif}
svg .lb{font-size:10.5px;fill:#1f2328}svg .sm{font-size:9.5px}svg .muted{fill:#6e7781}
svg .bad{fill:#8b1a1a;font-weight:bold}svg .stale{fill:#9a6700;font-weight:bold}\
svg .msg{fill:#1f6fd1;font-weight:bold}svg .wake{fill:#6b2fd6}
svg .tm{font-size:10.5px;fill:#57606a;font-family:"DejaVu Sans Mono",monospace}
svg .ln{font-size:12px;font-weight:bold;fill:#1f2328}svg .gn{font-size:12px;font-weight:bold;fill:#24292f}
svg .wb{font-size:10px;font-weight:bold;fill:#fff}
svg .grp{fill:#eaeef2;stroke:#d0d7de}
svg .grid{stroke:#eef1f4;stroke-width:1}
svg .ll-dead{stroke:#d0d7de;stroke-width:1;stroke-dasharray:3 4}
svg .ll-proc{stroke:#57606a;stroke-width:2.5}svg .ll-ses{stroke:#8c959f;stroke-width:1.5}
svg .phase{stroke:#8c959f;stroke-dasharray:8 4}
svg .brk{fill:#fbf7ec}svg .brkl{stroke:#d4a72c;stroke-dasharray:2 3}svg .brkt{fill:#7d5a00;font-style:italic}
svg g.ev:hover .lb{text-decoration:underline}
svg .o-held{fill:#b35c00;font-weight:bold}svg .o-parked{fill:#57606a;font-weight:bold}\
svg .o-refused{fill:#a40e26;font-weight:bold}svg .o-declined{fill:#8250df;font-weight:bold}\
svg .o-expired{fill:#bc4c00;font-weight:bold}svg .o-suppressed{fill:#57606a;font-weight:bold}
pre.slice{font-family:"DejaVu Sans Mono",monospace;font-size:11.5px;background:#f6f8fa;\
padding:8px;overflow:auto;max-width:1350px}
pre.slice b{color:#cf222e}
.err{color:#cf222e;font-weight:bold}
"""


def _e(s: Any) -> str:
    return escape(str(s), quote=True)


def _event_line(e: Event, long_run: bool) -> str:
    t, data = fmt_t(e.t, long_run), fmt_data(e.data(), 160)
    return f"#{e.i:<5} {t:>10}  {e.place:<22} {e.kind:<15} {data}"


def _page_head(result: RunResult) -> list[str]:
    verdict = "ok" if result.ok else "FAILED"
    return ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{_e(result.scenario)} seed={result.seed} — {verdict}</title>",
            f"<style>{CSS}</style></head><body>"]


def _header(result: RunResult, layout: Layout) -> list[str]:
    """The scenario, its verdict, the run's numbers, and the engine's error when it had one."""
    pill = '<span class="pill ok">ok</span>' if result.ok else '<span class="pill bad">FAILED</span>'
    out = ["<header>",
           f"<h1>{_e(result.scenario)} {pill}</h1>",
           f'<div class="meta">system under test <b>{_e(result.sut)}</b> · seed <b>{result.seed}</b> · '
           f'virtual time <b>{fmt_span(layout.end_t)}</b> · '
           f"dispatches <b>{result.dispatches}</b> · wall <b>{result.wall_s:.2f} s</b> · "
           f"events <b>{len(result.typed)}</b> · run dir <code>{_e(result.run_dir)}</code></div>"]
    if result.error:
        out.append(f'<div class="err">engine error: {_e(result.error)}</div>')
    out.append("</header>")
    return out


def _verdict_table(result: RunResult, layout: Layout, match: Callable[[Any], Optional[int]]) -> list[str]:
    """Verdicts: failures first, then not-reached, then the rest in their own order."""
    order = {"fail": 0, "not-reached": 1, "expected-fail": 2, "pass": 2, "skipped": 3}
    out = ['<section><h2>Verdicts</h2><table class="v"><tr><th>check</th><th>title</th><th>status</th>'
           "<th>rules</th><th>message</th><th>witness</th></tr>"]
    for v in sorted(result.verdicts, key=lambda v: order.get(v.status, 4)):
        links = []
        for w in v.witness if not v.ok else []:
            n = match(w)
            if n is not None and n in layout.witness:
                links.append(f'<a class="wl" href="#w{layout.witness[n]}">W{layout.witness[n]}</a>')
        out.append(f'<tr class="{_e(v.status)}"><td><b>{_e(v.check)}</b></td><td>{_e(v.title)}</td>'
                   f'<td class="st">{_e(v.status)}</td><td>{_e(" ".join(v.rules))}</td>'
                   f"<td>{_e(v.message)}</td><td>{''.join(links)}</td></tr>")
    out.append("</table></section>")
    return out


def _witness_table(result: RunResult, layout: Layout, match: Callable[[Any], Optional[int]]) -> list[str]:
    """Every witness of a failing verdict: the history events (linked to their outline), then the rest."""
    checks: dict[int, list[str]] = {}
    loose: list[tuple[str, Any]] = []  # witnesses that are not history events (db rows, notes)
    for v in result.verdicts:
        for w in v.witness if not v.ok else []:
            n = match(w)
            if n is not None:
                checks.setdefault(n, []).append(v.check)
            else:
                loose.append((v.check, w))
    if not layout.witness and not loose:
        return []
    out = ['<section><h2>Witness events (outlined in red on the timeline)</h2>'
           '<table class="v"><tr><th>#</th><th>breaks</th><th>time</th><th>where</th><th>kind</th><th>data</th></tr>']
    for n, w in sorted(layout.witness.items(), key=lambda kv: kv[1]):
        e = result.typed[n]
        data = fmt_data(e.data())
        out.append(f'<tr><td><a class="wl" href="#w{w}">W{w}</a></td>'
                   f'<td>{_e(", ".join(dict.fromkeys(checks.get(n, []))))}</td>'
                   f'<td>{fmt_t(e.t, layout.long_run)}</td><td>{_e(e.place)}</td>'
                   f'<td>{_e(e.kind)}</td><td><code>{_e(data[:200])}</code></td></tr>')
    for check, w in loose[:20]:
        what = next(iter(w), "value") if isinstance(w, dict) and len(w) == 1 else "not an event"
        out.append(f'<tr><td>—</td><td>{_e(check)}</td><td></td><td></td><td>{_e(what)}</td>'
                   f"<td><code>{_e(fmt_data(w)[:200])}</code></td></tr>")
    out.append("</table></section>")
    return out


def _line_swatch(color: str, dash: str = "") -> str:
    d = f' stroke-dasharray="{dash}"' if dash else ""
    return (f'<svg width="26" height="8"><line x1="0" y1="4" x2="26" y2="4" stroke="{color}" stroke-width="2"{d}/>'
            "</svg>")


# What became of a message, in the legend's words (the marks are `svg.SEND_STYLE` and the notices').
OUTCOME_WORDS = {
    HELD: "held for approval (a prompt with a deadline)",
    PARKED: "parked for a later review (no deadline)",
    REFUSED: "refused (never stored)",
    SUPPRESSED: "suppressed duplicate (its unread copy stands; nothing stored)",
    EXPIRED: "held message expired → notice to its sender",
    DECLINED: "held message declined → notice to its sender",
}


def _legend() -> list[str]:
    """What the diagram's lines, bars and outlines mean."""
    outcomes = "".join(f'<span class="o" data-outcome="{o}">{swatch(o)} {_e(words)}</span>'
                       for o, words in OUTCOME_WORDS.items())
    return ['<section><div class="key">'
            f"<span>{_line_swatch(C_MSG)} message delivered (send)</span>"
            f"<span>{_line_swatch(C_MSG, '6 3')} broadcast</span>"
            f"<span>{_line_swatch(C_WAKE, '4 2')} wake prompt (poller → session)</span>"
            f'<span><i class="sw" style="background:{C_FRESH}"></i>heartbeat fresh</span>'
            f'<span><i class="sw" style="background:{C_STALE}"></i>stale</span>'
            f'<span><i class="sw" style="background:{C_UNREG}"></i>not registered</span>'
            f'<span><i class="sw" style="background:{C_BUSY}"></i>busy/compacting</span>'
            '<span><i class="sw" style="background:#dde6f5"></i>machine asleep</span>'
            f'<span><i class="sw" style="border:2px solid {C_WITNESS};height:6px"></i>witness</span>'
            "<span>solid lifeline = process alive, dashed = not running · hover for details</span>"
            f'</div><div class="key">{outcomes}</div></section>']


def _omitted_note(layout: Layout) -> list[str]:
    """How many rows the cap left out, by kind."""
    if not layout.omitted:
        return []
    kinds = ", ".join(f"{k} ×{c}" for k, c in sorted(layout.omitted.items()))
    return [f"<section><p>{sum(layout.omitted.values())} rows not drawn to keep the page readable ({_e(kinds)}); "
            "see history.jsonl.</p></section>"]


def _history_slice(history: History, layout: Layout) -> list[str]:
    """The history lines around each witness (the first 40), witnesses in bold."""
    if not layout.witness:
        return []
    lines: list[str] = []
    shown: set[int] = set()
    for n in sorted(layout.witness)[:40]:
        lo, hi = max(0, n - SLICE_AROUND), min(len(history), n + SLICE_AROUND + 1)
        if lines and lo > max(shown) + 1:
            lines.append("   ⋮")
        for k in range(lo, hi):
            if k in shown:
                continue
            shown.add(k)
            line = _e(_event_line(history[k], layout.long_run))
            lines.append(f"<b>W{layout.witness[k]:<3}{line}</b>" if k in layout.witness else f"    {line}")
    return ['<section><details open><summary><b>History around the witnesses</b></summary>'
            f'<pre class="slice">{chr(10).join(lines)}</pre></details></section>']


def render_html(result: RunResult) -> str:
    """The whole report page as one string."""
    history = result.typed
    end_t = max(result.virtual_ms, max((e.t for e in history), default=0))
    head_svg, body_svg, layout = render_timeline(history, result.verdicts, end_t, result.db_path)
    match = layout.match
    timeline = f'<div class="scroll"><div class="sticky">{head_svg}</div>{body_svg}</div>'
    out = [*_page_head(result), *_header(result, layout), *_verdict_table(result, layout, match),
           *_witness_table(result, layout, match), *_legend(), timeline, *_omitted_note(layout),
           *_history_slice(history, layout), "</body></html>\n"]
    return "\n".join(out)


def write_run_report(result: RunResult, out_dir: Path) -> Path:
    """Write history.jsonl, summary.json and index.html into `out_dir`; return the index.html path."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    hist_out = out_dir / "history.jsonl"
    src = Path(result.history_path) if result.history_path else None
    if src is not None and src.is_file():
        if src.resolve() != hist_out.resolve():
            shutil.copyfile(src, hist_out)
    else:
        with open(hist_out, "w", encoding="utf-8", newline="\n") as fh:
            for e in result.history:
                fh.write(encode_event(e) + "\n")
    (out_dir / "summary.json").write_text(result.summary_json() + "\n", encoding="utf-8")
    index = out_dir / "index.html"
    index.write_text(render_html(result), encoding="utf-8")
    return index
