"""The hooks of httpx / httpx2 ``Client.send`` and ``AsyncClient.send``, the response tee, the rule of what is read.

``send`` is where every request of a client passes, whatever its transport
(LiteLLM's aiohttp transport included) and whether or not the body is
streamed. A request is looked at in three steps, each only if the one before
said "maybe": POST to a model endpoint's path (:func:`._endpoints.endpoint_for_path`),
host not excluded, then a JSON body of the API's shape. Everything else goes
to the library unread.

:func:`plan_request` is that rule for any library (the aiohttp hook,
:mod:`._aiohttp`, asks it too), :func:`measure_for` the response's reading.

Who measures a call (one span per call):

* a ctxscope model call already active in the context (the SDK instrumentor
  sends this request): that call. The response is still teed, unread, so the
  SDK level can hand a raw or streamed-raw response's call over to it
  (:func:`adopt`) and get usage and ids as the caller reads the body;
* otherwise the transport opens the call itself, makes it current while the
  request is sent, and the tee ends it when the body ends.

The tee yields each piece of the body the moment the library gives it, the
very same ``bytes`` object, and re-raises the library's exceptions
unchanged; reading is a side effect that cannot fail the caller.
"""

from __future__ import annotations

import functools
import logging
import weakref
from typing import Any, Callable, Mapping

from ctxscope.instrumentation._wrappers import ModelCall, Telemetry, active_call, start_call
from ctxscope.instrumentation.http import _endpoints, _frames
from ctxscope.instrumentation.http._endpoints import (MAX_BODY_BYTES, Endpoint, body_fits, endpoint_for_path,
                                                     model_from_path, provider_for, streamed)
from ctxscope.instrumentation.http._bodies import BodyCache
from ctxscope.instrumentation.http._measure import Measure
from ctxscope.instrumentation.http._patch import Switch

_log = logging.getLogger("ctxscope.instrumentation")


# ---------------------------------------------------------------------------
# The tee: a byte stream of the library's own kind around the response's stream
# ---------------------------------------------------------------------------

_tee_classes: dict[str, tuple[type, type]] = {}
_BODIES = BodyCache()  # the last bodies of a few conversations: the next is parsed from where it grew


def tee_classes(library: Any) -> tuple[type, type]:
    """(sync, async) tee stream classes subclassing ``library``'s byte streams (its clients check the type)."""
    cached = _tee_classes.get(library.__name__)
    if cached is not None:
        return cached

    class SyncTee(library.SyncByteStream):
        def __init__(self, inner: Any, measure: Measure) -> None:
            self.inner = inner
            self.measure = measure

        def __iter__(self) -> Any:
            measure = self.measure
            try:
                for chunk in self.inner:
                    measure.feed(chunk)
                    yield chunk
            except GeneratorExit:
                raise
            except BaseException as error:
                measure.fail(error)
                raise
            measure.done()

        def close(self) -> None:
            try:
                self.inner.close()
            finally:
                self.measure.done()

    class AsyncTee(library.AsyncByteStream):
        def __init__(self, inner: Any, measure: Measure) -> None:
            self.inner = inner
            self.measure = measure

        async def __aiter__(self) -> Any:
            measure = self.measure
            try:
                async for chunk in self.inner:
                    measure.feed(chunk)
                    yield chunk
            except GeneratorExit:
                raise
            except BaseException as error:
                measure.fail(error)
                raise
            measure.done()

        async def aclose(self) -> None:
            try:
                await self.inner.aclose()
            finally:
                self.measure.done()

    _tee_classes[library.__name__] = (SyncTee, AsyncTee)
    return SyncTee, AsyncTee


def _abandoned(measure: Measure) -> None:
    try:
        measure.done()
    except Exception:  # noqa: BLE001 - runs from the garbage collector
        pass


def adopt(http_response: Any, call: ModelCall) -> bool:
    """Hand an SDK-level call to the tee of its response, unread as yet (raw and streaming-raw responses).

    True when the tee takes it: the call then ends when the body is read or
    closed, with the usage and ids it held.
    """
    measure = getattr(getattr(http_response, "stream", None), "measure", None)
    return isinstance(measure, Measure) and measure.adopt(call)


# ---------------------------------------------------------------------------
# Looking at a request
# ---------------------------------------------------------------------------

class Plan:
    """A request to a model endpoint: who measures it, and the body when the transport does.

    ``body``: what the caller's thread needs (the fields around the
    conversation, enough to open the span and frame the response); ``parse``:
    the whole body, read by the measuring worker (None: ``body`` is whole).
    """

    __slots__ = ("endpoint", "owner", "body", "provider", "parse")

    def __init__(self, endpoint: Endpoint, owner: ModelCall | None, body: Any, provider: str,
                 parse: Callable[[], Mapping[str, Any] | None] | None = None) -> None:
        self.endpoint = endpoint
        self.owner = owner
        self.body = body
        self.provider = provider
        self.parse = parse


