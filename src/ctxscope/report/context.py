"""The ``ctxscope context`` report: a census of one chat, part by part.

A chat is a conversation's session and its side calls' sessions
(``<chat>/compaction``: :func:`ctxscope.core.conversation.chat_of`).
:func:`build_report` turns their stored records (:mod:`ctxscope.telemetry.store`) into a
JSON-able document; :func:`render_text` prints it for a terminal.

- **chats**: the chats kept in the store, latest first.
- **latest call** (of the conversation): each part's estimated tokens,
  characters, UTF-8 bytes, its apportioned tokens (the measured prompt split
  among parts, SPEC section 5, or the estimates where nothing was measured),
  its share of the window and its share of the call's input cost; the
  calibrated view per category. A call without reported usage whose request
  got a learned self-calibration correction shows estimate + correction in
  both views (the correction as ``unattributed`` when positive), labelled
  ``learned`` (``Snapshot.apportioned_label``; the span processor's rule).
- **over the chat**: each part summed over the chat's calls, side calls
  included under ``<kind>/`` (``compaction/results/read_file``), with the input
  cost it caused. A call's input cost (cache reads and writes at their rates,
  from :func:`ctxscope.core.limits.cost_usd`) is split among its parts by their
  apportioned tokens. A cost is ``unknown`` when a price or the usage it
  needs is (an output cost without output usage), never 0; an input cost
  computed from ctxscope's estimates (a call without reported usage) says so
  (``cost_from_estimates``).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Callable, Iterable, Mapping, Sequence, TextIO

from ctxscope.schema import CATEGORIES, part_category

UNKNOWN = "unknown"

CostFn = Callable[..., Decimal | None]


def _default_cost(*args: Any, **kwargs: Any) -> Decimal | None:
    from ctxscope.core.limits import cost_usd

    return cost_usd(*args, **kwargs)


def _category(part: str) -> str:
    try:
        return part_category(part).value
    except ValueError:
        return part.split("/", 1)[0]


def _usd(value: Decimal | None) -> str:
    return UNKNOWN if value is None else f"{value:.6f}"


@dataclass(frozen=True)
class CallCost:
    """One call's cost in USD: None where its price or its usage is not known."""

    input: Decimal | None
    output: Decimal | None
    estimated: bool  # the input cost rests on ctxscope's estimate: the call reported no usage


def _call_costs(record: Mapping[str, Any], cost: CostFn) -> CallCost:
    model = record.get("response_model") or record.get("request_model")
    provider = record.get("provider")
    usage = record.get("usage") or {}
    apportioned = record.get("apportioned") or {}
    prompt = usage.get("reported_input")
    estimated = prompt is None
    if estimated:
        # No usage: the prompt as estimated (apportioned falls back to the estimates); said so.
        prompt = sum(int(v) for v in apportioned.values())
    input_cost = cost(model, provider, input_tokens=int(prompt or 0),
                      cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
                      cache_write_tokens=int(usage.get("cache_creation_input_tokens") or 0))
    output = usage.get("output_tokens")
    # Output has no estimate: without its usage its cost is unknown, never 0.
    output_cost = cost(model, provider, output_tokens=int(output)) if output is not None else None
    return CallCost(input_cost, output_cost, estimated)


def _split(total: Decimal, weights: Mapping[str, int]) -> dict[str, Decimal]:
    whole = sum(max(0, int(v)) for v in weights.values())
    if whole == 0:
        return {k: Decimal(0) for k in weights}
    return {k: total * max(0, int(v)) / whole for k, v in weights.items()}


def _sum(values: Iterable[Decimal | None]) -> Decimal | None:
    total = Decimal(0)
    for value in values:
        if value is None:
            return None
        total += value
    return total


