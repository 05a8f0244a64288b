"""A real OTLP receiver (oteltest's gRPC or HTTP sink) that keeps what it decodes: the one sink of the tests.

Modules using it skip first without oteltest: ``pytest.importorskip("oteltest.sink")``.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any

from oteltest.sink import GrpcSink, HttpSink
from oteltest.sink.handler import RequestHandler


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Collect(RequestHandler):
    """Keeps every trace and metrics request the sink decodes."""

    def __init__(self) -> None:
        self.traces: list[Any] = []
        self.metrics: list[Any] = []
        self.lock = threading.Lock()

    def handle_logs(self, request, headers):  # pragma: no cover - nothing logs
        pass

    def handle_metrics(self, request, headers):
        with self.lock:
            self.metrics.append(request)

    def handle_trace(self, request, headers):
        with self.lock:
            self.traces.append(request)

    def spans(self) -> list[Any]:
        with self.lock:
            return spans_of(self.traces)


def spans_of(requests: list[Any]) -> list[Any]:
    """The spans of OTLP trace requests, in order."""
    return [s for r in requests for rs in r.resource_spans for ss in rs.scope_spans for s in ss.spans]


class Receiver:
    """``with Receiver() as r:`` an OTLP sink on a free port; ``r.endpoint``, ``r.handler``.

    ``protocol``: ``grpc`` (default) or ``http/protobuf``, as ``setup(protocol=...)`` names them.
    """

    def __init__(self, protocol: str = "grpc") -> None:
        self.protocol = protocol

    def __enter__(self) -> "Receiver":
        self.handler = Collect()
        port = free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        sink = GrpcSink if self.protocol == "grpc" else HttpSink
        self.server = sink(self.handler, logging.getLogger("oteltest-sink"), port=port)
        self.server.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.stop()


def value(any_value: Any) -> Any:
    return getattr(any_value, any_value.WhichOneof("value"))


def attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in kvs}


def gauge_points(request: Any, name: str) -> list[tuple[dict[str, Any], float]]:
    out = []
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == name:
                    for p in m.gauge.data_points:
                        out.append((attrs(p.attributes), p.as_int or p.as_double))
    return out


def wait_for(predicate, timeout: float = 15.0, what: str = "the OTLP receiver got nothing in time") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(what)
        time.sleep(0.05)
