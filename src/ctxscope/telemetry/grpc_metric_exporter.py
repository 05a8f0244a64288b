"""The OTLP/gRPC metric exporter :func:`ctxscope.setup` builds: the SDK's, its request parsed from ctxscope's encoding.

Everything but the encoding is the SDK exporter's own (endpoint, headers,
compression, credentials, retries, temporality and aggregation preferences,
batch splitting, its internal metrics). The request message is parsed (C
code) from :mod:`ctxscope.telemetry.otlp_metric_encoding`'s bytes where the
SDK would build it object by object, in ``_translate_data``, the exporter's
own hook; a batch that encoding refuses goes through the SDK's encoder.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as SdkGrpcMetricExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.sdk.metrics.export import MetricsData

from ctxscope.telemetry.otlp_metric_encoding import MetricEncoder

__all__ = ["GrpcMetricExporter"]


class GrpcMetricExporter(SdkGrpcMetricExporter):
    """The SDK's OTLP/gRPC metric exporter, its request parsed from ctxscope's encoding."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ctxscope_encoder = MetricEncoder()

    def _translate_data(self, data: MetricsData) -> ExportMetricsServiceRequest:
        encoded = self._ctxscope_encoder.encode_or_none(data)
        if encoded is None:
            return super()._translate_data(data)
        return ExportMetricsServiceRequest.FromString(encoded)
