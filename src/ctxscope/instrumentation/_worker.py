"""The measuring worker (package instrumentation/): a call's composition is measured off the caller's thread.

The wrappers do on the call path only what must happen before the request
leaves: open the span, note the request (a shallow copy of its lists, or the
body's bytes at the transport layer) and the time. Everything else (items,
framing, the ledger's diff, waste, the learned correction, the annotation on
the span, the metrics, the span's end) is a *job* handed to one daemon thread
per process, which runs the jobs in the order they were submitted: a
session's calls are measured in the order they were made, the request of a
call before its response.

Woken by no one on the call path: waking a thread is a system call, and on a
busy machine the woken thread can take the caller's CPU (and then asks for
the GIL while the caller serialises the request). The wrappers queue their
jobs silently (``wake=False``); the worker looks for work every
:data:`LOOK_EVERY_S`, so a call is measured at most that long after its
request or response was queued, most often while the caller waits for the
model (its thread blocked on the socket, the GIL free). Whoever needs the
measurements sooner drains (below). Idle, the worker wakes
``1 / LOOK_EVERY_S`` times a second and goes back to sleep.

Bounded: at most :data:`MAX_PENDING` jobs wait. A full queue is said once
(a warning) and the job that did not fit runs on the caller's thread, after
the jobs before it (so the order holds): nothing is dropped.

Drained by whoever needs the measurements: :func:`drain` runs what is pending
on the calling thread (the tracer provider's and ctxscope's span processor's
``force_flush``, a metric collection, the final export at exit,
``ctxscope.testing.wait_for_measurements``). A drain from inside a job (the
worker's own thread) returns at once: the jobs after it are not its to run.

The GIL: a CPU-bound job could hold the interpreter for a switch interval
(5 ms) each time the caller wants it back. A job yields (:func:`pause`)
between its steps, so the caller waits at most one step (measured in
``bench/bench_overhead.py``: the caller's delay while the worker measures).

A job that raises is logged once per site (:func:`ctxscope.faultlog.log_failure`)
and the worker goes on.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import threading
import time
from collections import deque
from typing import Callable

from ctxscope.core import tokens
from ctxscope.faultlog import log_failure

__all__ = ["LOOK_EVERY_S", "MAX_PENDING", "MeasuringWorker", "drain", "pause", "start", "submit", "worker"]

_log = logging.getLogger("ctxscope.instrumentation")

# Jobs waiting at most (two a call: its request, its response). At about a
# millisecond a job this is seconds of backlog, far past any agent's rate.
MAX_PENDING = 4096
# How often the worker looks for jobs queued without waking it (seconds): the delay of a call's
# telemetry, not of the call. Short enough that a model call's measurement usually runs while it is in
# flight; long enough that an idle worker costs nothing to speak of.
LOOK_EVERY_S = 0.2

Job = Callable[[], None]


class MeasuringWorker:
    """One daemon thread running jobs in submission order; drained on demand."""

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        if max_pending < 1:
            raise ValueError("max_pending must be at least 1")
        self.max_pending = max_pending
        self._jobs: deque[tuple[Job, str, contextvars.Context | None]] = deque()
        # Reentrant: a stream dropped unread ends its call from the garbage collector, which may run
        # on a thread that is inside submit already.
        self._ready = threading.Condition(threading.RLock())
        # Held while a job runs (the worker's, or a drain's): jobs never run two at a time.
        self._running = threading.RLock()
        self._thread: threading.Thread | None = None
        self._warned_full = False
        self._local = threading.local()
        self.inline_runs = 0  # jobs run on a caller's thread because the queue was full
        self.completed = 0  # jobs run so far, by anyone
        self._active = 0  # a job is running (1) or not (0)

    @property
    def pending(self) -> int:
        """Jobs waiting, and the one running (if any)."""
        return len(self._jobs) + self._active

    def submit(self, job: Job, site: str, context: contextvars.Context | None = None, *, wake: bool = True) -> None:
        """Queue ``job`` (run under ``context`` when given); a full queue runs it here, after the rest.

        ``wake=False``: do not signal the worker (the call path's jobs): it
        finds the job within :data:`LOOK_EVERY_S`, or a drain runs it.
        """
        with self._ready:
            if len(self._jobs) < self.max_pending:
                self._jobs.append((job, site, context))
                self._start_locked()
                if wake:
                    self._ready.notify()
                return
        if not self._warned_full:
            self._warned_full = True
            _log.warning("ctxscope: the measuring worker has %d calls waiting; measuring on the caller's "
                         "thread until it catches up (nothing is dropped; calls are slower meanwhile)",
                         self.max_pending)
        self.inline_runs += 1
        with self._running:  # on the caller's thread: nothing here waits for an encoding
            self._run_pending(on_call_path=True)
            self._run(job, site, context, on_call_path=True)

    def drain(self, timeout_s: float | None = None) -> bool:
        """Run every pending job now, on this thread. False if ``timeout_s`` passed first (or inside a job)."""
        if getattr(self._local, "in_job", False):
            return not self._jobs
        if not self._jobs and self._running.acquire(blocking=False):
            self._running.release()  # nothing queued, nothing running: the common case, no wait
            return True
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        if not self._running.acquire(timeout=-1 if timeout_s is None else max(0.0, timeout_s)):
            return False
        try:
            return self._run_pending(deadline)
        finally:
            self._running.release()

    def drain_count(self, timeout_s: float | None = None) -> int:
        """:meth:`drain` for :func:`ctxscope.telemetry.shutdown.on_drain`: jobs completed meanwhile, -1 on timeout."""
        before = self.completed
        if not self.drain(timeout_s):
            return -1
        return self.completed - before

    def _run_pending(self, deadline: float | None = None, on_call_path: bool = False) -> bool:
        """Run queued jobs in order (``_running`` held); False at the deadline with jobs left."""
        while True:
            if deadline is not None and time.monotonic() > deadline:
                return not self._jobs
            with self._ready:
                if not self._jobs:
                    return True
                job, site, context = self._jobs.popleft()
            self._run(job, site, context, on_call_path)

    def _run(self, job: Job, site: str, context: contextvars.Context | None, on_call_path: bool = False) -> None:
        self._local.in_job = True
        self._active = 1
        try:
            # Off the call path a count may wait (bounded) for the model's encoding to finish loading
            # rather than count chars/4 ("loading"): the caller is not held, only the telemetry.
            with contextlib.nullcontext() if on_call_path else tokens.off_the_call_path():
                if context is not None:
                    context.run(job)
                else:
                    job()
        except Exception:  # noqa: BLE001 - ours: logged once per site, the next job runs
            log_failure(_log, "ctxscope: measuring a call failed (%s)", site)
        finally:
            self._local.in_job = False
            self._active = 0
            self.completed += 1

    def start(self) -> None:
        """Start the worker's thread now (instrumenting does), not on the first call's path."""
        with self._ready:
            self._start_locked()

    def _start_locked(self) -> None:
        thread = self._thread
        if thread is None or not thread.is_alive():
            thread = threading.Thread(target=self._loop, name="ctxscope-measure", daemon=True)
            self._thread = thread
            thread.start()

    def _loop(self) -> None:
        while True:
            with self._ready:
                while not self._jobs:
                    self._ready.wait(LOOK_EVERY_S)  # jobs queued without a wake are found here
            with self._running:
                with self._ready:
                    if not self._jobs:  # a drain took it meanwhile
                        continue
                    job, site, context = self._jobs.popleft()
                self._run(job, site, context)
            pause()


_worker: MeasuringWorker | None = None
_worker_lock = threading.Lock()


def worker() -> MeasuringWorker:
    """The process's measuring worker (its thread starts with the first job)."""
    global _worker
    if _worker is None:
        with _worker_lock:
            if _worker is None:
                from ctxscope.telemetry import shutdown

                _worker = MeasuringWorker()
                shutdown.on_drain(_worker.drain_count)  # flushes and the final export finish its calls first
    return _worker


def _forget_in_child() -> None:
    """A forked child has no worker thread, and its copy's locks may be held: it starts a new one."""
    global _worker
    old, _worker = _worker, None
    if old is not None:
        from ctxscope.telemetry import shutdown

        shutdown.forget_drain(old.drain_count)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_in_child)


def submit(job: Job, site: str, context: contextvars.Context | None = None, *, wake: bool = True) -> None:
    worker().submit(job, site, context, wake=wake)


def start() -> None:
    """The process's worker thread started ahead of the first call (thread creation is not the call's)."""
    worker().start()


def drain(timeout_s: float | None = None) -> bool:
    """Every call measured so far is on its span and in the metrics (True), or the timeout passed (False)."""
    current = _worker
    return True if current is None else current.drain(timeout_s)


def pause() -> None:
    """Let a waiting caller have the interpreter now rather than after a switch interval (the GIL)."""
    from ctxscope.telemetry.tracker import let_others_run

    let_others_run()
