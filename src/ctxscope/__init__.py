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

__all__ = [
    "Annotation",
    "Category",
    "Change",
    "ChangeType",
    "Coverage",
    "Item",
    "Stage",
    "WasteKind",
]
