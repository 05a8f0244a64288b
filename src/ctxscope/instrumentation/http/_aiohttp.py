"""aiohttp: the model calls a ``ClientSession`` sends (LiteLLM's ``aiohttp_openai``, google-genai's async client).

The hook is ``ClientSession._request``, where every request of a session
passes (``request``, ``post``, ``aiohttp.request``): aiohttp's public
``TraceConfig`` signals are not enough (they see no request body before it
is sent, and the response chunks only of ``read()``, not of a stream read
with ``iter_any`` or line by line), and they are per session, set when it is
made. What is read is decided by the rule the httpx hooks use
(:func:`._send.plan_request`: the POST's path first, then the host, then a
body of the API's shape), read by the same :class:`._measure.Measure`.

A request that a ctxscope call above already measures (httpx over aiohttp:
LiteLLM's ``LiteLLMAiohttpTransport``, the OpenAI SDK's ``DefaultAioHttpClient``)
passes unread: the httpx hook above it tees the response.

**The response tee.** The caller reads ``resp.content``, aiohttp's
``StreamReader``, in any of its ways (``read()``, ``json()``,
``iter_chunked``, ``iter_any``, ``readline`` or ``async for`` over lines);
each of them takes its bytes from the reader's buffer through one method,
``_read_nowait_chunk``. The reader of a measured response becomes an
instance of :class:`TeeReader` (the same slots, ``__class__`` swapped: the
object the caller holds stays the one aiohttp made), whose
``_read_nowait_chunk`` hands the very bytes it returns to the measure, as
the caller takes them (only those past the reader's position the measure
has seen: bytes the caller pushes back with ``unread_data`` and reads
again are counted once). The call ends when the reader is at its end
(``feed_eof``, or the last bytes taken after it), fails with the exception
aiohttp sets on the reader (a reset mid-stream: the caller gets that same
exception), and ends with what was read when the caller closes the response
early or drops it. The method names are checked when the hook is installed:
an aiohttp without them is not instrumented, and that is said once.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any, Callable, Mapping

from ctxscope.instrumentation._wrappers import ModelCall, Telemetry
from ctxscope.instrumentation.http import _endpoints, _frames
from ctxscope.instrumentation.http._measure import Measure
from ctxscope.instrumentation.http._patch import Patch, Switch
from ctxscope.instrumentation.http._send import Plan, _begin, measure_for, plan_request

_log = logging.getLogger("ctxscope.instrumentation")

# The reader methods the tee relies on (aiohttp 3.x), and its position in the body: checked before
# anything is patched.
_READER_METHODS = ("_read_nowait_chunk", "feed_eof", "set_exception", "at_eof", "exception")
_READER_SLOTS = ("_cursor",)


class _Tee:
    """One measured response's reading: its measure, the response (to tell the caller's close from a reset),
    and how far into the body the measure has been fed (the reader's ``_cursor``)."""

    __slots__ = ("measure", "response", "fed_to")

    def __init__(self, measure: Measure, response: Any, fed_to: int) -> None:
        self.measure = measure
        self.response: Callable[[], Any] = weakref.ref(response)
        self.fed_to = fed_to


# id(reader) -> its tee; the reader has slots and no __dict__, so its state lives here, removed when the call ends.
_TEES: dict[int, _Tee] = {}
_tee_reader: type | None = None
_closed_by_caller: Any = None  # the exception aiohttp sets on the reader when the caller closes the response


def _end(key: int, how: Callable[[Measure], None]) -> None:
    tee = _TEES.pop(key, None)
    if tee is None:
        return
    try:
        how(tee.measure)
    except Exception:  # noqa: BLE001 - ours: the caller's read goes on
        _log.warning("ctxscope: could not end a model call read from aiohttp", exc_info=True)


def _done(measure: Measure) -> None:
    measure.done()


def tee_reader_class(stream_reader: type) -> type:
    """The :class:`TeeReader` of aiohttp's ``StreamReader`` (made once; a subclass with no slots of its own)."""
    global _tee_reader
    if _tee_reader is not None:
        return _tee_reader

    class TeeReader(stream_reader):
        __slots__ = ()

        def _read_nowait_chunk(self, n: int) -> bytes:
            data: bytes = super()._read_nowait_chunk(n)
            tee = _TEES.get(id(self))
            if tee is not None:
                # The body's bytes past what the measure has: bytes the caller pushed back
                # (``unread_data``) and reads again are not counted twice.
                new = self._cursor - tee.fed_to
                if new > 0:
                    tee.fed_to = self._cursor
                    tee.measure.feed(data if new >= len(data) else data[len(data) - new:])  # never raises
                if self.at_eof():
                    _end(id(self), _done)
            return data

        def feed_eof(self) -> None:
            super().feed_eof()
            if id(self) in _TEES and self.at_eof():  # nothing left unread: the body ended
                _end(id(self), _done)

        def set_exception(self, exc: BaseException, *args: Any, **kwargs: Any) -> None:
            super().set_exception(exc, *args, **kwargs)
            tee = _TEES.get(id(self))
            if tee is None:
                return
            response = tee.response()
            if exc is _closed_by_caller or (response is not None and getattr(response, "_released", False)):
                _end(id(self), _done)  # the caller closed or released the response: what was read
            else:
                _end(id(self), lambda measure: measure.fail(exc))

    TeeReader.__qualname__ = TeeReader.__name__ = "StreamReader"  # what the caller sees in a repr
    _tee_reader = TeeReader
    return TeeReader


def _abandoned(key: int) -> None:
    try:
        _end(key, _done)
    except Exception:  # noqa: BLE001 - runs from the garbage collector
        pass


# ---------------------------------------------------------------------------
# The request
# ---------------------------------------------------------------------------

def may_be_model_url(str_or_url: Any) -> bool:
    """The test every request pays: the URL (``str`` or ``yarl.URL``, relative too) ends like a model endpoint's."""
    if type(str_or_url) is str:
        return _endpoints.may_be_model_url(str_or_url)
    return _endpoints.may_be_model_path(str_or_url.path)


def _header(headers: Any, name: str) -> str | None:
    """A request header of a dict, a multidict, httpx ``Headers`` or a list of pairs; case-insensitive."""
    if not headers:
        return None
    items = headers.items() if hasattr(headers, "items") else headers
    for key, value in items:
        if str(key).lower() == name:
            return str(value)
    return None


def _content(kwargs: Mapping[str, Any]) -> Any:
    """The body as :func:`._send.plan_request` takes it: bytes, the ``json=`` object, or None (a stream)."""
    data = kwargs.get("data")
    json_body = kwargs.get("json")
    if json_body is not None and data is None:
        return json_body if isinstance(json_body, Mapping) else b""
    if data is None:
        return b""
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (Mapping, list, tuple)):
        return b""  # a form: not a model API's JSON
    return None  # a payload object, a file, an async generator: streamed


