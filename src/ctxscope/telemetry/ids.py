"""Span ids a transcript call keeps however often it is emitted (``watch``: a call repeated after a kill).

A watch exports a round's spans and then saves its state; a watch killed
between the two emits those calls again when it restarts (no exporter can
tell a process that was killed whether its last batch arrived). With
:class:`CallIds` the repeat is the same span: its trace id and span ids are
derived from the call's identity (session id, call index), so a backend or
a query that keeps one span per id counts the call once.

Inside :meth:`CallIds.seeded` the n-th span started gets the n-th id of the
seed; outside it (and on other threads) ids are the SDK's random ones.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.trace import INVALID_SPAN_ID, INVALID_TRACE_ID

# hashlib's blake2b without importing hashlib (which loads OpenSSL at every replay's start: _blake2b).
from ctxscope._blake2b import blake2b

__all__ = ["CallIds", "call_seed", "session_end_seed"]


def call_seed(session_id: str, index: int) -> str:
    """The identity of a call's spans: its session and its index in the session."""
    return f"call\0{session_id}\0{index}"


def session_end_seed(session_id: str, last_index: int) -> str:
    """The identity of a session's end marker: the session and the last call emitted before it."""
    return f"end\0{session_id}\0{last_index}"


class CallIds(IdGenerator):
    """An id generator that derives the ids of the spans started in :meth:`seeded` from the seed."""

    def __init__(self, fallback: IdGenerator | None = None) -> None:
        self._fallback = fallback if fallback is not None else RandomIdGenerator()
        self._local = threading.local()

    @contextmanager
    def seeded(self, seed: str) -> Iterator[None]:
        self._local.seed = seed
        self._local.spans = 0
        try:
            yield
        finally:
            self._local.seed = None

    def generate_trace_id(self) -> int:
        seed = getattr(self._local, "seed", None)
        if seed is None:
            return self._fallback.generate_trace_id()
        return _derived(f"{seed}\0trace", 16, INVALID_TRACE_ID)

    def generate_span_id(self) -> int:
        seed = getattr(self._local, "seed", None)
        if seed is None:
            return self._fallback.generate_span_id()
        n = self._local.spans
        self._local.spans = n + 1
        return _derived(f"{seed}\0span\0{n}", 8, INVALID_SPAN_ID)


def _derived(text: str, size: int, invalid: int) -> int:
    value = int.from_bytes(blake2b(text.encode("utf-8"), digest_size=size).digest(), "big")
    return value if value != invalid else 1  # 0 is the invalid id (one chance in 2**64 or 2**128)
