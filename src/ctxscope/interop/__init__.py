"""Profile model-call spans written by other GenAI instrumentations.

The official OpenTelemetry OpenAI instrumentation (GenAI conventions),
OpenLLMetry and OpenInference: add one span processor and their spans get
ctxscope's context annotation (on a companion span) and metrics::

    from ctxscope.interop import ForeignSpanProcessor

    provider.add_span_processor(ForeignSpanProcessor(provider))

See docs/other-instrumentations.md.
"""

from __future__ import annotations

from ctxscope.interop.formats import (
    FORMAT_GEN_AI,
    FORMAT_OPENINFERENCE,
    FORMAT_OPENLLMETRY,
    ForeignCall,
    parse_attributes,
)
from ctxscope.interop.processor import COMPANION_SPAN_PREFIX, ForeignSpanProcessor, install

__all__ = [
    "COMPANION_SPAN_PREFIX",
    "FORMAT_GEN_AI",
    "FORMAT_OPENINFERENCE",
    "FORMAT_OPENLLMETRY",
    "ForeignCall",
    "ForeignSpanProcessor",
    "install",
    "parse_attributes",
]
