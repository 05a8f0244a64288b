"""The HTTP transport layer: model calls of any client that sends them with ``httpx`` or ``httpx2``.

:class:`HTTPInstrumentor` (entry point ``ctxscope_http``, on by default
beside the SDK instrumentors) wraps ``Client.send`` and ``AsyncClient.send``
of both libraries. A POST to a known model endpoint (OpenAI-compatible chat
completions, OpenAI Responses, Anthropic Messages, Gemini ``generateContent``
/ ``streamGenerateContent``, Ollama ``/api/chat``) becomes one model-call
span with the context annotation, exactly as the SDK instrumentors make it;
its body is read, never copied into telemetry. A request the SDK
instrumentors already measure is not counted again (:mod:`._send`).

``CTXSCOPE_HTTP_EXCLUDE_HOSTS`` (comma-separated host names) leaves hosts
alone entirely; a body over 32 MB passes through unread.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any, Collection

from ctxscope.config import excluded_hosts, settings
from ctxscope.instrumentation._content import content_mode_from_env
from ctxscope.instrumentation._instrumentor import BaseInstrumentor
from ctxscope.instrumentation._wrappers import Telemetry, install_processor, unwrap_all
from ctxscope.instrumentation.http._send import adopt, send_wrapper

__all__ = ["HTTPInstrumentor", "adopt", "excluded_hosts"]

_log = logging.getLogger("ctxscope.instrumentation")

LIBRARIES = ("httpx", "httpx2")
_TARGETS = tuple((library, f"{cls}.send", cls == "AsyncClient") for library in LIBRARIES
                 for cls in ("Client", "AsyncClient"))


class HTTPInstrumentor(BaseInstrumentor):
    """Context spans for model calls sent through ``httpx`` / ``httpx2`` clients (LiteLLM, google-genai, ...)."""

    _telemetry: Telemetry | None = None
    _wrapped: tuple[tuple[str, str, bool], ...] = ()

    def instrumentation_dependencies(self) -> Collection[str]:
        # Either library will do; each is wrapped only if it is installed.
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        from wrapt import wrap_function_wrapper

        install_processor(kwargs.get("tracer_provider"), kwargs.get("meter_provider"))
        telemetry = Telemetry(kwargs.get("tracer_provider"), kwargs.get("tracker"), content=content_mode_from_env(),
                              logger_provider=kwargs.get("logger_provider"))
        type(self)._telemetry = telemetry  # noqa: SLF001 - the class's own state, set on the class (one instrumentation per process)
        given = kwargs.get("exclude_hosts")
        excluded = excluded_hosts(given) if given is not None else settings().http_exclude_hosts
        wrapped = []
        for module_name, name, is_async in _TARGETS:
            try:
                library = importlib.import_module(module_name)
                wrap_function_wrapper(module_name, name, send_wrapper(telemetry, library, excluded, is_async))
                wrapped.append((module_name, name, is_async))
            except (AttributeError, ImportError):  # the library is not installed
                _log.debug("ctxscope: %s.%s not found; not instrumented", module_name, name)
        type(self)._wrapped = tuple(wrapped)  # noqa: SLF001 - the class's own state, set on the class (one instrumentation per process)

    def _uninstrument(self, **kwargs: Any) -> None:
        unwrap_all(self._wrapped)
        type(self)._wrapped = ()  # noqa: SLF001 - the class's own state, set on the class (one instrumentation per process)
        telemetry = self._telemetry
        if telemetry is not None:
            telemetry.close()
            type(self)._telemetry = None  # noqa: SLF001 - the class's own state, set on the class (one instrumentation per process)
