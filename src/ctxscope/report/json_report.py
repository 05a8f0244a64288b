"""The ``ctxscope analyze --json`` document (schema in docs/analyze.md, ``schema_version`` 2)."""

from __future__ import annotations

import os
from typing import Any, Callable, Iterable

from ctxscope.schema import CATEGORIES, SPEC_VERSION
from ctxscope.report.analysis import FileResult, SessionResult
from ctxscope.report.call_rows import CallRow, CallRows

# 2: estimated_tokens includes the inferred system+tools prefix (inferred_tokens says how much);
# counting, inference, prefix_moves, session_waste and rollup added.
SCHEMA_VERSION = 2
# Categories in SPEC order with their names: a growth row per call, an enum .value each is slow.
_NAMED = tuple((c, c.value) for c in CATEGORIES)
# Growth rows encoded at a time by write_json: its working set, whatever the session's length. At 1,024
# a chunk's row objects and its text's copies made the write the peak of analyze on compacting
# sessions (3.4 MB of RSS above the end of reading, issue 14); at 256 it stays under the reading's.
GROWTH_CHUNK_ROWS = 256


def dumps(doc: Any) -> str:
    """The document as indented JSON (:func:`ctxscope.jsonio.dumps_indented`)."""
    from ctxscope.jsonio import dumps_indented

    return dumps_indented(doc)


def session_json(session: SessionResult, growth: Callable[[SessionResult], Any] | None = None) -> dict[str, Any]:
    """One session's object; ``growth`` puts something else in place of its growth rows (write_json)."""
    waste = session.waste
    return {
        "session_id": session.session_id,
        "parent_session_id": session.parent_session_id,
        "provider": session.provider,
        "model": session.model,
        "basis": session.basis,
        "counting": session.counting,
        "inference": session.inference,
        "inferred_prefix_tokens": session.inferred_prefix,
        "prefix_moves": [{"call": m.index, "before": m.before, "after": m.after} for m in session.prefix_moves],
        "stage": "transcript-observed",
        "coverage": session.coverage,
        "calls": len(session.rows),
        "compactions": session.compactions,
        "window_tokens": session.window,
        "used_tokens": session.used,
        "peak_tokens": session.peak,
        "composition": {c.value: v for c, v in _last(session).items()},
        "parts": dict(sorted(session.parts.items(), key=lambda kv: (-kv[1], kv[0]))),
        # The largest items calls added, with the tool call that contributed them where recorded.
        "largest_additions": [a.to_json() for a in session.largest_additions],
        "waste": {
            "tokens": {k.value: v for k, v in waste.waste.items()} if waste else {},
            "total": waste.wasted if waste else 0,
            "ratio": round(waste.ratio, 6) if waste else 0.0,
            "findings": [f.to_json() for f in waste.findings] if waste else [],
            "plan": waste.plan.to_json() if waste else {"saving": 0, "drop": [], "summarise": []},
        },
        "session_waste": session_waste_json(session),
        "growth": growth_json(session.rows) if growth is None else growth(session),
    }


def growth_json(rows: Iterable[CallRow]) -> list[dict[str, Any]]:
    """The growth table's rows: one object per call."""
    return _growth_objects((r.index, r.line, r.timestamp_ns, r.model, r.estimated, r.reported, r.inferred,
                            r.calibrated, r.waste, r.compaction, r.used) for r in rows)


def _growth_objects(fields: Iterable[tuple[Any, ...]], shown: bool = False) -> list[dict[str, Any]]:
    """The growth table's rows from rows' fields in CallRow's order (CallRows.field_tuples).

    ``shown``: the fields' categories are already as shown (``field_tuples(shown=True)``).
    """
    return [
        {"call": index, "line": line, "timestamp_ns": timestamp_ns,
         "estimated_tokens": estimated, "inferred_tokens": inferred, "reported_tokens": reported,
         "used_tokens": used,
         "categories": calibrated if shown else {name: tokens for c, name in _NAMED if (tokens := calibrated.get(c))},
         "waste_tokens": waste, "compaction": compaction}
        for index, line, timestamp_ns, _, estimated, reported, inferred, calibrated, waste, compaction, used
        in fields
    ]


def _money(value) -> str | None:
    return None if value is None else f"{value:.6f}"


