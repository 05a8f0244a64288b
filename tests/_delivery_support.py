"""What the delivery tests (replay, watch) share: a two-call transcript, a closed port, and a real OTLP/HTTP
receiver that answers every request 200, slowly (it has the data, the answer takes its time).

``with SlowReceiver(1.5) as receiver:`` serves on a free local port (``receiver.endpoint``) and keeps, in
arrival order, each request's signal and size (``receiver.requests``: ``("spans", n)`` or ``("points", n)``),
and for each metrics request its ``llm.context.tokens`` gauges (``receiver.gauges``: category -> value).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def closed_port() -> int:
    """A local port nobody listens on: connections to it are refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]  # closed when the block ends


def two_calls(path: Path) -> Path:
    """Two Claude Code calls of session ``s-unreachable`` (input 100 and 101 tokens), written to ``path``."""
    lines, parent = [], None
    for n in range(2):
        stamp = f"2026-02-11T10:00:{n:02d}.000Z"
        lines.append({"type": "user", "uuid": f"u{n}", "parentUuid": parent, "sessionId": "s-unreachable",
                      "timestamp": stamp, "message": {"role": "user", "content": f"question {n}"}})
        lines.append({"type": "assistant", "uuid": f"a{n}", "parentUuid": f"u{n}", "sessionId": "s-unreachable",
                      "timestamp": stamp, "requestId": f"req{n}",
                      "message": {"id": f"msg{n}", "role": "assistant", "model": "claude-sonnet-4-5",
                                  "content": [{"type": "text", "text": f"answer {n}"}],
                                  "usage": {"input_tokens": 100 + n, "output_tokens": 1}}})
        parent = f"a{n}"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        receiver = self.server.receiver
        if self.path.endswith("/v1/traces"):
            traces = ExportTraceServiceRequest.FromString(body)
            receiver.keep(("spans", sum(len(ss.spans) for rs in traces.resource_spans for ss in rs.scope_spans)))
        else:
            metrics = ExportMetricsServiceRequest.FromString(body)
            every = [m for rm in metrics.resource_metrics for sm in rm.scope_metrics for m in sm.metrics]
            gauges = {}
            for m in every:
                if m.name == "llm.context.tokens":
                    for p in m.gauge.data_points:
                        category = next(a.value.string_value for a in p.attributes
                                        if a.key == "llm.context.category")
                        gauges[(m.name, category)] = p.as_int or p.as_double
            receiver.keep(("points", sum(len(getattr(m, m.WhichOneof("data")).data_points) for m in every)), gauges)
        time.sleep(receiver.delay_s)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: "SlowReceiver"


class SlowReceiver:
    """The receiver (see the module docstring), started on entering the block and stopped on leaving it."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.requests: list[tuple[str, int]] = []
        self.gauges: list[dict[tuple[str, str], float]] = []
        self._lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.receiver = self
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"

    def keep(self, request: tuple[str, int], gauges: dict[tuple[str, str], float] | None = None) -> None:
        with self._lock:
            self.requests.append(request)
            if gauges is not None:
                self.gauges.append(gauges)

    def __enter__(self) -> "SlowReceiver":
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()
