"""The OTLP/gRPC metric exporter :func:`ctxscope.setup` builds: the SDK's, sending ctxscope's encoding.

Everything but the encoding is the SDK exporter's own (endpoint, headers,
compression, credentials, retries, temporality and aggregation preferences,
batch splitting, its internal metrics). In ``_translate_data``, the
exporter's own hook, the request is :mod:`ctxscope.telemetry.otlp_metric_encoding`'s
bytes where the SDK would build it object by object, sent as they are
(:mod:`ctxscope.telemetry.grpc_bytes`; parsed into the message on an SDK
whose exporter is built otherwise); a batch that encoding refuses goes
through the SDK's encoder.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as SdkGrpcMetricExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.sdk.metrics.export import MetricsData

from ctxscope.telemetry import grpc_bytes
from ctxscope.telemetry.otlp_metric_encoding import MetricEncoder

__all__ = ["GrpcMetricExporter"]


class GrpcMetricExporter(SdkGrpcMetricExporter):
    """The SDK's OTLP/gRPC metric exporter, sending ctxscope's encoding."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        grpc_bytes.send_bytes(self)
        self._ctxscope_encoder = MetricEncoder()

    def _translate_data(self, data: MetricsData) -> Any:
        encoded = self._ctxscope_encoder.encode_or_none(data)
        if encoded is None:
            return super()._translate_data(data)
        return grpc_bytes.request(self, encoded, ExportMetricsServiceRequest)
