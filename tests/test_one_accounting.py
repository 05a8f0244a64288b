"""One call's accounting on every path: the tracker, fidelity and the foreign-span processor agree with ``inspect``.

Each call site used to put a call through the ledger itself (and they had
drifted: one looked the model's window up, another not; one knew
``usage.iterations``, another not). Now they go through
:mod:`ctxscope.core.pipeline`; these tests hand the same recorded call to two
sites and compare what they say: estimate, window, limits, reported input.
The tracker is also taken through growing sessions, call by call, so its
incremental entry points (extractor, framing cache, ledger) are held to what
a count from nothing says of each body.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from _paths import DATA
from ctxscope.core import apis
from ctxscope.core import fidelity
from ctxscope.cli.inspect import Loaded, inspect
from ctxscope.core.tokens import counter_for


def _recordings() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(DATA.glob("requests_*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            out.append((f"{path.name}:{number}", json.loads(line)))
    return out


RECORDINGS = _recordings()


def _accounting(annotation: Any) -> dict[str, Any]:
    return {"estimated": annotation.estimated_tokens, "reported": annotation.reported_tokens,
            "window": annotation.window_tokens, "effective": annotation.effective_window_tokens,
            "threshold": annotation.compact_threshold_tokens, "model": annotation.model,
            "categories": dict(annotation.categories)}


def test_the_recordings_cover_both_providers_and_a_window():
    """The slices hold calls of both providers, with usage, and of a model whose window is known."""
    apis_seen = {fidelity.detect_api(r["request"], r.get("uri", "")) for _, r in RECORDINGS}
    assert {apis.API_OPENAI_CHAT, apis.API_ANTHROPIC} <= apis_seen
    windows = [inspect(Loaded(name, None, r["request"], r.get("response")), tokenizer="chars")[1]
               .annotation.window_tokens for name, r in RECORDINGS]
    assert any(w for w in windows)


@pytest.mark.parametrize("name,record", RECORDINGS, ids=[n for n, _ in RECORDINGS])
def test_fidelity_accounts_a_call_as_inspect_does(name: str, record: dict[str, Any]):
    """Same body, same response: fidelity's framed estimate, window, limits and reported input are inspect's."""
    body, response = record["request"], record.get("response")
    api = fidelity.detect_api(body, record.get("uri", ""))
    model = str(body.get("model") or "unknown")
    reported = fidelity.reported_input(response, api)
    counter = counter_for(model, "chars")
    est = fidelity.estimate(body, api, counter, model, reported)
    _, snapshot = inspect(Loaded(name, None, body, response), tokenizer="chars")
    assert est.snapshot is not None
    assert _accounting(est.snapshot.annotation) == _accounting(snapshot.annotation)
    assert est.framed == snapshot.annotation.estimated_tokens


def test_fidelity_reports_the_first_sampling_of_iterations_as_inspect_does(tmp_path: Path):
    """An Anthropic usage with iterations: both sites take the first ``message`` sampling's input (40)."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    usage = {"input_tokens": 90, "cache_read_input_tokens": 10, "output_tokens": 5, "iterations": [
        {"type": "message", "input_tokens": 30, "cache_read_input_tokens": 10, "output_tokens": 2},
        {"type": "message", "input_tokens": 60, "output_tokens": 3}]}
    response = {"type": "message", "usage": usage, "content": []}
    reported = fidelity.reported_input(response, apis.API_ANTHROPIC)
    est = fidelity.estimate(body, apis.API_ANTHROPIC, counter_for(body["model"], "chars"), body["model"], reported)
    _, snapshot = inspect(Loaded("x", None, body, response), tokenizer="chars")
    assert est.snapshot is not None
    assert est.snapshot.annotation.reported_tokens == snapshot.annotation.reported_tokens == 40
    assert est.snapshot.annotation.window_tokens == snapshot.annotation.window_tokens == 200_000


