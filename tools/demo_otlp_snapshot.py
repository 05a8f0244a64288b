"""Snapshot the OTLP output of ``make demo``, to show a refactor changed nothing a backend sees.

    python tools/demo_otlp_snapshot.py save DIR      # run the demo agent, keep its spans and metric points
    python tools/demo_otlp_snapshot.py compare A B   # what differs between two snapshots ("identical" if nothing)

``save`` runs what ``make demo`` runs (``examples/coding_agent.py`` under
``opentelemetry-instrument`` with ``OTEL_PYTHON_CONFIGURATOR=ctxscope``), with
OTLP/gRPC sent to a local receiver (the tests' oteltest sink,
``tests/_otlp_sink.py``), and writes ``DIR/otlp.json``: every span (name,
kind, status, scope, attributes, events, its parent as an index) and every
metric point (name, unit, kind, attributes, value), normalised so two runs
of the same code are equal: trace and span ids become indexes; timestamps,
durations (a duration histogram keeps its count), the local fake provider's
port and the resource attributes of one process (pid, command line, host,
runtime) are left out. The ctxscope the demo imports is the one Python finds first:
``PYTHONPATH=/some/checkout/src`` snapshots another tree with this venv.

The tiktoken basis is used when the offline cache is there (``../shared/tiktoken``),
as ``make demo`` does; a machine without it snapshots the ``auto`` fallback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TIKTOKEN = ROOT.parent / "shared" / "tiktoken"
AGENT = ROOT / "examples" / "coding_agent.py"

# Resource attributes that belong to one process or machine, not to what ctxscope wrote.
_PROCESS_RESOURCE_PREFIXES = ("process.", "host.", "os.", "service.instance.id", "telemetry.auto.version")
# Attributes whose value is a time of the run.
_TIME_ATTRIBUTES = frozenset(("llm.context.sample_offset_ns",))
# The demo's fake provider listens on a free port: the port is the run's own.
_LOCAL_PORT = re.compile(r"(127\.0\.0\.1|localhost):\d+")


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(any_value, kind)
    if kind == "array_value":
        return [_value(v) for v in value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.values}
    if kind == "bytes_value":
        return value.hex()
    return value


def _attributes(kvs: Any) -> dict[str, Any]:
    out = {}
    for kv in kvs:
        if kv.key in _TIME_ATTRIBUTES:
            continue
        value = _value(kv.value)
        if kv.key == "server.port":
            value = "<port>"
        elif isinstance(value, str):
            value = _LOCAL_PORT.sub(r"\1:<port>", value)
        out[kv.key] = value
    return out


def _resource(resource: Any) -> dict[str, Any]:
    return {k: v for k, v in _attributes(resource.attributes).items() if not k.startswith(_PROCESS_RESOURCE_PREFIXES)}


def _spans(requests: list[Any]) -> list[dict[str, Any]]:
    raw = []
    for request in requests:
        for resource_spans in request.resource_spans:
            resource = _resource(resource_spans.resource)
            for scope_spans in resource_spans.scope_spans:
                scope = scope_spans.scope.name
                for span in scope_spans.spans:
                    raw.append((span, scope, resource))
    # The agent is one thread: start times order the spans; ties (a companion and its markers) by content.
    def order(entry: tuple[Any, str, dict[str, Any]]) -> tuple[int, str, str]:
        span, _, _ = entry
        return span.start_time_unix_nano, span.name, json.dumps(_attributes(span.attributes), sort_keys=True)

    raw.sort(key=order)
    index = {span.span_id: n for n, (span, _, _) in enumerate(raw)}
    traces: dict[bytes, int] = {}
    out = []
    for span, scope, resource in raw:
        parent = span.parent_span_id
        out.append({
            "name": span.name,
            "kind": span.kind,
            "scope": scope,
            "trace": traces.setdefault(span.trace_id, len(traces)),
            "parent": index.get(parent, "outside") if parent else None,
            "status": {"code": span.status.code, "message": span.status.message},
            "attributes": _attributes(span.attributes),
            "events": [{"name": e.name, "attributes": _attributes(e.attributes)} for e in span.events],
            "links": len(span.links),
            "resource": resource,
        })
    return out


def _point(kind: str, point: Any, unit: str) -> dict[str, Any]:
    found: dict[str, Any] = {"attributes": _attributes(point.attributes)}
    if kind in ("sum", "gauge"):
        found["value"] = point.as_int if point.WhichOneof("value") == "as_int" else point.as_double
    elif kind == "histogram":
        found["count"] = point.count
        if unit not in ("s", "ms"):  # a duration's sum and buckets are the run's own timing
            found["sum"] = point.sum
            found["bucket_counts"] = list(point.bucket_counts)
            found["explicit_bounds"] = list(point.explicit_bounds)
    else:
        found["count"] = getattr(point, "count", None)
    return found


def _metrics(requests: list[Any]) -> dict[str, Any]:
    """The last export of each metric point (cumulative temporality: the last one holds the totals)."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    meta: dict[str, dict[str, Any]] = {}
    for request in requests:
        for resource_metrics in request.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    kind = metric.WhichOneof("data")
                    data = getattr(metric, kind)
                    meta[metric.name] = {"unit": metric.unit, "description": metric.description, "kind": kind,
                                         "scope": scope_metrics.scope.name}
                    for point in data.data_points:
                        found = _point(kind, point, metric.unit)
                        latest[(metric.name, json.dumps(found["attributes"], sort_keys=True))] = found
    out: dict[str, Any] = {}
    for name in sorted(meta):
        points = [p for (metric, key), p in sorted(latest.items()) if metric == name]
        out[name] = {**meta[name], "points": points}
    return out


