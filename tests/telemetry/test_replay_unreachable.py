"""``ctxscope replay`` to an endpoint nobody listens on: a bounded wait, one message, exit 1.

The process is run whole (its exit included) against a real closed port: no exporter is mocked.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from _delivery_support import closed_port, two_calls

SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_replay_to_a_closed_port_waits_a_few_seconds_says_so_once_and_exits_1(tmp_path, protocol):
    """Two calls replayed to a closed port: the process ends within the replay's export timeout
    (3 s by default) plus start-up, not the 20 s of the SDK's retries and two exit budgets; one line
    names the endpoint and what was not delivered (4 spans: 2 calls, the capture-start marker, the
    session-end marker), none of the SDK's per-retry warnings; exit status 1."""
    endpoint = f"http://127.0.0.1:{closed_port()}"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "CTXSCOPE_"))}
    env.update({"PYTHONPATH": str(SRC), "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": protocol})
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", "from ctxscope.cli import run; run()", "replay",
                           "--tokenizer", "chars", str(two_calls(tmp_path / "s.jsonl"))],
                          env=env, capture_output=True, text=True, timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode == 1, done.stderr
    assert elapsed < 10.0, f"{elapsed:.1f} s: {done.stderr}"  # 3 s of export, start-up on a loaded machine
    lines = done.stderr.splitlines()
    said = [line for line in lines if "not delivered" in line]
    assert len(said) == 1, done.stderr
    assert said[0].startswith(f"ctxscope: {endpoint} did not take the telemetry: 4 of 4 spans and ")
    assert " metric points not delivered, nothing sent after the first failed export" in said[0]
    assert not [line for line in lines if "Transient error" in line and line is not said[0]]
    assert lines[0] == f"replayed 2 calls of 1 session to {endpoint}"
    assert len(lines) == 2, done.stderr


class _RejectFirstTraces(BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver that answers the first trace request 500 (not retried by the SDK), then 200."""

    rejected = 0
    spans = 0
    points = 0
    lock = threading.Lock()

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        cls = type(self)
        with cls.lock:
            if self.path.endswith("/v1/traces"):
                if not cls.rejected:
                    cls.rejected = 1
                    self.send_response(500)
                    self.end_headers()
                    return
                traces = ExportTraceServiceRequest.FromString(body)
                cls.spans += sum(len(ss.spans) for rs in traces.resource_spans for ss in rs.scope_spans)
            else:
                metrics = ExportMetricsServiceRequest.FromString(body)
                cls.points += sum(len(getattr(m, m.WhichOneof("data")).data_points) for rm in metrics.resource_metrics
                                  for sm in rm.scope_metrics for m in sm.metrics)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()


def test_replay_after_a_batch_rejected_at_once_sends_the_rest_and_exits_1(tmp_path):
    """A receiver that answers the first span batch 500 (the SDK does not retry it) and then takes
    everything: the other batches still go out (the session-end marker, every metric point), the
    one line counts the 3 spans of that batch (2 calls, the capture-start marker) of 4, no metric
    point, and does not say that nothing more was sent; exit 1. (Before: 4 of 4 spans and every
    metric point lost, the receiver being up.)"""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _RejectFirstTraces)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("OTEL_", "CTXSCOPE_"))}
    env.update({"PYTHONPATH": str(SRC), "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "CTXSCOPE_STORE": "off",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_METRIC_EXPORT_INTERVAL": "600000"})
    try:
        done = subprocess.run([sys.executable, "-c", "from ctxscope.cli import run; run()", "replay",
                               "--tokenizer", "chars", str(two_calls(tmp_path / "s.jsonl"))],
                              env=env, capture_output=True, text=True, timeout=60)
    finally:
        server.shutdown()
    assert done.returncode == 1, done.stderr
    said = [line for line in done.stderr.splitlines() if "not delivered" in line]
    assert said == [f"ctxscope: {endpoint} did not take the telemetry: 3 of 4 spans not delivered (the "
                    "exporter's first message: Failed to export spans batch code: 500, reason: Internal "
                    "Server Error)"], done.stderr
    assert _RejectFirstTraces.spans == 1  # the session-end marker
    assert _RejectFirstTraces.points > 0
