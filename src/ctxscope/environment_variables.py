"""Deprecated: the variables and their parsers are in :mod:`ctxscope.config`.

Kept for one release so that imports of the old path keep working.
"""

import warnings

from ctxscope.config import (  # noqa: F401 - re-exported for the old import path
    CTXSCOPE_CAPTURE_LABELS,
    CTXSCOPE_COMPACT_THRESHOLD_TOKENS,
    CTXSCOPE_DATA_DIR,
    CTXSCOPE_EFFECTIVE_WINDOW_TOKENS,
    CTXSCOPE_HASH_KEY,
    CTXSCOPE_MAX_SESSIONS,
    CTXSCOPE_STORE,
    CTXSCOPE_TOKENIZER,
    CTXSCOPE_WINDOW_TOKENS,
    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT,
)

warnings.warn("ctxscope.environment_variables is deprecated; use ctxscope.config", DeprecationWarning,
              stacklevel=2)
