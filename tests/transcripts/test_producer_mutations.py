"""Transcripts as their producers write them: analyze, replay and watch on the same file changed the ways
agents change theirs (a BOM, CRLF, a line being written, a bad line, new record types and fields, a field
that changed type, usage null, records written again by a resumed session, an empty file).

Where the change carries no information the three give what the clean file gives; a bad line is one
problem naming its line and the rest still counts; nothing raises. Calls and reported inputs by hand from
the fixtures (tests/data/README.md): claude_4c2ddfdc.jsonl has 7 calls ending on lines 3, 13, 16, 18,
20, 23, 25 (input + cache creation + cache read: 35069 ... 36526); the Codex rollout has 8 calls, only
call 2 with a token_count.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conftest import CORPUS, DATA, requires_corpus

from ctxscope.cli import main
from ctxscope.schema import Attr
from ctxscope.telemetry.replay import CallEmitter, replay_files
from ctxscope.watch import Watcher, WatchState

CLAUDE = DATA / "transcripts" / "claude_4c2ddfdc.jsonl"
CODEX = DATA / "transcripts" / "codex_stage0_small_cli0.146.jsonl"
REPORTED = [35069, 35666, 35757, 35998, 36393, 36423, 36526]
NEW_TYPE = "record type 'zz_future_record' is new to ctxscope: read as carrying no context (said once a file)"
SPOTTER = CORPUS / "claude" / "spotter" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def redump(record: Any) -> bytes:
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


# -- the three readers of a file ------------------------------------------------------------


def analyzed(path: Path, capsys) -> tuple[int, dict | None, list[str]]:
    """``ctxscope analyze --json`` in process: exit code, the document, the stderr lines."""
    code = main(["analyze", "--json", "--tokenizer", "chars", "--no-subagents", str(path)])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out.strip() else None, [line for line in err.splitlines() if line]


def same_analysis(doc: dict) -> Any:
    """The document without what names the file (path, line numbers, record counts, problems)."""
    if isinstance(doc, dict):
        return {k: same_analysis(v) for k, v in doc.items() if k not in ("path", "line", "records", "problems")}
    if isinstance(doc, list):
        return [same_analysis(v) for v in doc]
    return doc


def chat_spans(exporter: InMemorySpanExporter) -> list[tuple[dict, list]]:
    return [(dict(s.attributes), [dict(e.attributes) for e in s.events])
            for s in exporter.get_finished_spans() if s.name.startswith("chat")]


def replayed(path: Path) -> tuple[list[tuple[dict, list]], list[tuple[int | None, str]]]:
    """The chat spans a replay writes (attributes, events) and its problems."""
    exporter = InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(exporter))
    result = replay_files([str(path)], CallEmitter.for_provider(tracers, tokenizer="chars"))
    return chat_spans(exporter), [(p.line, p.message) for _, p in result.problems]


def watched(path: Path, tmp_path: Path) -> tuple[list[tuple[dict, list]], list[tuple[int | None, str]]]:
    """The chat spans a watch (--from-start) writes for the file as it is, before it stops, and its problems."""
    folder = tmp_path / f"watch-{path.stem}"
    folder.mkdir()
    (folder / "s.jsonl").write_bytes(path.read_bytes())
    exporter = InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(exporter))
    problems: list[tuple[int | None, str]] = []
    w = Watcher([str(folder)], CallEmitter.for_provider(tracers, tokenizer="chars", stable_ids=True, hold=True),
                WatchState.load(tmp_path / f"state-{path.stem}.json"), from_start=True,
                on_problem=lambda _, p: problems.append((p.line, p.message)))
    w.scan()
    w.commit()
    spans = chat_spans(exporter)  # before close(): a watch that keeps running
    w.close()
    return spans, problems


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(data)
    return path


# -- changes that carry no information -----------------------------------------------------------


def bom(lines: list[bytes]) -> bytes:
    return b"\xef\xbb\xbf" + b"".join(lines)


def crlf(lines: list[bytes]) -> bytes:
    return b"".join(line.replace(b"\n", b"\r\n") for line in lines)


def bom_and_crlf(lines: list[bytes]) -> bytes:
    return b"\xef\xbb\xbf" + crlf(lines)


def new_fields(lines: list[bytes]) -> bytes:
    """A field a newer version adds, at the top and inside message / payload."""
    out = []
    for line in lines:
        record = json.loads(line)
        record["zzNewField"] = {"nested": [1, "x"]}
        for key in ("message", "payload"):
            if isinstance(record.get(key), dict):
                record[key]["zzNewField"] = None
        out.append(redump(record))
    return b"".join(out)


def new_record_types(lines: list[bytes]) -> bytes:
    """A record of a type no version had yet after every 4th line, stamped with the line's time."""
    out = []
    for n, line in enumerate(lines, 1):
        out.append(line)
        if n % 4 == 0:
            record = {"type": "zz_future_record", "data": {"a": [1]}}
            stamp = json.loads(line).get("timestamp")
            if stamp is not None:
                record["timestamp"] = stamp
            out.append(redump(record))
    return b"".join(out)