def _chat_parts(calls: Sequence[tuple[str | None, Mapping[str, Any], CallCost]]) -> list[dict[str, Any]]:
    """Each part summed over the chat's calls; a side call's parts under ``<kind>/`` (``compaction/...``)."""
    totals: dict[str, dict[str, Any]] = {}
    for kind, record, call_cost in calls:
        rec_parts = record.get("parts") or {}
        rec_apportioned = record.get("apportioned") or dict(rec_parts)
        rec_bytes = record.get("bytes")
        shares = _split(call_cost.input, rec_apportioned) if call_cost.input is not None else {}
        for part in set(rec_parts) | set(rec_apportioned):
            path = f"{kind}/{part}" if kind else part
            row = totals.setdefault(path, {"part": path, "category": _category(part), "side": kind,
                                           "tokens": 0, "apportioned": 0, "bytes": 0, "calls": 0,
                                           "cost": Decimal(0), "estimated": False})
            row["tokens"] += int(rec_parts.get(part, 0))
            row["apportioned"] += int(rec_apportioned.get(part, 0))
            if row["bytes"] is not None and isinstance(rec_bytes, Mapping):
                row["bytes"] += int(rec_bytes.get(part, 0))
            else:
                row["bytes"] = None  # a record written before the store kept bytes
            row["calls"] += 1
            # A part's cost is unknown as soon as the price of one call it was in is.
            row["cost"] = None if row["cost"] is None or call_cost.input is None else row["cost"] + shares[part]
            row["estimated"] = row["estimated"] or call_cost.estimated
    rows = sorted(totals.values(), key=lambda r: (-r["apportioned"], r["part"]))
    for row in rows:
        row["cost_usd"] = _usd(row.pop("cost"))
        row["cost_from_estimates"] = row.pop("estimated")
    return rows


