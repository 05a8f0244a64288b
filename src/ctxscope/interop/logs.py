"""Message content that a GenAI instrumentation puts in log events, not on its span.

With ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=event_only``,
``opentelemetry-instrumentation-openai-v2`` (through ``opentelemetry-util-genai``)
writes ``gen_ai.input.messages`` / ``gen_ai.system_instructions`` /
``gen_ai.tool.definitions`` only on a ``gen_ai.client.inference.operation.details``
log event, emitted just before the span ends, in the span's context. This
log record processor keeps those attributes, keyed by span id, for the
:class:`~ctxscope.interop.processor.ForeignSpanProcessor` to read when the
span ends. The content stays in the process and is dropped once read
(bounded: the newest 256 spans).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from typing import Any, Mapping

from opentelemetry import trace
from opentelemetry.sdk._logs import LogRecordProcessor

from ctxscope.schema import GenAI

__all__ = ["CONTENT_KEYS", "GenAIEventContent", "INFERENCE_DETAILS_EVENT"]

_log = logging.getLogger(__name__)

INFERENCE_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
CONTENT_KEYS = (GenAI.INPUT_MESSAGES, GenAI.SYSTEM_INSTRUCTIONS, GenAI.TOOL_DEFINITIONS)
_MAX_PENDING = 256


def _span_id(record: Any) -> int | None:
    span_id = getattr(record, "span_id", None)
    if isinstance(span_id, int) and span_id:
        return span_id
    context = getattr(record, "context", None)
    if context is None:
        return None
    span_context = trace.get_current_span(context).get_span_context()
    return span_context.span_id if span_context.is_valid else None


class GenAIEventContent(LogRecordProcessor):
    """Keeps the content attributes of GenAI inference events until their span ends."""

    def __init__(self) -> None:
        self._pending: OrderedDict[int, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def on_emit(self, log_record: Any) -> None:
        try:
            # SDK < 1.39 hands a LogData, later a ReadWriteLogRecord: both hold .log_record.
            record = getattr(log_record, "log_record", log_record)
            if getattr(record, "event_name", None) != INFERENCE_DETAILS_EVENT:
                return
            attributes = getattr(record, "attributes", None) or {}
            content = {k: attributes[k] for k in CONTENT_KEYS if k in attributes}
            span_id = _span_id(record)
            if not content or span_id is None:
                return
            with self._lock:
                self._pending[span_id] = content
                while len(self._pending) > _MAX_PENDING:
                    self._pending.popitem(last=False)
        except Exception:  # noqa: BLE001 - never break the user's program
            _log.warning("ctxscope: could not read a GenAI event", exc_info=True)

    def take(self, span_id: int) -> Mapping[str, Any] | None:
        """The content kept for a span, once."""
        with self._lock:
            return self._pending.pop(span_id, None)

    def shutdown(self) -> None:
        with self._lock:
            self._pending.clear()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
