"""The command's log lines carry ``ctxscope: `` once, whether or not the message names ctxscope itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
STAMP = "2026-02-11T10:00:00.000Z"
ONE_CALL = [
    {"type": "user", "uuid": "u0", "parentUuid": None, "sessionId": "s-prefix", "timestamp": STAMP,
     "message": {"role": "user", "content": "question"}},
    {"type": "assistant", "uuid": "a0", "parentUuid": "u0", "sessionId": "s-prefix", "timestamp": STAMP,
     "requestId": "req0", "message": {"id": "msg0", "role": "assistant", "model": "claude-sonnet-4-5",
                                      "content": [{"type": "text", "text": "answer"}],
                                      "usage": {"input_tokens": 100, "output_tokens": 1}}},
]


def _replay(transcript: Path, data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "CTXSCOPE_"))}
    env.update({"PYTHONPATH": str(SRC), "CTXSCOPE_DATA_DIR": str(data_dir)})
    return subprocess.run([sys.executable, "-c", "from ctxscope.cli import run; run()", "replay",
                           "--tokenizer", "chars", str(transcript)], env=env, capture_output=True, text=True,
                          timeout=60)


def test_a_warning_that_names_ctxscope_is_printed_with_one_prefix(tmp_path):
    """A replay into the local store whose session file ends in 26 bytes of a cut-off record: the store's
    warning (its message starts "ctxscope: ") is one line with one prefix. (Before: "ctxscope: ctxscope: ...",
    the command's log format adding its prefix to the message's own.)"""
    transcript = tmp_path / "s.jsonl"
    transcript.write_text("".join(json.dumps(line) + "\n" for line in ONE_CALL))
    first = _replay(transcript, tmp_path / "store")
    assert first.returncode == 0, first.stderr
    [session] = (tmp_path / "store" / "sessions").glob("*.jsonl")
    with session.open("ab") as f:
        f.write(b'{"session":"s1","ts":3,"pa')  # 26 bytes, no newline: a writer stopped mid-record
    again = _replay(transcript, tmp_path / "store")
    assert again.returncode == 0, again.stderr
    assert again.stderr.splitlines() == [
        f"ctxscope: {session}: dropped 26 bytes of a record its writer did not finish (stopped mid-write)",
        "replayed 1 call of 1 session to the local store (no OTLP endpoint set)"], again.stderr
