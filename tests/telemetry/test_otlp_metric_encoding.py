"""ctxscope's OTLP metric encoding writes the SDK encoder's bytes, byte for byte, and leaves it what it refuses."""

from __future__ import annotations

import logging
import time

import pytest
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Buckets,
    ExponentialHistogram,
    ExponentialHistogramDataPoint,
    Gauge,
    Histogram,
    HistogramDataPoint,
    InMemoryMetricReader,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.metrics._internal.exemplar import Exemplar
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from ctxscope.schema import Annotation, Attr, Category, Coverage, GenAI, Stage, WasteKind
from ctxscope.telemetry.otlp_encoding import UnencodableError
from ctxscope.telemetry.otlp_metric_encoding import MetricEncoder
from ctxscope.telemetry.processor import ContextSpanProcessor
from ctxscope.telemetry.views import gauge_views

CUMULATIVE, DELTA = AggregationTemporality.CUMULATIVE, AggregationTemporality.DELTA
SCOPE = InstrumentationScope("ctxscope", "1.2.3", "https://schema/1", {"scope.key": "v"})
RESOURCE = Resource({"service.name": "svc", "n": 3}, "https://schema/resource")
T0, T1 = 1_700_000_000_000_000_000, 1_700_000_060_000_000_000


def number(value: object, attributes: dict | None = None, exemplars: list | None = None,
           start: int = T0) -> NumberDataPoint:
    return NumberDataPoint(attributes or {}, start, T1, value, exemplars or [])  # type: ignore[arg-type]


def metric(name: str, data: object, description: str = "", unit: str = "") -> Metric:
    return Metric(name, description, unit, data)  # type: ignore[arg-type]


def request(*metrics: Metric, resource: Resource = RESOURCE, scope: InstrumentationScope = SCOPE) -> MetricsData:
    return MetricsData([ResourceMetrics(resource, [ScopeMetrics(scope, list(metrics), scope.schema_url)],
                                        resource.schema_url)])


def sdk_bytes(data: MetricsData) -> bytes:
    return encode_metrics(data).SerializeToString()


TRACED = Exemplar({"filtered": "x"}, 3.5, T1 - 5, span_id=0x00F067AA0BA902B7,
                  trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736)
UNTRACED = Exemplar({}, 7, T1 - 9)
ZERO_IDS = Exemplar({"k": 1}, 0, T1 - 1, span_id=0, trace_id=0)


def test_every_kind_of_point_and_value_is_the_sdks_bytes():
    """Gauges and sums of ints, floats, bools and int64's edges; histograms with every field; exemplars."""
    attributes = {"llm.context.category": "system", "llm.context.session.id": "s1", "n": 4096, "f": 0.5}
    data = request(
        metric("g.int", Gauge([number(0, attributes), number(-1), number(1 << 62), number((1 << 63) - 1),
                               number(-(1 << 63)), number(12_345, {"k": "v"})]), "a gauge", "{token}"),
        metric("g.float", Gauge([number(0.0), number(-2.25e-300), number(1.5, attributes, [TRACED, UNTRACED])])),
        metric("s.cumulative", Sum([number(3, {"trigger": "auto"}, [ZERO_IDS]), number(0.25, start=0)],
                                   CUMULATIVE, True), unit="{compaction}"),
        metric("s.delta", Sum([number(-4, {"k": "v"})], DELTA, False)),
        metric("h", Histogram([
            HistogramDataPoint({"llm.context.category": "results"}, T0, T1, 3, 4410.0, [1, 0, 2], [1, 4.5],
                               1, 4096, [TRACED]),
            HistogramDataPoint({}, 0, T1, 0, 0, [], [], 0, 0),
            HistogramDataPoint({"k": "v"}, T0, T1, 1, 7, [0, 1], [16], -3.0, float("inf")),
        ], DELTA)),
        metric("g.empty", Gauge([])), metric("s.empty", Sum([], CUMULATIVE, True)),
        metric("h.empty", Histogram([], CUMULATIVE)),
    )
    assert MetricEncoder().encode(data) == sdk_bytes(data)


