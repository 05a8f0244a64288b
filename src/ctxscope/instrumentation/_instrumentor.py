"""The instrumentor both providers share: wrap the methods a provider module names, unwrap them.

A provider module subclasses :class:`ProviderInstrumentor` and gives its
create-like methods (``_create_targets``: module, ``Class.method``, the
:class:`~._wrappers.Api`, async or not), its streaming helpers
(``_helper_targets`` and ``_helper_wrapper``) and its SDK requirement.
Everything else, including reading the content-capture variable once, is here.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Collection, Iterable

from ._content import content_mode_from_env
from ._wrappers import Api, Telemetry, create_wrapper, install_processor, unwrap_all

_log = logging.getLogger("ctxscope.instrumentation")

try:
    from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - the provider extras bring it
    BaseInstrumentor = object  # type: ignore[assignment,misc]

CreateTarget = tuple[str, str, Api, bool]  # module, "Class.method", api, is_async
HelperTarget = tuple[str, str, bool]  # module, "Class.method", is_async


def create_targets(module: str, resource: str, methods: Iterable[str], api: Api) -> tuple[CreateTarget, ...]:
    """Each method of a resource class and of its ``Async`` twin (the SDKs name them so)."""
    return tuple((module, f"{prefix}{resource}.{method}", api, bool(prefix))
                 for method in methods for prefix in ("", "Async"))


def helper_targets(module: str, resource: str, method: str = "stream") -> tuple[HelperTarget, ...]:
    """A streaming helper of a resource class and of its ``Async`` twin."""
    return tuple((module, f"{prefix}{resource}.{method}", bool(prefix)) for prefix in ("", "Async"))


class ProviderInstrumentor(BaseInstrumentor):  # type: ignore[misc,valid-type]
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
        install_processor(tracer_provider, kwargs.get("meter_provider"))
        # ``tracker``: a Tracker of one's own (tests, a tokenizer choice); default the process-wide one.
        # Content capture is decided here, once (SPEC section 7); ``logger_provider`` takes its events.
        telemetry = Telemetry(tracer_provider, kwargs.get("tracker"), content=content_mode_from_env(),
                              logger_provider=kwargs.get("logger_provider"))
        type(self)._telemetry = telemetry
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
        if type(self)._telemetry is not None:
            type(self)._telemetry.close()
            type(self)._telemetry = None
