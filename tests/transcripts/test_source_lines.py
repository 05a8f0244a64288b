"""The file reader's line rules, each at its line (``transcripts/source.py``, read as ``analyze`` reads).

One file written by hand, the line limit lowered to 1,024 bytes:

    1  BOM + user u1 "hi"                         a record (the BOM is the file's, not JSON)
    2  "\\x0b\\x0c\\n"                              blank space only: skipped, no problem
    3  " \\t" + assistant a1 (parent u1) + "\\r\\n"   a record: JSON may have blank space around it
    4  BOM + {"type":"user"}                      invalid JSON: only the file's first line has a BOM
    5  "x" x 2,000                                longer than the limit: skipped to its end
    6  user u2 (parent a1)                        a record: the line after the long one is read
    7  '{"type":"user","uu' without newline       the truncated last line, said once
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxscope.transcripts import source
from ctxscope.transcripts.source import TranscriptFile

BOM = b"\xef\xbb\xbf"


def _record(**fields: object) -> bytes:
    base = {"sessionId": "s", "isSidechain": False, "timestamp": "2025-01-01T00:00:00.000Z"}
    return json.dumps({**base, **fields}).encode()


def _lines() -> list[bytes]:
    user = _record(type="user", uuid="u1", parentUuid=None, message={"role": "user", "content": "hi"})
    assistant = _record(type="assistant", uuid="a1", parentUuid="u1", requestId="r1",
                        message={"id": "m1", "role": "assistant", "model": "m", "content": "ok",
                                 "usage": {"input_tokens": 3}})
    later = _record(type="user", uuid="u2", parentUuid="a1", message={"role": "user", "content": "more"})
    return [BOM + user + b"\n", b"\x0b\x0c\n", b" \t" + assistant + b"\r\n", BOM + b'{"type":"user"}\n',
            b"x" * 2000 + b"\n", later + b"\n", b'{"type":"user","uu']


@pytest.fixture
def transcript(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(source, "MAX_LINE_BYTES", 1024)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(_lines()))
    return path


def test_each_line_rule_at_its_line(transcript: Path) -> None:
    """BOM, blank space, a later BOM, a long line and a truncated last line: three records, three problems."""
    file = TranscriptFile(str(transcript))
    calls = list(file.calls())
    assert [(call.line, call.usage.input_tokens if call.usage else None) for call in calls] == [(3, 3)]
    assert file.records == 3  # lines 1, 3 and 6
    assert [(p.line, p.message.split(":")[0]) for p in file.problems] == [
        (4, "invalid JSON"), (5, "line longer than 0 MB, skipped"), (7, "truncated last line")]
    assert (file.line, file.offset) == (7, transcript.stat().st_size)


def test_a_follower_waits_for_the_last_line_and_counts_the_lines_before_it(transcript: Path) -> None:
    """Polled, the half-written line 7 is left for later: six lines and their bytes read, no problem for it."""
    file = TranscriptFile(str(transcript), documents=False)
    list(file.poll())
    assert file.line == 6
    assert file.offset == sum(len(line) for line in _lines()[:6])
    assert [p.line for p in file.problems] == [4, 5]


@pytest.mark.parametrize("space", [b" ", b"\t", b"\r", b"\x0b", b"\x0c"])
def test_each_blank_space_byte_may_lead_a_line(tmp_path: Path, space: bytes) -> None:
    """Any byte ``bytes.isspace()`` takes, first on a line: a blank line of three (skipped, no problem)
    and one before a record (read). orjson takes only space, tab, CR and LF around JSON, so a line
    that starts with \\x0b or \\x0c is stripped first; one left to orjson would be invalid JSON."""
    user = _lines()[0][len(BOM):]
    assistant = _lines()[2].lstrip(b" \t")
    path = tmp_path / "s.jsonl"
    path.write_bytes(user + space * 3 + b"\n" + space + assistant)
    file = TranscriptFile(str(path))
    calls = list(file.calls())
    assert [call.line for call in calls] == [3]
    assert (file.records, file.problems) == (2, [])
