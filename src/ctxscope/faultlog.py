"""Logging our own failures on the per-call path: once per site, and holding nothing of the caller's.

A log record with ``exc_info`` keeps the traceback, hence every frame of it,
hence the objects those frames hold: a stream proxy, the SDK's response, the
caller's locals. A handler that keeps records (``logging.handlers.MemoryHandler``,
pytest's ``caplog``, a queue) then keeps them alive: an abandoned stream is
never collected and its span never ends. So :func:`log_failure` renders the
exception to text first and logs the text.

And a failure of ours that repeats on every call must not log on every call:
the first one at WARNING (with the rendered traceback), the next ones from the
same site at DEBUG.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from typing import Any

__all__ = ["log_failure", "reset"]

_seen: set[tuple[str, str]] = set()
_lock = threading.Lock()


def log_failure(logger: logging.Logger, message: str, *args: Any) -> None:
    """Log the exception being handled: WARNING the first time ``message`` is logged by ``logger``, then DEBUG.

    Call it from an ``except`` block. The record holds ``message % args`` and
    the traceback as text, no exception object and no frame.
    """
    error = sys.exc_info()[1]
    site = (logger.name, message)
    with _lock:
        first = site not in _seen
        _seen.add(site)
    level = logging.WARNING if first else logging.DEBUG
    if not logger.isEnabledFor(level):
        return
    if error is None:
        logger.log(level, message, *args)
        return
    if first:
        detail = "".join(traceback.format_exception(type(error), error, error.__traceback__)).rstrip()
        logger.log(level, message + " (logged once; later ones at debug)\n%s", *args, detail)
    else:
        logger.log(level, message + ": %s: %s", *args, type(error).__name__, str(error))
    del error  # no reference to the traceback outlives this call


def reset() -> None:
    """Forget which sites have logged (for tests)."""
    with _lock:
        _seen.clear()
