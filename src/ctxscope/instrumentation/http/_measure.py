"""One model call's response, read as it passes: documents -> usage, ids, finish reasons -> the call's end.

A :class:`Measure` belongs to one HTTP response. It is fed the bytes the
caller gets (decoded, framed, parsed into the API's documents) and ends its
:class:`~.._wrappers.ModelCall` once, when the body ends, is closed, or
breaks off. Without a call (the SDK level owns the request) it reads
nothing until the SDK level hands its call over (:meth:`adopt`): that is
how ``with_streaming_response`` and streamed ``with_raw_response`` calls get
their usage and ids.

Every step is guarded: an error of ours stops the reading (logged once per
kind) and the call ends with what was seen; the caller's bytes never depend
on it.
"""

from __future__ import annotations

import logging
from typing import Any

from ctxscope.instrumentation._wrappers import ModelCall, ResponseInfo
from ctxscope.instrumentation.http import _frames
from ctxscope.instrumentation.http._endpoints import Endpoint, framing
from ctxscope.instrumentation.http._formats import format_for

_log = logging.getLogger("ctxscope.instrumentation")

_error_types: dict[str, type[Exception]] = {}


def provider_error(kind: str) -> Exception:
    """An exception standing for an error the provider answered with (no exception reached us).

    ``error.type`` is the exception's qualified name (SPEC section 7: the
    type, never the message), so the class is named after the HTTP status
    (``"429"``, the GenAI conventions' fallback) or the provider's error
    type in a stream (``"overloaded_error"``).
    """
    cls = _error_types.get(kind)
    if cls is None:
        cls = type(kind, (Exception,), {"__qualname__": kind, "__module__": __name__})
        _error_types[kind] = cls
    return cls(kind)


def _stream_error(document: Any) -> str | None:
    """The provider's error type when a stream document is an error event (OpenAI, Anthropic, Responses)."""
    if not isinstance(document, dict):
        return None
    if document.get("type") == "error":
        error = document.get("error")
        kind = error.get("type") if isinstance(error, dict) else document.get("code")
        return str(kind or "error")
    error = document.get("error")
    if isinstance(error, dict) and "choices" not in document:
        return str(error.get("type") or error.get("code") or "error")
    if isinstance(error, str):  # Ollama: {"error": "..."}
        return "error"
    return None


class Measure:
    """Reads one response for one model call (possibly handed over later)."""

    def __init__(self, endpoint: Endpoint, *, status: int, content_type: str, content_encoding: str,
                 is_stream: bool, call: ModelCall | None = None) -> None:
        self.endpoint = endpoint
        self.status = status
        self.call = call
        self._format = format_for(endpoint.api)
        self._kind = framing(endpoint, is_stream, content_type)
        self._encoding = content_encoding
        self._decoder: _frames.Decoder | None = None
        self._reader: _frames.Reader | None = None
        self._state: Any = None
        self._error: str | None = None
        self._documents: list[Any] = []
        self._reading = False
        if call is not None:
            self._begin()

    # -- reading -----------------------------------------------------------------------

    def _begin(self) -> None:
        try:
            self._decoder = _frames.Decoder(self._encoding)
            self._reading = self._decoder.supported and self.status < 400
            self._reader = _frames.reader_for(self._kind)
            if self._kind != _frames.JSON:
                self._state = self._format.stream_state(self.call.captures_content)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001
            self._stop("could not start reading")

    def adopt(self, call: ModelCall) -> bool:
        """The SDK level hands its call over before any byte was read; False if this response cannot take it."""
        if self.call is not None:
            return False
        self.call = call
        self._begin()
        return True

    def _stop(self, what: str) -> None:
        self._reading = False
        _frames.warn_once("read:" + what, "ctxscope: %s a %s response; the call goes without usage",
                           what, self.endpoint.api)
        _log.debug("ctxscope: %s", what, exc_info=True)

    def _take(self, documents: list[Any]) -> None:
        for document in documents:
            kind = _stream_error(document) if self._state is not None else None
            if kind is not None:
                self._error = kind
            if self._state is not None:
                self._state.observe(document)
            else:
                self._documents.append(document)

    def feed(self, data: bytes) -> None:
        """Bytes as the caller gets them (still content-encoded)."""
        if not self._reading or not data:
            return
        try:
            self._take(self._reader.feed(self._decoder.decode(data)))  # type: ignore[union-attr]
            if self._reader.failed:  # type: ignore[union-attr]
                self._reading = False
                _frames.warn_once("size", "ctxscope: a model response over %d bytes is not read",
                                   _frames.MAX_BODY_BYTES)
        except Exception:  # noqa: BLE001
            self._stop("could not read")

    def feed_decoded(self, data: bytes) -> None:
        """A body the HTTP client has already read and decoded (a response that is not a stream)."""
        if self._reading:
            self._decoder = _frames.Decoder("")
            self.feed(data)

    # -- the end ---------------------------------------------------------------------------

    def _info(self) -> ResponseInfo | None:
        if self._reading:
            try:
                self._take(self._reader.close())  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001
                self._stop("could not read the end of")
        try:
            if self._state is not None:
                return self._state.info()
            if self._documents:
                document = self._documents[-1]
                info = self._format.info(document)
                if self.call is not None and self.call.captures_content:
                    info.output_messages = self._format.output(document, info)
                return info
        except Exception:  # noqa: BLE001 - an unexpected response shape
            _log.debug("ctxscope: no usage in a %s response", self.endpoint.api, exc_info=True)
        return None

    def done(self) -> None:
        """The body ended or was closed: end the call with what was read (once)."""
        call = self.call
        if call is None or call.ended:
            return
        info = self._info()
        self._reading = False
        if self.status >= 400:
            self._set_status()
            call.fail(provider_error(str(self.status)), info)
        elif self._error is not None:
            call.fail(provider_error(self._error), info)
        else:
            call.finish(info)

    def fail(self, error: BaseException) -> None:
        """Reading the body raised (a reset mid-stream): the call ends with the error; the caller gets it."""
        call = self.call
        if call is None or call.ended:
            return
        info = self._info()
        self._reading = False
        call.fail(error, info)

    def _set_status(self) -> None:
        try:
            call = self.call
            call.telemetry.spans.annotate(call.span, {"http.response.status_code": self.status})  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001
            pass

