"""A self-contained HTML report: inline SVG charts, inline CSS, no script, no network.

One section per session: the composition over calls as a stacked area chart
(calibrated view) with compactions marked, the current composition, largest
parts and waste findings. Counts and identities only (SPEC section 7): the
references shown are those the terminal report shows.
"""

from __future__ import annotations

import html
from typing import Sequence

from ctxscope.schema import CATEGORIES, INFERRED_PREFIX_LABEL, Category
from ctxscope.report.analysis import FileResult, SessionResult

COLOURS = {
    Category.SYSTEM: "#6c757d", Category.RULES: "#8e44ad", Category.SKILLS: "#9b59b6",
    Category.TOOLS: "#2c3e50", Category.ENVIRONMENT: "#16a085", Category.PROMPTS: "#2980b9",
    Category.ASSISTANT: "#27ae60", Category.RESULTS: "#e67e22", Category.SUMMARIES: "#f1c40f",
    Category.OVERHEAD: "#95a5a6", Category.MESSAGES: "#34495e", Category.UNATTRIBUTED: "#c0392b",
}
_W, _H, _PAD_L, _PAD_B, _PAD_T = 900, 320, 70, 40, 20
_MAX_POINTS = 600  # a long session is sampled so that the page stays small


def _esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def chart_svg(session: SessionResult) -> str:
    rows = session.rows
    if not rows:
        return "<p>No calls.</p>"
    step = max(1, -(-len(rows) // _MAX_POINTS))
    sample = [r for i, r in enumerate(rows) if i % step == 0 or i == len(rows) - 1 or r.compaction]
    present = [c for c in CATEGORIES if any(r.calibrated.get(c) for r in sample)]
    peak = max(1, max(r.used for r in sample))
    n = len(sample)
    plot_w, plot_h = _W - _PAD_L - 10, _H - _PAD_B - _PAD_T

    def x(i: int) -> float:
        return _PAD_L + (plot_w * i / (n - 1) if n > 1 else plot_w / 2)

    def y(v: float) -> float:
        return _PAD_T + plot_h - plot_h * v / peak

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" role="img" width="{_W}" height="{_H}" '
             f'viewBox="0 0 {_W} {_H}" aria-label="Context composition over calls">',
             f'<rect x="0" y="0" width="{_W}" height="{_H}" fill="#ffffff"/>']
    base = [0.0] * n
    for category in present:
        top = [base[i] + sample[i].calibrated.get(category, 0) for i in range(n)]
        if n == 1:
            points = [(x(0) - 20, y(top[0])), (x(0) + 20, y(top[0])), (x(0) + 20, y(base[0])), (x(0) - 20, y(base[0]))]
        else:
            points = [(x(i), y(top[i])) for i in range(n)] + [(x(i), y(base[i])) for i in reversed(range(n))]
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py in points)
        parts.append(f'<polygon class="area" data-category="{category.value}" points="{path}" '
                     f'fill="{COLOURS[category]}" fill-opacity="0.85"><title>{category.value}</title></polygon>')
        base = top
    for i, r in enumerate(sample):
        if r.compaction:
            parts.append(f'<line class="compaction" x1="{x(i):.1f}" x2="{x(i):.1f}" y1="{_PAD_T}" '
                         f'y2="{_PAD_T + plot_h}" stroke="#000" stroke-dasharray="4 3"/>'
                         f'<text x="{x(i) + 3:.1f}" y="{_PAD_T + 12}" font-size="11">compaction</text>')
    # Axes and labels.
    parts.append(f'<line x1="{_PAD_L}" y1="{_PAD_T + plot_h}" x2="{_PAD_L + plot_w}" y2="{_PAD_T + plot_h}" '
                 'stroke="#333"/>')
    parts.append(f'<line x1="{_PAD_L}" y1="{_PAD_T}" x2="{_PAD_L}" y2="{_PAD_T + plot_h}" stroke="#333"/>')
    for frac in (0, 0.5, 1):
        value = int(peak * frac)
        parts.append(f'<text x="{_PAD_L - 6}" y="{y(value) + 4:.1f}" font-size="11" text-anchor="end">{value:,}</text>')
    parts.append(f'<text x="{_PAD_L}" y="{_H - 8}" font-size="12">call {sample[0].index}</text>')
    parts.append(f'<text x="{_PAD_L + plot_w}" y="{_H - 8}" font-size="12" text-anchor="end">'
                 f'call {sample[-1].index}</text>')
    parts.append(f'<text x="{_PAD_L + plot_w / 2:.0f}" y="{_H - 8}" font-size="12" text-anchor="middle">'
                 'calls (tokens, calibrated)</text>')
    parts.append("</svg>")
    legend = "".join(f'<span class="key"><i style="background:{COLOURS[c]}"></i>{c.value}</span>' for c in present)
    return "".join(parts) + f'<div class="legend">{legend}</div>'