def url_path(url: Any) -> str:
    """A URL's path (percent-decoded, as ``URL.path``); by the parsed reference when there is one (5x faster)."""
    reference = getattr(url, "_uri_reference", None)  # httpx / httpx2 internals, checked: else the public path
    path = getattr(reference, "path", None)
    if type(path) is str and "%" not in path:
        return path
    return url.path


def maybe_model_call(request: Any) -> bool:
    """The test every request pays: a POST whose path ends like a model endpoint's."""
    return request.method == "POST" and _endpoints.may_be_model_path(url_path(request.url))


def _too_large(length: str | None) -> bool:
    return length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES


def plan_request(method: str, path: str, host: str, header: Callable[[str], str | None],
                 content: Callable[[], Any], excluded_hosts: frozenset[str]) -> Plan | None:
    """The one rule for what is read, whichever library sends the request; None: pass it on unread.

    ``header(name)`` is a request header (lower-case name) or None;
    ``content()`` the body: its bytes, the JSON object the library is about
    to serialise (aiohttp's ``json=``), or None when it is streamed.
    """
    if method != "POST" and method.upper() != "POST":
        return None
    endpoint = endpoint_for_path(path)
    if endpoint is None:
        return None
    if host in excluded_hosts:
        return None
    owner = active_call()
    if owner is not None:
        return Plan(endpoint, owner, None, "")  # measured above: its body is not read again
    if _too_large(header("content-length")):
        _frames.warn_once("request-size", "ctxscope: a model request over %d bytes is not read",
                           MAX_BODY_BYTES)
        return None
    if header("content-encoding"):
        _frames.warn_once("request-encoding", "ctxscope: a content-encoded model request is not read")
        return None
    data = content()
    if data is None:
        _frames.warn_once("request-stream", "ctxscope: a model request with a streamed body is not read")
        return None
    parse: Callable[[], Mapping[str, Any] | None] | None = None
    if isinstance(data, Mapping):
        body: Any = data  # the caller's object: ModelCall copies what it keeps, as at the SDK level
    else:
        if len(data) > MAX_BODY_BYTES:
            _frames.warn_once("request-size", "ctxscope: a model request over %d bytes is not read",
                               MAX_BODY_BYTES)
            return None
        body = _BODIES.peek(data, endpoint.conversation)
        if body is not None:  # a known conversation's next body: the worker reads it whole
            parse = functools.partial(_read_later, data, endpoint, path)
        else:
            try:
                body = _BODIES.parse_whole(data, endpoint.conversation)
            except ValueError:
                return None
    if not body_fits(endpoint, body):
        return None
    body = _with_model(endpoint, body, path)
    if parse is None and not isinstance(data, Mapping):
        parse = functools.partial(_same, body)  # read whole already, ctxscope's own objects: no copy
    return Plan(endpoint, None, body, provider_for(host, endpoint), parse)


def _with_model(endpoint: Endpoint, body: Any, path: str) -> Any:
    if endpoint.model_in_path and "model" not in body:
        # A copy (never sent, the caller's object untouched): the tracker and the span name the model.
        return {**body, "model": model_from_path(path)}
    return body


def _same(body: Mapping[str, Any]) -> Mapping[str, Any]:
    return body


def _read_later(data: bytes, endpoint: Endpoint, path: str) -> Mapping[str, Any] | None:
    """On the measuring worker: the whole body the caller's thread only peeked at (None: not the API's after all)."""
    try:
        body = _BODIES.parse(data, endpoint.conversation)
    except ValueError:  # its ends were a known body's, its middle is not JSON: no composition
        _log.debug("ctxscope: a %s request is not JSON", endpoint.api, exc_info=True)
        return None
    if not body_fits(endpoint, body):
        return None
    return _with_model(endpoint, body, path)


def _httpx_content(request: Any) -> bytes | None:
    try:
        return request.content
    except Exception:  # noqa: BLE001 - a streamed upload (RequestNotRead): not read
        return None


def plan(request: Any, excluded_hosts: frozenset[str]) -> Plan | None:
    """The plan for an httpx / httpx2 request, or None: not a model call (or not one we may read)."""
    url = request.url
    return plan_request(request.method, url_path(url), url.host, request.headers.get,
                        lambda: _httpx_content(request), excluded_hosts)


def measure_for(plan_: Plan, status: int, header: Callable[[str], str | None], call: ModelCall | None, *,
                decoded: bool = False) -> Measure | None:
    """A measure for the response, or None when its body must pass unread (too large).

    ``decoded``: the library undoes the content encoding before the body is read (aiohttp by default).
    """
    if _too_large(header("content-length")):
        _frames.warn_once("response-size", "ctxscope: a model response over %d bytes is not read",
                           MAX_BODY_BYTES)
        return None
    body = plan_.body
    is_stream = plan_.endpoint.streamed_always or (isinstance(body, dict) and streamed(plan_.endpoint, body))
    return Measure(plan_.endpoint, status=status, content_type=header("content-type") or "",
                   content_encoding="" if decoded else header("content-encoding") or "", is_stream=is_stream,
                   call=call)