def test_resources_and_scopes_group_as_the_sdk_groups_them():
    """Several resources and scopes; an equal resource, and an equal scope, replace the earlier entry's metrics."""
    first = metric("a", Gauge([number(1)]))
    second = metric("b", Gauge([number(2)]))
    other = InstrumentationScope("other")
    data = MetricsData([
        ResourceMetrics(RESOURCE, [ScopeMetrics(SCOPE, [first], SCOPE.schema_url),
                                   ScopeMetrics(other, [second], ""),
                                   ScopeMetrics(InstrumentationScope("ctxscope", "1.2.3", "https://schema/1",
                                                                     {"scope.key": "v"}), [second], "")],
                        RESOURCE.schema_url),
        ResourceMetrics(Resource({"service.name": "svc2"}), [ScopeMetrics(other, [first], "")], ""),
        ResourceMetrics(Resource({}), [ScopeMetrics(InstrumentationScope(""), [first], "")], ""),
        ResourceMetrics(Resource({"service.name": "svc", "n": 3}, "https://schema/resource"),
                        [ScopeMetrics(other, [first, second], "")], "https://schema/resource"),
    ])
    assert MetricEncoder().encode(data) == sdk_bytes(data)


def test_a_points_attributes_are_kept_by_identity_and_checked_against_a_copy():
    """The same attributes object written again from the cache; changed in place, it is written anew."""
    attributes = {"llm.context.session.id": "s1", "llm.context.category": "tools"}
    encoder = MetricEncoder(cache_limit=2)  # small: the cache also starts again
    for value in (10, 11, 12.5):
        data = request(metric("g", Gauge([number(value, attributes), number(1, {"a": "b"}),
                                          number(2, {"c": "d"})])))
        assert encoder.encode(data) == sdk_bytes(data)
    attributes["llm.context.category"] = "results"  # an application may change a dict it handed the SDK
    data = request(metric("g", Gauge([number(13, attributes)])))
    assert encoder.encode(data) == sdk_bytes(data)
    assert b"results" in encoder.encode(data) and b"tools" not in encoder.encode(data)


@pytest.mark.parametrize("data", [
    request(metric("exp", ExponentialHistogram([ExponentialHistogramDataPoint(
        {}, T0, T1, 1, 2.0, 1, 0, Buckets(0, [1]), Buckets(0, []), 0, 2.0, 2.0)], CUMULATIVE))),
    request(metric("big", Gauge([number(1 << 63)]))),
    request(metric("small", Sum([number(-(1 << 63) - 1)], CUMULATIVE, True))),
    request(metric("exemplar", Gauge([number(1, exemplars=[Exemplar({}, "7", T1)])]))),  # type: ignore[arg-type]
    request(metric("value", Gauge([number("7")]))),
    request(metric("bool", Gauge([number(True)]))),
    request(metric("bool-exemplar", Sum([number(1, exemplars=[Exemplar({}, False, T1)])], DELTA, True))),
], ids=["exponential", "over-int64", "under-int64", "exemplar-value", "point-value", "bool", "bool-exemplar"])
def test_what_this_encoder_does_not_write_is_left_to_the_sdks_encoder(data, caplog):
    """encode raises UnencodableError; encode_or_none says None (the exporter then runs the SDK's encoder)."""
    with pytest.raises(UnencodableError):
        MetricEncoder().encode(data)
    with caplog.at_level(logging.DEBUG, logger="ctxscope.telemetry.otlp_metric_encoding"):
        assert MetricEncoder().encode_or_none(data) is None
    assert "left to the SDK's encoder" in caplog.text