def plan_for(session: Any, method: Any, str_or_url: Any, kwargs: Mapping[str, Any],
             excluded: frozenset[str]) -> Plan | None:
    """The plan for one ``ClientSession._request``, by the httpx hooks' rule."""
    from yarl import URL

    url = URL(str_or_url)
    if not url.absolute:
        base = getattr(session, "_base_url", None)  # ClientSession(base_url=...): aiohttp's own join
        if base is not None:
            url = base.join(url)
    session_headers = getattr(session, "headers", None)

    def header(name: str) -> str | None:
        found = _header(kwargs.get("headers"), name)
        return found if found is not None else _header(session_headers, name)

    return plan_request(str(method), url.path, url.host or "", header, lambda: _content(kwargs), excluded)


def _plan_safely(session: Any, method: Any, str_or_url: Any, kwargs: Mapping[str, Any],
                 excluded: frozenset[str]) -> Plan | None:
    try:
        return plan_for(session, method, str_or_url, kwargs, excluded)
    except Exception:  # noqa: BLE001 - ours: the request goes on unmeasured
        _log.warning("ctxscope: could not look at an aiohttp request", exc_info=True)
        return None


def _decoded(session: Any, kwargs: Mapping[str, Any]) -> bool:
    """Whether aiohttp undoes the content encoding before the caller (and the tee) read the body."""
    given = kwargs.get("auto_decompress")
    if given is not None:
        return bool(given)
    return bool(getattr(session, "auto_decompress", True))


