"""Anthropic Messages' usage and what the server did to the context: the readers a transcript needs.

Claude Code transcripts record each call's usage as the API returns it; reading
it needs these functions alone, not the request walkers of
:mod:`~ctxscope.core.apis.anthropic_messages` (which re-exports every name here
and is the format module: its module docstring says how the reported input is
read). Kept apart so a transcript command imports no wire format it never reads.
"""

from __future__ import annotations

from typing import Any

from ctxscope.core.observation import Usage
from ctxscope.core.payload import as_list

from ctxscope.core.apis._fields import count, field

__all__ = ["CLEAR_THINKING_PREFIX", "COMPACTION_BLOCK", "cleared", "compacted", "first_sampling", "is_summary",
           "usage"]


def first_sampling(value: Any) -> Any:
    """The usage of the request's own sampling: the first ``message`` entry of ``iterations``, else the usage."""
    iterations = field(value, "iterations")
    if isinstance(iterations, (list, tuple)):
        for entry in iterations:
            if field(entry, "type") == "message" and count(field(entry, "input_tokens")) is not None:
                return entry
    return value


# The content block that holds a server-side compaction's summary (in responses and in later requests).
COMPACTION_BLOCK = "compaction"
# Context editing strategies and the category of what each clears (clear_tool_uses_*: tool results,
# with clear_tool_inputs their calls too; clear_thinking_*: thinking blocks).
CLEAR_THINKING_PREFIX = "clear_thinking"


def compacted(usage: Any, content: Any = None) -> bool:
    """Whether the server compacted the context during the call (an iteration or a block says so)."""
    iterations = field(usage, "iterations")
    if isinstance(iterations, (list, tuple)) and any(field(e, "type") == "compaction" for e in iterations):
        return True
    return any(is_summary(block) for block in as_list(content) or ())


def is_summary(block: Any) -> bool:
    """A compaction block that holds a summary (what the API drops the earlier context for)."""
    # A compaction block without content is a failed compaction: the server treats it as a no-op.
    return field(block, "type") == COMPACTION_BLOCK and field(block, "content") is not None


def cleared(context_management: Any) -> tuple[tuple[str, int], ...]:
    """``(edit type, cleared_input_tokens)`` of each applied context edit that cleared tokens."""
    found = []
    for edit in as_list(field(context_management, "applied_edits")) or ():
        tokens = count(field(edit, "cleared_input_tokens"))
        if tokens:
            found.append((str(field(edit, "type") or "context_edit"), tokens))
    return tuple(found)


def usage(value: Any, server_tool_calls: int | None = None) -> Usage | None:
    if value is None:
        return None
    if type(value) is dict and value.get("iterations") is None:
        return _plain_usage(value, server_tool_calls)
    sampled = first_sampling(value)
    first_uncached = count(field(sampled, "input_tokens"))
    if first_uncached is None:
        return None
    reported = (first_uncached + (count(field(sampled, "cache_creation_input_tokens")) or 0)
                + (count(field(sampled, "cache_read_input_tokens")) or 0))
    # The other counts are the call's own, as billed: the top-level fields.
    return Usage(input_tokens=count(field(value, "input_tokens")), output_tokens=count(field(value, "output_tokens")),
                 cache_read_input_tokens=count(field(value, "cache_read_input_tokens")),
                 cache_creation_input_tokens=count(field(value, "cache_creation_input_tokens")),
                 reported_input=reported, server_tool_calls=server_tool_calls, provider_compaction=compacted(value))


def _plain_usage(value: dict[str, Any], server_tool_calls: int | None) -> Usage | None:
    """:func:`usage` of a JSON object without ``iterations`` (every transcript call's): each field read once.

    The same values as the general reading: the request's own sampling is the
    usage itself, and without iterations (and no content given) nothing says
    the server compacted.
    """
    get = value.get
    uncached = count(get("input_tokens"))
    if uncached is None:
        return None
    cache_read = count(get("cache_read_input_tokens"))
    cache_creation = count(get("cache_creation_input_tokens"))
    # Positional, in Usage's field order (input, output, cache read, cache creation, reported input,
    # server tool calls, provider compaction): no keyword dict built for every transcript call.
    return Usage(uncached, count(get("output_tokens")), cache_read, cache_creation,
                 uncached + (cache_creation or 0) + (cache_read or 0), server_tool_calls, False)
