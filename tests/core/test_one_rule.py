"""Each rule that used to be written in several places, and whose copies disagreed, now agrees.

Every test here failed before the rule moved to one place (the architecture
issue lists the five disagreements): the session fingerprint, the session
cap, the Anthropic reported input, and the warning for a bad setting.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from _instr_support import attr, instrumented
from ctxscope import config
from ctxscope.cli import main
from ctxscope.telemetry.setup import setup
from ctxscope.instrumentation.openai import OpenAIInstrumentor
from ctxscope.schema import Attr
from ctxscope.testing import ProviderServer
from ctxscope.telemetry.tracker import Tracker

SYSTEM = "You are a terse assistant."
QUESTION = "What is the capital of France?"


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as s:
        yield s


def test_a_body_has_one_session_id_live_and_as_a_transcript(server, monkeypatch, tmp_path: Path, capsys):
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": QUESTION}]
    with instrumented(server, monkeypatch, OpenAIInstrumentor) as tel:
        server.openai_client().chat.completions.create(model="gpt-4o", messages=messages)
        live = attr(tel.one_call(), Attr.SESSION_ID)
    assert isinstance(live, str) and live.startswith("fp-")

    body = tmp_path / "body.json"
    body.write_text(json.dumps({"model": "gpt-4o", "messages": messages}))
    assert main(["analyze", "--json", "--tokenizer", "chars", str(body)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [s["session_id"] for s in report["files"][0]["sessions"]] == [live]


def test_max_sessions_zero_is_the_default_for_tracker_and_processor(monkeypatch, caplog):
    monkeypatch.setenv(config.CTXSCOPE_MAX_SESSIONS, "0")
    telemetry = setup("t", store=False, set_global=False, instrument=False)
    try:
        assert Tracker().max_sessions == 64
        assert telemetry.processor is not None and telemetry.processor._max_sessions == 64
    finally:
        telemetry.shutdown()
    warnings = [r.getMessage() for r in caplog.records if "CTXSCOPE_MAX_SESSIONS" in r.getMessage()]
    assert warnings == ["ignoring CTXSCOPE_MAX_SESSIONS='0'; a positive whole number is needed; using 64"]


def test_anthropic_iterations_give_one_reported_input_in_inspect_and_fidelity(tmp_path: Path, capsys):
    # A server-side compaction: the compaction sampling read the context before it was compacted (90),
    # the message sampling the context the model saw (30 uncached + 10 cache reads = 40); the top-level
    # fields sum the samplings (120 + 10).
    usage = {"input_tokens": 120, "output_tokens": 7, "cache_read_input_tokens": 10,
             "iterations": [{"type": "compaction", "input_tokens": 90, "output_tokens": 2},
                            {"type": "message", "input_tokens": 30, "cache_read_input_tokens": 10,
                             "output_tokens": 5}]}
    record = {"request": {"model": "claude-sonnet-4-5", "max_tokens": 100, "system": "Be brief.",
                          "messages": [{"role": "user", "content": "What is 2+2?"}]},
              "response": {"usage": usage}}
    path = tmp_path / "rec.jsonl"
    path.write_text(json.dumps(record) + "\n")

    assert main(["inspect", "--json", "--tokenizer", "chars", f"{path}:1"]) == 0
    inspected = json.loads(capsys.readouterr().out)["annotation"]
    assert inspected["reported_tokens"] == 40

    # fidelity compares the framed estimate with the same 40: |13 - 40| / 40 = 67.5%.
    assert inspected["estimated_tokens"] == 13
    assert main(["fidelity", "--json", "--basis", "chars", str(path)]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows[0]["figures"]["chars/framed"]["median_abs_error_pct"] == 67.5


def test_a_bad_setting_is_one_line_without_a_doubled_prefix(tmp_path: Path):
    script = (
        "import logging; logging.basicConfig(format='ctxscope: %(message)s')\n"
        "from ctxscope.telemetry.setup import setup\nfrom ctxscope.telemetry.tracker import Tracker\n"
        "t = setup('x', store=False, set_global=False, instrument=False); Tracker(); Tracker(); t.shutdown()\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env={"CTXSCOPE_MAX_SESSIONS": "many", "PATH": "/usr/bin:/bin",
                               "HOME": str(tmp_path), "OTEL_TRACES_EXPORTER": "none",
                               "OTEL_METRICS_EXPORTER": "none"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [
        "ctxscope: ignoring CTXSCOPE_MAX_SESSIONS='many'; a positive whole number is needed; using 64"]
