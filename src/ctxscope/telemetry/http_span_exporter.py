"""The OTLP/HTTP (protobuf) span exporter :func:`ctxscope.setup` builds: the SDK's, sending ctxscope's encoding.

Everything but the encoding is the SDK exporter's own (endpoint, headers,
compression, certificates, retries, timeouts, its internal metrics). The
SDK's exporter encodes inside ``export``; this one encodes with
:mod:`ctxscope.telemetry.otlp_encoding` (the same bytes, without the SDK's
message tree) and sends them through the same client with the same checks.
A batch that encoding refuses goes through the SDK's ``export``, which logs
and skips what it cannot write, as before; so does every batch on an SDK
release whose exporter lacks the parts this uses.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as SdkHttpSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from ctxscope.telemetry.http_transport import with_stdlib_transport
from ctxscope.telemetry.otlp_encoding import SpanEncoder

__all__ = ["HttpSpanExporter"]

# What the HTTP path uses of the SDK's exporter (1.45): without any of them, its own export runs.
_HTTP_PARTS = ("_shutdown", "_metrics", "_client", "_max_request_size")


class HttpSpanExporter(SdkHttpSpanExporter):
    """The SDK's OTLP/HTTP (protobuf) span exporter, sending ctxscope's encoding of each batch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # A plain http:// endpoint is sent to without requests where requests would do the same (http_transport).
        super().__init__(*args, **with_stdlib_transport(SdkHttpSpanExporter, args, kwargs))
        self._ctxscope_encoder = SpanEncoder()
        self._ctxscope_send = _http_sender(self)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        send = self._ctxscope_send
        if send is None or self._shutdown:
            return super().export(spans)
        encoded = self._ctxscope_encoder.encode_or_none(spans)
        if encoded is None:
            return super().export(spans)
        return send(encoded, len(spans))


def _http_sender(exporter: SdkHttpSpanExporter) -> Any:
    """The SDK exporter's ``export`` after its encoding, as a function of the bytes; None if this SDK differs."""
    try:
        from opentelemetry.exporter.otlp.proto.http._common import (
            RequestPayloadTooLargeError,
            _is_request_too_large,
        )
        from opentelemetry.semconv.attributes.http_attributes import HTTP_RESPONSE_STATUS_CODE
    except ImportError:
        return None
    if not all(hasattr(exporter, part) for part in _HTTP_PARTS):
        return None
    logger = logging.getLogger(SdkHttpSpanExporter.__module__)  # the SDK's messages, under the SDK's logger

    def send(serialized: bytes, count: int) -> SpanExportResult:
        # The SDK's OTLPSpanExporter.export (1.45), from its encoding on.
        with exporter._metrics.export_operation(count) as result:  # noqa: SLF001
            limit = exporter._max_request_size  # noqa: SLF001
            if _is_request_too_large(serialized, limit):
                logger.warning("Dropping span batch: serialized size %d bytes exceeds max_request_size %d bytes.",
                               len(serialized), limit)
                result.error = RequestPayloadTooLargeError(
                    f"Serialized span request size {len(serialized)} bytes exceeds max_request_size {limit} bytes.")
                return SpanExportResult.FAILURE
            export_result = exporter._client.export(serialized)  # noqa: SLF001
            if not export_result.success:
                result.error = export_result.error
                result.error_attrs = ({HTTP_RESPONSE_STATUS_CODE: export_result.status_code}
                                      if export_result.status_code is not None else None)
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    return send
