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

from typing import Any, Sequence

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as SdkGrpcSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan

from ctxscope.telemetry import grpc_bytes
from ctxscope.telemetry.otlp_encoding import SpanEncoder

__all__ = ["GrpcSpanExporter"]


class GrpcSpanExporter(SdkGrpcSpanExporter):
    """The SDK's OTLP/gRPC span exporter, sending ctxscope's encoding."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        grpc_bytes.send_bytes(self)
        self._ctxscope_encoder = SpanEncoder()

    def _translate_data(self, data: Sequence[ReadableSpan]) -> Any:
        encoded = self._ctxscope_encoder.encode_or_none(data)
        if encoded is None:
            return super()._translate_data(data)
        return grpc_bytes.request(self, encoded, ExportTraceServiceRequest)