def content_as_blocks(lines: list[bytes]) -> bytes:
    """A user message's string content as one text block, and one text block as a string."""
    out = []
    for line in lines:
        record = json.loads(line)
        message = record.get("message")
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                message["content"] = [{"type": "text", "text": content}]
            elif isinstance(content, list) and len(content) == 1 and content[0].get("type") == "text":
                message["content"] = content[0]["text"]
        out.append(redump(record))
    return b"".join(out)


def written_again(lines: list[bytes]) -> bytes:
    """Claude Code records written a second time (same uuids, message ids), as a resumed session does."""
    return b"".join(lines[:16] + lines[8:16] + lines[16:])


INFO_FREE = {"bom": bom, "crlf": crlf, "bom_and_crlf": bom_and_crlf, "new_fields": new_fields,
             "new_record_types": new_record_types, "content_as_blocks": content_as_blocks}


@pytest.mark.parametrize("source", [CLAUDE, CODEX], ids=["claude", "codex"])
@pytest.mark.parametrize("change", sorted(INFO_FREE))
def test_a_change_without_information_gives_the_clean_files_results(tmp_path, capsys, source, change):
    """analyze's document, replay's and watch's chat spans (attributes and change events) are the clean
    file's; no problem is reported, but for records of a new type: said once, at the first (line 5)."""
    lines = lines_of(source)
    clean = write(tmp_path, "clean", b"".join(redump(json.loads(line)) for line in lines))
    changed = write(tmp_path, change, INFO_FREE[change](lines))
    said = [(5, NEW_TYPE)] if change == "new_record_types" else []
    code, doc, err = analyzed(changed, capsys)
    clean_code, clean_doc, _ = analyzed(clean, capsys)
    assert (code, err) == (0, [f"ctxscope: {changed}:{n}: {m}" for n, m in said]) and clean_code == 0
    assert same_analysis(doc) == same_analysis(clean_doc)
    assert [(p["line"], p["message"]) for p in doc["files"][0]["problems"]] == said
    calls = sum(s["calls"] for s in doc["files"][0]["sessions"])
    assert calls == {CLAUDE: 7, CODEX: 8}[source]
    assert replayed(changed) == (replayed(clean)[0], said)
    assert watched(changed, tmp_path) == (watched(clean, tmp_path)[0], said)


def test_records_written_again_by_a_resumed_claude_code_session_count_once(tmp_path, capsys):
    """Lines 9-16 written a second time (calls 1 and 2 among them): still 7 calls, the same results."""
    lines = lines_of(CLAUDE)
    clean = write(tmp_path, "clean", b"".join(lines))
    again = write(tmp_path, "again", written_again(lines))
    code, doc, err = analyzed(again, capsys)
    assert (code, err) == (0, [])
    assert same_analysis(doc) == same_analysis(analyzed(clean, capsys)[1])
    spans, problems = replayed(again)
    assert [a[Attr.REPORTED_TOKENS] for a, _ in spans] == REPORTED and problems == []
    assert spans == replayed(clean)[0]
    assert watched(again, tmp_path) == (watched(clean, tmp_path)[0], [])


# -- a bad line: one problem, the rest counted ------------------------------------------------------------


