"""Which spans' model calls ctxscope has measured already: one measurement per call, whichever way in.

ctxscope measures a call at the SDK level, at the HTTP transport, or through
the GenAI completion hook of the official instrumentations. The first two
know of each other through the context (:func:`._wrappers.active_call`). The
hook runs in another instrumentation's span, after the call: it asks here
whether a ctxscope call started inside that span (ctxscope below it) or that
span started inside a ctxscope call (ctxscope above it).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from opentelemetry import trace

_MAX = 4096  # recent spans remembered: far more than the calls in flight at once


class RecentIds:
    """A thread-safe set of the newest span ids."""

    def __init__(self, size: int = _MAX) -> None:
        self._ids: OrderedDict[int, None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def add(self, value: int) -> None:
        with self._lock:
            self._ids[value] = None
            if len(self._ids) > self._size:
                self._ids.popitem(last=False)

    def __contains__(self, value: object) -> bool:
        with self._lock:
            return value in self._ids


_calls = RecentIds()  # span ids of ctxscope's model-call spans
_enclosing = RecentIds()  # span ids of the spans that were current when one started


def note_call(span: Any) -> None:
    """A ctxscope model call's span was just started in the current context."""
    context = span.get_span_context()
    if context.is_valid:
        _calls.add(context.span_id)
    parent = trace.get_current_span().get_span_context()
    if parent.is_valid:
        _enclosing.add(parent.span_id)


def measured(span: Any) -> bool:
    """Whether a ctxscope call ran inside ``span``, or ``span`` inside a ctxscope call."""
    context = span.get_span_context()
    if context.is_valid and context.span_id in _enclosing:
        return True
    parent = getattr(span, "parent", None)
    return parent is not None and parent.span_id in _calls
