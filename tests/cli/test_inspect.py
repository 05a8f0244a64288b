"""``ctxscope inspect``: composition of one request body, its JSON, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ctxscope.cli import main

ANTHROPIC_BODY = {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": "s" * 40,
                  "messages": [{"role": "user", "content": "u" * 20}]}
# Reported input per SPEC 4 for Anthropic: 10 + 5 + 100 = 115.
ANTHROPIC_RESPONSE = {"usage": {"input_tokens": 10, "cache_creation_input_tokens": 5,
                                "cache_read_input_tokens": 100, "output_tokens": 3}}
CHAT_BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "c" * 8}]}
READ_TOOL = {"type": "function", "function": {
    "name": "read", "description": "Read a file",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["inspect", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_table_of_a_recording(tmp_path, capsys):
    """chars/4: system 40 chars -> 10, prompt 20 -> 5, Claude framing 8; reported 115, unattributed 92.

    Framing of claude-sonnet-4-5: the turn "\\n\\nHuman: " (9 chars) 3, the priming
    "\\n\\nAssistant:" (12) 3, and the proxy encoding of the 15 prose tokens,
    15 x 0.16 = 2.4 -> 2 (as the live tracker); the context-awareness tags are not billed.
    """
    path = write(tmp_path, "rec.json", json.dumps({"request": ANTHROPIC_BODY, "response": ANTHROPIC_RESPONSE}))
    code, out, err = run(capsys, path, "--tokenizer", "chars")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"{path}  anthropic.messages  model claude-sonnet-4-5  basis chars/4  5 items"
    assert lines[2:8] == [
        "category          tokens   share",
        "system                10   43.5%",
        "prompts                5   21.7%",
        "overhead               8   34.8%",
        "estimated             23",
        "reported             115   calibration factor 1.000, unattributed 92",
    ]
    assert lines[9].split() == ["largest", "parts", "label", "tokens", "items"]
    assert lines[10].split() == ["system", "-", "10", "1"]
    # The part's label is its largest item's: the turn and the priming tie at 3 of the 8, the first wins.
    assert lines[11].split() == ["overhead", "messages", "8", "3"]
    assert lines[12].split() == ["prompts/text", "-", "5", "1"]


def test_no_framing_table_is_raw_content(tmp_path, capsys):
    """--no-framing: system 10 + prompts 5 = 15, no overhead; reported 115 leaves 100 unattributed."""
    path = write(tmp_path, "rec.json", json.dumps({"request": ANTHROPIC_BODY, "response": ANTHROPIC_RESPONSE}))
    code, out, err = run(capsys, path, "--tokenizer", "chars", "--no-framing")
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0] == f"{path}  anthropic.messages  model claude-sonnet-4-5  basis chars/4  2 items"
    assert lines[2:7] == [
        "category          tokens   share",
        "system                10   66.7%",
        "prompts                5   33.3%",
        "estimated             15",
        "reported             115   calibration factor 1.000, unattributed 100",
    ]


def test_chat_tool_rendering_and_functions_framing(tmp_path, capsys):
    """gpt-4o, one tool, chars/4: tools 15 (the rendered TypeScript), prompts 2, overhead 28.

    The tool renders as "// Read a file\\ntype read = (_: {\\npath: string,\\n}) => any;\\n\\n"
    (59 chars: 15). Overhead: user message 3 + "user" 1, priming 3, the functions block
    "namespace functions {\\n\\n" (23 chars: 6) + "} // namespace functions" (24: 6) + 9 = 21.
    """
    path = write(tmp_path, "body.json", json.dumps({**CHAT_BODY, "tools": [READ_TOOL]}))
    code, out, _ = run(capsys, path, "--json", "--tokenizer", "chars")
    doc = json.loads(out)
    assert code == 0 and doc["framing"] is True
    assert doc["annotation"]["categories"] == {"tools": 15, "prompts": 2, "overhead": 28}
    assert doc["parts"] == {"overhead": 28, "tools/read": 15, "prompts/text": 2}
    labels = {row["part"]: row["label"] for row in doc["largest"]}
    assert labels["overhead"] == "functions"  # the largest framing item: 21 of the 28
    code, out, _ = run(capsys, path, "--json", "--tokenizer", "chars", "--no-framing")
    doc = json.loads(out)
    # Tool definitions keep their rendering without framing: that is their text in the prompt.
    assert doc["framing"] is False and doc["annotation"]["categories"] == {"tools": 15, "prompts": 2}


def test_server_tool_hidden_part_and_tool_use_prompt(tmp_path, capsys):
    """Claude with web search, chars/4: overhead 3+3 + the tool-use prompt 496 + proxy 7 = 509.

    Sonnet 4.5's tool-use prompt is Anthropic's published count for auto (docs/fidelity.md):
    496 Claude tokens whatever the basis.

    The declaration as sent (63 chars of compact JSON) counts 16 in tools/web_search; its
    hidden definition is the part tools/server/web_search, 0 until self-calibration learns it.
    Proxy encoding: the declaration 16 x 0.30 (JSON) + 15 prose x 0.16 = 4.8 + 2.4 = 7.2 -> 7.
    """
    body = {**ANTHROPIC_BODY, "tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 3}]}
    path = write(tmp_path, "body.json", json.dumps(body))
    code, out, _ = run(capsys, path, "--json", "--tokenizer", "chars")
    doc = json.loads(out)
    assert code == 0
    assert doc["annotation"]["categories"] == {"system": 10, "tools": 16, "prompts": 5, "overhead": 509}
    assert doc["parts"]["tools/server/web_search"] == 0 and doc["parts"]["tools/web_search"] == 16


def test_json_document(tmp_path, capsys):
    """--json: the annotation (raw estimates), parts, and the calibrated view with unattributed."""
    path = write(tmp_path, "rec.json", json.dumps({"request": ANTHROPIC_BODY, "response": ANTHROPIC_RESPONSE}))
    code, out, _ = run(capsys, path, "--json", "--tokenizer", "chars", "--no-framing")
    doc = json.loads(out)
    assert code == 0
    assert doc["api"] == "anthropic.messages"
    ann = doc["annotation"]
    assert ann["categories"] == {"system": 10, "prompts": 5}
    assert (ann["estimated_tokens"], ann["reported_tokens"], ann["calibration_factor"]) == (15, 115, 1.0)
    assert ann["basis"] == "chars/4" and ann["stage"] == "request-input" and ann["baseline"] is True
    assert doc["parts"] == {"system": 10, "prompts/text": 5}
    assert doc["calibrated"] == {"system": 10, "prompts": 5, "unattributed": 100}


def test_reported_flag_overrides_and_scales_down(tmp_path, capsys):
    """--reported 12 below the estimate of 15: calibration factor 12/15 = 0.8."""
    path = write(tmp_path, "body.json", json.dumps(ANTHROPIC_BODY))
    code, out, _ = run(capsys, path, "--json", "--tokenizer", "chars", "--reported", "12", "--no-framing")
    ann = json.loads(out)["annotation"]
    assert code == 0 and ann["reported_tokens"] == 12 and ann["calibration_factor"] == pytest.approx(0.8)


def test_jsonl_line_pick_and_chat_usage(tmp_path, capsys):
    """FILE:LINE picks a recording of a JSONL file; chat reports usage.prompt_tokens; overhead 3+1+3 = 7."""
    lines = [json.dumps({"request": ANTHROPIC_BODY, "response": ANTHROPIC_RESPONSE}),
             json.dumps({"request": CHAT_BODY, "response": {"usage": {"prompt_tokens": 9}}})]
    path = write(tmp_path, "recs.jsonl", "\n".join(lines) + "\n")
    code, out, _ = run(capsys, f"{path}:2", "--json", "--tokenizer", "chars")
    doc = json.loads(out)
    assert code == 0 and doc["file"] == f"{path}:2" and doc["api"] == "openai.chat"
    assert doc["annotation"]["categories"] == {"prompts": 2, "overhead": 7}
    assert doc["annotation"]["reported_tokens"] == 9


def test_model_flag_overrides_the_body(tmp_path, capsys):
    """--model names the measurement's model."""
    path = write(tmp_path, "body.json", json.dumps(CHAT_BODY))
    code, out, _ = run(capsys, path, "--json", "--tokenizer", "chars", "--model", "gpt-4.1")
    assert code == 0 and json.loads(out)["annotation"]["model"] == "gpt-4.1"


