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

from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as SdkGrpcMetricExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest

from ctxscope.telemetry.grpc_bytes import EncodedRequests
from ctxscope.telemetry.otlp_metric_encoding import MetricEncoder

__all__ = ["GrpcMetricExporter"]


class GrpcMetricExporter(EncodedRequests, SdkGrpcMetricExporter):
    """The SDK's OTLP/gRPC metric exporter, sending ctxscope's encoding."""

    encoder_class = MetricEncoder
    request_class = ExportMetricsServiceRequest