def test_a_last_line_being_written(tmp_path, capsys):
    """Line 25 (call 7) cut in half, no newline: analyze and replay count calls 1-6 and say line 25 once;
    a watch says nothing (the line may still be written), emits 6 calls, and the 7th once the line ends."""
    lines = lines_of(CLAUDE)
    partial = write(tmp_path, "partial", b"".join(lines[:-1]) + lines[-1][:len(lines[-1]) // 2])
    code, doc, err = analyzed(partial, capsys)
    assert code == 0 and len(err) == 1 and err[0].startswith(f"ctxscope: {partial}:25: truncated last line: ")
    assert [p["line"] for p in doc["files"][0]["problems"]] == [25]
    assert sum(s["calls"] for s in doc["files"][0]["sessions"]) == 6
    spans, problems = replayed(partial)
    assert [a[Attr.REPORTED_TOKENS] for a, _ in spans] == REPORTED[:6]
    assert [line for line, _ in problems] == [25] and problems[0][1].startswith("truncated last line: ")

    folder = tmp_path / "live"
    folder.mkdir()
    live = folder / "s.jsonl"
    live.write_bytes(partial.read_bytes())
    exporter = InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(exporter))
    seen: list = []
    w = Watcher([str(folder)], CallEmitter.for_provider(tracers, tokenizer="chars", stable_ids=True, hold=True),
                WatchState.load(tmp_path / "live-state.json"), from_start=True, on_problem=lambda *a: seen.append(a))
    w.scan()
    w.commit()
    assert [a[Attr.REPORTED_TOKENS] for a, _ in chat_spans(exporter)] == REPORTED[:6] and seen == []
    with open(live, "ab") as handle:
        handle.write(lines[-1][len(lines[-1]) // 2:])
    w.check(str(live))
    w.close()
    assert [a[Attr.REPORTED_TOKENS] for a, _ in chat_spans(exporter)] == REPORTED and seen == []


@pytest.mark.parametrize("source,line,calls", [(CLAUDE, 12, 7), (CLAUDE, 13, 6), (CODEX, 60, 8)],
                         ids=["claude-user-line", "claude-call-line", "codex"])
def test_a_bad_line_in_the_middle_is_one_problem_and_the_rest_counts(tmp_path, capsys, source, line, calls):
    """A line cut in half, its newline kept: one problem naming it ("invalid JSON"), and every result is
    that of the file without the line (Claude Code line 13 is call 2's response: 6 calls; line 12 a user
    prompt: 7; Codex line 60 an event: 8)."""
    lines = lines_of(source)
    bad = lines[line - 1]
    broken = write(tmp_path, "broken", b"".join(lines[:line - 1] + [bad[:len(bad) // 2] + b"\n"] + lines[line:]))
    without = write(tmp_path, "without", b"".join(lines[:line - 1] + lines[line:]))
    code, doc, err = analyzed(broken, capsys)
    assert code == 0 and len(err) == 1 and err[0].startswith(f"ctxscope: {broken}:{line}: invalid JSON: ")
    assert same_analysis(doc) == same_analysis(analyzed(without, capsys)[1])
    assert sum(s["calls"] for s in doc["files"][0]["sessions"]) == calls
    spans, problems = replayed(broken)
    assert spans == replayed(without)[0] and [n for n, _ in problems] == [line]
    spans, problems = watched(broken, tmp_path)
    assert [n for n, _ in problems] == [line]
    if source is CLAUDE:  # Codex's last call waits for a token_count the watch has not seen: 7 before the stop
        assert spans == watched(without, tmp_path)[0] and len(spans) == calls


# -- a field that changed type, and usage gone ----------------------------------------------------------


def test_usage_null_counts_every_call_without_a_reported_input(tmp_path, capsys):
    """``message.usage: null`` on every response: still 7 calls, none with a reported input, each span
    saying usage_missing; no traceback, no problem."""
    out = []
    for line in lines_of(CLAUDE):
        record = json.loads(line)
        if isinstance(record.get("message"), dict) and "usage" in record["message"]:
            record["message"]["usage"] = None
        out.append(redump(record))
    path = write(tmp_path, "no-usage", b"".join(out))
    code, doc, err = analyzed(path, capsys)
    assert (code, err) == (0, [])
    assert sum(s["calls"] for s in doc["files"][0]["sessions"]) == 7
    spans, problems = replayed(path)
    assert problems == [] and len(spans) == 7
    assert all(Attr.REPORTED_TOKENS not in a and a[Attr.USAGE_MISSING] is True for a, _ in spans)


def test_a_codex_token_count_with_null_info_is_a_call_without_usage(tmp_path, capsys):
    """Call 2's token_count with ``info: null``: 8 calls, now none with a reported input."""
    out = []
    for line in lines_of(CODEX):
        record = json.loads(line)
        if isinstance(record.get("payload"), dict) and record["payload"].get("type") == "token_count":
            record["payload"]["info"] = None
        out.append(redump(record))
    path = write(tmp_path, "no-info", b"".join(out))
    code, doc, err = analyzed(path, capsys)
    assert (code, err) == (0, [])
    spans, problems = replayed(path)
    assert problems == [] and len(spans) == 8
    assert all(Attr.REPORTED_TOKENS not in a for a, _ in spans)


# -- files with nothing to read -------------------------------------------------------------------------


@pytest.mark.parametrize("data,message", [
    (b"", "empty file: no transcript records"),
    (b'{"type":"zz_future_record","uuid":"a"}\n{"type":"zz_future_record","uuid":"b"}\n',
     "unrecognised transcript format (first record has type 'zz_future_record'); "
     "pass --format claude-code/codex/messages"),
], ids=["empty", "only-unknown-records"])
def test_a_file_with_no_transcript_is_one_line(tmp_path, capsys, data, message):
    """analyze exits 1 with one line naming the file (line 1 for an unknown format) and no traceback;
    replay reports the same problem and counts nothing; a watch waits and says nothing (records may come)."""
    path = write(tmp_path, "nothing", data)
    code, doc, err = analyzed(path, capsys)
    where = f"{path}:1" if data else str(path)
    assert code == 1 and err == [f"ctxscope: {where}: {message}", f"ctxscope: no usable calls in {path}"]
    assert "Traceback" not in "\n".join(err)
    spans, problems = replayed(path)
    assert spans == [] and [m for _, m in problems] == [message]
    assert watched(path, tmp_path) == ([], [])


# -- the long real sessions -----------------------------------------------------------------------------------


@requires_corpus
def test_a_long_claude_code_2_1_39_session_with_a_bom_crlf_and_a_line_being_written(tmp_path, capsys):
    """spotter's 258c7280 session (1,863 lines, 152 calls, an auto-compaction): BOM, CRLF, records of an
    unknown type and the last line half written give the clean file without its last line: 152 calls
    (line 1863 is not a call); the new type (line 1863) and the half line (1864) said once each."""
    lines = lines_of(SPOTTER)
    changed = write(tmp_path, "spotter", b"\xef\xbb\xbf" + crlf(lines[:-1])
                    + b'{"type":"zz_future_record"}\r\n' + lines[-1][:len(lines[-1]) // 2])
    clean = write(tmp_path, "clean", b"".join(lines[:-1]))
    code, doc, err = analyzed(changed, capsys)
    assert code == 0 and len(err) == 2 and err[0] == f"ctxscope: {changed}:1863: {NEW_TYPE}"
    assert err[1].startswith(f"ctxscope: {changed}:1864: truncated last line: ")
    assert same_analysis(doc) == same_analysis(analyzed(clean, capsys)[1])
    assert sum(s["calls"] for s in doc["files"][0]["sessions"]) == 152
    spans, problems = replayed(changed)
    assert spans == replayed(clean)[0] and [n for n, _ in problems] == [1863, 1864]


def test_replay_of_a_changed_file_into_a_real_receiver(tmp_path):
    """``ctxscope replay`` (a subprocess, OTLP/gRPC into the tests' sink) of the Claude Code fixture with a BOM,
    CRLF, new record types and its last line half written: exit 0, the two lines said (the new type at line
    5; the half line at 31, after 24 lines and the 6 records added after lines 4, 8, ... 24), no
    traceback, and the chat spans of the clean file without its last line: 6 calls, REPORTED[:6]."""
    import os
    import subprocess
    import sys

    pytest.importorskip("oteltest.sink")
    from _otlp_sink import Receiver, attrs

    lines = lines_of(CLAUDE)
    changed = write(tmp_path, "changed", b"\xef\xbb\xbf" + new_record_types(lines[:-1]).replace(b"\n", b"\r\n")
                    + lines[-1][:len(lines[-1]) // 2])
    clean = write(tmp_path, "clean", b"".join(lines[:-1]))

    def replay(path: Path) -> tuple[subprocess.CompletedProcess, list[dict]]:
        with Receiver() as receiver:
            env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                   "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_METRICS_EXPORTER": "none",
                   "CTXSCOPE_DATA_DIR": str(tmp_path / "data")}
            done = subprocess.run([sys.executable, "-c", "from ctxscope.cli import run; run()", "replay",
                                   "--tokenizer", "chars", str(path)], env=env, capture_output=True, text=True,
                                  timeout=120)
            spans = [attrs(s.attributes) for s in receiver.handler.spans() if s.name.startswith("chat")]
        return done, spans

    done, spans = replay(changed)
    assert done.returncode == 0 and "Traceback" not in done.stderr
    said = [line for line in done.stderr.splitlines() if line.startswith(f"ctxscope: {changed}:")]
    assert said[0] == f"ctxscope: {changed}:5: {NEW_TYPE}" and len(said) == 2
    assert said[1].startswith(f"ctxscope: {changed}:31: truncated last line: ")
    assert [a[Attr.REPORTED_TOKENS] for a in spans] == REPORTED[:6]
    assert spans == replay(clean)[1]
