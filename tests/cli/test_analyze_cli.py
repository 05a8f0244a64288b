"""`ctxscope analyze` and `ctxscope diff` at the command line: outputs, exit codes, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import DATA

from ctxscope.cli import main
from ctxscope.schema import CATEGORIES

MAIN = DATA / "transcripts" / "claude_4c2ddfdc.jsonl"
CODEX = DATA / "transcripts" / "codex_turn-2.jsonl"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_terminal_report_has_summary_composition_growth_parts_and_waste(capsys):
    """The plain report names the session, 7 calls, the calibrated composition, growth and waste."""
    code, out, _ = run(capsys, "analyze", str(MAIN), "--tokenizer", "chars")
    assert code == 0
    assert "session 4c2ddfdc-b619-4525-8d03-1950fb1b0257" in out
    assert "calls 7" in out
    assert "composition (calibrated view, last call)" in out and "unattributed" in out
    assert "growth over calls" in out and "largest parts" in out and "waste " in out
    # The figures, not just the headings. Reported input of the 7 calls, by hand from the file
    # (input + cache creation + cache read of each call's first assistant line, as in test_watch):
    reported = [35069, 35666, 35757, 35998, 36393, 36423, 36526]
    # The window is known as replay knows it (limits: genai-prices, 200,000 for Sonnet 4.5).
    assert "context now 36,526 tokens of 200,000 window   peak 36,526   reported 36,526" in out
    growth = [line.split() for line in out.splitlines() if line.strip().startswith("call ")]
    assert [(int(row[1]), int(row[4].replace(",", ""))) for row in growth] == list(enumerate(reported))
    # The calibrated composition of the last call adds up to its reported 36,526.
    block = out.split("composition (calibrated view, last call)")[1].split("growth over calls")[0]
    categories = {c.value for c in CATEGORIES}
    rows = {line.split()[0]: int(line.split()[1].replace(",", "")) for line in block.splitlines()
            if line.strip() and line.split()[0] in categories}
    assert "unattributed" in rows and sum(rows.values()) == 36526
    # The hidden prefix is named under system, learned from the calls before the last.
    assert "of which system+tools (inferred from usage):" in block


def test_json_schema_and_values(capsys):
    """--json: schema_version 2, 7 growth rows, the last call's used tokens equal its reported 36,526."""
    code, out, _ = run(capsys, "analyze", str(MAIN), "--json", "--tokenizer", "chars")
    assert code == 0
    doc = json.loads(out)
    assert doc["schema_version"] == 2
    session = doc["files"][0]["sessions"][0]
    assert session["calls"] == 7 and len(session["growth"]) == 7
    assert session["growth"][-1]["reported_tokens"] == 36526
    assert session["used_tokens"] == 36526 == sum(session["composition"].values())
    assert session["stage"] == "transcript-observed" and session["coverage"] == "partial"
    assert set(session["waste"]["tokens"]) == {"duplicate", "stale", "bloat", "tool_definition_overage"}


