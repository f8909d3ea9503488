"""The policy comparison, as text and as one self-contained HTML page.

`thatch-sim compare` (simulator/compare.py) runs each scenario under each
policy set with the same seed and measures every run into a `PolicyRun`;
this module lays them side by side: a text table per scenario for the
terminal, and a page with the same tables, what each column means (a table),
every failed check by id and title, and an inline-SVG chart per scenario as
wide as the page (the wake prompts over virtual time, one line per policy
set, with labelled axes and the values under the pointer), so the difference
a policy makes can be seen at a glance. Inline CSS and SVG only, like the
run report: nothing is fetched, the file opens offline.
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
    promises: dict[str, str]           # P1..P14, Q1..Q3 -> pass / fail / expected-fail / skipped / not-reached
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
    peak_hour: int                     # most wakes one recipient got in a rolling hour
    read_median_s: Optional[float]     # send -> read, over every message read
    read_worst_s: Optional[float]
    unread: int                        # messages never read by the end
    wake_times: list[int] = field(default_factory=list)
    error: Optional[str] = None
    failures: list[tuple[str, str]] = field(default_factory=list)   # (id, title) of everything that failed
    wake_cap: Optional[int] = None     # the set's wakes per recipient per rolling hour (None: no cap)


@dataclass
class ScenarioComparison:
    name: str
    file: str
    seed: int
    story: str
    run_ms: int                        # duration + drain
    runs: list[PolicyRun]
    # Systems under test compared (`--sut`): each verdict that differs, one line per system with its witness.
    differences: list[tuple[str, list[str]]] = field(default_factory=list)


def span(ms: int) -> str:
    """`3h5m`, `57m50s`, `20s`, `0s`: whole seconds, largest units first."""
    return format_duration(int(round(ms / 1000)) * 1000)


def _secs(value: Optional[float]) -> str:
    return "-" if value is None else span(int(value * 1000))


def broken_promises(run: PolicyRun) -> list[str]:
    return [k for k, s in run.promises.items() if s in ("fail", "not-reached", "expected-fail")]


def promise_cell(run: PolicyRun) -> str:
    """`9/10 (fail P10)`: promises that held of those judged."""
    judged = [k for k, s in run.promises.items() if s in ("pass", "fail", "not-reached", "expected-fail")]
    bad = broken_promises(run)
    expected = " as expected" if bad and all(run.promises[k] == "expected-fail" for k in bad) else ""
    return f"{len(judged) - len(bad)}/{len(judged)}" + (f" (fail {' '.join(bad)}{expected})" if bad else "")


# Each column and what it counts: the page shows this as the column legend.
COLUMN_MEANINGS = (
    ("policy", "the policy set the scenario ran under"),
    ("promises", "thatch's properties P1-P14 and the policies' Q1-Q3 that held, of those judged "
                 "(`as expected`: failures the scenario expects under that design, an incident caught)"),
    ("script", "the scenario's own expectations, step replies and reach claims that held "
               "(written for the policy the scenario names)"),
    ("sent", "send attempts"),
    ("held", "sends held for the recipient's user's approval"),
    ("refused", "sends refused (sender cap, recipient refuses or has exited)"),
    ("expired", "held messages nobody reviewed in time"),
    ("declined", "held messages the recipient's user declined"),
    ("peak wakes/h", "the most wake prompts one recipient got in any rolling hour, beside the set's cap on it"),
    ("wait median", "from a send to the recipient's read (a held message: from its send), the median"),
    ("wait worst", "the same, the longest"),
    ("unread", "messages never read by the end of the run"),
)
COLUMNS = tuple(name for name, _ in COLUMN_MEANINGS)


def peak_cell(run: PolicyRun) -> str:
    """`6 (cap 6)`: the busiest rolling hour of one recipient, beside the cap that bounds it."""
    return f"{run.peak_hour} ({'no cap' if run.wake_cap is None else f'cap {run.wake_cap}'})"


def row_cells(run: PolicyRun) -> list[str]:
    if run.error:
        return [run.policy, "error", run.error.splitlines()[0][:60]] + [""] * (len(COLUMNS) - 3)
    return [run.policy, promise_cell(run), f"{run.script_passed}/{run.script_total}", str(run.sent), str(run.held),
            str(run.refused), str(run.expired), str(run.declined), peak_cell(run),
            _secs(run.read_median_s), _secs(run.read_worst_s), str(run.unread)]


def failure_lines(run: PolicyRun) -> list[str]:
    """`expect#0: wakes of reviewer at 9m`: every failed check with its title."""
    return [f"{check}: {title}" if title else check for check, title in run.failures] or list(run.failed)


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
        for check, lines in comp.differences:
            out.append(f"  differs: {check}")
            out.extend(f"    {line}" for line in lines)
        for run in comp.runs:
            for line in failure_lines(run):
                out.append(f"  {run.policy} failed: {line}")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# -- the chart -------------------------------------------------------------------------

# The chart's own units: it is drawn as wide as the page (`width="100%"`, the height follows).
VW, VH = 1000, 260
PAD_L, PAD_R, PAD_T, PAD_B = 62, 18, 34, 44
DASHES = ("", "7 4", "2 3", "10 3 2 3")
MAX_POINTS = 400   # hover points per line (a long run's wakes are thinned evenly)


def _ticks(run_ms: int) -> list[int]:
    step = next(s for s in (60_000, 300_000, 600_000, 1_800_000, HOUR_MS, 3 * HOUR_MS, 6 * HOUR_MS, 24 * HOUR_MS)
                if run_ms / s <= 8)
    return list(range(0, run_ms + 1, step))


def y_ticks(top: int) -> list[int]:
    """0 and evenly spaced round counts up to the first one at or above `top` (at most about 6 steps)."""
    step = next(s for m in (1, 10, 100, 1000, 10_000) for s in (m, 2 * m, 5 * m) if top / s <= 6)
    return list(range(0, -(-max(top, 1) // step) * step + 1, step))


def _axes(total: int, ymax: int, x, y) -> list[str]:
    """The plot's frame, gridlines, tick labels and axis titles."""
    plot_w, plot_h = VW - PAD_L - PAD_R, VH - PAD_T - PAD_B
    parts = [f'<rect x="{PAD_L}" y="{PAD_T}" width="{plot_w}" height="{plot_h}" fill="#fafbfc" stroke="#d0d7de"/>']
    for t in _ticks(total):
        parts.append(f'<line x1="{x(t):.1f}" y1="{PAD_T}" x2="{x(t):.1f}" y2="{PAD_T + plot_h}" stroke="#eef1f4"/>'
                     f'<text x="{x(t):.1f}" y="{PAD_T + plot_h + 15}" class="tk" text-anchor="middle">'
                     f'{span(t) if t else "0"}</text>')
    for n in y_ticks(ymax):
        parts.append(f'<line x1="{PAD_L}" y1="{y(n):.1f}" x2="{PAD_L + plot_w}" y2="{y(n):.1f}" stroke="#eef1f4"/>'
                     f'<text x="{PAD_L - 6}" y="{y(n) + 4:.1f}" class="tk" text-anchor="end">{n}</text>')
    mid = PAD_T + plot_h / 2
    parts.append(f'<text x="{PAD_L + plot_w / 2:.0f}" y="{VH - 8}" class="ax" text-anchor="middle">'
                 'virtual time since the scenario start</text>'
                 f'<text x="16" y="{mid:.0f}" class="ax" transform="rotate(-90 16 {mid:.0f})" '
                 'text-anchor="middle">wake prompts so far</text>')
    return parts


