"""What one observed model call hands to listeners (the local store, reports).

The tracker (live instrumentation) and the transcript replayer produce an
:class:`Observation` per model call once its response (or stream) is done;
listeners such as the local store consume it. Counts and identities only:
an observation carries no prompt or response text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ctxscope._record import Record

if TYPE_CHECKING:  # pragma: no cover
    from ctxscope.core.ledger import Snapshot


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Usage(Record):
    """Provider-reported usage of one call (SPEC section 4 for ``reported_input``)."""

    input_tokens: int | None = None  # uncached input as the provider reports it
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    reported_input: int | None = None  # the prompt size, cached input counted once
    # Server-tool runs within the call (Anthropic usage.server_tool_use, server_tool_use
    # blocks): 0 when known to be none. Self-calibration learns from a request offering
    # server tools only when this is 0 (a run's reported input sums a loop).
    server_tool_calls: int | None = None
    # Provider-side context management (docs/instrumentation.md, "Provider-side context editing"):
    # the provider compacted the context during the call (Anthropic's compaction iteration or
    # block, a Responses compaction item in the output) ...
    provider_compaction: bool = False
    # ... or cleared parts of it before the model saw it (Anthropic context editing): one
    # (edit type, cleared input tokens) per applied edit.
    cleared: tuple[tuple[str, int], ...] = ()


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Observation(Record):
    """One model call as an instrumentation or a transcript saw it: what the pipeline observes."""

    session_id: str
    provider: str  # gen_ai.provider.name: "openai", "anthropic", ...
    request_model: str | None
    response_model: str | None
    snapshot: "Snapshot"
    usage: Usage = field(default_factory=Usage)
    timestamp_ns: int = 0
    duration_ns: int | None = None
    error: str | None = None  # the provider error's type name, when the call failed