def _measure(plan_: Plan, response: Any, call: ModelCall | None) -> Measure | None:
    return measure_for(plan_, response.status_code, response.headers.get, call)


def _attach(plan_: Plan, response: Any, call: ModelCall | None, library: Any, is_async: bool) -> None:
    """Tee the response's body (or read it now, when the client has read it already)."""
    measure = _measure(plan_, response, call)
    if measure is None:
        if call is not None:
            call.finish(None)
        return
    if response.is_closed:  # send(stream=False): the client has the whole, decoded body
        if call is not None:
            try:
                measure.feed_decoded(response.content)
            except Exception:  # noqa: BLE001 - closed without being read
                pass
            measure.done()
        return
    sync_tee, async_tee = tee_classes(library)
    tee = (async_tee if is_async else sync_tee)(response.stream, measure)
    response.stream = tee
    # A response dropped unread and unclosed: its call ends with what was seen when it is collected
    # (not at interpreter exit, when the providers may be gone), as the SDK-level stream proxies do.
    weakref.finalize(tee, _abandoned, measure).atexit = False


def _begin(telemetry: Telemetry, plan_: Plan) -> ModelCall | None:
    if plan_.owner is not None:
        return None
    return start_call(telemetry, provider=plan_.provider, api=plan_.endpoint.api, body=plan_.body,
                      parse=plan_.parse)


def _plan_safely(request: Any, excluded: frozenset[str]) -> Plan | None:
    try:
        return plan(request, excluded)
    except Exception:  # noqa: BLE001 - ours: the request goes on unmeasured
        _log.warning("ctxscope: could not look at a request", exc_info=True)
        return None


def _attach_safely(plan_: Plan, response: Any, call: ModelCall | None, library: Any, is_async: bool) -> None:
    try:
        _attach(plan_, response, call, library, is_async)
    except Exception:  # noqa: BLE001
        _log.warning("ctxscope: could not read a model response", exc_info=True)
        if call is not None and not call.ended:
            call.finish(None)


def _hook(telemetry: Telemetry, plan_: Plan) -> tuple[ModelCall | None, object]:
    """Open the transport's own call (none when measured above) and make it current while the request is sent."""
    call = _begin(telemetry, plan_)
    return call, (call.activate() if call is not None else None)


def send_wrapper(telemetry: Telemetry, library: Any, excluded: frozenset[str],
                 is_async: bool) -> Callable[[Any, Switch], Callable[..., Any]]:
    """The maker of the hook of ``library``'s ``Client.send`` (or ``AsyncClient.send``), for :class:`._patch.Patch`.

    The pass-through comes first and is one test: a POST whose path ends
    like a model endpoint's (:func:`maybe_model_call`); anything else goes
    to the original at the cost of one function call.
    """
    may_be_model_path = _endpoints.may_be_model_path

    def make(original: Any, switch: Switch) -> Callable[..., Any]:
        if is_async:
            async def async_send(self: Any, *args: Any, **kwargs: Any) -> Any:
                request: Any = args[0] if args else kwargs.get("request")
                try:
                    maybe = switch.on and request.method == "POST" and may_be_model_path(url_path(request.url))
                except Exception:  # noqa: BLE001 - not a request we know: not ours to read
                    maybe = False
                plan_ = _plan_safely(request, excluded) if maybe else None
                if plan_ is None:
                    return await original(self, *args, **kwargs)
                call, token = _hook(telemetry, plan_)
                try:
                    response = await original(self, *args, **kwargs)
                except BaseException as error:
                    if call is not None:
                        call.fail(error)
                    raise
                finally:
                    if call is not None:
                        call.deactivate(token)
                _attach_safely(plan_, response, call, library, is_async=True)
                return response

            return async_send

        def send(self: Any, *args: Any, **kwargs: Any) -> Any:
            request: Any = args[0] if args else kwargs.get("request")
            try:
                maybe = switch.on and request.method == "POST" and may_be_model_path(url_path(request.url))
            except Exception:  # noqa: BLE001 - not a request we know: not ours to read
                maybe = False
            plan_ = _plan_safely(request, excluded) if maybe else None
            if plan_ is None:
                return original(self, *args, **kwargs)
            call, token = _hook(telemetry, plan_)
            try:
                response = original(self, *args, **kwargs)
            except BaseException as error:
                if call is not None:
                    call.fail(error)
                raise
            finally:
                if call is not None:
                    call.deactivate(token)
            _attach_safely(plan_, response, call, library, is_async=False)
            return response

        return send

    return make
