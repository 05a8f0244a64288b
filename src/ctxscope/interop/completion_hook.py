"""ctxscope as the GenAI completion hook of the official OpenTelemetry instrumentations.

``opentelemetry-util-genai`` loads a hook from the entry point group
``opentelemetry_genai_completion_hook`` named by
``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK`` (``ctxscope`` here) and calls
it when each model call of its instrumentations completes, with the call's
inputs, outputs, system instruction and tool definitions, whether or not
content capture is on, and the call's span (still open). The hook turns them
into the GenAI conventions' JSON, reads them with :mod:`.formats` (the
reader of other instrumentations' spans) and writes the context annotation
on a companion span, exactly as :class:`.processor.ForeignSpanProcessor`
does for content found on spans: only counts and identities leave the
process (SPEC section 7), the content never does.

One measurement per call: a call ctxscope already measured (its SDK
instrumentor or its HTTP transport ran inside the official span, or the
official span inside ctxscope's) is left alone (:mod:`..instrumentation._measured`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from typing import Any

from ctxscope.schema import GenAI
from ctxscope.interop.formats import parse_attributes

_log = logging.getLogger("ctxscope.interop")

HOOK_NAME = "ctxscope"  # OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=ctxscope


def _plain(value: Any) -> Any:
    """util-genai's dataclasses as the conventions' JSON values (enums by value)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if getattr(value, f.name) is not None}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "value") and not isinstance(value, (str, int, float, bool)):
        return value.value  # an Enum (FinishReason, Modality)
    return value


def _json(value: Any) -> str:
    return json.dumps(_plain(value), separators=(",", ":"), ensure_ascii=False, default=str)


def content_attributes(inputs: Any, system_instruction: Any, tool_definitions: Any) -> dict[str, str]:
    """The call's content under the conventions' attribute names (read here, never set on a span)."""
    attributes = {GenAI.INPUT_MESSAGES: _json(inputs or [])}
    if system_instruction:
        attributes[GenAI.SYSTEM_INSTRUCTIONS] = _json(system_instruction)
    if tool_definitions is not None:
        attributes[GenAI.TOOL_DEFINITIONS] = _json(tool_definitions)
    return attributes


class CtxscopeCompletionHook:
    """The context annotation of every call the official GenAI instrumentations complete."""

    def __init__(self, tracer_provider: Any = None, meter_provider: Any = None, *, tracker: Any = None) -> None:
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._tracker = tracker
        self._processor: Any = None
        self._lock = threading.Lock()

    def _annotator(self) -> Any:
        # Built at the first call: util-genai loads hooks before the SDK's providers may be set.
        with self._lock:
            if self._processor is None:
                from ctxscope.interop.processor import ForeignSpanProcessor

                self._processor = ForeignSpanProcessor(self._tracer_provider, self._meter_provider,
                                                       tracker=self._tracker)
            return self._processor

    def on_completion(self, *, inputs: Any, outputs: Any, system_instruction: Any,
                      tool_definitions: Any = None, span: Any = None, log_record: Any = None) -> None:
        try:
            self._on_completion(inputs, system_instruction, tool_definitions, span)
        except Exception:  # noqa: BLE001 - never break the user's program
            _log.warning("ctxscope: the GenAI completion hook could not annotate a call", exc_info=True)

    def _on_completion(self, inputs: Any, system_instruction: Any, tool_definitions: Any, span: Any) -> None:
        if span is None:
            return
        from ctxscope.instrumentation._measured import measured

        if measured(span):
            return  # ctxscope's own instrumentor or transport measured this call
        attributes = dict(getattr(span, "attributes", None) or {})
        attributes.update(content_attributes(inputs, system_instruction, tool_definitions))
        call = parse_attributes(attributes)
        if call is None:
            return
        annotator = self._annotator()
        annotator._annotate(span, call)  # noqa: SLF001 - the one annotator of other instrumentations' calls
