"""The ``ctxscope context`` report: one stored session, part by part.

:func:`build_report` turns a session's stored records (:mod:`ctxscope.store`)
into a JSON-able document; :func:`render_text` prints it for a terminal.

- **latest call**: each part's estimated tokens, characters, its apportioned
  tokens (the measured prompt split among parts, SPEC section 5, or the
  estimates where nothing was measured) and its share of the window; the
  calibrated view per category. A call without reported usage whose request
  got a learned self-calibration correction shows estimate + correction in
  both views (the correction as ``unattributed`` when positive), labelled
  ``learned`` (``Snapshot.apportioned_label``; the span processor's rule).
- **over the session**: each part summed over the session's calls, with the
  input cost it caused. A call's input cost (cache reads and writes at their
  rates, from :func:`ctxscope.limits.cost_usd`) is split among its parts by
  their apportioned tokens. A cost is ``unknown`` when any call's price is.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, Callable, Iterable, Mapping, Sequence, TextIO

from ..schema import CATEGORIES, part_category

UNKNOWN = "unknown"

CostFn = Callable[..., Decimal | None]


def _default_cost(*args: Any, **kwargs: Any) -> Decimal | None:
    from ..limits import cost_usd

    return cost_usd(*args, **kwargs)


def _category(part: str) -> str:
    try:
        return part_category(part).value
    except ValueError:
        return part.split("/", 1)[0]


def _usd(value: Decimal | None) -> str:
    return UNKNOWN if value is None else f"{value:.6f}"


def _call_costs(record: Mapping[str, Any], cost: CostFn) -> tuple[Decimal | None, Decimal | None]:
    """(input cost, output cost) of one call in USD; None where the price is unknown."""
    model = record.get("response_model") or record.get("request_model")
    provider = record.get("provider")
    usage = record.get("usage") or {}
    apportioned = record.get("apportioned") or {}
    prompt = usage.get("reported_input")
    if prompt is None:
        prompt = sum(int(v) for v in apportioned.values())
    input_cost = cost(model, provider, input_tokens=int(prompt),
                      cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
                      cache_write_tokens=int(usage.get("cache_creation_input_tokens") or 0))
    output = usage.get("output_tokens")
    output_cost = cost(model, provider, output_tokens=int(output)) if output is not None else Decimal(0)
    return input_cost, output_cost


def _split(total: Decimal, weights: Mapping[str, int]) -> dict[str, Decimal]:
    whole = sum(max(0, int(v)) for v in weights.values())
    if whole == 0:
        return {k: Decimal(0) for k in weights}
    return {k: total * max(0, int(v)) / whole for k, v in weights.items()}


def build_report(records: Sequence[Mapping[str, Any]], *, cost: CostFn | None = None) -> dict[str, Any]:
    """The report document of one session's records (oldest first, at least one)."""
    if not records:
        raise ValueError("a session report needs at least one record")
    cost = cost or _default_cost
    last = records[-1]
    ann = last.get("annotation") or {}
    window = ann.get("window_tokens")
    parts = {str(k): int(v) for k, v in (last.get("parts") or {}).items()}
    chars = last.get("chars") or {}
    apportioned = {str(k): int(v) for k, v in (last.get("apportioned") or {}).items()}
    calibrated = {str(k): int(v) for k, v in (last.get("calibrated") or {}).items()}
    used = ann.get("reported_tokens")
    if used is None:
        used = sum(calibrated.values())
    latest_rows = []
    for part in sorted(set(parts) | set(apportioned), key=lambda p: (-apportioned.get(p, parts.get(p, 0)), p)):
        share = apportioned.get(part, parts.get(part, 0)) / window if window else None
        latest_rows.append({
            "part": part, "category": _category(part), "tokens": parts.get(part),
            "chars": int(chars[part]) if part in chars else None,
            "apportioned": apportioned.get(part), "share_of_window": share,
        })

    costs = [_call_costs(record, cost) for record in records]
    known = all(c[0] is not None for c in costs)
    input_total = sum((c[0] for c in costs), Decimal(0)) if known else None
    output_total = sum((c[1] for c in costs), Decimal(0)) if all(c[1] is not None for c in costs) else None
    totals: dict[str, dict[str, Any]] = {}
    for record, (input_cost, _) in zip(records, costs):
        rec_parts = record.get("parts") or {}
        rec_apportioned = record.get("apportioned") or dict(rec_parts)
        shares = _split(input_cost, rec_apportioned) if input_cost is not None else {}
        for part in set(rec_parts) | set(rec_apportioned):
            row = totals.setdefault(part, {"part": part, "category": _category(part), "tokens": 0,
                                           "apportioned": 0, "calls": 0, "cost": Decimal(0)})
            row["tokens"] += int(rec_parts.get(part, 0))
            row["apportioned"] += int(rec_apportioned.get(part, 0))
            row["calls"] += 1
            row["cost"] += shares.get(part, Decimal(0))
    session_rows = sorted(totals.values(), key=lambda r: (-r["apportioned"], r["part"]))
    for row in session_rows:
        # A part's cost is unknown as soon as one call's price is.
        value = row.pop("cost")
        row["cost_usd"] = _usd(value if known else None)
    total = None if input_total is None or output_total is None else input_total + output_total
    return {
        "session_id": last.get("session"),
        "calls": len(records),
        "provider": last.get("provider"),
        "model": last.get("response_model") or last.get("request_model"),
        "basis": ann.get("basis"),
        "window_tokens": window,
        "used_tokens": used,
        "reported_tokens": ann.get("reported_tokens"),
        # Only where it is what the views rest on: a reported input overrides it.
        "learned_correction_tokens": (ann.get("learned_correction_tokens")
                                      if ann.get("reported_tokens") is None else None),
        "free_tokens": max(0, window - used) if window else None,
        "apportioned_label": last.get("apportioned_label") or "estimated",
        "latest": {"parts": latest_rows,
                   "calibrated": {c.value: calibrated[c.value] for c in CATEGORIES if c.value in calibrated}},
        "session": {"parts": session_rows, "compactions": sum(1 for r in records if r.get("compaction")),
                    "input_cost_usd": _usd(input_total), "output_cost_usd": _usd(output_total),
                    "cost_usd": _usd(total)},
    }


