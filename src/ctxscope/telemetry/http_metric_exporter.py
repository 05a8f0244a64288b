"""The OTLP/HTTP (protobuf) metric exporter :func:`ctxscope.setup` builds: the SDK's, from ctxscope's encoding.

Everything but the encoding is the SDK exporter's own (endpoint, headers,
compression, certificates, retries, timeouts, temporality and aggregation
preferences, batch splitting, its internal metrics). The SDK's exporter
encodes inside ``export``; this one parses the request (C code) from
:mod:`ctxscope.telemetry.otlp_metric_encoding`'s bytes and hands it to the
SDK's own batch export, as the SDK's ``export`` (1.45) does after its
encoding. A batch that encoding refuses goes through the SDK's ``export``,
which encodes, logs or refuses it as it always did; so does every batch on
an SDK release whose exporter lacks the parts this uses.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.exporter.otlp.proto.http import metric_exporter as _sdk_module
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as SdkHttpMetricExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.sdk.metrics.export import MetricExportResult, MetricsData

from ctxscope.telemetry.http_transport import with_stdlib_transport
from ctxscope.telemetry.otlp_metric_encoding import MetricEncoder

__all__ = ["HttpMetricExporter"]

# What the export after the encoding uses of the SDK's exporter (1.45): without any of them, its own export runs.
_HTTP_PARTS = ("_shutdown", "_export_batch", "_max_export_batch_size")
_split = getattr(_sdk_module, "_split_metrics_data", None)


class HttpMetricExporter(SdkHttpMetricExporter):
    """The SDK's OTLP/HTTP (protobuf) metric exporter, its request parsed from ctxscope's encoding."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # A plain http:// endpoint is sent to without requests where requests would do the same (http_transport).
        super().__init__(*args, **with_stdlib_transport(SdkHttpMetricExporter, args, kwargs))
        self._ctxscope_encoder = MetricEncoder()
        self._ctxscope_fits = _split is not None and all(hasattr(self, part) for part in _HTTP_PARTS)

    def export(self, metrics_data: MetricsData, timeout_millis: float | None = 10000,
               **kwargs: Any) -> MetricExportResult:
        if not self._ctxscope_fits or self._shutdown:
            return super().export(metrics_data, timeout_millis, **kwargs)
        encoded = self._ctxscope_encoder.encode_or_none(metrics_data)
        if encoded is None:
            return super().export(metrics_data, timeout_millis, **kwargs)
        request = ExportMetricsServiceRequest.FromString(encoded)
        # The SDK's OTLPMetricExporter.export (1.45), from its encoding on.
        batch_size = self._max_export_batch_size
        if batch_size is None:
            return self._export_batch(request)
        for batch in _split(request, batch_size):  # type: ignore[misc]
            if self._export_batch(batch) != MetricExportResult.SUCCESS:
                return MetricExportResult.FAILURE
        return MetricExportResult.SUCCESS
