"""The OTLP/gRPC span exporter :func:`ctxscope.setup` builds: the SDK's, sending ctxscope's encoding.

Everything but the encoding is the SDK exporter's own (endpoint, headers,
compression, credentials, retries, its internal metrics). In
``_translate_data``, the exporter's own hook, the request is
:mod:`ctxscope.telemetry.otlp_encoding`'s bytes where the SDK would build it
object by object, sent as they are (:mod:`ctxscope.telemetry.grpc_bytes`;
parsed into the message on an SDK whose exporter is built otherwise); a
batch that encoding refuses goes through the SDK's encoder, which logs and
skips what it cannot write, as before.
"""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as SdkGrpcSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from ctxscope.telemetry.grpc_bytes import EncodedRequests
from ctxscope.telemetry.otlp_encoding import SpanEncoder

__all__ = ["GrpcSpanExporter"]


class GrpcSpanExporter(EncodedRequests, SdkGrpcSpanExporter):
    """The SDK's OTLP/gRPC span exporter, sending ctxscope's encoding."""

    encoder_class = SpanEncoder
    request_class = ExportTraceServiceRequest
