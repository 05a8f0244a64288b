"""Fuzzing every reader with random and mutated lines: no exception escapes, good lines still count."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import DATA

from ctxscope.transcripts import TranscriptFile, make_reader

FIXTURES = {
    "claude-code": DATA / "transcripts" / "claude_4c2ddfdc.jsonl",
    "codex": DATA / "transcripts" / "codex_turn-2.jsonl",
}
PAIR = {"request": {"model": "gpt-4o", "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
                    "messages": [{"role": "developer", "content": "d"}, {"role": "user", "content": "u"},
                                 {"role": "assistant", "content": None, "reasoning_content": "r", "tool_calls": [
                                     {"id": "c", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
                                 {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "t"}]}]},
        "response": {"usage": {"prompt_tokens": 50}}}
ANTHROPIC = {"model": "claude-x", "system": [{"type": "text", "text": "s"}], "messages": [
    {"role": "user", "content": [{"type": "text", "text": "u"}, {"type": "image", "source": {"data": "iVBORw0KGgo="}}]},
    {"role": "assistant", "content": [{"type": "thinking", "thinking": "t"},
                                      {"type": "tool_use", "id": "x", "name": "Read", "input": {"file_path": "a"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "body"}]}]}


def _records(fmt: str) -> list[dict[str, Any]]:
    if fmt == "messages":
        return [PAIR, ANTHROPIC]
    return [json.loads(line) for line in FIXTURES[fmt].read_text().splitlines() if line.strip()]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


@st.composite
def mutated(draw: st.DrawFn, record: Any, depth: int = 0) -> Any:
    """A record with values replaced, keys dropped and types changed at random places."""
    choice = draw(st.integers(0, 9))
    if choice == 0:
        return draw(json_values)
    if isinstance(record, dict) and depth < 6:
        out = {}
        for key, value in record.items():
            if draw(st.integers(0, 9)) == 0:
                continue  # drop a key
            out[key] = draw(mutated(value, depth + 1))
        return out
    if isinstance(record, list) and depth < 6:
        return [draw(mutated(v, depth + 1)) for v in record]
    return record


FORMATS = ("claude-code", "codex", "messages")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), fmt=st.sampled_from(FORMATS), source=st.sampled_from(FORMATS))
def test_readers_never_raise_on_mutated_records(data: st.DataObject, fmt: str, source: str):
    """Every reader's feed() takes mutated records of every format without raising (checks, not the guard)."""
    reader = make_reader(fmt, "fuzz.jsonl")
    for line, record in enumerate(_records(source), 1):
        reader.feed(data.draw(mutated(record)), line)
        reader.feed(data.draw(json_values), line)
    reader.finish()


garbage = st.one_of(
    st.binary(max_size=60).map(lambda b: b.replace(b"\n", b" ")),
    st.text(max_size=60).map(lambda t: t.replace("\n", " ").replace("\r", " ").encode("utf-8", "surrogatepass")),
    st.sampled_from([b"{", b"[1, 2]", b"42", b'"text"', b"null", b'{"type": ', b"\xff\xfe\x00"]),
)


def _calls(path: Path) -> list[tuple[str, int, int | None, int]]:
    return [(c.session_id, c.index, c.reported_tokens, len(c.items)) for c in TranscriptFile(str(path)).calls()]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(FORMATS), junk=st.lists(st.tuples(st.integers(0, 60), garbage), max_size=8))
def test_garbage_lines_do_not_change_the_calls(tmp_path: Path, fmt: str, junk: list[tuple[int, bytes]]):
    """Random lines inserted anywhere (not valid records) leave every call of the good lines as it was."""
    if fmt == "messages":
        good = [json.dumps(PAIR).encode(), json.dumps({"request": ANTHROPIC}).encode()] * 3
    else:
        good = FIXTURES[fmt].read_bytes().splitlines()
    lines = list(good)
    for position, line in junk:
        lines.insert(min(position, len(lines)) if position else 1, line)  # keep line 1 for sniffing
    path = tmp_path / f"fuzz-{fmt}.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    clean = tmp_path / f"clean-{fmt}.jsonl"
    clean.write_bytes(b"\n".join(good) + b"\n")
    assert _calls(path) == _calls(clean)
