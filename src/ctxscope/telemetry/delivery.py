"""What a command whose job is exporting (``ctxscope replay``) delivered, and its stop at the first failure.

A live application keeps the SDK's behaviour: an unreachable backend costs it
nothing but the data, each batch retried within the exporter's timeout. A
replay is different: every batch after a failed one would wait out the same
retries (a dead endpoint made a one-session replay wait 22 s), and the user
has to replay again anyway. :class:`Delivery` wraps the exporters
:func:`ctxscope.setup` built (their ``export``, on the instance): it counts
what was sent and what failed, and after the first export that failed only
once its retries had waited (:data:`GIVE_UP_AFTER_S`: refused, timed out, a
retryable status that persisted) it sends nothing more (each later export
fails at once, counted). A rejection answered at once (an HTTP 400 or 500,
which the SDK does not retry) costs that batch only: the receiver is there,
waiting is not the problem, and the later batches are still sent. The SDK's own
exporter messages (a warning per retry) are held back while it watches
(:meth:`Delivery.quiet`); the first is kept for :meth:`Delivery.problem`, the
one line the command prints.

It also knows when an export is under way (:meth:`Delivery.exporting`): the
command's end (:meth:`Delivery.end`: ``Telemetry.shutdown``) waits for those,
each bounded by its own timeout, rather than cutting them at the exit's
budget, which a receiver taking 1.2 s a request outlasted (three exports in a
row) while it took everything. When that end did not finish all the same
(:meth:`Delivery.unfinished`), the line says so and nothing more is sent.

``ctxscope watch`` counts the same way but keeps a live application's
behaviour while it runs (``give_up=False``: a failed export costs its batch,
the next ones are still sent, the SDK's messages are shown as they come); it
stops sending only at its end, once an export failed having waited.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

__all__ = ["GIVE_UP_AFTER_S", "Delivery"]

# A failed export that took this long waited (a retry's backoff, the SDK's first 1 s; a connection or an
# answer that did not come): the endpoint is unreachable or keeps refusing, and every later export would
# wait as long. A quicker failure was a rejection answered at once (a round trip, not retried): only that
# batch is lost, and the later ones cost no wait.
GIVE_UP_AFTER_S = 0.5

# The loggers of the SDK's OTLP exporters and their HTTP client (1.45), and their parents' prefix.
_EXPORTER_LOGGERS = "opentelemetry.exporter."


class _Signal:
    __slots__ = ("exports", "failed", "items", "failed_items")

    def __init__(self) -> None:
        self.exports = self.failed = self.items = self.failed_items = 0


class Delivery:
    """Counts of a set-up's exports; after the first failure that waited (a watch: at its end), nothing more is sent."""

    def __init__(self, endpoint: str | None, *, give_up: bool = True) -> None:
        self.endpoint = endpoint
        self._lock = threading.Lock()
        self._signals = {"spans": _Signal(), "metrics": _Signal()}
        self._failed = False
        # Stop sending at the first export that failed having waited: a replay from the start, a watch
        # from its end (end()). And whether the last export did (the backend is down).
        self._give_up, self._from_start, self._down = give_up, give_up, False
        self._message: str | None = None  # the exporter's first message at WARNING or above
        self._under_way = 0  # exports started and not returned
        self._unfinished: str | None = None  # why the final export was left behind (unfinished())

    @classmethod
    def watch(cls, telemetry: Any, *, give_up: bool = True) -> "Delivery":
        """A :class:`Delivery` over ``telemetry``'s exporters (those :func:`ctxscope.setup` built).

        ``give_up=False`` (``ctxscope watch``): a failure that waited stops the sending only from :meth:`end`.
        """
        delivery = cls(telemetry.traces_endpoint or telemetry.metrics_endpoint, give_up=give_up)
        if telemetry.span_exporter is not None:
            delivery._wrap(telemetry.span_exporter, "spans", len)
        if telemetry.metric_exporter is not None:
            delivery._wrap(telemetry.metric_exporter, "metrics", _points)
        return delivery

    @property
    def failed(self) -> bool:
        """An export failed after waiting for its retries: nothing has been sent since."""
        return self._failed

    def _wrap(self, exporter: Any, signal: str, count: Callable[[Any], int]) -> None:
        export = exporter.export
        counts = self._signals[signal]
        failure = _failure(signal)

        def watched(data: Any, *args: Any, **kwargs: Any) -> Any:
            items = count(data)
            if self._failed:
                with self._lock:
                    counts.exports += 1
                    counts.failed += 1
                    counts.items += items
                    counts.failed_items += items
                return failure
            started = time.monotonic()
            with self._lock:
                self._under_way += 1
            try:
                result = export(data, *args, **kwargs)
            finally:
                with self._lock:
                    self._under_way -= 1
            ok = getattr(result, "name", None) == "SUCCESS"
            with self._lock:
                counts.exports += 1
                counts.items += items
                self._down = not ok and time.monotonic() - started >= GIVE_UP_AFTER_S
                if not ok:
                    counts.failed += 1
                    counts.failed_items += items
                if self._down and self._give_up:
                    self._failed = True
            return result

        exporter.export = watched

    def exporting(self) -> bool:
        """An export is under way (bounded by the exporter's own timeout, retries included)."""
        with self._lock:
            return self._under_way > 0

    def end(self, telemetry: Any) -> None:
        """The command's end: ``telemetry.shutdown()`` (the final values and zeros, the providers' shutdown).

        The exports it waits for, each bounded by its own timeout, are not cut at the exit's budget: a
        slow receiver that answers gets everything; only ctxscope's own work past the budget is left
        behind (:meth:`unfinished`). From here a failure that waited stops the sending, and does at
        once when the last export failed so (a backend found down costs one export timeout, not three).
        Nothing is logged: :meth:`problem` says what was not delivered, once.
        """
        from ctxscope.config import CTXSCOPE_SHUTDOWN_TIMEOUT_MS
        from ctxscope.telemetry.shutdown import budget_s

        with self._lock:
            self._give_up = True
            self._failed = self._failed or self._down
        if not telemetry.shutdown(exporting=self.exporting, warn=False):
            self.unfinished(f"did not finish within {budget_s():.1f} s of its own work "
                            f"({CTXSCOPE_SHUTDOWN_TIMEOUT_MS})")

    def unfinished(self, why: str) -> None:
        """The final export was left behind (``why``): what it had not sent is lost, and nothing more is sent.

        From then on every export fails at once, counted, the abandoned thread's and the exit's alike.
        """
        with self._lock:
            self._unfinished = why
            self._failed = True

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """The SDK exporters' messages held back (the root logger's handlers), the first one kept."""
        held = _Hold(self)
        handlers = list(logging.getLogger().handlers)
        for handler in handlers:
            handler.addFilter(held)
        try:
            yield
        finally:
            for handler in handlers:
                handler.removeFilter(held)

    def _keep(self, record: logging.LogRecord) -> None:
        if self._message is None and record.levelno >= logging.WARNING:
            try:
                self._message = record.getMessage()
            except Exception:  # noqa: BLE001 - a message that cannot be formatted: its template
                self._message = str(record.msg)

    def problem(self) -> str | None:
        """One line on what was not delivered and why; None when every export succeeded."""
        with self._lock:
            spans, metrics = self._signals["spans"], self._signals["metrics"]
            if not spans.failed and not metrics.failed and self._unfinished is None:
                return None
            lost = []
            if spans.failed:
                lost.append(f"{spans.failed_items:,} of {spans.items:,} spans")
            if metrics.failed:
                lost.append(f"{metrics.failed_items:,} of {metrics.items:,} metric points")
            said = f" (the exporter's first message: {self._message})" if self._message else ""
            if self._unfinished is not None:  # what the abandoned end had not exported cannot be counted
                also = f", nor {' and '.join(lost)}" if lost else ""
                return (f"the final export to {self.endpoint} {self._unfinished}; what it had not sent is not "
                        f"delivered{also}{said}")
            stopped = ("" if not self._failed else ", nothing sent after the first failed export" if self._from_start
                       else ", nothing sent at the end after a failed export")
        return f"{self.endpoint} did not take the telemetry: {' and '.join(lost)} not delivered{stopped}{said}"


class _Hold(logging.Filter):
    def __init__(self, delivery: Delivery) -> None:
        super().__init__()
        self._delivery = delivery

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith(_EXPORTER_LOGGERS):
            self._delivery._keep(record)  # noqa: SLF001
            return False
        return True


def _failure(signal: str) -> Any:
    if signal == "spans":
        from opentelemetry.sdk.trace.export import SpanExportResult

        return SpanExportResult.FAILURE
    from opentelemetry.sdk.metrics.export import MetricExportResult

    return MetricExportResult.FAILURE


def _points(metrics_data: Any) -> int:
    """The data points of a ``MetricsData``."""
    try:
        return sum(len(metric.data.data_points) for resource in metrics_data.resource_metrics
                   for scope in resource.scope_metrics for metric in scope.metrics)
    except Exception:  # noqa: BLE001 - not the SDK's shape: counted as none
        return 0
