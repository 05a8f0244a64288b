"""ctxscope's OTLP span encoding writes the SDK encoder's bytes, byte for byte, and leaves it what it refuses."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.util import BoundedList
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from ctxscope.telemetry.otlp_encoding import SpanEncoder, UnencodableError

TRACE = 0x0AF7651916CD43DD8448EB211C80319C
SCOPE = InstrumentationScope("ctxscope", "1.2.3", "https://schema/1", {"scope.key": "v"})
RESOURCE = Resource({"service.name": "svc", "n": 3}, "https://schema/resource")

# Every kind of attribute value the SDK writes: its AnyValue choice, at and around each edge.
EVERY_VALUE = {
    "s": "text", "s.empty": "", "s.unicode": "é✓ 😀", "t": True, "f": False,
    "i0": 0, "i.small": 7, "i.byte": 127, "i.two": 128, "i.big": 5_000_000, "i.neg": -1, "i.neg.small": -4095,
    "i.max": (1 << 63) - 1, "i.min": -(1 << 63), "d": 1.5, "d0": 0.0, "d.neg": -2.25e-300,
    "b": b"\x00\xff", "b.empty": b"", "a.s": ("x", "y"), "a.i": (1, -2, 1 << 40), "a.mixed": (True, 0.5, b"z"),
    "a.empty": (), "none": None, "map": {"k": 1, "nested": {"deep": "v"}}, "list": [1, 2],
}


def context(span_id: int, remote: bool = False, state: TraceState | None = None) -> SpanContext:
    return SpanContext(TRACE, span_id, remote, TraceFlags(TraceFlags.SAMPLED), state)


def span(name: str, span_id: int, **kwargs: object) -> ReadableSpan:
    options: dict[str, object] = {"resource": RESOURCE, "instrumentation_scope": SCOPE, "start_time": 10,
                                  "end_time": 20, "kind": SpanKind.CLIENT}
    options.update(kwargs)
    options.setdefault("context", context(span_id))
    return ReadableSpan(name, **options)  # type: ignore[arg-type]


def sdk_bytes(spans: list[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializePartialToString()


def test_every_kind_of_value_and_field_is_the_sdks_bytes():
    """Attributes of every type, events, links, status, flags, trace state, parents local and remote."""
    spans = [
        span("chat m", 1, attributes=EVERY_VALUE,
             events=[Event("llm.context.change", {"id": "a", "n": 12_345}, timestamp=15), Event("bare", None, 16)],
             links=[Link(context(9, remote=True), {"why": "link"})],
             status=Status(StatusCode.ERROR, "TimeoutError")),
        span("marker", 2, parent=context(1), kind=SpanKind.INTERNAL, status=Status(StatusCode.OK)),
        span("remote child", 3, parent=context(8, remote=True), kind=SpanKind.SERVER,
             attributes={"s": "text", "i.big": 5_000_000}),
        span("stateful", 4, kind=SpanKind.PRODUCER, start_time=0, end_time=None,
             context=context(4, state=TraceState([("vendor", "v1"), ("other", "x")]))),
        span("", 5, kind=SpanKind.CONSUMER, attributes={}),
    ]
    assert SpanEncoder().encode(spans) == sdk_bytes(spans)


def test_spans_of_two_resources_and_scopes_group_as_the_sdk_groups_them():
    """Resource then scope, in order of first appearance; an equal resource object joins its group."""
    other_scope = InstrumentationScope("other")
    spans = [span("a", 1), span("b", 2, instrumentation_scope=other_scope),
             span("c", 3, resource=Resource({"service.name": "svc2"})),
             span("d", 4, resource=Resource({"service.name": "svc", "n": 3}, "https://schema/resource")),
             span("e", 5, instrumentation_scope=None)]
    assert SpanEncoder().encode(spans) == sdk_bytes(spans)


def test_a_cached_attribute_is_written_with_its_own_fields_tag():
    """The same key and value on a span, its event and its link: each under its own field number."""
    same = {"k": "v", "n": 3}
    spans = [span("a", 1, attributes=same, events=[Event("e", same, 11)], links=[Link(context(7), same)])] * 3
    encoder = SpanEncoder(cache_limit=2)  # small: the cache also starts again mid-batch
    assert encoder.encode(spans) == sdk_bytes(spans)
    assert encoder.encode(spans) == sdk_bytes(spans)


def test_counts_and_long_strings_that_repeat_or_change_are_the_sdks_bytes():
    """A count and an id kept once they repeat their key's last value, then changed, at every varint size."""
    conversation = "3464640e-efef-4bce-b4c3-b9ac99b74908"
    spans = [span("chat m", n, attributes={"conversation": conversation, "tokens": tokens, "long": "x" * 200},
                  events=[Event("llm.context.change", {"id": f"result:toolu_{n:030d}", "chars": tokens}, 15)])
             for n, tokens in enumerate([4096, 4096, 4096, 16_384, 2_097_152, 268_435_456, 1 << 62, 4096], 1)]
    encoder = SpanEncoder(cache_limit=3)  # small: both caches also start again mid-batch
    assert encoder.encode(spans) == sdk_bytes(spans)
    assert encoder.encode(spans[::-1]) == sdk_bytes(spans[::-1])


def test_bools_and_floats_kept_apart_from_equal_integers_are_the_sdks_bytes():
    """True == 1 == 1.0 and 0.0 == -0.0: one key taking each in turn is written as its own type every time."""
    values = [1, True, 1.0, True, 1, 1.0, 0.0, -0.0, False, 0, 0.0, -0.0, float("nan"), float("nan"), 2.5, 2.5]
    spans = [span("chat m", n, attributes={"k": value}, events=[Event("e", {"k": value}, 15)])
             for n, value in enumerate(values, 1)]
    for encoder in (SpanEncoder(), SpanEncoder(cache_limit=2)):
        assert encoder.encode(spans) == sdk_bytes(spans)
        assert encoder.encode(spans[::-1]) == sdk_bytes(spans[::-1])