def build_report(records: Sequence[Mapping[str, Any]], *,
                 side: Sequence[tuple[str, Sequence[Mapping[str, Any]]]] = (),
                 chats: Sequence[Mapping[str, Any]] | None = None,
                 cost: CostFn | None = None) -> dict[str, Any]:
    """The census of one chat: its conversation's records (oldest first, at least one) and its side calls'.

    ``side``: ``(kind, records)`` of the chat's side-call sessions (``compaction``);
    ``chats``: the chats kept in the store, latest first, as :func:`chats_json` gives them.
    """
    if not records:
        raise ValueError("a session report needs at least one record")
    cost = cost or _default_cost
    last = records[-1]
    ann = last.get("annotation") or {}
    window = ann.get("window_tokens")
    parts = {str(k): int(v) for k, v in (last.get("parts") or {}).items()}
    chars = last.get("chars") or {}
    sizes = last.get("bytes")
    apportioned = {str(k): int(v) for k, v in (last.get("apportioned") or {}).items()}
    calibrated = {str(k): int(v) for k, v in (last.get("calibrated") or {}).items()}
    used = ann.get("reported_tokens")
    if used is None:
        used = sum(calibrated.values())
    last_cost = _call_costs(last, cost)
    last_shares = _split(last_cost.input, apportioned or parts) if last_cost.input is not None else None
    latest_rows = []
    for part in sorted(set(parts) | set(apportioned), key=lambda p: (-apportioned.get(p, parts.get(p, 0)), p)):
        share = apportioned.get(part, parts.get(part, 0)) / window if window else None
        latest_rows.append({
            "part": part, "category": _category(part), "tokens": parts.get(part),
            "chars": int(chars[part]) if part in chars else None,
            "bytes": int(sizes[part]) if isinstance(sizes, Mapping) and part in sizes else None,
            "apportioned": apportioned.get(part), "share_of_window": share,
            "cost_usd": _usd(last_shares.get(part, Decimal(0)) if last_shares is not None else None),
        })

    calls: list[tuple[str | None, Mapping[str, Any], CallCost]] = [
        (None, record, _call_costs(record, cost)) for record in records]
    for kind, side_records in side:
        calls.extend((kind, record, _call_costs(record, cost)) for record in side_records)
    input_total = _sum(c.input for _, _, c in calls)
    output_total = _sum(c.output for _, _, c in calls)
    total = None if input_total is None or output_total is None else input_total + output_total
    estimated_calls = sum(1 for _, _, c in calls if c.estimated)
    by_kind: dict[str, int] = {}
    for side_kind, _, _ in calls:
        if side_kind:
            by_kind[side_kind] = by_kind.get(side_kind, 0) + 1
    return {
        "chat_id": last.get("session"),
        "chats": list(chats) if chats is not None else [],
        "session_id": last.get("session"),
        "calls": len(calls),
        "provider": last.get("provider"),
        "model": last.get("response_model") or last.get("request_model"),
        "basis": ann.get("basis"),
        "coverage": ann.get("coverage"),
        "window_tokens": window,
        "used_tokens": used,
        "reported_tokens": ann.get("reported_tokens"),
        # Only where it is what the views rest on: a reported input overrides it.
        "learned_correction_tokens": (ann.get("learned_correction_tokens")
                                      if ann.get("reported_tokens") is None else None),
        "free_tokens": max(0, window - used) if window else None,
        "apportioned_label": last.get("apportioned_label") or "estimated",
        "latest": {"parts": latest_rows,
                   "calibrated": {c.value: calibrated[c.value] for c in CATEGORIES if c.value in calibrated},
                   "input_cost_usd": _usd(last_cost.input), "output_cost_usd": _usd(last_cost.output),
                   "cost_from_estimates": last_cost.estimated},
        "chat": {"parts": _chat_parts(calls), "calls": len(calls), "conversation_calls": len(records),
                 "side_calls": by_kind,
                 "compactions": sum(1 for r in records if r.get("compaction")),
                 "input_cost_usd": _usd(input_total), "output_cost_usd": _usd(output_total),
                 "cost_usd": _usd(total), "cost_from_estimates_calls": estimated_calls},
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
    chat = doc["chat"]
    sides = "".join(f", {n} {kind}" for kind, n in chat["side_calls"].items())
    out.write(f"\nover the chat: {chat['calls']} calls ({chat['conversation_calls']} conversation{sides}), "
              f"{chat['compactions']} compactions\n")
    out.write(f"  {'part':<40}{'tokens':>12}{'apportioned':>13}{'calls':>7}{'input USD':>12}\n")
    for row in chat["parts"]:
        mark = "*" if row["cost_from_estimates"] and row["cost_usd"] != UNKNOWN else " "
        out.write(f"  {row['part']:<40}{row['tokens']:>12,}{row['apportioned']:>13,}{row['calls']:>7}"
                  f"{row['cost_usd']:>12}{mark}\n")
    out.write(f"cost (USD): input {chat['input_cost_usd']}   output {chat['output_cost_usd']}   "
              f"total {chat['cost_usd']}\n")
    if chat["cost_from_estimates_calls"]:
        out.write(f"  * input cost from ctxscope's estimates for {chat['cost_from_estimates_calls']} of "
                  f"{chat['calls']} calls (no reported usage)\n")
    chats = doc.get("chats") or []
    if len(chats) > 1:
        out.write(f"\n{len(chats)} chats kept, latest first: "
                  + ", ".join(c["chat_id"] for c in chats[:5]) + (", ..." if len(chats) > 5 else "") + "\n")


def render_sessions(sessions: Iterable[Any], out: TextIO) -> None:
    """``--list``: the stored sessions, most recent first."""
    out.write(f"{'session':<44}{'model':<28}{'provider':<12}{'size':>10}\n")
    for info in sessions:
        out.write(f"{info.session_id:<44}{(info.model or '-'):<28}{(info.provider or '-'):<12}"
                  f"{info.size_bytes:>10,}\n")


def chats_json(chats: Iterable[Any]) -> list[dict[str, Any]]:
    """The chats kept in the store (:class:`ctxscope.telemetry.store.ChatInfo`), latest first."""
    out = []
    for chat in chats:
        conversation = chat.sessions[0]
        out.append({"chat_id": chat.chat_id, "last_ns": chat.last_ns, "model": conversation.model,
                    "provider": conversation.provider, "sessions": [s.session_id for s in chat.sessions]})
    return out


def sessions_json(sessions: Iterable[Any]) -> list[dict[str, Any]]:
    return [{"session_id": s.session_id, "model": s.model, "provider": s.provider, "last_ns": s.last_ns,
             "size_bytes": s.size_bytes, "path": str(s.path)} for s in sessions]
