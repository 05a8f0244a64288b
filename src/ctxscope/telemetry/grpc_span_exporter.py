"""The OTLP/gRPC span exporter :func:`ctxscope.setup` builds: the SDK's, its request parsed from ctxscope's encoding.

Everything but the encoding is the SDK exporter's own (endpoint, headers,
compression, credentials, retries, its internal metrics). The request
message is parsed (C code) from :mod:`ctxscope.telemetry.otlp_encoding`'s
bytes where the SDK would build it object by object, in ``_translate_data``,
the exporter's own hook; a batch that encoding refuses goes through the
SDK's encoder, which logs and skips what it cannot write, as before.
"""

from __future__ import annotations

from typing import Any, Sequence

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as SdkGrpcSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan

from ctxscope.telemetry.otlp_encoding import SpanEncoder

__all__ = ["GrpcSpanExporter"]


class GrpcSpanExporter(SdkGrpcSpanExporter):
    """The SDK's OTLP/gRPC span exporter, its request parsed from ctxscope's encoding."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ctxscope_encoder = SpanEncoder()

    def _translate_data(self, data: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
        encoded = self._ctxscope_encoder.encode_or_none(data)
        if encoded is None:
            return super()._translate_data(data)
        return ExportTraceServiceRequest.FromString(encoded)
