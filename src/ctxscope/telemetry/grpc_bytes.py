"""An SDK OTLP/gRPC exporter that sends ctxscope's encoded bytes as they are.

The SDK's gRPC exporters call their service stub's ``Export`` with the
message ``_translate_data`` returns, and the stub serialises it. With the
request already encoded (:mod:`ctxscope.telemetry.otlp_encoding`,
:mod:`ctxscope.telemetry.otlp_metric_encoding`), parsing it into a message
only for gRPC to serialise it again costs about a third of the encoding
itself. :func:`send_bytes` gives the exporter a stub of the SDK's own
generated class (the same method path and response parser) whose request
serialiser passes ``bytes`` through and serialises anything else as before;
the SDK builds its stubs from ``_stub``, on reconnection too, so that stays
the one it makes. :func:`request` returns the bytes only while the
exporter's client is such a stub, and the parsed message otherwise (an SDK
that builds its client another way), so a request never reaches a
serialiser that cannot take it.
"""

from __future__ import annotations

from typing import Any, Callable

__all__ = ["EncodedRequests", "request", "send_bytes"]


def _passing_bytes(serialize: Callable[[Any], bytes] | None) -> Callable[[Any], bytes]:
    def serializer(message: Any) -> bytes:
        if type(message) is bytes:
            return message
        return serialize(message) if serialize is not None else message
    return serializer


class _Channel:
    """The exporter's channel, as the generated stub sees it: ``unary_unary`` with a bytes-passing serialiser."""

    def __init__(self, channel: Any) -> None:
        self._channel = channel

    def unary_unary(self, method: str, request_serializer: Any = None, *args: Any, **kwargs: Any) -> Any:
        return self._channel.unary_unary(method, _passing_bytes(request_serializer), *args, **kwargs)


class _BytesStub:
    """Marks a stub made by :func:`send_bytes`."""


def _bytes_stub(stub_class: type) -> type:
    """A subclass of the SDK's stub class whose ``unary_unary`` calls get the bytes-passing serialiser."""
    def init(self: Any, channel: Any) -> None:
        stub_class.__init__(self, _Channel(channel))  # type: ignore[misc]

    return type(f"Bytes{stub_class.__name__}", (stub_class, _BytesStub), {"__init__": init})


def send_bytes(exporter: Any) -> None:
    """Give an SDK gRPC exporter (just built, nothing sent yet) a stub that sends bytes as they are.

    Leaves it as it is where it lacks the parts this uses (another SDK release).
    """
    stub_class, channel = getattr(exporter, "_stub", None), getattr(exporter, "_channel", None)
    if not isinstance(stub_class, type) or channel is None or not hasattr(exporter, "_client"):
        return
    try:
        exporter._stub = _bytes_stub(stub_class)  # noqa: SLF001 - the class the SDK builds its stubs from
        exporter._client = exporter._stub(channel)  # noqa: SLF001
    except Exception:  # noqa: BLE001 - a stub of another shape: the exporter keeps the SDK's
        exporter._stub, exporter._client = stub_class, stub_class(channel)  # noqa: SLF001


def request(exporter: Any, encoded: bytes, message_class: Any) -> Any:
    """What ``_translate_data`` returns: the bytes for a bytes-passing stub, else the parsed message."""
    if isinstance(getattr(exporter, "_client", None), _BytesStub):
        return encoded
    return message_class.FromString(encoded)


class EncodedRequests:
    """Mixin before an SDK gRPC exporter class: each request ctxscope's encoding, sent as bytes.

    A subclass names the encoder (a :class:`~ctxscope.telemetry.otlp_encoding.FallbackEncoder`)
    and the request message class; a batch the encoder refuses goes through
    the SDK's own ``_translate_data``.
    """

    encoder_class: Any
    request_class: Any

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        send_bytes(self)
        self._ctxscope_encoder = self.encoder_class()

    def _translate_data(self, data: Any) -> Any:
        encoded = self._ctxscope_encoder.encode_or_none(data)
        if encoded is None:
            return super()._translate_data(data)  # type: ignore[misc]
        return request(self, encoded, self.request_class)
