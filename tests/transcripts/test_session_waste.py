"""Waste over the session: a file read, edited and read again, then compacted (figures by hand).

Tokenizer chars (ceil(chars / 4)), model claude-sonnet-4-5 (input $3 per million, genai-prices):

    call 0  context: prompt                                       Read a.py
    call 1  + result R1 (4,000 chars: 1,000 tokens)               Edit a.py
    call 2  + edit result                                         Read a.py
    call 3  + result R2 (another 1,000-token body): R1 is stale   (text)
    call 4  + a prompt                                            (text)
    call 5  compacted: a summary and a prompt only

R1 rode along stale in calls 3 and 4: 1,000 x 2 = 2,000 token-calls, $0.006 at $3 per million.
Bloat (cap 400): R1 kept in calls 1-2, R2 in calls 3-4, 600 over the cap each: 600 x 4 = 2,400.
The last call's view (what a compaction now could remove) is empty: the compaction took it all.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from ctxscope.cli import main
from ctxscope.report.analysis import analyze_file

pytest.importorskip("genai_prices")
MODEL = "claude-sonnet-4-5"


def _rec(kind: str, uuid: str, parent: str | None, n: int, **extra) -> dict:
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "waste-session",
            "timestamp": f"2026-02-11T10:00:{n:02d}.000Z", **extra}


def _user(uuid: str, parent: str | None, n: int, content, **extra) -> dict:
    return _rec("user", uuid, parent, n, message={"role": "user", "content": content}, **extra)


def _assistant(uuid: str, parent: str, n: int, content: list) -> dict:
    return _rec("assistant", uuid, parent, n, requestId=f"req{n}", message={
        "id": f"msg{n}", "role": "assistant", "model": MODEL, "content": content,
        "usage": {"input_tokens": 5000 + 100 * n, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 0, "output_tokens": 1}})


def _tool(uuid: str, parent: str, n: int, call_id: str, name: str, args: dict) -> dict:
    return _assistant(uuid, parent, n, [{"type": "tool_use", "id": call_id, "name": name, "input": args}])


def _result(uuid: str, parent: str, n: int, call_id: str, body: str) -> dict:
    return _user(uuid, parent, n, [{"type": "tool_result", "tool_use_id": call_id, "content": body}])


def write(path: Path) -> None:
    recs = [
        _user("u1", None, 1, "please fix the bug in a.py"),
        _tool("a1", "u1", 2, "t1", "Read", {"file_path": "a.py"}),
        _result("r1", "a1", 3, "t1", "A" * 4000),
        _tool("a2", "r1", 4, "t2", "Edit", {"file_path": "a.py", "old_string": "A", "new_string": "B"}),
        _result("r2", "a2", 5, "t2", "The file a.py has been updated."),
        _tool("a3", "r2", 6, "t3", "Read", {"file_path": "a.py"}),
        _result("r3", "a3", 7, "t3", "B" * 4000),
        _assistant("a4", "r3", 8, [{"type": "text", "text": "Fixed it."}]),
        _user("u4", "a4", 9, "now run the tests please"),
        _assistant("a5", "u4", 10, [{"type": "text", "text": "Running."}]),
        _rec("system", "b1", None, 11, subtype="compact_boundary", logicalParentUuid="a5",
             compactMetadata={"trigger": "auto", "preTokens": 5900}),
        _user("u5", "b1", 12, "Summary: a.py was fixed.", isCompactSummary=True),
        _user("u6", "u5", 13, "go on"),
        _assistant("a6", "u6", 14, [{"type": "text", "text": "Done."}]),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_the_stale_copy_is_charged_for_the_calls_it_rode_along_in(tmp_path):
    """Stale: 2,000 token-calls, $0.006; bloat 2,400 token-calls; the last-call view is empty."""
    path = tmp_path / "s.jsonl"
    write(path)
    (session,) = analyze_file(str(path), tokenizer="chars").sessions
    assert len(session.rows) == 6 and session.compactions == 1
    view = session.session_waste
    by_kind = {(f.kind, f.reference.split(":")[0]): f for f in view.findings}
    stale = by_kind[("stale", "Read")]
    assert (stale.token_calls, stale.cost_usd) == (2000, Decimal("0.006"))
    assert by_kind[("bloat", "Read")].token_calls == 2400
    assert view.input_price_per_mtok == Decimal("3")
    assert session.waste.wasted == 0 and session.waste.findings == []


def test_the_json_says_the_session_view_and_the_every_turn_split(tmp_path, capsys):
    """--json session_waste: findings with token-calls and cost; every-turn vs conversation token-calls."""
    path = tmp_path / "s.jsonl"
    write(path)
    assert main(["analyze", str(path), "--json", "--tokenizer", "chars"]) == 0
    session = json.loads(capsys.readouterr().out)["files"][0]["sessions"][0]
    view = session["session_waste"]
    stale = [f for f in view["findings"] if f["kind"] == "stale"]
    assert [(f["token_calls"], f["cost_usd"]) for f in stale] == [(2000, "0.006000")]
    assert view["token_calls"] == 2000 + 2400
    assert view["cost_usd"] == "0.013200"  # 4,400 x $3 / 1e6
    # Every call's estimate is split in two; together they are the session's estimated token-calls.
    assert view["every_turn_token_calls"] + view["conversation_token_calls"] == \
        sum(g["estimated_tokens"] for g in session["growth"])


def _same_body_twice(path: Path) -> None:
    """Two results of tool calls the file never had (no reference: grouped by body), the same 3,000 characters."""
    body = "same output\n" * 250  # 3,000 chars: 750 tokens on chars
    recs = [
        _user("u1", None, 1, "run it twice"),
        _assistant("a1", "u1", 2, [{"type": "text", "text": "Running."}]),
        _result("r1", "a1", 3, "gone_1", body),
        _assistant("a2", "r1", 4, [{"type": "text", "text": "Again."}]),
        _result("r2", "a2", 5, "gone_2", body),
        _assistant("a3", "r2", 6, [{"type": "text", "text": "Same."}]),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


def test_a_body_keyed_group_is_named_by_its_tool_never_by_the_digest(tmp_path):
    """The older copy of the body is a duplicate of 750 tokens, named "identical result of unknown"; the
    digest that grouped them (Python's string hash, other in every process) is in no output: two processes
    with other hash seeds print the same JSON."""
    import os
    import subprocess
    import sys

    path = tmp_path / "s.jsonl"
    _same_body_twice(path)
    (session,) = analyze_file(str(path), tokenizer="chars").sessions
    duplicates = [(f.reference, f.tokens_saved) for f in session.waste.findings if f.kind == "duplicate"]
    assert duplicates == [("identical result of unknown", 750)]
    outputs = []
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run([sys.executable, "-c", "from ctxscope.cli import run; run()", "analyze", "--json",
                              "--tokenizer", "chars", str(path)], env=env, capture_output=True, check=True)
        outputs.append(run.stdout)
    assert b"identical result of unknown" in outputs[0]
    assert outputs[0] == outputs[1]