def save(target: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from _otlp_sink import Receiver

    venv_bin = Path(sys.executable).parent
    with tempfile.TemporaryDirectory() as data_dir, Receiver("grpc") as receiver:
        env = {**os.environ, "CTXSCOPE_DATA_DIR": data_dir, "CTXSCOPE_STORE": "on",
               "OTEL_PYTHON_CONFIGURATOR": "ctxscope", "OTEL_SERVICE_NAME": "ctxscope-demo",
               "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
               "OTEL_EXPORTER_OTLP_INSECURE": "true"}
        if TIKTOKEN.is_dir():
            env.setdefault("TIKTOKEN_CACHE_DIR", str(TIKTOKEN))
        started = time.monotonic()
        run = subprocess.run([str(venv_bin / "opentelemetry-instrument"), sys.executable, str(AGENT), "--quiet"],
                             env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
        if run.returncode != 0:
            sys.exit(f"demo_otlp_snapshot: the demo agent failed ({run.returncode}):\n{run.stderr[-2000:]}")
        time.sleep(1.0)  # the exporters flush at exit; let the receiver finish decoding
        with receiver.handler.lock:
            traces, metrics = list(receiver.handler.traces), list(receiver.handler.metrics)
    snapshot = {"spans": _spans(traces), "metrics": _metrics(metrics)}
    if not snapshot["spans"]:
        sys.exit("demo_otlp_snapshot: the receiver got no spans (is OTLP export configured?)")
    target.mkdir(parents=True, exist_ok=True)
    (target / "otlp.json").write_text(json.dumps(snapshot, indent=1, sort_keys=True))
    print(f"{len(snapshot['spans'])} spans and {sum(len(m['points']) for m in snapshot['metrics'].values())} "
          f"metric points of {len(snapshot['metrics'])} metrics saved to {target / 'otlp.json'} "
          f"({time.monotonic() - started:.1f} s)")


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a:
                out.append(f"{path}.{key}: only in B ({json.dumps(b[key])[:200]})")
            elif key not in b:
                out.append(f"{path}.{key}: only in A ({json.dumps(a[key])[:200]})")
            else:
                _diff(a[key], b[key], f"{path}.{key}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} entries in A, {len(b)} in B")
        for n, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{n}]", out)
    elif a != b:
        out.append(f"{path}: {json.dumps(a)[:200]} -> {json.dumps(b)[:200]}")


def compare(a: Path, b: Path) -> int:
    left = json.loads((a / "otlp.json").read_text())
    right = json.loads((b / "otlp.json").read_text())
    out: list[str] = []
    _diff(left, right, "", out)
    if not out:
        print(f"identical: {len(left['spans'])} spans, "
              f"{sum(len(m['points']) for m in left['metrics'].values())} metric points")
        return 0
    for line in out:
        print(line)
    print(f"{len(out)} differences")
    return 1


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "save":
        save(Path(argv[1]))
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(Path(argv[1]), Path(argv[2]))
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
