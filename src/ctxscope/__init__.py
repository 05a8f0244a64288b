"""ctxscope: profile the context window of LLM agents with OpenTelemetry."""

from .schema import (
    Annotation,
    Category,
    Change,
    ChangeType,
    Coverage,
    Item,
    Stage,
    WasteKind,
)
from . import session  # callable: ``with ctxscope.session("id"):``; also ``ctxscope.session.mark_compaction``

__all__ = [
    "Annotation",
    "Category",
    "Change",
    "ChangeType",
    "Coverage",
    "Item",
    "Stage",
    "WasteKind",
    "session",
    "setup",
]


def __getattr__(name: str):
    # Lazy, so that importing the pure modules needs no OpenTelemetry SDK.
    if name == "setup":
        from .export import setup

        return setup
    raise AttributeError(f"module 'ctxscope' has no attribute {name!r}")