def _rereads(path: Path) -> Path:
    """A session reading app.py twice (4,000 chars = 1,000 tokens each), priced at 3,000 tokens."""
    def rec(**r):
        return json.dumps({"sessionId": "s", **r})
    body = "x" * 4000
    usage = {"input_tokens": 3000, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    lines = [rec(type="user", uuid="u1", parentUuid=None, message={"role": "user", "content": "go"})]
    parent = "u1"
    for n in (1, 2):
        lines.append(rec(type="assistant", uuid=f"a{n}", parentUuid=parent, requestId=f"r{n}",
                         message={"id": f"m{n}", "model": "claude-x", "usage": usage, "content": [
                             {"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"file_path": "app.py"}}]}))
        lines.append(rec(type="user", uuid=f"u{n + 1}", parentUuid=f"a{n}", message={"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{n}", "content": body}]}))
        parent = f"u{n + 1}"
    lines.append(rec(type="assistant", uuid="a3", parentUuid=parent, requestId="r3",
                     message={"id": "m3", "model": "claude-x", "usage": usage,
                              "content": [{"type": "text", "text": "ok"}]}))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_reread_file_is_a_duplicate_with_its_saving(tmp_path: Path, capsys):
    """The second read of app.py (1,000 tokens) is duplicate; the kept one is 600 bloat: ratio 1,600/3,000."""
    code, out, _ = run(capsys, "analyze", str(_rereads(tmp_path / "r.jsonl")), "--json", "--tokenizer", "chars")
    waste = json.loads(out)["files"][0]["sessions"][0]["waste"]
    assert code == 0
    assert waste["tokens"] == {"duplicate": 1000, "stale": 0, "bloat": 600, "tool_definition_overage": 0}
    assert waste["findings"][0] == {"kind": "duplicate", "severity": "high", "reference": "Read:file_path=app.py",
                                    "count": 1, "tokens_saved": 1000, "action": "drop"}
    assert abs(waste["ratio"] - 1600 / 3000) < 1e-6
    assert waste["plan"]["saving"] == 1600


def test_fail_over_ratio_exit_codes(tmp_path: Path, capsys):
    """Waste ratio 0.533: exit 2 over 0.5, 0 under 0.6, 1 for a ratio out of range."""
    path = str(_rereads(tmp_path / "r.jsonl"))
    assert run(capsys, "analyze", path, "--tokenizer", "chars", "--fail-over-ratio", "0.5")[0] == 2
    assert run(capsys, "analyze", path, "--tokenizer", "chars", "--fail-over-ratio", "0.6")[0] == 0
    assert run(capsys, "analyze", path, "--fail-over-ratio", "7")[0] == 1
    assert run(capsys, "diff", str(MAIN), path, "--tokenizer", "chars", "--fail-over-ratio", "0.5")[0] == 2


def test_usage_errors_exit_1(capsys):
    """An unknown option, a missing file and --html without -o all exit 1 with one line."""
    assert run(capsys, "analyze", "--no-such-option", str(MAIN))[0] == 1
    code, _, err = run(capsys, "analyze", "/no/such/file.jsonl")
    assert code == 1 and err.strip() == "ctxscope: /no/such/file.jsonl: no such file"
    assert run(capsys, "analyze", str(MAIN), "--html")[0] == 1


def test_bad_lines_are_reported_and_the_rest_analysed(tmp_path: Path, capsys):
    """An invalid line 2, an unknown type and a truncated last line: named by line, the 7 calls still counted."""
    lines = MAIN.read_text().splitlines()
    bad = [lines[0], "{not json", *lines[1:], '{"type": "brand-new-record", "uuid": "x"}', lines[-1][:40]]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(bad))
    code, out, err = run(capsys, "analyze", str(path), "--json", "--tokenizer", "chars")
    assert code == 0
    assert f"{path}:2: invalid JSON" in err
    assert f"{path}:{len(bad)}: truncated last line" in err
    assert "Traceback" not in err
    assert json.loads(out)["files"][0]["sessions"][0]["calls"] == 7


@pytest.mark.parametrize("content, message", [
    (b"", "empty file"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00", "binary file"),
    (b"hello world\n", "not a JSON or JSONL transcript"),
])
def test_unusable_files_exit_1_with_one_line(tmp_path: Path, capsys, content: bytes, message: str):
    """Empty, binary and non-JSON files: one line naming the file, exit 1, no traceback."""
    path = tmp_path / "input.jsonl"
    path.write_bytes(content)
    code, _, err = run(capsys, "analyze", str(path))
    assert code == 1
    assert f"ctxscope: {path}" in err and message in err
    assert "Traceback" not in err


def test_line_over_32_mb_is_skipped_and_named(tmp_path: Path, capsys):
    """A 33 MB line is reported by its number and skipped; the calls around it still count."""
    lines = MAIN.read_text().splitlines()
    huge = '{"type": "user", "pad": "' + "x" * (33 * 1024 * 1024) + '"}'
    path = tmp_path / "huge.jsonl"
    path.write_text("\n".join([lines[0], huge, *lines[1:]]) + "\n")
    code, out, err = run(capsys, "analyze", str(path), "--json", "--tokenizer", "chars")
    assert code == 0
    assert f"{path}:2: line longer than 32 MB" in err
    assert json.loads(out)["files"][0]["sessions"][0]["calls"] == 7


def test_subagents_beside_session_are_separate_sessions(tmp_path: Path, capsys):
    """A 2.1.x layout <session>/subagents/agent-*.jsonl adds the subagent as its own session."""
    shutil.copy(MAIN, tmp_path / "s.jsonl")
    (tmp_path / "s" / "subagents").mkdir(parents=True)
    shutil.copy(DATA / "transcripts" / "claude_agent-36541525.jsonl",
                tmp_path / "s" / "subagents" / "agent-36541525.jsonl")
    code, out, _ = run(capsys, "analyze", str(tmp_path / "s.jsonl"), "--json", "--tokenizer", "chars")
    sessions = [s for f in json.loads(out)["files"] for s in f["sessions"]]
    assert code == 0
    assert [(s["calls"], s["parent_session_id"] is not None) for s in sessions] == [(7, False), (1, True)]
    assert sessions[1]["used_tokens"] == 16979


def test_diff_compares_two_sessions(capsys):
    """diff --json: the Claude session (7 calls) against the Codex one (2 calls): delta -5 calls."""
    code, out, _ = run(capsys, "diff", str(MAIN), str(CODEX), "--json", "--tokenizer", "chars")
    assert code == 0
    doc = json.loads(out)
    assert doc["before"]["calls"] == 7 and doc["after"]["calls"] == 2 and doc["delta"]["calls"] == -5
    assert doc["after"]["used_tokens"] == 1100
    # The terminal table prints the ratio's change as percentage points, from the same two ratios.
    code, out, _ = run(capsys, "diff", str(MAIN), str(CODEX), "--tokenizer", "chars")
    row = next(line for line in out.splitlines() if line.startswith("waste_ratio")).split()
    points = (doc["after"]["waste_ratio"] - doc["before"]["waste_ratio"]) * 100
    assert row[-1] == "pp" and row[-2] == f"{points:+.1f}"


def test_format_forced_wrongly_finds_no_calls(capsys):
    """Forcing --format codex on a Claude Code file yields no calls: exit 1."""
    code, _, err = run(capsys, "analyze", str(MAIN), "--format", "codex")
    assert code == 1 and "no usable calls" in err


def test_subagents_beside_session_in_the_20x_layout(tmp_path: Path, capsys):
    """2.0.x: agent-<id>.jsonl beside the session with its sessionId is added as its own session."""
    shutil.copy(MAIN, tmp_path / "4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl")
    shutil.copy(DATA / "transcripts" / "claude_agent-36541525.jsonl", tmp_path / "agent-36541525.jsonl")
    (tmp_path / "agent-other.jsonl").write_text('{"type": "user", "sessionId": "someone-else"}\n')
    code, out, _ = run(capsys, "analyze", str(tmp_path / "4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl"),
                       "--json", "--tokenizer", "chars")
    files = json.loads(out)["files"]
    assert code == 0
    assert [Path(f["path"]).name for f in files] == ["4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl",
                                                     "agent-36541525.jsonl"]
    assert files[1]["sessions"][0]["parent_session_id"] == "4c2ddfdc-b619-4525-8d03-1950fb1b0257"


def test_progress_bar_only_on_a_terminal(monkeypatch, capsys):
    """With stderr a terminal the bar reaches 100 %; piped, nothing but the report is written."""
    import io
    import sys

    from ctxscope.cli import analyze as analyze_cmd

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(analyze_cmd, "PROGRESS_MIN_BYTES", 0)
    fake = Tty()
    monkeypatch.setattr(sys, "stderr", fake)
    assert main(["analyze", str(MAIN), "--tokenizer", "chars"]) == 0
    assert "100%" in fake.getvalue() and "[##############################]" in fake.getvalue()
    monkeypatch.undo()
    capsys.readouterr()
    monkeypatch.setattr(analyze_cmd, "PROGRESS_MIN_BYTES", 0)
    assert main(["analyze", str(MAIN), "--tokenizer", "chars"]) == 0
    assert capsys.readouterr().err == ""


def test_tiktoken_basis_when_the_encoding_loads(tiktoken_ready, capsys):
    """--tokenizer auto counts with tiktoken o200k_base where it can load (the offline cache here)."""
    code, out, _ = run(capsys, "analyze", str(MAIN), "--json")
    session = json.loads(out)["files"][0]["sessions"][0]
    assert code == 0 and session["basis"] == "tiktoken/o200k_base"
    assert session["used_tokens"] == 36526


def test_redact_keeps_tools_and_hides_paths(tmp_path: Path, capsys):
    """--redact: the duplicate finding names Read and a hash, not app.py."""
    code, out, _ = run(capsys, "analyze", str(_rereads(tmp_path / "r.jsonl")), "--json", "--redact",
                       "--tokenizer", "chars")
    finding = json.loads(out)["files"][0]["sessions"][0]["waste"]["findings"][0]
    assert code == 0
    assert finding["reference"].startswith("Read:#") and "app.py" not in out


def test_one_bad_file_among_good_ones_still_exits_0(tmp_path: Path, capsys):
    """An empty file next to a good one: its line on stderr, the good one analysed, exit 0."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, out, err = run(capsys, "analyze", str(empty), str(MAIN), "--json", "--tokenizer", "chars")
    assert code == 0
    assert f"ctxscope: {empty}: empty file" in err
    assert [f["sessions"][0]["calls"] if f["sessions"] else 0 for f in json.loads(out)["files"]] == [0, 7]


def test_json_written_to_a_file_owner_only(tmp_path: Path, capsys):
    """--json -o writes the document (mode 0600) instead of printing it."""
    target = tmp_path / "out.json"
    code, out, _ = run(capsys, "analyze", str(MAIN), "--json", "-o", str(target), "--tokenizer", "chars")
    assert code == 0 and out == ""
    assert json.loads(target.read_text())["files"][0]["sessions"][0]["calls"] == 7
    assert target.stat().st_mode & 0o777 == 0o600
