"""The policy comparison, as text and as one self-contained HTML page.

`thatch-sim compare` (simulator/compare.py) runs each scenario under each
policy set with the same seed and measures every run into a `PolicyRun`;
this module lays them side by side: a text table per scenario for the
terminal, and a page with the same tables and a small inline-SVG chart per
scenario (the wake prompts over virtual time, one line per policy set), so
the difference a policy makes can be seen at a glance. Inline CSS and SVG
only, like the run report: nothing is fetched, the file opens offline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import Optional

from simulator.scenario.durations import format_duration


HOUR_MS = 3_600_000
PALETTE = ("#1f6fd1", "#d1571f", "#1a7f37", "#8250df", "#9a6700", "#cf222e")


@dataclass
class PolicyRun:
    """One scenario run under one policy set, measured."""

    policy: str                        # the set's label (thatch, qoder, qoder+wake_cap=6, a file's name)
    options: str                       # the options that differ from thatch's
    ok: bool                           # every promise and every scripted check held
    promises: dict[str, str]           # P1..P10, Q1..Q3 -> pass / fail / skipped / not-reached
    script_passed: int                 # expectations, step replies, reach claims, faults that held
    script_total: int
    failed: list[str]                  # the ids of everything that failed
    sent: int                          # send attempts
    delivered: int                     # stored in the recipient's inbox at once
    held: int
    refused: int
    expired: int
    declined: int
    wakes: int
    wakes_per_recipient_hour: float    # the busiest recipient's wakes over the run's hours
    peak_hour: int                     # most wakes one recipient got in a rolling hour
    read_median_s: Optional[float]     # send -> read, over every message read
    read_worst_s: Optional[float]
    unread: int                        # messages never read by the end
    wake_times: list[int] = field(default_factory=list)
    error: Optional[str] = None


@dataclass
class ScenarioComparison:
    name: str
    file: str
    seed: int
    story: str
    run_ms: int                        # duration + drain
    runs: list[PolicyRun]


def span(ms: int) -> str:
    """`3h5m`, `57m50s`, `20s`, `0s`: whole seconds, largest units first."""
    return format_duration(int(round(ms / 1000)) * 1000)


def _secs(value: Optional[float]) -> str:
    return "-" if value is None else span(int(value * 1000))


def broken_promises(run: PolicyRun) -> list[str]:
    return [k for k, s in run.promises.items() if s in ("fail", "not-reached")]


def promise_cell(run: PolicyRun) -> str:
    """`9/10 (fail P10)`: promises that held of those judged."""
    judged = [k for k, s in run.promises.items() if s in ("pass", "fail", "not-reached")]
    bad = broken_promises(run)
    return f"{len(judged) - len(bad)}/{len(judged)}" + (f" (fail {' '.join(bad)})" if bad else "")


COLUMNS = ("policy", "promises", "script", "sent", "held", "refused", "expired", "declined", "wakes/rcpt/h", "peak 1h",
           "wait median", "wait worst", "unread")


def row_cells(run: PolicyRun) -> list[str]:
    if run.error:
        return [run.policy, "error", run.error.splitlines()[0][:60]] + [""] * (len(COLUMNS) - 3)
    return [run.policy, promise_cell(run), f"{run.script_passed}/{run.script_total}", str(run.sent), str(run.held),
            str(run.refused), str(run.expired), str(run.declined), f"{run.wakes_per_recipient_hour:.1f}",
            str(run.peak_hour), _secs(run.read_median_s), _secs(run.read_worst_s), str(run.unread)]


def text_table(comparisons: list[ScenarioComparison]) -> str:
    """The side-by-side table of every scenario, one block each, for the terminal."""
    out = []
    for comp in comparisons:
        rows = [list(COLUMNS)] + [row_cells(r) for r in comp.runs]
        widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
        out.append(f"{comp.name} (seed {comp.seed}, {span(comp.run_ms)} with the drain)")
        for r in rows:
            out.append("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                                        for i, (c, w) in enumerate(zip(r, widths))).rstrip())
        for run in comp.runs:
            if run.options != "thatch":
                out.append(f"  {run.policy}: {run.options}")
        for run in comp.runs:
            if run.failed:
                out.append(f"  {run.policy} failed: {', '.join(run.failed)}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# -- the chart -------------------------------------------------------------------------

W, H, PAD_L, PAD_R, PAD_T, PAD_B = 500, 190, 40, 175, 12, 30
DASHES = ("", "7 4", "2 3", "10 3 2 3")


def _ticks(run_ms: int) -> list[int]:
    step = next(s for s in (60_000, 300_000, 600_000, 1_800_000, HOUR_MS, 3 * HOUR_MS, 6 * HOUR_MS, 24 * HOUR_MS)
                if run_ms / s <= 8)
    return list(range(0, run_ms + 1, step))


def chart_svg(comp: ScenarioComparison) -> str:
    """Wake prompts received so far (all sessions) over virtual time, one step line per policy set."""
    top = max([len(r.wake_times) for r in comp.runs] + [1])
    total = max(comp.run_ms, 1)
    plot_w, plot_h = W - PAD_L - PAD_R, H - PAD_T - PAD_B

    def x(t: int) -> float:
        return PAD_L + plot_w * min(t, total) / total

    def y(n: int) -> float:
        return PAD_T + plot_h * (1 - n / top)

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" role="img" '
             f'aria-label="wake prompts over time, {escape(comp.name)}">',
             f'<rect x="{PAD_L}" y="{PAD_T}" width="{plot_w}" height="{plot_h}" fill="#fafbfc" stroke="#d0d7de"/>']
    for t in _ticks(total):
        parts.append(f'<line x1="{x(t):.1f}" y1="{PAD_T}" x2="{x(t):.1f}" y2="{PAD_T + plot_h}" '
                     'stroke="#eef1f4"/>'
                     f'<text x="{x(t):.1f}" y="{H - 12}" class="tk" text-anchor="middle">'
                     f'{span(t) if t else "0"}</text>')
    parts.append(f'<text x="{PAD_L - 6}" y="{PAD_T + 10}" class="tk" text-anchor="end">{top}</text>'
                 f'<text x="{PAD_L - 6}" y="{PAD_T + plot_h}" class="tk" text-anchor="end">0</text>'
                 f'<text x="12" y="{PAD_T + plot_h / 2:.0f}" class="tk" '
                 f'transform="rotate(-90 12 {PAD_T + plot_h / 2:.0f})" '
                 f'text-anchor="middle">wakes</text>')
    for k, run in enumerate(comp.runs):
        color = PALETTE[k % len(PALETTE)]
        points, n = [f"{x(0):.1f},{y(0):.1f}"], 0
        for t in sorted(run.wake_times):
            points.append(f"{x(t):.1f},{y(n):.1f}")
            n += 1
            points.append(f"{x(t):.1f},{y(n):.1f}")
        points.append(f"{x(total):.1f},{y(n):.1f}")
        # Sets that behave alike draw the same line: dashes and a pixel's shift keep each one visible.
        dash = DASHES[k % len(DASHES)]
        style = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{style} '
                     f'transform="translate(0 {-1.5 * k:.1f})" '
                     f'points="{" ".join(points)}"/>')
        ly = PAD_T + 14 + 16 * k
        parts.append(f'<line x1="{W - PAD_R + 8}" y1="{ly - 4}" x2="{W - PAD_R + 28}" y2="{ly - 4}" '
                     f'stroke="{color}" stroke-width="3"{style}/>'
                     f'<text x="{W - PAD_R + 32}" y="{ly}" class="lg">{escape(run.policy[:20])} ({n})</text>')
    parts.append("</svg>")
    return "".join(parts)


# -- the page ----------------------------------------------------------------------------

CSS = """
body{font-family:"DejaVu Sans","Liberation Sans",Arial,sans-serif;margin:0;color:#1f2328;background:#fff;font-size:13px}
header{padding:14px 20px 8px;border-bottom:1px solid #d0d7de}
h1{font-size:19px;margin:0 0 6px}h2{font-size:15px;margin:16px 0 4px}
.meta{color:#57606a}section{padding:0 20px 10px;border-bottom:1px solid #eaeef2}
.story{color:#57606a;max-width:1000px;margin:2px 0 8px}
.wrap{display:flex;gap:18px;align-items:flex-start;flex-wrap:wrap;margin-top:6px}
table{border-collapse:collapse;margin:4px 0}
td,th{border:1px solid #d0d7de;padding:3px 6px;text-align:right;white-space:nowrap}
th{background:#f6f8fa}td:first-child,th:first-child{text-align:left;font-weight:bold}
td.good{color:#1a7f37}td.bad{color:#cf222e;font-weight:bold}
.opts{color:#57606a;margin:2px 0}.fails{color:#cf222e;margin:2px 0}
svg text{font-family:"DejaVu Sans","Liberation Sans",Arial,sans-serif}\
svg .tk{font-size:10px;fill:#57606a}svg .lg{font-size:10.5px;fill:#1f2328}
"""

LEGEND = ("promises: thatch's properties P1-P10 and the policies' Q1-Q3 that held, of those judged; "
          "script: the scenario's own expectations, step replies and reach claims (written for the policy it names); "
          "sent: send attempts; "
          "held / refused / expired / declined: what the recipients' policies and users did; "
          "wakes/rcpt/h: the busiest recipient's wake prompts "
          "per hour of the run; peak 1h: most wakes one recipient got in a rolling hour; wait: from a send to the "
          "recipient's read (a held message from its send), median and worst; unread: never read by the end.")


def _tone(run: PolicyRun, column: int) -> str:
    """Promises and script cells: green when all held, red when one broke."""
    if run.error or column not in (1, 2):
        return ""
    bad = broken_promises(run) if column == 1 else run.script_passed < run.script_total
    return ' class="bad"' if bad else ' class="good"'


def _section(comp: ScenarioComparison) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    rows = "".join("<tr>" + "".join(f"<td{_tone(r, i)}>{escape(c)}</td>" for i, c in enumerate(row_cells(r)))
                   + "</tr>" for r in comp.runs)
    notes = "".join(f'<div class="opts"><b>{escape(r.policy)}</b>: {escape(r.options)}</div>'
                    for r in comp.runs if r.options != "thatch")
    notes += "".join(f'<div class="fails"><b>{escape(r.policy)}</b> failed: {escape(", ".join(r.failed))}</div>'
                     for r in comp.runs if r.failed)
    return (f'<section id="{escape(comp.name)}"><h2>{escape(comp.name)}</h2>'
            f'<div class="meta">{escape(comp.file)} · seed {comp.seed} · '
            f'{span(comp.run_ms)} with the drain</div>'
            f'<div class="story">{escape(comp.story)}</div>'
            f'<table><tr>{head}</tr>{rows}</table>'
            f'<div class="wrap">{chart_svg(comp)}<div>{notes}</div></div></section>')


def render_page(comparisons: list[ScenarioComparison], policies: list[str]) -> str:
    body = "".join(_section(c) for c in comparisons)
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>policy comparison</title>"
            f"<style>{CSS}</style></head><body><header><h1>Messaging policies side by side</h1>"
            f'<div class="meta">{len(comparisons)} scenario(s) under {escape(", ".join(policies))}, '
            f"each with its own seed in every set</div><div class=\"meta\">{escape(LEGEND)}</div></header>"
            f"{body}</body></html>\n")
