"""Does analyze follow the context of real sessions? ../shared/tools/tracking.py's measure, in the suite.

Per main session of 20+ calls: zero collapses (an estimate below 60% of the previous call's without
a declared compaction), every compaction record of the file found, and a residual of at most 5%
(the median |error| of the least-squares line reported ~ offset + slope x estimated over the calls
after the third, as a share of the median reported input). Basis chars/4: deterministic, and the
like-for-like basis of the benchmarks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


from conftest import CORPUS, DATA, requires_corpus
from ctxscope.report.analysis import analyze_file

MIN_CALLS = 20
MAX_RESIDUAL = 0.05
SLICE = DATA / "transcripts" / "claude_258c7280_spotter_compaction.jsonl"


def compactions_in_file(path: Path) -> int:
    found = 0
    with open(path, errors="replace") as handle:
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict) or record.get("isSidechain"):
                continue
            if (record.get("type") == "system" and record.get("subtype") == "compact_boundary") \
                    or record.get("type") == "compacted":
                found += 1
    return found


def measure(path: Path) -> dict | None:
    """tracking.py's row for a file's main session, or None below MIN_CALLS."""
    sessions = [s for s in analyze_file(str(path), tokenizer="chars").sessions if not s.parent_session_id]
    if not sessions:
        return None
    session = max(sessions, key=lambda s: len(s.rows))
    rows = session.rows
    if len(rows) < MIN_CALLS:
        return None
    est = [r.estimated for r in rows]
    collapses = sum(1 for i in range(1, len(rows))
                    if est[i] < 0.6 * est[i - 1] and not rows[i].compaction and est[i - 1] > 2000)
    pts = [(r.estimated, r.reported) for r in rows[3:] if r.reported]
    mx = sum(e for e, _ in pts) / len(pts)
    my = sum(r for _, r in pts) / len(pts)
    slope = sum((e - mx) * (r - my) for e, r in pts) / (sum((e - mx) ** 2 for e, _ in pts) or 1)
    offset = my - slope * mx
    errors = sorted(abs(r - (offset + slope * e)) for e, r in pts)
    residual = errors[len(errors) // 2] / sorted(r for _, r in pts)[len(pts) // 2]
    return {"calls": len(rows), "found": session.compactions, "in_file": compactions_in_file(path),
            "collapses": collapses, "residual": residual}


def main_sessions(root: Path) -> list[Path]:
    out = []
    for folder, _, names in os.walk(root):
        if "subagents" in Path(folder).parts:
            continue
        out += [Path(folder) / n for n in sorted(names) if n.endswith(".jsonl") and not n.startswith("agent-")]
    return sorted(out)


def test_a_2_1_39_slice_with_progress_links_and_a_compaction_is_followed():
    """The spotter slice (26 calls, progress/system links, one auto compaction): 0 collapses, 1/1, residual <= 5%."""
    row = measure(SLICE)
    assert row is not None and row["calls"] == 26
    assert (row["collapses"], row["found"], row["in_file"]) == (0, 1, 1)
    assert row["residual"] <= MAX_RESIDUAL, row


@requires_corpus
def test_every_corpus_session_of_20_calls_or_more_is_followed():
    """Every real main session of 20+ calls in ../shared/corpus: 0 collapses, every compaction, residual <= 5%."""
    rows = {}
    for path in main_sessions(CORPUS / "claude") + main_sessions(CORPUS / "codex"):
        row = measure(path)
        if row is not None:
            rows[path.name] = row
    assert len(rows) >= 16  # the corpus as it is today: the check must not pass on nothing
    bad = {name: row for name, row in rows.items()
           if row["collapses"] or row["found"] != row["in_file"] or row["residual"] > MAX_RESIDUAL}
    assert bad == {}
