"""The end of the process: the recording's final export, within ctxscope's own time budget.

At interpreter exit and on ``SIGTERM``, every live :class:`~ctxscope.telemetry.processor.ContextSpanProcessor`
exports its sessions' latest state and then their zeros, and the SDK providers
that would shut down at exit anyway (those with their own ``atexit`` handler)
are shut down, spans flushed, all within :func:`budget_s` seconds
(``CTXSCOPE_SHUTDOWN_TIMEOUT_MS``, default 3,000 ms). The SDK's exporters wait
up to their own timeout per export and retry within it (10 s by default, for
each signal): with a backend down, an exit would otherwise pay that per
pending export. So the work runs on a daemon thread and the exit waits at most
the budget; past it, what is left is dropped with one warning (the daemon
thread is abandoned, the process exits).

``SIGTERM``: a handler is installed only where the default action is still in
place (the main thread, no handler of the application's); it runs the same
export, then restores the default action and re-delivers the signal, so the
process still dies of ``SIGTERM`` as before (its parent sees no difference).
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import threading
import time
import weakref
from typing import Any, Callable, Iterable

from ctxscope.config import CTXSCOPE_SHUTDOWN_TIMEOUT_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS, settings

__all__ = ["DEFAULT_SHUTDOWN_TIMEOUT_MS", "at_exit", "budget_s", "drain_pending", "end_process", "forget_drain",
           "on_drain", "run_within", "take_exit_handler", "watch"]

_log = logging.getLogger(__name__)


_processors: "weakref.WeakSet[Any]" = weakref.WeakSet()
_local_steps: list[Callable[[], Any]] = []  # local writes (store, learned calibration), run first
# Work not done yet on the calls made so far (the live path's measuring worker): drained before any
# export of what those calls measured. Each takes a timeout in seconds (None: no limit), returns
# how many jobs it ran, or -1 when the timeout passed first.
_drains: list[Callable[[float | None], int]] = []
_lock = threading.Lock()
_ended = False
_sigterm_installed = False


def budget_s() -> float:
    """``CTXSCOPE_SHUTDOWN_TIMEOUT_MS`` in seconds (:mod:`ctxscope.config`)."""
    return settings().shutdown_timeout_ms / 1000


# How often a wait that spares the exports' time looks again (run_within's ``exporting``).
_POLL_S = 0.05


def run_within(steps: Iterable[Callable[[], Any]], timeout_s: float, what: str, *,
               exporting: Callable[[], bool] | None = None, warn: bool = True) -> bool:
    """Run ``steps`` in order on a daemon thread; wait at most ``timeout_s``. False when they did not finish.

    A step that raises is logged and the next one runs. ``exporting`` (a command whose job is the
    export: ``ctxscope replay``) says when an export is under way: that time does not count against
    ``timeout_s``, each export being bounded by its exporter's own timeout, so a slow receiver that
    answers is waited for and only ``timeout_s`` of the steps' own work is not. ``warn=False``: the
    caller says what was not delivered, and this says nothing.
    """
    def work() -> None:
        for step in steps:
            try:
                step()
            except Exception:  # noqa: BLE001 - ours or the SDK's: the exit goes on
                _log.warning("ctxscope: %s: a step failed", what, exc_info=True)

    worker = threading.Thread(target=work, name="ctxscope-shutdown", daemon=True)
    started = time.monotonic()
    worker.start()
    if exporting is None:
        worker.join(timeout_s)
    else:
        idle = 0.0  # time with no export under way, at either end of a look
        while worker.is_alive() and idle < timeout_s:
            before = time.monotonic()
            busy = exporting()
            worker.join(min(_POLL_S, timeout_s - idle))
            if not (busy or exporting()):
                idle += time.monotonic() - before
    if worker.is_alive():
        if warn:
            _log.warning("ctxscope: %s did not finish within %.1f s (%s); the rest is dropped. "
                         "Is the telemetry backend reachable?", what, time.monotonic() - started,
                         CTXSCOPE_SHUTDOWN_TIMEOUT_MS)
        return False
    return True


def watch(processor: Any) -> None:
    """End ``processor``'s recording at exit and on SIGTERM (see the module docstring)."""
    with _lock:
        _processors.add(processor)
        _register()
    _install_sigterm()


def at_exit(step: Callable[[], Any]) -> None:
    """Run ``step`` (a local write: the store's queue, learned calibration) at exit, before the export.

    The one owner of the end of the process: every part of ctxscope that has
    something to finish registers here rather than with :mod:`atexit` itself,
    so the order is fixed (local writes, then the final export and the
    providers' shutdown within the budget). A step bounds its own wait.
    """
    with _lock:
        _local_steps.append(step)
        _register()


