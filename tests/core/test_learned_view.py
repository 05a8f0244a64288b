"""The learned correction in the ledger's calibrated and apportioned views, `ctxscope context` and the gauges.

A call without reported usage whose request carries a learned self-calibration
correction: the views sum to estimate + correction (the processor's rule,
``calibration.calibration_target``), labelled ``learned``; the raw annotation
stays unscaled (SPEC section 5).
"""

from __future__ import annotations

import json

import pytest

from ctxscope.core.views import calibration_target
from ctxscope.cli import main
from ctxscope.instrumentation.openai import OpenAIInstrumentor
from ctxscope.core.ledger import SessionLedger
from ctxscope.schema import Attr, Category, Item
from ctxscope.telemetry.store import LocalStore
from ctxscope.testing import ProviderServer
from ctxscope.core.tokens import CharsCounter
from ctxscope.telemetry.tracker import Tracker

from _instr_support import attr, make_telemetry, metered, token_gauges

C = Category


def snapshot_with(correction: int | None, reported: int | None = None):
    """system 100 + read_file 150 + grep 50 = 300 estimated (chars/4), window 1,000."""
    ledger = SessionLedger("s", counter=CharsCounter())
    items = [Item(id="sys", category=C.SYSTEM, part="system", chars=400, text="x" * 400),
             Item(id="r1", category=C.RESULTS, part="results/read_file", chars=600, text="x" * 600),
             Item(id="r2", category=C.RESULTS, part="results/grep", chars=200, text="x" * 200)]
    snap = ledger.observe(items, model="gpt-4o", window_tokens=1000)
    snap.annotation.learned_correction_tokens = correction
    return ledger.report(snap, reported)


def test_calibration_target_rule():
    """Reported wins; else estimate + correction, never below 0; else nothing to calibrate against."""
    assert calibration_target(420, 300, 50) == 420
    assert calibration_target(None, 300, 50) == 350
    assert calibration_target(None, 300, -400) == 0
    assert calibration_target(None, 300, None) is None


def test_positive_correction_is_learned_unattributed():
    """+50: calibrated adds unattributed 50, parts keep their estimates, used 350, free 650, label learned."""
    snap = snapshot_with(50)
    assert snap.calibrated() == {C.SYSTEM: 100, C.RESULTS: 200, C.UNATTRIBUTED: 50}
    assert snap.apportioned() == {"system": 100, "results/grep": 50, "results/read_file": 150, "unattributed": 50}
    assert (snap.used, snap.free(), snap.apportioned_label) == (350, 650, "learned")
    # The raw annotation is untouched (SPEC section 5).
    assert snap.annotation.categories == {C.SYSTEM: 100, C.RESULTS: 200}
    assert snap.annotation.estimated_tokens == 300


def test_negative_correction_scales_down():
    """-60: target 240 = 300 x 0.8: system 80, results 160 (read_file 120, grep 40), unattributed 0."""
    snap = snapshot_with(-60)
    assert snap.calibrated() == {C.SYSTEM: 80, C.RESULTS: 160, C.UNATTRIBUTED: 0}
    assert snap.apportioned() == {"system": 80, "results/grep": 40, "results/read_file": 120}
    assert snap.used == 240


def test_reported_input_overrides_the_correction():
    """Once usage arrives it is the measurement (420: unattributed 120), label apportioned."""
    snap = snapshot_with(50, reported=420)
    assert snap.calibrated()[C.UNATTRIBUTED] == 120
    assert (snap.used, snap.apportioned_label) == (420, "apportioned")
    assert snapshot_with(None).apportioned_label == "estimated"


HIDDEN = 500
SYSTEM = {"role": "system", "content": "You are terse."}


@pytest.fixture
def live(tmp_path):
    """Instrumented openai SDK (chars/4, framing on), a metric reader, and a local store on the tracker."""
    with ProviderServer(overhead_tokens=HIDDEN) as server:
        tel = make_telemetry()
        tel.tracker = Tracker(tokenizer="chars")
        store = LocalStore(tmp_path)
        tel.tracker.add_listener(store.record)
        instrumentor = OpenAIInstrumentor()
        with metered(tel) as reader:
            instrumentor.instrument(tracer_provider=tel.provider, tracker=tel.tracker)
            yield tel, reader, server.openai_client()
            instrumentor.uninstrument()


def test_context_report_agrees_with_the_gauges(live, tmp_path, capsys):
    """Three calls teach +491; a stream without usage: `ctxscope context` shows 20 + 491 = 511, as the gauges do."""
    tel, reader, client = live
    for text in ("hello there", "what is in src/", "read the README file please"):
        client.chat.completions.create(model="gpt-4o", messages=[SYSTEM, {"role": "user", "content": text}])
    stream = client.chat.completions.create(
        model="gpt-4o", messages=[SYSTEM, {"role": "user", "content": "stream please"}], stream=True)
    for _ in stream:
        pass
    span = tel.calls()[-1]
    session = attr(span, Attr.SESSION_ID)
    # Estimate: system 4 + prompts 4 ("stream please") + overhead 12 = 20; no usage; correction 491.
    assert (attr(span, Attr.ESTIMATED_TOKENS), attr(span, Attr.LEARNED_CORRECTION_TOKENS)) == (20, 491)
    expected = {"system": 4, "prompts": 4, "overhead": 12, "unattributed": 491}
    assert token_gauges(reader, session) == expected
    assert main(["context", "--data-dir", str(tmp_path), "--session", session, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["latest"]["calibrated"] == expected
    assert (doc["used_tokens"], doc["reported_tokens"], doc["apportioned_label"],
            doc["learned_correction_tokens"]) == (511, None, "learned", 491)
    assert {r["part"]: r["apportioned"] for r in doc["latest"]["parts"]}["unattributed"] == 491
    assert main(["context", "--data-dir", str(tmp_path), "--session", session]) == 0
    text = capsys.readouterr().out
    assert "+491 tokens learned correction" in text and "(learned view)" in text
