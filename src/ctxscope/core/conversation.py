"""The application's session id, and compactions it declares.

A session is one agent conversation (SPEC section 1). Its key, first match wins:

1. an explicit argument (``session_id=`` where an API takes one);
2. ``with ctxscope.session("my-id"):`` around the calls (a contextvar, so it
   follows threads started with ``contextvars.copy_context`` and asyncio tasks);
3. ``gen_ai.conversation.id`` already set on the current span, or in baggage;
4. the SPEC fingerprint: a keyed hash of the system prompt and the first user
   message of the request (:func:`fingerprint`).

A compaction is declared with :func:`mark_compaction` (the next request of the
session is its first after the compaction) or with the :func:`compacting`
context manager around the summariser call: requests inside it belong to a
session of their own (``<id>/compaction``), so the summariser's prompt is not
taken for growth of the conversation, and the next request after the block
is marked as post-compaction.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ctxscope.core import apis
from ctxscope.config import settings
from ctxscope.schema import CompactionTrigger, GenAI

__all__ = [
    "COMPACTION_SUFFIX",
    "SIDE_CALL_SUFFIXES",
    "chat_of",
    "compacting",
    "current_session_id",
    "fingerprint",
    "mark_compaction",
    "session",
]

COMPACTION_SUFFIX = "/compaction"
# Sessions of a chat's side calls, ``<chat><suffix>``: calls the agent makes for the chat that are not
# its conversation (the summariser of a compaction). ``ctxscope context`` counts them in the chat.
SIDE_CALL_SUFFIXES: tuple[str, ...] = (COMPACTION_SUFFIX,)
_DEFAULT_HASH_KEY = b"ctxscope-v1"
_HASH_KEY = settings().hash_key or _DEFAULT_HASH_KEY

_session_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("ctxscope_session_id", default=None)
_compacting: contextvars.ContextVar[bool] = contextvars.ContextVar("ctxscope_compacting", default=False)


@dataclass
class _PendingCompactions:
    """Compactions declared but not yet seen on a request, keyed by session id.

    ``None`` holds one declared with no session known yet: the next request of
    any session takes it.
    """

    # Each pending one with its declaration number, in declaration order: a request measured later
    # than it was made (the live path's worker) takes only those declared before the request was
    # sent, and one declared after it waits for the next request instead of replacing it.
    by_session: dict[str | None, list[tuple[int, CompactionTrigger]]] = field(default_factory=dict)
    declared: int = 0


_pending = _PendingCompactions()
# Declared on the application's thread, taken on the measuring worker's: one at a time.
_pending_lock = threading.Lock()


class session(contextlib.ContextDecorator):  # noqa: N801 - used as ``with ctxscope.session("id"):``
    """Calls inside ``with session("id"):`` (or a function decorated with it) belong to the session ``id``.

    A contextvar, so it follows threads started with ``contextvars.copy_context``
    and asyncio tasks. ``session.compacting`` and ``session.mark_compaction``
    are :func:`compacting` and :func:`mark_compaction`, reachable from here as
    documented before.
    """

    def __init__(self, session_id: str) -> None:
        if not isinstance(session_id, str) or not session_id:
            raise ValueError("a session id is a non-empty string")
        self.session_id = session_id
        self._tokens: list[contextvars.Token[str | None]] = []

    def __enter__(self) -> str:
        self._tokens.append(_session_id.set(self.session_id))
        return self.session_id

    def __exit__(self, *exc: object) -> None:
        _session_id.reset(self._tokens.pop())


def chat_of(session_id: str) -> tuple[str, str | None]:
    """(the chat a session belongs to, the kind of its side calls or None for the conversation itself).

    ``demo/compaction`` -> (``demo``, ``compaction``); ``demo`` -> (``demo``, None).
    """
    for suffix in SIDE_CALL_SUFFIXES:
        if session_id.endswith(suffix) and len(session_id) > len(suffix):
            return session_id[: -len(suffix)], suffix.lstrip("/")
    return session_id, None


def current_session_id() -> str | None:
    """The session id the application set for this context (argument 2 above), if any."""
    return _session_id.get()


def mark_compaction(trigger: CompactionTrigger | str = CompactionTrigger.MANUAL,
                    session_id: str | None = None) -> None:
    """Declare that the session's context was just compacted.

    The next request observed for the session records the compaction on a
    ``post-compaction`` span. ``trigger`` is ``auto`` or ``manual``.
    """
    declare_compaction(trigger, session_id)


def declare_compaction(trigger: CompactionTrigger | str, session_id: str | None,
                       declared_at: int | None = None) -> None:
    """:func:`mark_compaction`; ``declared_at``: for a compaction learnt after the fact (a response
    measured off the call path), :func:`compaction_marks` when it happened."""
    trigger = CompactionTrigger(trigger)
    key = session_id or _session_id.get()
    with _pending_lock:
        if declared_at is None:
            _pending.declared += 1
            declared_at = _pending.declared
        _pending.by_session.setdefault(key, []).append((declared_at, trigger))


@contextmanager
def compacting(trigger: CompactionTrigger | str = CompactionTrigger.AUTO,
               session_id: str | None = None) -> Iterator[None]:
    """Wrap the summariser call of a compaction; the next request is post-compaction."""
    trigger = CompactionTrigger(trigger)
    token = _compacting.set(True)
    try:
        yield
    finally:
        _compacting.reset(token)
    mark_compaction(trigger, session_id)


session.compacting = staticmethod(compacting)  # type: ignore[attr-defined]
session.mark_compaction = staticmethod(mark_compaction)  # type: ignore[attr-defined]


def compaction_marks() -> int:
    """How many compactions have been declared so far (for :func:`take_compaction`'s ``declared_by``)."""
    return _pending.declared


def take_compaction(session_id: str, declared_by: int | None = None) -> CompactionTrigger | None:
    """The compaction declared for a session (or for whichever comes next), once.

    ``declared_by``: :func:`compaction_marks` when the request was sent; one
    declared after that is the next request's, not this one's.
    """
    with _pending_lock:
        return _take_locked(session_id, declared_by)


def _take_locked(session_id: str, declared_by: int | None) -> CompactionTrigger | None:
    for key in (session_id, None):
        declared = _pending.by_session.get(key)
        if not declared:
            continue
        due = [entry for entry in declared if declared_by is None or entry[0] <= declared_by]
        if not due:
            continue
        later = [entry for entry in declared if declared_by is not None and entry[0] > declared_by]
        if later:
            _pending.by_session[key] = later
        else:
            del _pending.by_session[key]
        # Two declared before one request are one compaction of that request: the last one's trigger.
        return due[-1][1]
    return None


def in_compaction() -> bool:
    return _compacting.get()


def conversation_id_from_context() -> str | None:
    """``gen_ai.conversation.id`` on the current span or in baggage (OpenTelemetry API only)."""
    try:
        from opentelemetry import baggage, trace
    except ImportError:  # pragma: no cover - the API is a core dependency
        return None
    span = trace.get_current_span()
    attributes = getattr(span, "attributes", None)
    if attributes:
        value = attributes.get(GenAI.CONVERSATION_ID)
        if isinstance(value, str) and value:
            return value
    value = baggage.get_baggage(GenAI.CONVERSATION_ID)
    if isinstance(value, str) and value:
        return value
    return None


def resolve(body: Mapping[str, Any], api: str, session_id: str | None = None) -> str:
    """The session key of a request, by the order in the module docstring."""
    return resolve_identity(body, api, session_id)[0]


def resolve_identity(body: Mapping[str, Any], api: str, session_id: str | None = None) -> tuple[str, bool]:
    """(the session key of a request, whether the application gave it) - False: the fingerprint.

    Only an id the application gave may become ``gen_ai.conversation.id``
    (the GenAI conventions: never one made up from a content hash).
    """
    given = session_id or _session_id.get() or conversation_id_from_context()
    key = given or fingerprint(body, api)
    if _compacting.get():
        key += COMPACTION_SUFFIX
    return key, bool(given)


# ---------------------------------------------------------------------------
# The fingerprint
# ---------------------------------------------------------------------------

def fingerprint(body: Mapping[str, Any], api: str) -> str:
    """SPEC session fingerprint: keyed BLAKE2b of the system prompt and the first user message."""
    system, first_user = apis.get(api).session_seed(body)
    digest = hashlib.blake2b(key=_HASH_KEY, digest_size=8)
    digest.update(system.encode("utf-8", "surrogatepass"))
    digest.update(b"\x00")
    digest.update(first_user.encode("utf-8", "surrogatepass"))
    return "fp-" + digest.hexdigest()