def test_the_foreign_span_processor_accounts_a_call_as_inspect_does():
    """OpenLLMetry's recorded spans: each companion span's estimate, window, limits and reported input
    are what inspect says of the request the span describes (the processor's tracker is the live path's)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    from ctxscope.interop import ForeignSpanProcessor, parse_attributes
    from ctxscope.schema import Attr
    from ctxscope.telemetry.tracker import Tracker

    recording = json.loads((DATA / "openllmetry-0.52.6-chat-spans.json").read_text())
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(ForeignSpanProcessor(provider, tracker=Tracker(tokenizer="chars")))
    expected = []
    for span in recording["spans"]:
        provider.get_tracer(span["scope"]).start_span(span["name"], kind=SpanKind.CLIENT,
                                                      attributes=span["attributes"]).end()
        call = parse_attributes(span["attributes"])
        assert call is not None and call.body is not None
        _, snapshot = inspect(Loaded(span["name"], None, call.body), tokenizer="chars",
                              reported=call.usage.reported_input)
        ann = snapshot.annotation
        expected.append((ann.estimated_tokens, ann.reported_tokens, ann.window_tokens,
                         ann.effective_window_tokens, ann.compact_threshold_tokens))
    companions = [s for s in exporter.get_finished_spans() if s.name.startswith("ctxscope.context")]
    got = [(c.attributes[Attr.ESTIMATED_TOKENS], c.attributes[Attr.REPORTED_TOKENS], c.attributes[Attr.WINDOW_TOKENS],
            c.attributes.get(Attr.EFFECTIVE_WINDOW_TOKENS), c.attributes.get(Attr.COMPACT_THRESHOLD_TOKENS))
           for c in companions]
    provider.shutdown()
    assert len(got) == 2 and got == expected


def _tracker_call(tracker: Any, body: dict[str, Any], api: str, response: Any = None,
                  session_id: str | None = None) -> Any:
    """One call through the live tracker as the instrumentors make it: request, then the response's usage."""
    wire = apis.get(api)
    call = tracker.observe_request(body, api, provider=wire.provider, session_id=session_id)
    usage = wire.usage(wire.response_usage(response)) if response is not None else None
    return tracker.observe_response(call, usage)


@pytest.mark.parametrize("name,record", RECORDINGS, ids=[n for n, _ in RECORDINGS])
def test_the_tracker_accounts_a_call_as_inspect_does(name: str, record: dict[str, Any]):
    """Same body, same response: the live tracker's estimate, window, limits and reported input are inspect's."""
    from ctxscope.telemetry.tracker import Tracker

    body, response = record["request"], record.get("response")
    api = fidelity.detect_api(body, record.get("uri", ""))
    observation = _tracker_call(Tracker(tokenizer="chars"), body, api, response)
    _, snapshot = inspect(Loaded(name, None, body, response), tokenizer="chars")
    assert _accounting(observation.snapshot.annotation) == _accounting(snapshot.annotation)


def _growing(record: dict[str, Any], api: str) -> list[dict[str, Any]]:
    """The recording's conversation as the calls of an agent that sent it one message at a time."""
    field_name = apis.get(api).conversation_field
    messages = record["request"].get(field_name)
    if not isinstance(messages, list) or len(messages) < 2:
        return []
    return [{**record["request"], field_name: messages[:n]} for n in range(1, len(messages) + 1)]


GROWING = [(name, record) for name, record in RECORDINGS
           if _growing(record, fidelity.detect_api(record["request"], record.get("uri", "")))]


def test_the_recordings_hold_conversations_to_grow():
    assert len(GROWING) >= 10


@pytest.mark.parametrize("name,record", GROWING, ids=[n for n, _ in GROWING])
def test_the_trackers_incremental_accounting_of_a_growing_session_is_inspects_of_each_body(
        name: str, record: dict[str, Any]):
    """One session growing call by call (the tracker reuses the items, framing and counts of the earlier
    calls) says of each call what inspect, counting that body from nothing, says of it."""
    from ctxscope.telemetry.tracker import Tracker

    api = fidelity.detect_api(record["request"], record.get("uri", ""))
    tracker = Tracker(tokenizer="chars")
    for number, body in enumerate(_growing(record, api), 1):
        observation = _tracker_call(tracker, body, api, session_id="growing")
        _, snapshot = inspect(Loaded(f"{name} call {number}", None, body), tokenizer="chars")
        assert observation.session_id == "growing"
        assert _accounting(observation.snapshot.annotation) == _accounting(snapshot.annotation), number


def test_the_tracker_reports_the_first_sampling_of_iterations_as_inspect_does():
    """An Anthropic usage with iterations: the tracker takes the first ``message`` sampling's input (40), as inspect."""
    from ctxscope.telemetry.tracker import Tracker

    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    usage = {"input_tokens": 90, "cache_read_input_tokens": 10, "output_tokens": 5, "iterations": [
        {"type": "message", "input_tokens": 30, "cache_read_input_tokens": 10, "output_tokens": 2},
        {"type": "message", "input_tokens": 60, "output_tokens": 3}]}
    response = {"type": "message", "usage": usage, "content": []}
    observation = _tracker_call(Tracker(tokenizer="chars"), body, apis.API_ANTHROPIC, response)
    _, snapshot = inspect(Loaded("x", None, body, response), tokenizer="chars")
    assert observation.snapshot.annotation.reported_tokens == snapshot.annotation.reported_tokens == 40
    assert observation.snapshot.annotation.window_tokens == snapshot.annotation.window_tokens == 200_000
    assert _accounting(observation.snapshot.annotation) == _accounting(snapshot.annotation)