def _table(headers: Sequence[str], rows: Sequence[Sequence[object]], numeric: Sequence[int] = ()) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td{" class=num" if i in numeric else ""}>{_esc(v)}</td>'
                                    for i, v in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_ADDITION_HEADERS = ("tokens", "category", "call", "line", "tool", "tool call id", "item")


def session_html(session: SessionResult, top: int = 15) -> str:
    last = session.last
    comp_rows = []
    if last is not None:
        used = session.used or 1
        comp_rows = [(c.value, f"{last.calibrated[c]:,}", f"{last.calibrated[c] / used:.1%}")
                     for c in CATEGORIES if last.calibrated.get(c)]
    addition_rows = [(f"{a.tokens:,}", a.category, a.call, a.line or "-", a.tool or "-", a.tool_call_id or "-",
                      a.item) for a in session.largest_additions[:top]]
    parts_rows = [(p, f"{v:,}") for p, v in sorted(session.parts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
    waste = session.waste
    finding_rows = [(f.severity, f.kind, f.count, f"{f.tokens_saved:,}", f.reference)
                    for f in (waste.findings[:top] if waste else [])]
    summary = (f"{len(session.rows)} calls, {session.compactions} compactions, context now "
               f"{session.used:,} tokens (peak {session.peak:,}), model {session.model or '-'}, basis {session.basis}")
    summary += (f". Counting: {session.counting}. Inference: {session.inference}; "
                f"{INFERRED_PREFIX_LABEL} {session.inferred_prefix:,} tokens at the last call")
    waste_line = (f"Waste {waste.wasted:,} tokens ({waste.ratio:.1%}); suggested compaction saves "
                  f"{waste.plan.saving:,} tokens." if waste else "")
    view = session.session_waste
    session_rows = []
    if view is not None:
        session_rows = [(f.kind, f"{f.token_calls:,}", f"{f.cost_usd:.4f}" if f.cost_usd is not None else "unknown",
                         f.reference) for f in view.findings[:top]]
        cost = view.cost(view.token_calls)
        session_line = (f"Over the session: {view.token_calls:,} token-calls of waste"
                        f"{f' (${cost:.4f} at the input price)' if cost is not None else ' (price unknown)'}; "
                        f"every turn (system, tools, rules, skills) {view.every_turn_token_calls:,} token-calls, "
                        f"conversation {view.conversation_token_calls:,}.")
    else:
        session_line = ""
    title = _esc(session.session_id) + (f" <small>(subagent of {_esc(session.parent_session_id)})</small>"
                                       if session.parent_session_id else "")
    return (f'<section class="session"><h2>Session {title}</h2><p>{_esc(summary)}</p>'
            f'<h3>Composition over calls</h3>{chart_svg(session)}'
            '<h3>Composition (calibrated view, last call)</h3>'
            f'{_table(["category", "tokens", "share"], comp_rows, (1, 2))}'
            f'<h3>Largest parts</h3>{_table(["part", "tokens"], parts_rows, (1,))}'
            '<h3>Largest additions</h3>'
            f'{_table(_ADDITION_HEADERS, addition_rows, (0, 2, 3))}'
            f'<h3>Waste findings</h3><p>{_esc(waste_line)}</p>'
            f'{_table(["severity", "kind", "count", "tokens saved", "reference"], finding_rows, (2, 3))}'
            f'<h3>Waste over the session</h3><p>{_esc(session_line)}</p>'
            f'{_table(["kind", "token-calls", "cost (USD)", "reference"], session_rows, (1, 2))}</section>')


_CSS = ("body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:8px 0}"
        "td,th{border:1px solid #ddd;padding:3px 8px;font-size:13px}td.num{text-align:right}"
        ".legend .key{margin-right:12px;font-size:13px}.legend i{display:inline-block;width:12px;height:12px;"
        "margin-right:4px;vertical-align:middle}section{margin-bottom:32px}")


def render(files: list[FileResult]) -> str:
    body = []
    for f in files:
        body.append(f"<h1>ctxscope analyze: {_esc(f.path)}</h1><p>{_esc(f.format or 'unknown format')}, "
                    f"{f.records:,} records, {len(f.sessions)} session(s), "
                    "stage transcript-observed, coverage "
                    f"{_esc(', '.join(sorted({s.coverage for s in f.sessions})) or 'partial')}</p>")
        body.extend(session_html(s) for s in f.sessions)
    return ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<title>ctxscope context report</title>"
            f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>")