def test_spans_built_as_replay_builds_them_and_bounded_ones_that_dropped_are_the_sdks_bytes():
    """Plain containers (a dict, a list of events, no links) drop nothing; bounded ones write their drops."""
    bounded = BoundedAttributes(2, {"a": 1, "b": 2, "c": 3})
    spans = [span("chat m", 1, attributes={"a": 1}, events=[Event("e", {"id": "x"}, 15), Event("e", {}, 15)],
                  links=()),
             span("capture-start", 2, parent=context(1), kind=SpanKind.INTERNAL, attributes={}, events=[],
                  links=(), status=Status(StatusCode.UNSET)),
             span("bounded", 3, attributes=bounded, events=BoundedList.from_seq(1, [Event("e", bounded, 15)] * 2),
                  links=BoundedList.from_seq(0, [Link(context(7))]))]
    assert SpanEncoder().encode(spans) == sdk_bytes(spans)


def test_real_spans_of_a_tracer_are_the_sdks_bytes():
    """Spans the SDK itself built (BoundedAttributes, events added, ended), as the batch processor hands them."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=RESOURCE)
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("ctxscope", "0.1")
    with tracer.start_as_current_span("chat m", kind=SpanKind.CLIENT, attributes={"a": 1, "b": "x"}) as parent:
        parent.add_event("llm.context.change", {"id": "i", "delta": 4096, "share": 0.25})
        with tracer.start_as_current_span("capture-start", attributes={"c": (1, 2)}):
            pass
    spans = list(memory.get_finished_spans())
    assert len(spans) == 2
    assert SpanEncoder().encode(spans) == sdk_bytes(spans)


@pytest.mark.parametrize("value", [1 << 63, -(1 << 63) - 1, "\udc80", object()], ids=["over", "under", "surrogate",
                                                                                   "object"])
def test_a_value_the_sdk_would_skip_is_left_to_the_sdks_encoder(value, caplog):
    """encode raises UnencodableError; encode_or_none says None (the exporter then runs the SDK's encoder)."""
    spans = [span("a", 1, attributes={"ok": 1, "bad": value})]
    with pytest.raises(UnencodableError):
        SpanEncoder().encode(spans)
    with caplog.at_level(logging.DEBUG, logger="ctxscope.telemetry.otlp_encoding"):
        assert SpanEncoder().encode_or_none(spans) is None
    assert "left to the SDK's encoder" in caplog.text


def test_http_exporter_sends_the_sdks_bytes_and_falls_back_for_what_it_refuses(monkeypatch):
    """ctxscope's HTTP exporter posts the SDK's bytes; a refused batch goes through the SDK's export."""
    from ctxscope.telemetry.http_span_exporter import HttpSpanExporter

    exporter = HttpSpanExporter(endpoint="http://127.0.0.1:9/v1/traces")
    posted: list[bytes] = []

    class Sent:
        success, error, status_code = True, None, 200

    monkeypatch.setattr(exporter._client, "export", lambda data, *a, **k: posted.append(data) or Sent())
    good = [span("a", 1, attributes={"x": 1})]
    bad = [span("b", 2, attributes={"bad": 1 << 64, "kept": "k"})]
    assert exporter.export(good) == SpanExportResult.SUCCESS
    assert exporter.export(bad) == SpanExportResult.SUCCESS
    # The SDK's encoder skips the bad attribute (and logs it): the second request is its bytes.
    assert posted == [sdk_bytes(good), sdk_bytes(bad)]
    assert b"kept" in posted[1] and b"bad" not in posted[1]


def _edge_values() -> list[object]:
    """Values at the encoder's edges: each varint size's first and last (and their negatives), True/1/1.0,
    0.0/-0.0/NaN/inf, strings and events whose lengths cross a varint size, arrays mixing the lookalikes."""
    ints = [0, 1, -1, (1 << 63) - 1, -(1 << 63)]
    for bits in range(7, 63, 7):
        ints += [(1 << bits) - 1, 1 << bits, (1 << bits) + 1, -(1 << bits)]
    floats = [0.0, -0.0, 1.0, -1.0, float("nan"), float("inf"), float("-inf"), 5e-324, 2.0 ** 53, 0.1]
    strings = ["", "a", "x" * 127, "x" * 128, "é", "x" * 16_383]
    return [*ints, *floats, True, False, *strings, (1, 2), (True, 1.0), ("a",)]


@pytest.mark.parametrize("cache_limit", [2, 3, 1000])
def test_random_batches_of_edge_values_are_the_sdks_bytes(cache_limit):
    """One encoder over many batches (its caches and key states carried, and cleared when small), keys
    taking values of every kind in turn: each batch is the SDK's bytes."""
    import random

    rng = random.Random(cache_limit)
    pool = _edge_values()
    encoder = SpanEncoder(cache_limit=cache_limit)
    for _ in range(60):
        spans = [span("chat m", n, attributes={rng.choice("kKab"): rng.choice(pool) for _ in range(rng.randint(0, 5))},
                      events=[Event("e" + "p" * rng.choice([0, 100, 120, 16_300, 16_400]),
                                    {rng.choice("kq"): rng.choice(pool) for _ in range(rng.randint(0, 3))}, 15)])
                 for n in range(1, rng.randint(2, 6))]
        assert encoder.encode(spans) == sdk_bytes(spans)
