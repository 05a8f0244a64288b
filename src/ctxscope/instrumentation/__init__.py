"""OpenTelemetry instrumentors that put the context annotation on model-call spans.

``OpenAIInstrumentor`` (chat completions, Responses) and
``AnthropicInstrumentor`` (messages), registered under the
``opentelemetry_instrumentor`` entry point as ``ctxscope_openai`` and
``ctxscope_anthropic``, so ``opentelemetry-instrument`` finds them. The
provider SDKs (and ``wrapt``, ``opentelemetry-instrumentation``) are extras:
they are imported only when an instrumentor is used. ``ctxscope.setup()``
turns on every one whose SDK is installed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["AnthropicInstrumentor", "OpenAIInstrumentor"]


def __getattr__(name: str) -> Any:
    if name == "OpenAIInstrumentor":
        from ctxscope.instrumentation.openai import OpenAIInstrumentor

        return OpenAIInstrumentor
    if name == "AnthropicInstrumentor":
        from ctxscope.instrumentation.anthropic import AnthropicInstrumentor

        return AnthropicInstrumentor
    raise AttributeError(name)

