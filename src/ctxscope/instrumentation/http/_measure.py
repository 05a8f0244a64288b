"""One model call's response, read as it passes: documents -> usage, ids, finish reasons -> the call's end.

A :class:`Measure` belongs to one HTTP response. It is fed the bytes the
caller gets and ends its :class:`~.._wrappers.ModelCall` once, when the body
ends, is closed, or breaks off. Without a call (the SDK level owns the
request) it reads nothing until the SDK level hands its call over
(:meth:`adopt`): that is how ``with_streaming_response`` and streamed
``with_raw_response`` calls get their usage and ids.

**Read by the measuring worker.** On the caller's thread a piece of the
body is only kept (the very ``bytes`` object: no copy, no parse); the
pieces go to the measuring worker (:mod:`.._worker`) when the body ends, or
every :data:`HAND_OVER_BYTES` of a long stream, and the worker decodes,
frames and parses them (:class:`_Reading`) in the order they came, then
ends the call as the response says (finished, or failed with the provider's
error type). The caller's bytes and timing never depend on it.

Every step is guarded: an error of ours stops the reading (logged once per
kind) and the call ends with what was seen.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from ctxscope.instrumentation import _worker
from ctxscope.instrumentation._wrappers import ModelCall, ResponseInfo
from ctxscope.instrumentation.http import _frames
from ctxscope.instrumentation.http._endpoints import Endpoint, framing
from ctxscope.instrumentation.http._formats import format_for

_log = logging.getLogger("ctxscope.instrumentation")

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


HAND_OVER_BYTES = 256 * 1024
"""A stream's pieces go to the worker every this many bytes (what the caller's thread holds at most)."""


class _Reading:
    """The worker's side of one response: content decoding, framing, the API's documents."""

    def __init__(self, measure: "Measure", call: ModelCall) -> None:
        self.endpoint = measure.endpoint
        self._format = format_for(measure.endpoint.api)
        self._kind = framing(measure.endpoint, measure.is_stream, measure.content_type)
        self._decoder: _frames.Decoder | None = None
        self._reader: _frames.Reader | None = None
        self._state: Any = None
        self.error: str | None = None
        self._documents: list[Any] = []
        self._captures = call.captures_content
        self._reading = False
        try:
            self._decoder = _frames.Decoder(measure.encoding)
            self._reading = self._decoder.supported and measure.status < 400
            self._reader = _frames.reader_for(self._kind)
            if self._kind != _frames.JSON:
                self._state = self._format.stream_state(self._captures)
        except Exception:  # noqa: BLE001
            self._stop("could not start reading")

    def _stop(self, what: str) -> None:
        self._reading = False
        _frames.warn_once("read:" + what, "ctxscope: %s a %s response; the call goes without usage",
                           what, self.endpoint.api)
        _log.debug("ctxscope: %s", what, exc_info=True)

    def _take(self, documents: list[Any]) -> None:
        for document in documents:
            kind = _stream_error(document) if self._state is not None else None
            if kind is not None:
                self.error = kind
            if self._state is not None:
                self._state.observe(document)
            else:
                self._documents.append(document)

    def feed(self, pieces: list[bytes]) -> None:
        """Pieces of the body as the caller got them (still content-encoded), in order."""
        for data in pieces:
            if not self._reading:
                return
            try:
                self._take(self._reader.feed(self._decoder.decode(data)))  # type: ignore[union-attr]
                if self._reader.failed:  # type: ignore[union-attr]
                    self._reading = False
                    _frames.warn_once("size", "ctxscope: a model response over %d bytes is not read",
                                       _frames.MAX_BODY_BYTES)
            except Exception:  # noqa: BLE001
                self._stop("could not read")

    def info(self) -> ResponseInfo | None:
        if self._reading:
            try:
                self._take(self._reader.close())  # type: ignore[union-attr]
            except Exception:  # noqa: BLE001
                self._stop("could not read the end of")
            self._reading = False
        try:
            if self._state is not None:
                return self._state.info()
            if self._documents:
                document = self._documents[-1]
                info = self._format.info(document)
                if self._captures:
                    info.output_messages = self._format.output(document, info)
                return info
        except Exception:  # noqa: BLE001 - an unexpected response shape
            _log.debug("ctxscope: no usage in a %s response", self.endpoint.api, exc_info=True)
        return None


class Measure:
    """Reads one response for one model call (possibly handed over later)."""

    def __init__(self, endpoint: Endpoint, *, status: int, content_type: str, content_encoding: str,
                 is_stream: bool, call: ModelCall | None = None) -> None:
        self.endpoint = endpoint
        self.status = status
        self.content_type = content_type
        self.encoding = content_encoding
        self.is_stream = is_stream
        self.call = call
        self._pieces: list[bytes] = []  # kept on the caller's thread, not yet handed to the worker
        self._held = 0  # their bytes
        self._reading_state: _Reading | None = None  # the worker's; made by its first job
        self._keeping = call is not None and status < 400

    # -- the caller's thread -------------------------------------------------------------

    def adopt(self, call: ModelCall) -> bool:
        """The SDK level hands its call over before any byte was read; False if this response cannot take it."""
        if self.call is not None:
            return False
        self.call = call
        self._keeping = self.status < 400
        return True

    def feed(self, data: bytes) -> None:
        """Bytes as the caller gets them (still content-encoded): kept for the worker."""
        if not self._keeping or not data:
            return
        self._pieces.append(data)
        self._held += len(data)
        if self._held >= HAND_OVER_BYTES:
            self._hand_over()

    def feed_decoded(self, data: bytes) -> None:
        """A body the HTTP client has already read and decoded (a response that is not a stream)."""
        if self._keeping:
            self.encoding = ""
            self.feed(data)

    def _taken(self) -> list[bytes]:
        pieces, self._pieces, self._held = self._pieces, [], 0
        return pieces

    def _hand_over(self) -> None:
        try:
            _worker.submit(functools.partial(self._read, self._taken()), "response", wake=False)
        except Exception:  # noqa: BLE001 - ours: the caller's read goes on
            self._keeping = False
            _log.debug("ctxscope: could not hand a response over", exc_info=True)

    def done(self) -> None:
        """The body ended or was closed: the worker ends the call with what was read (once)."""
        call = self.call
        if call is None or call.ended:
            return
        self._keeping = False
        call.end_read(functools.partial(self._outcome, self._taken(), None))

    def fail(self, error: BaseException) -> None:
        """Reading the body raised (a reset mid-stream): the call ends with the error; the caller gets it."""
        call = self.call
        if call is None or call.ended:
            return
        self._keeping = False
        # The type's name only: the exception (its traceback, the caller's frames) is not kept.
        call.end_read(functools.partial(self._outcome, self._taken(), type(error).__qualname__))

    # -- the measuring worker ----------------------------------------------------------------

    def _read(self, pieces: list[bytes]) -> None:
        reading = self._reading_state
        if reading is None:
            reading = self._reading_state = _Reading(self, self.call)  # type: ignore[arg-type]
        reading.feed(pieces)

    def _outcome(self, pieces: list[bytes], error_type: str | None) -> tuple[ResponseInfo | None, str | None]:
        """The response's info, and the error type the call fails with (None: it finished).

        No exception reached us for an error the provider answered with: its
        ``error.type`` (SPEC section 7: the type, never the message) is the
        HTTP status (``"429"``, the GenAI conventions' fallback) or the
        provider's error type in a stream (``"overloaded_error"``).
        """
        self._read(pieces)
        reading = self._reading_state
        assert reading is not None
        info = reading.info()
        if error_type is not None:
            return info, error_type
        if self.status >= 400:
            self._set_status()
            return info, str(self.status)
        return info, reading.error

    def _set_status(self) -> None:
        try:
            call = self.call
            call.telemetry.spans.annotate(call.span, {"http.response.status_code": self.status})  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001
            pass
