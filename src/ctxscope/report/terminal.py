"""Plain aligned text for ``ctxscope analyze`` in a terminal (no colour library needed)."""

from __future__ import annotations

from typing import TextIO

from ctxscope.schema import CATEGORIES, INFERRED_PREFIX_LABEL
from ctxscope.report.analysis import Addition, FileResult, SessionResult

_BAR = 30
_MOVES_SHOWN = 5
# What each source lacks, which the provider's count includes: the unattributed part.
MISSING = {
    "claude-code": "not in the file: system prompt, tool schemas",
    "codex": "not in the file: tool schemas, request framing",
    "messages": "request framing and anything the body does not show",
}


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def render_session(session: SessionResult, out: TextIO, *, top: int = 10, growth_rows: int = 12) -> None:
    last = session.last
    used = session.used
    out.write(f"\nsession {session.session_id}")
    if session.parent_session_id:
        out.write(f"  (subagent of {session.parent_session_id})")
    out.write("\n")
    out.write(f"  calls {len(session.rows)}   compactions {session.compactions}   model {session.model or '-'}"
              f"   basis {session.basis}   coverage {session.coverage} (transcript-observed)\n")
    window = f" of {session.window:,} window" if session.window else ""
    reported = last.reported if last else None
    out.write(f"  counting {session.counting}\n")
    out.write(f"  inference {session.inference}\n")
    out.write(f"  context now {used:,} tokens{window}   peak {session.peak:,}   "
              f"reported {_n(reported)}\n")
    if last is not None and not session.recorded:
        out.write("\n  composition not recorded: the transcript holds no text for the last call"
                  " (its reported total only)\n")
    elif last is not None:
        out.write("\n  composition (calibrated view, last call)\n")
        for category in CATEGORIES:
            value = last.calibrated.get(category, 0)
            if not value:
                continue
            share = value / used if used else 0.0
            bar = "#" * max(1, round(share * _BAR)) if value else ""
            note = f"  ({MISSING.get(session.format, 'not in the input')})" if category.value == "unattributed" else ""
            out.write(f"    {category.value:<13}{value:>11,}  {share:6.1%}  {bar}{note}\n")
            if category.value == "system" and last.inferred:
                out.write(f"      of which {INFERRED_PREFIX_LABEL}: {last.inferred:,} (estimate)\n")
        moves = session.prefix_moves
        for move in moves[:_MOVES_SHOWN]:
            out.write(f"    {INFERRED_PREFIX_LABEL} moved at call {move.index}: "
                      f"{move.before:,} -> {move.after:,}\n")
        if len(moves) > _MOVES_SHOWN:
            out.write(f"    ... {len(moves) - _MOVES_SHOWN} more moves (--json: prefix_moves)\n")
    if session.rows:
        out.write("\n  growth over calls (used tokens; * compaction)\n")
        rows = session.rows
        step = max(1, len(rows) // growth_rows)
        picked = [r for i, r in enumerate(rows) if i % step == 0 or r.compaction or i == len(rows) - 1]
        peak = max(1, session.peak)
        for r in picked:
            total = r.used
            mark = "*" if r.compaction else " "
            out.write(f"   {mark}call {r.index:>5}  line {r.line or 0:>7}  {total:>11,}  "
                      f"{'=' * max(0, round(total / peak * _BAR))}\n")
    if session.parts:
        out.write("\n  largest parts (apportioned)\n")
        for part, value in sorted(session.parts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]:
            out.write(f"    {part:<40}{value:>11,}\n")
    additions = session.largest_additions[:top]
    if additions:
        out.write("\n  largest additions (tokens a call added; the tool call where recorded, else the call)\n")
        for a in additions:
            out.write(f"    {a.tokens:>11,}  {a.category:<13}{addition_source(a)}\n")
    waste = session.waste
    if waste is not None:
        out.write(f"\n  waste {waste.wasted:,} tokens ({waste.ratio:.1%} of {waste.total:,}):  "
                  + "  ".join(f"{k.value} {v:,}" for k, v in waste.waste.items()) + "\n")
        if waste.findings:
            out.write(f"    {'severity':<9}{'kind':<25}{'count':>6}{'saved':>10}  reference\n")
            for f in waste.findings[:top]:
                out.write(f"    {f.severity:<9}{f.kind:<25}{f.count:>6}{f.tokens_saved:>10,}  {_clip(f.reference)}\n")
            if len(waste.findings) > top:
                out.write(f"    ... {len(waste.findings) - top} more (--top N, or --json)\n")
        plan = waste.plan
        view = session.session_waste
        if view is not None and view.findings:
            cost = view.cost(view.token_calls)
            out.write(f"  waste over the session: {view.token_calls:,} token-calls"
                      f"{f' (${cost:.4f} at the input price)' if cost is not None else ' (price unknown)'}; "
                      f"every turn (system, tools, rules, skills) {view.every_turn_token_calls:,}, "
                      f"conversation {view.conversation_token_calls:,}\n")
            for over in view.findings[:top]:
                money = f"  ${over.cost_usd:.4f}" if over.cost_usd is not None else ""
                out.write(f"    {over.kind:<25}{over.token_calls:>14,}{money}  {_clip(over.reference)}\n")
        if plan.saving:
            out.write(f"  suggested compaction: drop {sum(f.count for f in plan.drop)} result(s), "
                      f"summarise {len(plan.summarise)}: saves {plan.saving:,} tokens\n")


def addition_source(addition: Addition) -> str:
    """Where an addition came from: the tool call (name and id) when recorded, else the request."""
    where = f"call {addition.call}" + (f" (line {addition.line})" if addition.line else "")
    if addition.tool_call_id:
        return f"tool {addition.tool or '-'} {addition.tool_call_id}, {where}"
    return f"{where}, item {_clip(addition.item, 60)}"


def _clip(text: str, width: int = 90) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def render_rollup(files: list[FileResult], out: TextIO, *, top: int = 10) -> None:
    """Many sessions at once: ranked by waste, then by peak context, before the detail."""
    sessions = [s for f in files for s in f.sessions if s.rows]
    if len(sessions) < 2:
        return
    out.write(f"{len(sessions)} sessions in {len(files)} file(s)\n")
    by_waste = sorted(sessions, key=lambda s: (-(s.waste.wasted if s.waste else 0), s.session_id))
    out.write("\n  by waste (last call's context)\n")
    out.write(f"    {'waste':>11} {'ratio':>6} {'calls':>6}  session\n")
    for s in by_waste[:top]:
        wasted = s.waste.wasted if s.waste else 0
        out.write(f"    {wasted:>11,} {s.waste_ratio:6.1%} {len(s.rows):>6}  {s.session_id}\n")
    by_peak = sorted(sessions, key=lambda s: (-s.peak, s.session_id))
    out.write("\n  by peak context\n")
    out.write(f"    {'peak':>11} {'window':>9} {'calls':>6}  session\n")
    for s in by_peak[:top]:
        window = f"{s.window:,}" if s.window else "-"
        out.write(f"    {s.peak:>11,} {window:>9} {len(s.rows):>6}  {s.session_id}\n")
    if len(sessions) > top:
        out.write(f"    ... {len(sessions) - top} more (--top N)\n")
    out.write("\n")


def render(files: list[FileResult], out: TextIO, *, top: int = 10) -> None:
    render_rollup(files, out, top=top)
    for f in files:
        out.write(f"{f.path}: {f.format or 'unknown format'}, {f.records:,} records, "
                  f"{len(f.sessions)} session(s)\n")
        for session in f.sessions:
            render_session(session, out, top=top)
        out.write("\n")