def on_drain(drain: Callable[[float | None], int]) -> None:
    """Register pending work that every flush and the final export finish first (see ``_drains``)."""
    with _lock:
        if drain not in _drains:
            _drains.append(drain)


def forget_drain(drain: Callable[[float | None], int]) -> None:
    """Unregister what :func:`on_drain` registered (a forked child's copy of its parent's worker)."""
    if drain in _drains:
        _drains.remove(drain)


def drain_pending(timeout_s: float | None = None) -> int:
    """Finish the calls measured so far (the metrics and spans then hold them). Jobs run, -1 on timeout.

    Once the process is ending (:func:`end_process` drained already, within the budget) it waits for
    nothing: a thread that holds the worker may be an abandoned one, or frozen by the interpreter's
    finalization, and a provider's shutdown or a collection at that point must not wait on it.
    """
    return _drain_all(0.0 if _ended else timeout_s)


def _drain_all(timeout_s: float | None) -> int:
    ran = 0
    for drain in list(_drains):
        try:
            done = drain(timeout_s)
        except Exception:  # noqa: BLE001 - ours: what was measured is still exported
            _log.warning("ctxscope: could not finish the pending measurements", exc_info=True)
            continue
        if done < 0:
            return -1
        ran += done
    return ran


def _register() -> None:
    # atexit runs the last registered first: registered again after every new
    # processor or step, after the providers it works with, this runs before
    # their own handlers. Called with _lock held.
    atexit.unregister(end_process)
    atexit.register(end_process)


def take_exit_handler(provider: Any) -> Callable[[], Any] | None:
    """A provider's shutdown when the SDK would run it at exit (its own atexit handler), taken over."""
    for name in ("_atexit_handler", "_at_exit_handler"):
        handler = getattr(provider, name, None)
        if handler is not None:
            atexit.unregister(handler)  # ours runs it now, bounded; the SDK's would wait unbounded
            try:
                setattr(provider, name, None)
            except (AttributeError, TypeError):
                pass
            return handler
    return None


def end_process() -> None:
    """The final export of every live recording and the providers' shutdown, within the budget. Once."""
    global _ended
    with _lock:
        if _ended:
            return
        _ended = True
        processors = list(_processors)
    started = time.monotonic()
    # The calls still measured off the call path first (their observations reach the local store,
    # their values the final export), on a daemon thread within the budget: a job that ends a span
    # into an exporter that blocks must not hold the exit.
    if _drains:
        run_within([lambda: _drain_all(budget_s())], budget_s(), "measuring the last calls")
    drained_s = time.monotonic() - started
    with _lock:  # read after the drain: the last calls' first local write registers its step then
        local = list(_local_steps)
    for step in local:  # on this thread: local files, each bounded by its own timeout
        try:
            step()
        except Exception:  # noqa: BLE001 - one failed write must not stop the export
            _log.warning("a local write at exit failed", exc_info=True)
    steps: list[Callable[[], Any]] = [p.stop for p in processors]
    seen: set[int] = set()
    providers: list[Any] = []
    for processor in processors:
        providers += [getattr(processor, "tracer_provider", None), processor._resolved_meter_provider()]  # noqa: SLF001
    try:
        from opentelemetry import _logs

        providers.append(_logs.get_logger_provider())
    except Exception:  # noqa: BLE001 - no logs API: nothing to shut down
        pass
    for provider in providers:
        if provider is None or id(provider) in seen:
            continue
        seen.add(id(provider))
        shutdown = take_exit_handler(provider)
        if shutdown is not None:
            steps.append(shutdown)
    if steps:  # the budget is the whole exit's: what the drain took is not given again
        run_within(steps, max(0.1, budget_s() - drained_s), "the final telemetry export")


def _on_sigterm(signum: int, frame: Any) -> None:
    try:
        end_process()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _install_sigterm() -> None:
    global _sigterm_installed
    if _sigterm_installed or not hasattr(signal, "SIGTERM"):
        return
    if threading.current_thread() is not threading.main_thread():
        _log.debug("ctxscope: not on the main thread; SIGTERM ends the process without the final export")
        return
    try:
        if signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, None):
            return  # the application's own handler: it decides how the process ends (exit runs ours)
        signal.signal(signal.SIGTERM, _on_sigterm)
        _sigterm_installed = True
    except (ValueError, OSError):  # not the main interpreter, or a platform without it
        _log.debug("ctxscope: could not handle SIGTERM", exc_info=True)