def collections_of_live_sessions(rounds: int, views: list) -> list[MetricsData]:
    """What a periodic reader collects from ctxscope's processor: 8 sessions, one calling between collections."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], views=views, shutdown_on_exit=False)
    processor = ContextSpanProcessor(provider, max_sessions=8)
    categories = {c: 1000 + 100 * i for i, c in enumerate(list(Category)[:8])}

    def call(session: int, n: int) -> None:
        counts = dict(categories)
        counts[Category.RESULTS] += 400 * n
        ann = Annotation(stage=Stage.REQUEST_INPUT, basis="chars/4", coverage=Coverage.COMPLETE, baseline=n == 0,
                         categories=counts, estimated_tokens=sum(counts.values()),
                         reported_tokens=sum(counts.values()) + 500, window_tokens=200000, model="gpt-4o",
                         waste={WasteKind.DUPLICATE: 10 * n})
        attrs = {Attr.SESSION_ID: f"s{session}", GenAI.REQUEST_MODEL: "gpt-4o", GenAI.PROVIDER_NAME: "openai",
                 **ann.to_attributes()}
        processor.observe_call(attrs, time.time_ns())

    out = []
    for s in range(8):
        call(s, 0)
    for r in range(rounds):
        call(r % 8, r + 1)
        data = reader.get_metrics_data()
        assert data is not None
        out.append(data)
    provider.shutdown()
    return out


def test_collections_of_live_sessions_are_the_sdks_bytes_each_time(gauge_views_or_none):
    """Real collections, one encoder across them: the cached attributes give the SDK's bytes every time."""
    encoder = MetricEncoder()
    collected = collections_of_live_sessions(4, gauge_views_or_none)
    points = sum(len(m.data.data_points) for rm in collected[-1].resource_metrics for sm in rm.scope_metrics
                 for m in sm.metrics)
    assert points >= 8 * 12  # nine token series, a limit, reported, utilisation, a waste kind a session
    for data in collected:
        assert encoder.encode(data) == sdk_bytes(data)


@pytest.mark.parametrize("protocol", ["grpc", "grpc-parsed", "http/protobuf"])
@pytest.mark.parametrize("batch_size", [None, 2])
def test_the_exporters_setup_builds_send_what_the_sdks_own_send(protocol, batch_size, caplog, monkeypatch):
    """A real OTLP receiver gets the same requests from ctxscope's exporter and the SDK's, batches split alike.

    ctxscope's encoder writes every batch but the one with an exponential
    histogram, which goes through the SDK's encoder (the fallback, said at
    debug level once), in the same request order. gRPC sends the encoded
    bytes as they are; ``grpc-parsed`` is an SDK whose exporter does not
    take the bytes-passing stub: the request is parsed into the message.
    """
    pytest.importorskip("oteltest.sink")
    from _otlp_sink import Receiver, wait_for

    from ctxscope.telemetry import grpc_bytes

    if protocol == "grpc-parsed":
        monkeypatch.setattr(grpc_bytes, "send_bytes", lambda exporter: None)
        protocol = "grpc"
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as Sdk

        from ctxscope.telemetry.grpc_metric_exporter import GrpcMetricExporter as Ours
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as Sdk

        from ctxscope.telemetry.http_metric_exporter import HttpMetricExporter as Ours  # type: ignore[assignment]

    live = collections_of_live_sessions(2, gauge_views())
    refused = request(metric("exp", ExponentialHistogram([ExponentialHistogramDataPoint(
        {}, T0, T1, 1, 2.0, 1, 0, Buckets(0, [1]), Buckets(0, []), 0, 2.0, 2.0)], CUMULATIVE)),
        metric("g", Gauge([number(5, {"k": "v"}), number(6, {"k": "w"}), number(7, {"k": "x"})])))
    received, fallbacks = [], []
    for exporter_class in (Sdk, Ours):
        caplog.clear()
        with Receiver(protocol) as receiver:
            path = "" if protocol == "grpc" else "/v1/metrics"
            exporter = exporter_class(endpoint=receiver.endpoint + path, max_export_batch_size=batch_size,
                                      **({"insecure": True} if protocol == "grpc" else {}))
            with caplog.at_level(logging.DEBUG, logger="ctxscope.telemetry.otlp_metric_encoding"):
                for data in (*live, refused):
                    assert exporter.export(data).name == "SUCCESS"
            fallbacks.append(caplog.text.count("metric batch left to the SDK's encoder"))
            exporter.shutdown()
            wait_for(lambda: receiver.handler.metrics)
            received.append([r.SerializeToString() for r in receiver.handler.metrics])
    sdk, ours = received
    assert len(sdk) >= 3 if batch_size is None else len(sdk) > 3
    assert ours == sdk
    assert fallbacks == [0, 1]
