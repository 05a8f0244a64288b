"""The HTTP transport layer: model calls of any client that sends them with ``httpx``, ``httpx2`` or ``aiohttp``.

:class:`HTTPInstrumentor` (entry point ``ctxscope_http``, on by default
beside the SDK instrumentors) hooks ``Client.send`` and ``AsyncClient.send``
of both httpx libraries, and aiohttp's ``ClientSession._request``
(:mod:`._aiohttp`), each where installed, with plain functions
(:mod:`._patch`: the pass-through of every other request is the hot path).
A POST to a known model endpoint (OpenAI-compatible chat completions,
OpenAI Responses, Anthropic Messages, Gemini ``generateContent`` /
``streamGenerateContent``, Ollama ``/api/chat``) becomes one model-call
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
from ctxscope.instrumentation._wrappers import Telemetry, install_processor
from ctxscope.instrumentation.http import _aiohttp
from ctxscope.instrumentation.http._patch import Patch
from ctxscope.instrumentation.http._send import adopt, send_wrapper

__all__ = ["HTTPInstrumentor", "adopt", "excluded_hosts"]

_log = logging.getLogger("ctxscope.instrumentation")

LIBRARIES = ("httpx", "httpx2")
_TARGETS = tuple((library, cls, cls == "AsyncClient") for library in LIBRARIES for cls in ("Client", "AsyncClient"))


class HTTPInstrumentor(BaseInstrumentor):
    """Context spans for model calls sent through ``httpx`` / ``httpx2`` / ``aiohttp`` (LiteLLM, google-genai, ...)."""

    _telemetry: Telemetry | None = None
    _patches: tuple[Patch, ...] = ()

    def instrumentation_dependencies(self) -> Collection[str]:
        # Either library will do; each is wrapped only if it is installed.
        return ()

    def _instrument(self, **kwargs: Any) -> None:
        install_processor(kwargs.get("tracer_provider"), kwargs.get("meter_provider"))
        telemetry = Telemetry(kwargs.get("tracer_provider"), kwargs.get("tracker"), content=content_mode_from_env(),
                              logger_provider=kwargs.get("logger_provider"))
        type(self)._telemetry = telemetry  # noqa: SLF001 - the class's own state, set on the class (one instrumentation per process)
        given = kwargs.get("exclude_hosts")
        excluded = excluded_hosts(given) if given is not None else settings().http_exclude_hosts
        patches = []
        for module_name, class_name, is_async in _TARGETS:
            try:
                library = importlib.import_module(module_name)
                patches.append(Patch(getattr(library, class_name), "send",
                                     send_wrapper(telemetry, library, excluded, is_async)))
            except (AttributeError, ImportError, KeyError):  # the library is not installed
                _log.debug("ctxscope: %s.%s.send not found; not instrumented", module_name, class_name)
        aiohttp_patch = _aiohttp.install(telemetry, excluded)
        if aiohttp_patch is not None:
            patches.append(aiohttp_patch)
        type(self)._patches = tuple(patches)  # noqa: SLF001 - the class's own state, set on the class (one instrumentation per process)

    def _uninstrument(self, **kwargs: Any) -> None:
        for patch in reversed(self._patches):
            patch.undo()
        type(self)._patches = ()  # noqa: SLF001 - the class's own state, set on the class (one instrumentation per process)
        telemetry = self._telemetry
        if telemetry is not None:
            telemetry.close()
            type(self)._telemetry = None  # noqa: SLF001 - the class's own state, set on the class (one instrumentation per process)