@pytest.mark.parametrize("content, arg, message", [
    ('{"a": 1}\n{"a": 2}\n', "", "holds 2 JSON lines; pick one with {path}:LINE"),
    ('{"request": {"model": "x", "messages": []}}\n{"request": \n', ":2", "{path}:2: not valid JSON"),
    ('{"request": {"model": "x", "messages": []}}\n', ":5", "{path}:5: no line 5: the file has 1 lines"),
    ('{"prompt": "hi"}', "", "{path}: not a request body"),
    ('[1, 2]', "", "{path}: expected a JSON object, got list"),
])
def test_bad_input_is_one_line_exit_1(tmp_path, capsys, content, arg, message):
    """Malformed input: exit 1 and one stderr line naming the file (and line), no traceback."""
    path = write(tmp_path, "bad.jsonl", content)
    code, out, err = run(capsys, path + arg)
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert message.format(path=path) in err


def test_missing_file(tmp_path, capsys):
    """A file that does not exist: one line, exit 1."""
    code, _, err = run(capsys, str(tmp_path / "nope.json"))
    assert code == 1 and err == f"ctxscope: {tmp_path / 'nope.json'}: no such file\n"


def test_console_script_runs_inspect(tmp_path):
    """The installed ``ctxscope`` entry point lists and runs inspect."""
    path = write(tmp_path, "body.json", json.dumps(CHAT_BODY))
    script = Path(sys.executable).with_name("ctxscope")
    done = subprocess.run([str(script), "inspect", path, "--tokenizer", "chars"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "prompts                2   22.2%" in done.stdout  # of 2 + overhead 7


def test_responses_recording_reports_input_tokens(tmp_path, capsys):
    """A Responses recording: reported input is usage.input_tokens (cached included)."""
    body = {"model": "gpt-5", "instructions": "i" * 12, "input": "p" * 4}
    response = {"usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 40}}}
    path = write(tmp_path, "rec.json", json.dumps({"request": body, "response": response}))
    code, out, _ = run(capsys, path, "--json", "--tokenizer", "chars", "--no-framing")
    ann = json.loads(out)["annotation"]
    assert code == 0 and json.loads(out)["api"] == "openai.responses"
    assert ann["categories"] == {"system": 3, "prompts": 1} and ann["reported_tokens"] == 50


def test_help_names_the_options(capsys):
    """``ctxscope inspect --help`` documents FILE:LINE and every option."""
    code, out, _ = run(capsys, "--help")
    assert code == 0
    for text in ("FILE:LINE", "--json", "--tokenizer {auto,chars,tiktoken}", "--model", "--reported N", "--top K",
                 "--no-framing"):
        assert text in out
