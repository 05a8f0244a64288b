"""Every environment variable ctxscope reads, one constant each, documented.

Configuration is read once at start (instrumentation, processor, CLI), never
per request.
"""

OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""``true`` opts in to message content in telemetry (SPEC section 7); off by default."""

CTXSCOPE_TOKENIZER = "CTXSCOPE_TOKENIZER"
"""``auto`` (default), ``tiktoken``, ``chars`` or ``bytes``: the counting basis."""

CTXSCOPE_HASH_KEY = "CTXSCOPE_HASH_KEY"
"""Key of the keyed hash behind item ids and session fingerprints (default: a fixed key)."""

CTXSCOPE_CAPTURE_LABELS = "CTXSCOPE_CAPTURE_LABELS"
"""``true`` lets file paths and commands into change labels (default: tool names only)."""
