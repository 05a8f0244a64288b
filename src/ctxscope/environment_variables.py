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

CTXSCOPE_WINDOW_TOKENS = "CTXSCOPE_WINDOW_TOKENS"
"""Context window override: tokens for every model, or ``pattern=tokens`` pairs (``claude-*=200000,gpt-4o*=128000``)."""

CTXSCOPE_EFFECTIVE_WINDOW_TOKENS = "CTXSCOPE_EFFECTIVE_WINDOW_TOKENS"
"""The harness's effective (compaction) window, when smaller than the model's; same syntax as the window."""

CTXSCOPE_COMPACT_THRESHOLD_TOKENS = "CTXSCOPE_COMPACT_THRESHOLD_TOKENS"
"""The automatic compaction threshold: tokens or a percentage (``80%``) of the effective window, else the window."""

CTXSCOPE_MAX_SESSIONS = "CTXSCOPE_MAX_SESSIONS"
"""Live sessions the instrumentation tracks at once (default 64); the least recently used is dropped past it."""

CTXSCOPE_DATA_DIR = "CTXSCOPE_DATA_DIR"
"""Directory of the local store (default ``$XDG_DATA_HOME/ctxscope``, else ``~/.local/share/ctxscope``)."""

CTXSCOPE_STORE = "CTXSCOPE_STORE"
"""``auto`` (default: keep the local store when no OTLP endpoint is configured), ``on`` or ``off``."""

CTXSCOPE_HTTP_EXCLUDE_HOSTS = "CTXSCOPE_HTTP_EXCLUDE_HOSTS"
"""Comma-separated host names whose requests the HTTP transport layer leaves unread (docs/instrumentation.md)."""
