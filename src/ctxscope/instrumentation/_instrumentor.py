"""The instrumentor both providers share: the method wrappers, and wrapping the methods a provider names.

:func:`create_wrapper` wraps a create-like method: it opens the call's span
from the keyword arguments, makes it current while the SDK sends, re-raises
the provider's errors unchanged, and ends the call with the response, or
hands a stream to a proxy (:mod:`._streams`) that ends it with the stream.

A provider module subclasses :class:`ProviderInstrumentor` and gives its
create-like methods (``_create_targets``: module, ``Class.method``, the
:class:`~._wrappers.Api`, async or not), its streaming helpers
(``_helper_targets`` and ``_helper_wrapper``) and its SDK requirement.
Everything else, including reading the content-capture variable once, is here.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Collection, Iterable

from ctxscope.faultlog import log_failure
from ctxscope.instrumentation import _worker
from ctxscope.instrumentation._content import content_mode_from_env
from ctxscope.instrumentation._streams import AsyncStream, SyncStream, register_helper_call
from ctxscope.instrumentation._wrappers import (
    Api,
    ModelCall,
    ResponseInfo,
    Telemetry,
    install_processor,
    request_body,
    server_of,
    start_call,
    unwrap_all,
)

_log = logging.getLogger("ctxscope.instrumentation")

# How long uninstrumenting waits for the calls still being measured (seconds): bounded, as every
# wait of ctxscope's is; past it they are measured later, against a closed telemetry (not exported).
_UNINSTRUMENT_DRAIN_S = 5.0

try:
    # mypy finds the module but not the class in it (opentelemetry-instrumentation 0.66b2): Any then.
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - the provider extras bring it
    BaseInstrumentor = object


# ---------------------------------------------------------------------------
# Method wrappers, the same for every provider
# ---------------------------------------------------------------------------


def begin(telemetry: Telemetry, api: Api, kwargs: dict[str, Any], instance: Any = None) -> ModelCall | None:
    """Open the call's span from the keyword arguments, or None (the call then runs bare).

    ``instance``: the SDK resource called (its client names the server).
    """
    try:
        call = start_call(telemetry, provider=api.provider, api=api.name, body=request_body(kwargs),
                          server=server_of(instance))
        if call is not None:
            register_helper_call(call)  # a streaming helper's manager ends it at exit
        return call
    except Exception:  # noqa: BLE001
        log_failure(_log, "ctxscope: could not start the %s call", api.name)
        return None


_RAW_RESPONSES = ("LegacyAPIResponse", "APIResponse")  # the SDKs' with_raw_response results


def _raw_body_read(result: Any) -> bool:
    """A ``with_raw_response`` result whose body the SDK has already read (not a stream)."""
    if type(result).__name__ not in _RAW_RESPONSES + ("AsyncAPIResponse",):
        return False
    # openai's legacy response says ``_stream``, anthropic's ``_is_sse_stream``.
    if getattr(result, "_stream", getattr(result, "_is_sse_stream", True)):
        return False
    return bool(getattr(getattr(result, "http_response", None), "is_closed", False))


def _raw_parsed(result: Any) -> Any:
    """A ``with_raw_response`` result's parsed object, when its body is already read; else the result.

    The SDKs cache what ``parse()`` returns, so the caller's own ``parse()``
    later gets the very same object. A streamed raw response, and
    ``with_streaming_response`` (its body not read yet), are left alone: the
    span then has estimates but no usage.
    """
    if type(result).__name__ in _RAW_RESPONSES and _raw_body_read(result):
        return result.parse()
    return result


async def _raw_parsed_async(result: Any) -> Any:
    """The same for the async clients, whose ``parse()`` is a coroutine (openai's legacy one is not)."""
    try:
        if _raw_body_read(result):
            parsed = result.parse()
            return (await parsed) if hasattr(parsed, "__await__") else parsed
    except Exception:  # noqa: BLE001 - an unexpected shape: the span goes without usage
        _log.debug("ctxscope: could not read a raw response of type %s", type(result).__name__)
    return result


def _handed_to_transport(call: ModelCall, result: Any) -> bool:
    """A raw response whose body is still to be read goes to the HTTP tee, which ends the call as it is read.

    ``with_streaming_response`` and streamed ``with_raw_response`` results:
    the transport layer (instrumentation/http), when on, reads their usage
    and ids from the bytes the caller reads. Without it the call ends now,
    with estimates but no usage.
    """
    if type(result).__name__ not in _RAW_RESPONSES + ("AsyncAPIResponse",) or _raw_body_read(result):
        return False
    try:
        from ctxscope.instrumentation.http import adopt

        return adopt(getattr(result, "http_response", None), call)
    except Exception:  # noqa: BLE001 - not instrumented, or an unexpected shape
        return False


def read_info(api: Api, response: Any, captures_content: bool) -> ResponseInfo | None:
    """What a response tells about its call (usage, ids, finish reasons; the output when captured).

    Run by the measuring worker, off the call path: reading a response
    object (pydantic attributes, the usage) is the worker's job, not the caller's.
    """
    info = None
    try:
        info = api.info(response)
        if captures_content:
            info.output_messages = api.output(response, info)
    except Exception:  # noqa: BLE001 - an unexpected response shape
        _log.debug("ctxscope: no usage in a %s result of type %s", api.name, type(response).__name__)
    return info


def finish_result(call: ModelCall, api: Api, result: Any, response: Any = None) -> Any:
    """Wrap a stream in a proxy bound to the call, or end the call with the response; return what the caller gets.

    ``response``: the parsed object where the caller gets a raw response (async clients parse it first).
    """
    try:
        sync_class, async_class = api.stream_classes()
        if isinstance(result, sync_class):
            return SyncStream(result, call, api.stream_state(call.captures_content))
        if isinstance(result, async_class):
            return AsyncStream(result, call, api.stream_state(call.captures_content))
        if _handed_to_transport(call, result):
            return result
        try:
            # On this thread: a raw response's parse() is the caller's too (the SDK caches its result).
            response = _raw_parsed(result) if response is None else response
        except Exception:  # noqa: BLE001 - an unexpected response shape
            _log.debug("ctxscope: no usage in a %s result of type %s", api.name, type(result).__name__)
            call.finish(None)
            return result
        call.finish(functools.partial(read_info, api, response, call.captures_content))
    except Exception:  # noqa: BLE001
        log_failure(_log, "ctxscope: could not finish the %s call", api.name)
        if not call.ended:
            call.finish(None)
    return result


def create_wrapper(telemetry: Telemetry, api: Api, is_async: bool) -> Callable[..., Any]:
    """A ``wrapt`` wrapper of a create-like method: span around the request, provider errors re-raised as they are."""
    if is_async:
        async def async_wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
            call = begin(telemetry, api, kwargs, instance)
            if call is None:
                return await wrapped(*args, **kwargs)
            token = call.activate()
            try:
                result = await wrapped(*args, **kwargs)
            except BaseException as error:
                call.fail(error)
                raise
            finally:
                call.deactivate(token)
            return finish_result(call, api, result, await _raw_parsed_async(result))

        return async_wrapper

    def wrapper(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        call = begin(telemetry, api, kwargs, instance)
        if call is None:
            return wrapped(*args, **kwargs)
        token = call.activate()
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as error:
            call.fail(error)
            raise
        finally:
            call.deactivate(token)
        return finish_result(call, api, result)

    return wrapper


# ---------------------------------------------------------------------------
# The instrumentor
# ---------------------------------------------------------------------------

CreateTarget = tuple[str, str, Api, bool]  # module, "Class.method", api, is_async
HelperTarget = tuple[str, str, bool]  # module, "Class.method", is_async


def create_targets(module: str, resource: str, methods: Iterable[str], api: Api) -> tuple[CreateTarget, ...]:
    """Each method of a resource class and of its ``Async`` twin (the SDKs name them so)."""
    return tuple((module, f"{prefix}{resource}.{method}", api, bool(prefix))
                 for method in methods for prefix in ("", "Async"))


def helper_targets(module: str, resource: str, method: str = "stream") -> tuple[HelperTarget, ...]:
    """A streaming helper of a resource class and of its ``Async`` twin."""
    return tuple((module, f"{prefix}{resource}.{method}", bool(prefix)) for prefix in ("", "Async"))


def _beside_other_configurator() -> None:
    try:
        from ctxscope.telemetry.setup import configure_beside_other_configurator

        configure_beside_other_configurator()
    except Exception:  # noqa: BLE001 - the calls are still instrumented
        _log.warning("ctxscope: could not set up beside the configured providers", exc_info=True)


class ProviderInstrumentor(BaseInstrumentor):
    """Context spans for one provider SDK's model calls."""

    _instruments: tuple[str, ...] = ()
    _create_targets: tuple[CreateTarget, ...] = ()
    _helper_targets: tuple[HelperTarget, ...] = ()
    _telemetry: Telemetry | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return self._instruments

    def _helper_wrapper(self, telemetry: Telemetry, is_async: bool) -> Callable[..., Any]:
        raise NotImplementedError

    def _instrument(self, **kwargs: Any) -> None:
        from wrapt import wrap_function_wrapper

        tracer_provider = kwargs.get("tracer_provider")
        if kwargs.get("tracker") is None:  # the process-wide tracker, which the local store records
            _beside_other_configurator()
        install_processor(tracer_provider, kwargs.get("meter_provider"))
        # ``tracker``: a Tracker of one's own (tests, a tokenizer choice); default the process-wide one.
        # Content capture is decided here, once (SPEC section 7); ``logger_provider`` takes its events.
        telemetry = Telemetry(tracer_provider, kwargs.get("tracker"), content=content_mode_from_env(),
                              logger_provider=kwargs.get("logger_provider"),
                              meter_provider=kwargs.get("meter_provider"))
        type(self)._telemetry = telemetry  # noqa: SLF001 - the class's own state, set on the class (one instrumentation per process)
        _worker.start()  # its thread now, not on the first call's path
        # No encoding is loaded here: the first call of a model that needs one starts its load, in the
        # background (ctxscope.core.tokens), and a call counted before it is ready says so on its span.
        wrappers = [(module, name, create_wrapper(telemetry, api, is_async))
                    for module, name, api, is_async in self._create_targets]
        wrappers += [(module, name, self._helper_wrapper(telemetry, is_async))
                     for module, name, is_async in self._helper_targets]
        for module, name, wrapper in wrappers:
            try:
                wrap_function_wrapper(module, name, wrapper)
            except (AttributeError, ImportError):  # an SDK version without this method
                _log.debug("ctxscope: %s.%s not found; not instrumented", module, name)

    def _uninstrument(self, **kwargs: Any) -> None:
        unwrap_all(self._create_targets, self._helper_targets)
        telemetry = self._telemetry
        if telemetry is not None:
            # The calls made while instrumented are measured before their telemetry closes (the
            # measuring worker may still hold them): nothing measured is lost by uninstrumenting.
            _worker.drain(_UNINSTRUMENT_DRAIN_S)
            telemetry.close()
            type(self)._telemetry = None  # noqa: SLF001 - the class's own state, set on the class (one instrumentation per process)
