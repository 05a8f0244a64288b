#!/usr/bin/env python3
"""What ``analyze`` holds when it has read a session: live memory by structure, per call and per chain link.

    python bench/analyze_memory.py SESSION.jsonl     # tokenizer chars

tracemalloc (10 frames) from after the imports; at the end of reading (the
reader, the ledger and the waste tracker still alive, before the report),
every live allocation is given to the innermost ctxscope function a rule
below names, and the structures are printed largest first with bytes per call
and per link of the Claude Code chain. With ``PYTHONPATH=<other src>`` it
measures another tree (the function names, not line numbers, make the rules).
Peak RSS is another figure (``bench_analyze.py``): this one says what grows.
"""

from __future__ import annotations

import ast
import collections
import functools
import sys
import tracemalloc
from typing import Iterator

import ctxscope.report.analysis as analysis
from ctxscope.transcripts import TranscriptCall, TranscriptFile

ITEMS = "items (Item objects, ids, digests, parts, references)"
# (file suffix, function names or None for all of the file's) -> the structure they build.
RULES = [
    ("report/call_rows.py", None, "rows of the report"),
    ("report/analysis.py", {"_account"}, "rows of the report"),
    ("core/ledger.py", None, "ledger counts (_cache, _text_counts, totals)"),
    ("core/framing/parts.py", None, "proxy-encoding items (ledger keys)"),
    ("core/framing/claude_proxy.py", None, "proxy-encoding items (ledger keys)"),
    ("core/waste.py", None, "waste tracker"),
    ("transcripts/claude_code.py", {"_maybe_call", "_key_of"}, "seen calls"),
    ("transcripts/claude_code.py", {"_advance"}, "chain list, position, counts"),
    ("transcripts/_items.py", None, ITEMS),
    ("transcripts/model.py", {"content_digest"}, ITEMS),
    ("core/classify.py", None, ITEMS),
    ("transcripts/claude_code.py", {"_assistant_items", "_user_items", "_attachment_items"}, ITEMS),
    ("transcripts/claude_code.py", {"feed"}, "nodes (links off the chain)"),
    ("transcripts/spill.py", None, "freed links (uuid hash, line offset)"),
    ("transcripts/claude_code.py", {"_let_go"}, "freed links (uuid hash, line offset)"),
    ("transcripts/source.py", {"_read_lines"}, "JSON strings kept (uuids, call ids), recent line times"),
]


@functools.lru_cache(maxsize=None)
def _functions(path: str) -> list[tuple[int, int, str]]:
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError):
        return []
    return [(n.lineno, n.end_lineno or n.lineno, n.name) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _function_at(path: str, line: int) -> str:
    inner = max(((a, name) for a, b, name in _functions(path) if a <= line <= b), default=(0, "<module>"))
    return inner[1]


def structure(traceback: tracemalloc.Traceback) -> str:
    for frame in reversed(list(traceback)):  # innermost first
        for suffix, names, label in RULES:
            if not frame.filename.endswith(suffix):
                continue
            if names is None or _function_at(frame.filename, frame.lineno) in names:
                return label
    return "other"


class _Probe(TranscriptFile):
    def calls(self) -> Iterator[TranscriptCall]:
        yield from super().calls()
        sizes: collections.Counter[str] = collections.Counter()
        for stat in tracemalloc.take_snapshot().statistics("traceback"):
            sizes[structure(stat.traceback)] += stat.size
        sessions = list(getattr(self.reader, "_sessions", {}).values())
        calls = max(1, sum(s.calls for s in sessions))
        links = max(1, sum(len(s.chain) for s in sessions))
        print(f"{calls:,} calls, {links:,} chain links; live at the end of reading: {sum(sizes.values()) / 1e6:.2f} MB")
        for name, size in sizes.most_common():
            print(f"  {size / 1e6:6.2f} MB  {size / calls:6.0f} B/call  {size / links:5.0f} B/link  {name}")


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    analysis.TranscriptFile = _Probe  # type: ignore[misc]
    tracemalloc.start(10)
    analysis.analyze_file(sys.argv[1], tokenizer="chars")


if __name__ == "__main__":
    main()
