"""``analyze`` lists the largest additions: the tool call (id and name) where recorded, else the request.

A hand-written OpenAI message history, one call per assistant message,
counted with chars/4 (rounded up): call 0 is the baseline (system and the
first prompt); call 1 adds the read_file call and its result, 600 chars of
"x = 1\\n": 150 tokens; call 2 adds the grep call, its result "a.py:3: TODO
fix this and that thing" (36 chars: 9) and the prompt "Now summarise the
file for me, please." (38 chars: 10), which no tool call contributed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ctxscope.cli import main

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Read a.py and grep TODO"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_read", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}}]},
    {"role": "tool", "tool_call_id": "call_read", "content": "x = 1\n" * 100},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_grep", "type": "function", "function": {"name": "grep", "arguments": '{"q": "TODO"}'}}]},
    {"role": "tool", "tool_call_id": "call_grep", "content": "a.py:3: TODO fix this and that thing"},
    {"role": "user", "content": "Now summarise the file for me, please."},
    {"role": "assistant", "content": "done"},
]


@pytest.fixture
def history(tmp_path: Path) -> Path:
    path = tmp_path / "history.json"
    path.write_text(json.dumps({"model": "gpt-4o", "messages": MESSAGES}, indent=1), encoding="utf-8")
    return path


def test_json_lists_the_largest_additions_with_their_tool_calls(history: Path, capsys):
    """150 (read_file's result), 10 (the prompt: no tool call), 9 (grep's result), then the calls' arguments."""
    assert main(["analyze", str(history), "--json", "--tokenizer", "chars"]) == 0
    (session,) = json.loads(capsys.readouterr().out)["files"][0]["sessions"]
    top = [(a["tokens"], a["category"], a["call"], a["tool"], a["tool_call_id"]) for a in session["largest_additions"]]
    assert top[:3] == [(150, "results", 1, "read_file", "call_read"),
                       (10, "prompts", 2, None, None),
                       (9, "results", 2, "grep", "call_grep")]
    # The arguments: '{"path": "a.py"}' 16 chars -> 4 and '{"q": "TODO"}' 13 -> 4, the earlier call first.
    assert top[3:5] == [(4, "assistant", 1, "read_file", "call_read"), (4, "assistant", 2, "grep", "call_grep")]
    assert session["largest_additions"][0]["item"] == "call_read:result"


def test_terminal_names_the_tool_call_or_the_request(history: Path, capsys):
    """One line an addition: tokens, category, the tool and its call id, else the call and the item."""
    assert main(["analyze", str(history), "--tokenizer", "chars"]) == 0
    out = capsys.readouterr().out
    section = out.split("largest additions", 1)[1]
    lines = [line.strip() for line in section.splitlines()[1:4]]
    assert re.fullmatch(r"150\s+results\s+tool read_file call_read, call 1 \(line 1\)", lines[0])
    assert re.fullmatch(r"10\s+prompts\s+call 2 \(line 1\), item h:[0-9a-f]+", lines[1])
    assert re.fullmatch(r"9\s+results\s+tool grep call_grep, call 2 \(line 1\)", lines[2])


def test_html_has_the_additions_table(history: Path, tmp_path: Path):
    """The HTML report's table: the read_file result first, with its tool call id."""
    out = tmp_path / "report.html"
    assert main(["analyze", str(history), "--html", "-o", str(out), "--tokenizer", "chars"]) == 0
    html = out.read_text(encoding="utf-8")
    table = html.split("<h3>Largest additions</h3>", 1)[1].split("</table>", 1)[0]
    first = re.findall(r"<tr>(.*?)</tr>", table)[1]  # after the header row
    cells = re.findall(r"<td[^>]*>(.*?)</td>", first)
    assert cells[:6] == ["150", "results", "1", "1", "read_file", "call_read"]
