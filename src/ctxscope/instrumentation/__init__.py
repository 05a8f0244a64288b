"""OpenTelemetry instrumentors that put the context annotation on model-call spans.

``OpenAIInstrumentor`` (chat completions, Responses) and
``AnthropicInstrumentor`` (messages), registered under the
``opentelemetry_instrumentor`` entry point as ``ctxscope_openai`` and
``ctxscope_anthropic``, so ``opentelemetry-instrument`` finds them. The
provider SDKs (and ``wrapt``, ``opentelemetry-instrumentation``) are extras:
they are imported only when an instrumentor is used.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AnthropicInstrumentor", "OpenAIInstrumentor", "instrument"]


def __getattr__(name: str) -> Any:
    if name == "OpenAIInstrumentor":
        from .openai import OpenAIInstrumentor

        return OpenAIInstrumentor
    if name == "AnthropicInstrumentor":
        from .anthropic import AnthropicInstrumentor

        return AnthropicInstrumentor
    raise AttributeError(name)


def instrument(**kwargs: Any) -> list[str]:
    """Instrument every provider SDK that is installed; returns the names instrumented.

    ``kwargs`` go to ``BaseInstrumentor.instrument`` (``tracer_provider``,
    ``meter_provider``).
    """
    import importlib.util

    done = []
    for module, cls in (("openai", "OpenAIInstrumentor"), ("anthropic", "AnthropicInstrumentor")):
        if importlib.util.find_spec(module) is None:
            continue
        instrumentor = __getattr__(cls)()
        if not instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.instrument(**kwargs)
        done.append(module)
    return done
