"""The Claude Code reader keeps a chain link once, and a rewind still walks back onto a cut-off branch.

Tokenizer chars (ceil(chars / 4) an item), model m1 (no proxy item):

    u1  prompt "p" x 40                 10
    a1  text "done" (4 chars)            1   call 0: u1 = 10
    u2  prompt "q" x 40 (parent a1)     10
    a2  text "more"                      1   call 1: u1 a1 u2 = 21
    u3  prompt "r" x 40 (parent a1)     10
    a3  text "again"                         call 2, a rewind past u2/a2: u1 a1 u3 = 21
    u4  prompt "s" x 40 (parent a2: back onto the branch call 2 cut off)
    a4  text "ok"                            call 3: u1 a1 u2 a2 u4 = 32
"""

from __future__ import annotations

import json

from ctxscope.report.analysis import analyze_file


def _user(uuid: str, parent: str | None, text: str) -> dict:
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": "s",
            "message": {"role": "user", "content": text}}


def _assistant(uuid: str, parent: str, n: int, text: str) -> dict:
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "sessionId": "s", "requestId": f"r{n}",
            "message": {"id": f"m{n}", "role": "assistant", "model": "m1",
                        "content": [{"type": "text", "text": text}]}}


def test_a_call_back_on_a_cut_off_branch_has_that_branch_in_its_context(tmp_path):
    """Contexts 10, 21, 21 and 32: u2 and a2, cut off by the rewind, are walked again by call 3."""
    records = [_user("u1", None, "p" * 40), _assistant("a1", "u1", 0, "done"),
               _user("u2", "a1", "q" * 40), _assistant("a2", "u2", 1, "more"),
               _user("u3", "a1", "r" * 40), _assistant("a3", "u3", 2, "again"),
               _user("u4", "a2", "s" * 40), _assistant("a4", "u4", 3, "ok")]
    path = tmp_path / "s.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    session = analyze_file(str(path), tokenizer="chars").sessions[0]
    assert [r.estimated - r.inferred for r in session.rows] == [10, 21, 21, 32]