def _n(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def render_text(doc: Mapping[str, Any], out: TextIO) -> None:
    """The report for a terminal: plain aligned text."""
    out.write(f"session {doc['session_id']}  ({doc.get('provider') or '-'} {doc.get('model') or '-'}, "
              f"{doc['calls']} calls, basis {doc.get('basis') or '-'})\n")
    window = doc.get("window_tokens")
    of = f" of {window:,} window ({doc['used_tokens'] / window:.1%}), free {doc['free_tokens']:,}" if window else \
        " (window unknown)"
    out.write(f"context now {doc['used_tokens']:,} tokens{of}   reported {_n(doc.get('reported_tokens'))}\n")
    learned = doc.get("learned_correction_tokens")
    if learned is not None:
        out.write(f"no reported usage: estimate {learned:+,} tokens learned correction (self-calibration)\n")
    label = doc["apportioned_label"]
    out.write(f"\nlatest call, part by part ({label} view)\n")
    out.write(f"  {'part':<40}{'tokens':>10}{'chars':>11}{label:>13}{'window':>8}\n")
    for row in doc["latest"]["parts"]:
        share = "-" if row["share_of_window"] is None else f"{row['share_of_window']:.1%}"
        out.write(f"  {row['part']:<40}{_n(row['tokens']):>10}{_n(row['chars']):>11}"
                  f"{_n(row['apportioned']):>13}{share:>8}\n")
    calibrated = doc["latest"]["calibrated"]
    if calibrated:
        out.write("calibrated by category: " + "  ".join(f"{k} {v:,}" for k, v in calibrated.items()) + "\n")
    session = doc["session"]
    out.write(f"\nover the session: {doc['calls']} calls, {session['compactions']} compactions\n")
    out.write(f"  {'part':<40}{'tokens':>12}{'apportioned':>13}{'calls':>7}{'input USD':>12}\n")
    for row in session["parts"]:
        out.write(f"  {row['part']:<40}{row['tokens']:>12,}{row['apportioned']:>13,}{row['calls']:>7}"
                  f"{row['cost_usd']:>12}\n")
    out.write(f"cost (USD): input {session['input_cost_usd']}   output {session['output_cost_usd']}   "
              f"total {session['cost_usd']}\n")


def render_sessions(sessions: Iterable[Any], out: TextIO) -> None:
    """``--list``: the stored sessions, most recent first."""
    out.write(f"{'session':<44}{'model':<28}{'provider':<12}{'size':>10}\n")
    for info in sessions:
        out.write(f"{info.session_id:<44}{(info.model or '-'):<28}{(info.provider or '-'):<12}"
                  f"{info.size_bytes:>10,}\n")


def sessions_json(sessions: Iterable[Any]) -> list[dict[str, Any]]:
    return [{"session_id": s.session_id, "model": s.model, "provider": s.provider, "last_ns": s.last_ns,
             "size_bytes": s.size_bytes, "path": str(s.path)} for s in sessions]