def _series(k: int, run: PolicyRun, total: int, x, y) -> list[str]:
    """One policy set's step line, a hover point at every wake, and its entry in the chart's key."""
    color, dash = PALETTE[k % len(PALETTE)], DASHES[k % len(DASHES)]
    style = f' stroke-dasharray="{dash}"' if dash else ""
    times = sorted(run.wake_times)
    points, dots = [f"{x(0):.1f},{y(0):.1f}"], []
    every = max(1, -(-len(times) // MAX_POINTS))
    for n, t in enumerate(times, start=1):
        points += [f"{x(t):.1f},{y(n - 1):.1f}", f"{x(t):.1f},{y(n):.1f}"]
        if n % every == 0 or n == len(times):
            dots.append(f'<circle cx="{x(t):.1f}" cy="{y(n):.1f}" r="3" fill="{color}">'
                        f'<title>{escape(run.policy)}: wake {n} of {len(times)} at {span(t)}</title></circle>')
    points.append(f"{x(total):.1f},{y(len(times)):.1f}")
    # Sets that behave alike draw the same line: dashes and a pixel's shift keep each one visible.
    key_x = PAD_L + 8 + 220 * k
    return [f'<g class="series" transform="translate(0 {-1.5 * k:.1f})">'
            f'<polyline fill="none" stroke="{color}" stroke-width="2"{style} points="{" ".join(points)}">'
            f'<title>{escape(run.policy)}: {len(times)} wake prompts</title></polyline>{"".join(dots)}</g>',
            f'<line x1="{key_x}" y1="{PAD_T - 14}" x2="{key_x + 24}" y2="{PAD_T - 14}" stroke="{color}" '
            f'stroke-width="3"{style}/><text x="{key_x + 30}" y="{PAD_T - 10}" class="lg">'
            f'{escape(run.policy[:24])}: {len(times)} wakes</text>']


def chart_svg(comp: ScenarioComparison) -> str:
    """Wake prompts received so far (all sessions) over virtual time, one step line per policy set."""
    total = max(comp.run_ms, 1)
    ymax = y_ticks(max([len(r.wake_times) for r in comp.runs] + [1]))[-1]
    plot_w, plot_h = VW - PAD_L - PAD_R, VH - PAD_T - PAD_B

    def x(t: int) -> float:
        return PAD_L + plot_w * min(t, total) / total

    def y(n: int) -> float:
        return PAD_T + plot_h * (1 - n / ymax)

    parts = [f'<svg class="chart" viewBox="0 0 {VW} {VH}" width="100%" role="img" '
             f'aria-label="wake prompts over time, {escape(comp.name)}">', *_axes(total, ymax, x, y)]
    for k, run in enumerate(comp.runs):
        parts += _series(k, run, total, x, y)
    parts.append("</svg>")
    return "".join(parts)


# -- the page ----------------------------------------------------------------------------

CSS = """
body{font-family:"DejaVu Sans","Liberation Sans",Arial,sans-serif;margin:0;color:#1f2328;background:#fff;font-size:13px}
header{padding:14px 20px 8px;border-bottom:1px solid #d0d7de}
h1{font-size:19px;margin:0 0 6px}h2{font-size:15px;margin:16px 0 4px}
.meta{color:#57606a}section{padding:0 20px 10px;border-bottom:1px solid #eaeef2}
.story{color:#57606a;max-width:1000px;margin:2px 0 8px}
table{border-collapse:collapse;margin:4px 0}
td,th{border:1px solid #d0d7de;padding:3px 6px;text-align:right;white-space:nowrap}
th{background:#f6f8fa}td:first-child,th:first-child{text-align:left;font-weight:bold}
td.good{color:#1a7f37}td.bad{color:#cf222e;font-weight:bold}
table.cols td,table.cols th{text-align:left;white-space:normal}table.cols td:first-child{white-space:nowrap}
details{margin:6px 0}
.opts{color:#57606a;margin:2px 0}.fails{color:#cf222e;margin:2px 0}
ul.fails{margin:2px 0 6px;padding-left:22px}ul.fails code{color:#1f2328}
svg.chart{display:block;margin:8px 0}
svg text{font-family:"DejaVu Sans","Liberation Sans",Arial,sans-serif}\
svg .tk{font-size:11px;fill:#57606a}svg .lg{font-size:12px;fill:#1f2328}svg .ax{font-size:12px;fill:#1f2328}
svg g.series circle{opacity:.55}svg g.series circle:hover{opacity:1}
"""


def _tone(run: PolicyRun, column: int) -> str:
    """Promises and script cells: green when all held, red when one broke."""
    if run.error or column not in (1, 2):
        return ""
    bad = broken_promises(run) if column == 1 else run.script_passed < run.script_total
    return ' class="bad"' if bad else ' class="good"'


def _column_legend() -> str:
    rows = "".join(f"<tr><td>{escape(name)}</td><td>{escape(meaning)}</td></tr>" for name, meaning in COLUMN_MEANINGS)
    return (f'<details open><summary>What the columns count</summary><table class="cols">'
            f"<tr><th>column</th><th>meaning</th></tr>{rows}</table></details>")


def _failures(run: PolicyRun) -> str:
    items = "".join(f"<li><code>{escape(check)}</code> {escape(title)}</li>" for check, title in
                    (run.failures or [(c, "") for c in run.failed]))
    return f'<div class="fails"><b>{escape(run.policy)}</b> failed:</div><ul class="fails">{items}</ul>'


def _section(comp: ScenarioComparison) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    rows = "".join("<tr>" + "".join(f"<td{_tone(r, i)}>{escape(c)}</td>" for i, c in enumerate(row_cells(r)))
                   + "</tr>" for r in comp.runs)
    notes = "".join(f'<div class="opts"><b>{escape(r.policy)}</b>: {escape(r.options)}</div>'
                    for r in comp.runs if r.options != "thatch")
    notes += "".join(_failures(r) for r in comp.runs if r.failed)
    notes += "".join(f'<div class="fails"><b>differs: {escape(check)}</b></div><ul class="fails">'
                     + "".join(f"<li><code>{escape(line)}</code></li>" for line in lines) + "</ul>"
                     for check, lines in comp.differences)
    return (f'<section id="{escape(comp.name)}"><h2>{escape(comp.name)}</h2>'
            f'<div class="meta">{escape(comp.file)} · seed {comp.seed} · '
            f'{span(comp.run_ms)} with the drain</div>'
            f'<div class="story">{escape(comp.story)}</div>'
            f'<table><tr>{head}</tr>{rows}</table>{notes}{chart_svg(comp)}</section>')


def render_page(comparisons: list[ScenarioComparison], policies: list[str]) -> str:
    body = "".join(_section(c) for c in comparisons)
    return ("<!doctype html><html><head><meta charset=\"utf-8\"><title>policy comparison</title>"
            f"<style>{CSS}</style></head><body><header><h1>Messaging policies side by side</h1>"
            f'<div class="meta">{len(comparisons)} scenario(s) under {escape(", ".join(policies))}, '
            f"each with its own seed in every set</div>{_column_legend()}</header>"
            f"{body}</body></html>\n")