def _attach(plan_: Plan, response: Any, call: ModelCall, decoded: bool, stream_reader: Any) -> None:
    """Tee the response's reader; the call ends as the caller reads it to the end."""
    measure = measure_for(plan_, response.status, response.headers.get, call, decoded=decoded)
    if measure is None:
        call.finish(None)
        return
    reader: Any = response.content
    if type(reader) is not stream_reader:  # no body (HEAD, 204: aiohttp's empty reader), or someone else's
        measure.feed_decoded(b"")
        measure.done()
        return
    error = reader.exception()
    if error is not None:
        measure.fail(error)
        return
    tee_class = tee_reader_class(stream_reader)
    _TEES[id(reader)] = _Tee(measure, response, reader._cursor)  # noqa: SLF001 - checked at install (_READER_SLOTS)
    reader.__class__ = tee_class
    if reader.at_eof():  # an empty body, already ended
        _end(id(reader), _done)
        return
    # A response dropped neither read nor closed: its call ends with what was read when it is collected.
    weakref.finalize(response, _abandoned, id(reader)).atexit = False


def _attach_safely(plan_: Plan, response: Any, call: ModelCall, decoded: bool, stream_reader: Any) -> None:
    try:
        _attach(plan_, response, call, decoded, stream_reader)
    except Exception:  # noqa: BLE001
        _log.warning("ctxscope: could not read an aiohttp model response", exc_info=True)
        if not call.ended:
            call.finish(None)


def request_wrapper(telemetry: Telemetry, excluded: frozenset[str],
                    stream_reader: type) -> Callable[[Any, Switch], Callable[..., Any]]:
    """The maker of the plain-function hook of ``ClientSession._request``, for :class:`._patch.Patch`."""
    def make(original: Any, switch: Switch) -> Callable[..., Any]:
        async def _request(self: Any, method: Any, str_or_url: Any, **kwargs: Any) -> Any:
            try:  # the URL first: one C-level test turns nearly every other request away
                maybe = (may_be_model_url(str_or_url) and switch.on
                         and (method == "POST" or method == "post" or method.upper() == "POST"))
            except Exception:  # noqa: BLE001 - not a URL we know: not ours to read
                maybe = False
            plan_ = _plan_safely(self, method, str_or_url, kwargs, excluded) if maybe else None
            if plan_ is None or plan_.owner is not None:  # measured above (httpx over aiohttp): unread
                return await original(self, method, str_or_url, **kwargs)
            call = _begin(telemetry, plan_)
            if call is None:
                return await original(self, method, str_or_url, **kwargs)
            token = call.activate()
            try:
                response = await original(self, method, str_or_url, **kwargs)
            except BaseException as error:
                call.fail(error)
                raise
            finally:
                call.deactivate(token)
            _attach_safely(plan_, response, call, _decoded(self, kwargs), stream_reader)
            return response

        return _request

    return make


def install(telemetry: Telemetry, excluded: frozenset[str]) -> Patch | None:
    """Hook ``aiohttp.ClientSession._request``; None when aiohttp is not installed (or not one we can read)."""
    global _closed_by_caller
    try:
        import aiohttp
        from aiohttp import client_reqrep
        from aiohttp.streams import StreamReader
    except ImportError:
        _log.debug("ctxscope: aiohttp not installed; not instrumented")
        return None
    missing = [name for name in _READER_METHODS if not callable(getattr(StreamReader, name, None))]
    missing += [name for name in _READER_SLOTS if name not in getattr(StreamReader, "__slots__", ())]
    if missing or not callable(vars(aiohttp.ClientSession).get("_request")):
        _frames.warn_once("aiohttp-version", "ctxscope: aiohttp %s is not instrumented (its ClientSession or "
                          "StreamReader lacks %s); model calls it sends are not measured",
                          getattr(aiohttp, "__version__", "?"), ", ".join(missing) or "_request")
        return None
    _closed_by_caller = getattr(client_reqrep, "_CONNECTION_CLOSED_EXCEPTION", None)
    return Patch(aiohttp.ClientSession, "_request", request_wrapper(telemetry, excluded, StreamReader))