def session_waste_json(session: SessionResult) -> dict[str, Any]:
    """The session view: token-calls per finding, their cost at the input price where known."""
    view = session.session_waste
    if view is None:
        return {}
    return {
        "token_calls": view.token_calls,
        "cost_usd": _money(view.cost(view.token_calls)),
        "input_price_per_mtok_usd": None if view.input_price_per_mtok is None else str(view.input_price_per_mtok),
        "every_turn_token_calls": view.every_turn_token_calls,
        "every_turn_cost_usd": _money(view.cost(view.every_turn_token_calls)),
        "conversation_token_calls": view.conversation_token_calls,
        "conversation_cost_usd": _money(view.cost(view.conversation_token_calls)),
        "findings": [{"kind": f.kind, "reference": f.reference, "token_calls": f.token_calls,
                      "cost_usd": _money(f.cost_usd)} for f in view.findings],
    }


def _last(session: SessionResult) -> dict:
    last = session.last
    if last is None:
        return {}
    return {c: last.calibrated[c] for c in CATEGORIES if last.calibrated.get(c)}


def rollup_json(files: list[FileResult]) -> dict[str, Any]:
    """Every session of the run ranked by waste (last call's context) and by peak context."""
    sessions = [(f.path, s) for f in files for s in f.sessions if s.rows]

    def row(path: str, s: SessionResult) -> dict[str, Any]:
        return {"path": path, "session_id": s.session_id, "calls": len(s.rows),
                "waste_tokens": s.waste.wasted if s.waste else 0, "waste_ratio": round(s.waste_ratio, 6),
                "peak_tokens": s.peak, "window_tokens": s.window}

    return {
        "sessions": len(sessions),
        "by_waste": [row(p, s) for p, s in sorted(sessions, key=lambda x: (-(x[1].waste.wasted if x[1].waste else 0),
                                                                           x[1].session_id))],
        "by_peak": [row(p, s) for p, s in sorted(sessions, key=lambda x: (-x[1].peak, x[1].session_id))],
    }


def files_json(files: list[FileResult], growth: Callable[[SessionResult], Any] | None = None) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "spec_version": SPEC_VERSION,
        "rollup": rollup_json(files),
        "files": [
            {"path": f.path, "format": f.format, "records": f.records,
             "problems": [{"line": p.line, "message": p.message} for p in f.problems],
             "sessions": [session_json(s, growth) for s in f.sessions]}
            for f in files
        ],
    }


def write_json(files: list[FileResult], write: Callable[[str], object]) -> None:
    """``dumps(files_json(files))`` and a newline, the same text, handed to ``write`` in pieces.

    The growth rows grow with the session (a row per call: about 20 MB of
    text, and more of objects, for 200 MB of transcript); built whole they
    were the peak of a long analysis. Here the rest of the document is
    encoded with a placeholder string where each session's rows go, and the
    rows are encoded ``GROWTH_CHUNK_ROWS`` at a time into its place, indented
    as the whole document would have them. Rows hold ints, null and ASCII
    words, which both encoders of :func:`ctxscope.jsonio.dumps_indented` write
    alike; a session whose ints do not all hold in 64 bits (orjson refuses
    those: the whole document then goes to :mod:`json`) is written the one way.
    """
    sessions = [s for f in files for s in f.sessions]
    if not all(isinstance(s.rows, CallRows) and s.rows.int64 for s in sessions):
        write(dumps(files_json(files)) + "\n")
        return
    token = os.urandom(8).hex()  # secrets.token_hex's own bytes, without importing secrets (hmac, random)
    places: dict[str, SessionResult] = {}

    def place(session: SessionResult) -> str:
        mark = f"ctxscope-growth-{token}-{len(places)}"
        places[mark] = session
        return mark

    text = dumps(files_json(files, place))
    at = 0
    for mark, session in places.items():
        quoted = text.index(f'"{mark}"', at)
        write(text[at:quoted])
        indent = line_start = text.rfind("\n", 0, quoted) + 1
        while text[indent] == " ":
            indent += 1
        indent -= line_start  # the spaces before ``"growth":``
        _write_growth(session.rows, indent, write)
        at = quoted + len(mark) + 2
    write(text[at:])
    write("\n")


def _write_growth(rows: CallRows, indent: int, write: Callable[[str], object]) -> None:
    """The rows as the list ``dumps`` writes under a key indented by ``indent`` spaces."""
    if not len(rows):
        write("[]")
        return
    pad = " " * indent
    write("[\n")
    for start in range(0, len(rows), GROWTH_CHUNK_ROWS):
        if start:
            write(",\n")
        # The chunk as a list of its own: items at 2 spaces; every line moved in by ``indent``.
        stop = start + GROWTH_CHUNK_ROWS
        if type(rows) is CallRows:
            chunk = _growth_objects(rows.field_tuples(start, stop, shown=True), shown=True)
        else:
            chunk = growth_json(rows[start:stop])
        piece = dumps(chunk)
        write(pad + piece[2:-2].replace("\n", "\n" + pad))
    write("\n" + pad + "]")
