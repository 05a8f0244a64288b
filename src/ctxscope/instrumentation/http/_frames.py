"""Reading a response body as it passes: content decoding, then the provider's framing.

Each reader takes the bytes in the pieces the caller gets them (``feed``)
and hands back the JSON documents complete so far; ``close`` gives any last
one. Readers never hold more than :data:`~._endpoints.MAX_BODY_BYTES` of
pending text: past that they give up (``failed``) and the bytes go on
unread. A reader's error never reaches the caller: the tee catches it.

Pure: no OpenTelemetry, no HTTP library.
"""

from __future__ import annotations

import json
import logging
import zlib
from typing import Any, Callable

from ctxscope.instrumentation.http._endpoints import JSON, JSON_ARRAY, MAX_BODY_BYTES, NDJSON, SSE

_log = logging.getLogger("ctxscope.instrumentation")

try:  # the ``fast`` extra: the same documents, parsed faster
    import orjson

    _loads: Callable[[bytes], Any] = orjson.loads
except ImportError:  # pragma: no cover - orjson is in the dev extra
    _loads = json.loads

_warned: set[str] = set()


def warn_once(key: str, message: str, *args: Any) -> None:
    """Log ``message`` the first time ``key`` comes up in this process (a model call is never noisy)."""
    if key not in _warned:
        _warned.add(key)
        _log.warning(message, *args)


def loads(data: bytes) -> Any:
    return _loads(data)


class Decoder:
    """The response's ``content-encoding`` undone (gzip, deflate); others are not read (said once)."""

    def __init__(self, encoding: str) -> None:
        encoding = encoding.strip().lower()
        self.supported = True
        self._zlib: Any = None
        if encoding in ("gzip", "x-gzip"):
            self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif encoding == "deflate":
            self._zlib = zlib.decompressobj()
        elif encoding not in ("", "identity"):
            self.supported = False
            warn_once("encoding:" + encoding, "ctxscope: a %s-encoded model response is not read "
                       "(the call has no usage); gzip and deflate are", encoding)

    def decode(self, data: bytes) -> bytes:
        return self._zlib.decompress(data) if self._zlib is not None else data


class Reader:
    """Base: documents out of bytes; ``failed`` once the body cannot be read any further."""

    def __init__(self) -> None:
        self.failed = False

    def feed(self, data: bytes) -> list[Any]:
        raise NotImplementedError

    def close(self) -> list[Any]:
        return []


class WholeJson(Reader):
    """One JSON document: kept until the body ends (up to the size limit)."""

    def __init__(self) -> None:
        super().__init__()
        self._parts: list[bytes] = []
        self._size = 0

    def feed(self, data: bytes) -> list[Any]:
        self._size += len(data)
        if self._size > MAX_BODY_BYTES:
            self.failed = True
            self._parts = []
        elif data:
            self._parts.append(data)
        return []

    def close(self) -> list[Any]:
        if self.failed or not self._parts:
            return []
        return [loads(b"".join(self._parts))]


class _Lines(Reader):
    """Complete lines out of pieces; a line longer than the limit stops the reader."""

    def __init__(self) -> None:
        super().__init__()
        self._pending = b""

    def _lines(self, data: bytes) -> list[bytes]:
        data = self._pending + data
        lines = data.split(b"\n")
        self._pending = lines.pop()
        if len(self._pending) > MAX_BODY_BYTES:
            self.failed = True
            self._pending = b""
        return [line[:-1] if line.endswith(b"\r") else line for line in lines]

    def _rest(self) -> list[bytes]:
        rest, self._pending = self._pending, b""
        return [rest.rstrip(b"\r")] if rest.strip() else []


class ServerSentEvents(_Lines):
    """Server-sent events: the ``data:`` fields of an event joined, one JSON document per event.

    ``[DONE]`` (OpenAI's end marker) and data that is not JSON are skipped.
    """

    def __init__(self) -> None:
        super().__init__()
        self._data: list[bytes] = []

    def _dispatch(self, out: list[Any]) -> None:
        if not self._data:
            return
        payload = b"\n".join(self._data)
        self._data = []
        if payload.strip() == b"[DONE]":
            return
        try:
            out.append(loads(payload))
        except ValueError:
            pass  # not JSON: a comment-like payload some servers send

    def _take(self, lines: list[bytes]) -> list[Any]:
        out: list[Any] = []
        for line in lines:
            if not line:
                self._dispatch(out)
            elif line.startswith(b"data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(b" ") else value)
        return out

    def feed(self, data: bytes) -> list[Any]:
        return self._take(self._lines(data))

    def close(self) -> list[Any]:
        out = self._take(self._rest())
        self._dispatch(out)
        return out


class JsonLines(_Lines):
    """One JSON document per line (Ollama's streams)."""

    def _take(self, lines: list[bytes]) -> list[Any]:
        out = []
        for line in lines:
            if line.strip():
                try:
                    out.append(loads(line))
                except ValueError:
                    pass
        return out

    def feed(self, data: bytes) -> list[Any]:
        return self._take(self._lines(data))

    def close(self) -> list[Any]:
        return self._take(self._rest())


class JsonArray(Reader):
    """A JSON array whose elements arrive one by one (Gemini's stream without ``alt=sse``).

    Scans for the end of each top-level object, minding strings and escapes,
    so each element is handed out as soon as it is complete.
    """

    def __init__(self) -> None:
        super().__init__()
        self._buffer = bytearray()
        self._depth = 0
        self._in_string = False
        self._escaped = False
        self._start = -1
        self._scanned = 0

    def feed(self, data: bytes) -> list[Any]:
        self._buffer += data
        out: list[Any] = []
        buffer = self._buffer
        i = self._scanned
        while i < len(buffer):
            c = buffer[i]
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif c == 0x5C:  # backslash
                    self._escaped = True
                elif c == 0x22:
                    self._in_string = False
            elif c == 0x22:
                self._in_string = True
            elif c == 0x7B:  # {
                if self._depth == 0:
                    self._start = i
                self._depth += 1
            elif c == 0x7D:  # }
                self._depth -= 1
                if self._depth == 0 and self._start >= 0:
                    try:
                        out.append(loads(bytes(buffer[self._start:i + 1])))
                    except ValueError:
                        pass
                    del buffer[:i + 1]
                    i, self._start = -1, -1
            i += 1
        if self._depth == 0:
            buffer.clear()  # separators and brackets between elements
            i = 0
        self._scanned = i
        if len(buffer) > MAX_BODY_BYTES:
            self.failed = True
            buffer.clear()
            self._scanned = 0
        return out


def reader_for(kind: str) -> Reader:
    return {JSON: WholeJson, SSE: ServerSentEvents, NDJSON: JsonLines, JSON_ARRAY: JsonArray}[kind]()
