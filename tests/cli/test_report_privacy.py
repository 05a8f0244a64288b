"""Local report files hold no text of the session by default (SPEC section 7): a sentinel test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxscope.cli import main

SENTINEL = "ZQXSENTINEL7731"


def _rec(kind: str, uuid: str, parent: str | None, n: int, message: dict, **extra) -> dict:
    return {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "privacy-session",
            "timestamp": f"2026-02-11T10:00:{n:02d}.000Z", "message": message, **extra}


def _assistant(uuid: str, parent: str, n: int, content: list, reported: int) -> dict:
    return _rec("assistant", uuid, parent, n, {
        "id": f"msg{n}", "role": "assistant", "model": "claude-sonnet-4-5", "content": content,
        "usage": {"input_tokens": reported, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
                  "output_tokens": 1}}, requestId=f"req{n}")


# A rules file the harness injects into a prompt, twice: a part and a repeated-text finding named by it.
RULES = (f"<system-reminder>\nContents of /home/u/{SENTINEL}/{SENTINEL}.md (project instructions):\n\n"
         + "Always run the tests before you commit. " * 20 + "\n</system-reminder>")


def transcript(path: Path) -> None:
    """A prompt, a file read twice (a duplicate finding names its reference) and a command, each with the sentinel."""
    read = {"file_path": f"/work/{SENTINEL}/app.py"}
    body = f"def {SENTINEL}():\n" + "    return 1\n" * 600  # large: bloat and a duplicate
    recs = [
        _rec("user", "u0", None, 0, {"role": "user", "content": RULES}),
        _rec("user", "u1", "u0", 1, {"role": "user", "content": f"please look at {SENTINEL} now\n" + RULES}),
        _assistant("a1", "u1", 2, [{"type": "tool_use", "id": "t1", "name": "Read", "input": read}], 9000),
        _rec("user", "r1", "a1", 3, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": body}]}),
        _assistant("a2", "r1", 4, [{"type": "tool_use", "id": "t2", "name": "Read", "input": read}], 12000),
        _rec("user", "r2", "a2", 5, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": body}]}),
        _assistant("a3", "r2", 6, [{"type": "tool_use", "id": "t3", "name": "Bash",
                                    "input": {"command": f"grep -r {SENTINEL} ."}}], 15000),
        _rec("user", "r3", "a3", 7, {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t3", "content": f"found {SENTINEL} in app.py"}]}),
        _assistant("a4", "r3", 8, [{"type": "text", "text": f"done with {SENTINEL}"}], 15500),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))


@pytest.mark.parametrize("kind", ["--json", "--html"])
def test_report_files_hold_no_byte_of_the_session_text_by_default(tmp_path, kind, capsys):
    """--json -o and --html -o: the sentinel of a tool argument, a tool result and a prompt is nowhere in the file."""
    session = tmp_path / "session.jsonl"
    transcript(session)
    out = tmp_path / "report.out"
    assert main(["analyze", str(session), kind, "-o", str(out), "--tokenizer", "chars"]) == 0
    data = out.read_bytes()
    assert SENTINEL.encode() not in data
    assert b"Read:#" in data  # the duplicate read is still named: by its tool and a hash of its arguments


def test_show_references_opts_in_to_the_paths(tmp_path):
    """--show-references keeps the file path in the reference (the user asked for it)."""
    session = tmp_path / "session.jsonl"
    transcript(session)
    out = tmp_path / "report.json"
    assert main(["analyze", str(session), "--json", "-o", str(out), "--tokenizer", "chars",
                 "--show-references"]) == 0
    assert f"/work/{SENTINEL}/app.py".encode() in out.read_bytes()


def test_ctxlens_flag_names_are_accepted(tmp_path, capsys):
    """--tool-result-cap and --tool-def-budget set the same options as --result-cap and --tool-budget."""
    session = tmp_path / "session.jsonl"
    transcript(session)
    assert main(["analyze", str(session), "--json", "--tokenizer", "chars", "--tool-result-cap", "100000",
                 "--tool-def-budget", "5"]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert main(["analyze", str(session), "--json", "--tokenizer", "chars", "--result-cap", "100000",
                 "--tool-budget", "5"]) == 0
    assert json.loads(capsys.readouterr().out) == ours
    assert ours["files"][0]["sessions"][0]["waste"]["tokens"]["bloat"] == 0  # no result over a 100,000 cap


def test_report_is_analyze_by_ctxlens_name_and_many_files_roll_up_first(tmp_path, capsys):
    """`report SESSION --html -o FILE` writes the page; two files: ranked by waste and by peak first."""
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    transcript(one)
    two.write_text(one.read_text().replace("privacy-session", "second-session").replace('"input_tokens": 15500',
                                                                                       '"input_tokens": 99000'))
    page = tmp_path / "r.html"
    assert main(["report", str(one), "--html", "-o", str(page), "--tokenizer", "chars"]) == 0
    assert page.read_bytes().startswith(b"<!DOCTYPE html>") or b"<html" in page.read_bytes()[:200]
    capsys.readouterr()
    assert main(["analyze", str(one), str(two), "--tokenizer", "chars"]) == 0
    out = capsys.readouterr().out
    head = out.split("session privacy-session")[0]
    assert head.startswith("2 sessions in 2 file(s)")
    peak = head.split("by peak context")[1]
    assert peak.index("second-session") < peak.index("privacy-session")  # 99,000 reported at its last call
    assert "99,000" in peak
