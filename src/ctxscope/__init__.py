"""ctxscope: profile the context window of LLM agents with OpenTelemetry.

What users import is named here (the README shows it; ``tests/test_public_surface.py``
imports exactly that). The names that need the OpenTelemetry SDK load on first
use, so importing ``ctxscope`` for the pure parts (items, counting, transcripts)
costs no SDK import; so do the session functions (``core.conversation`` imports
every wire format, which a transcript command never reads).
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

from ctxscope._deprecated import DeprecatedModule
from ctxscope.schema import Annotation, Category, Change, ChangeType, Coverage, Item, Stage, WasteKind

if TYPE_CHECKING:  # pragma: no cover
    from ctxscope.core.conversation import compacting, current_session_id, mark_compaction, session
    from ctxscope.telemetry.setup import Telemetry, setup
    from ctxscope.telemetry.processor import ContextSpanProcessor


def _installed_version() -> str:
    # importlib.metadata costs more to import than most of ctxscope: only when asked.
    from importlib import metadata as _metadata

    try:
        return _metadata.version("ctxscope")
    except _metadata.PackageNotFoundError:  # a source tree on sys.path, not installed
        return "0+unknown"

__all__ = [
    "Annotation",
    "Category",
    "Change",
    "ChangeType",
    "ContextSpanProcessor",
    "Coverage",
    "Item",
    "Stage",
    "Telemetry",
    "WasteKind",
    "__version__",
    "compacting",
    "current_session_id",
    "mark_compaction",
    "session",
    "setup",
]

_LAZY = {
    "compacting": ("ctxscope.core.conversation", "compacting"),
    "current_session_id": ("ctxscope.core.conversation", "current_session_id"),
    "mark_compaction": ("ctxscope.core.conversation", "mark_compaction"),
    "session": ("ctxscope.core.conversation", "session"),
    "setup": ("ctxscope.telemetry.setup", "setup"),
    "Telemetry": ("ctxscope.telemetry.setup", "Telemetry"),
    "ContextSpanProcessor": ("ctxscope.telemetry.processor", "ContextSpanProcessor"),
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        version = globals()["__version__"] = _installed_version()
        return version
    if name in _LAZY:
        module, attribute = _LAZY[name]
        value = globals()[name] = getattr(importlib.import_module(module), attribute)  # looked up once
        return value
    raise AttributeError(f"module 'ctxscope' has no attribute {name!r}")


# ``ctxscope.session`` is the context manager; ``from ctxscope.session import X`` still finds X.
sys.modules.setdefault("ctxscope.session", DeprecatedModule("ctxscope.session", "ctxscope.core.conversation"))

# Old module paths (0.1) stay importable for one release.
from ctxscope._moved import install as _install_moved_paths  # noqa: E402

_install_moved_paths()
