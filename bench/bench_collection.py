"""One metric collection of the context span processor: CPU, points, and what is ctxscope's own.

``.venv/bin/python bench/run.py bench_collection`` (issue 16, docs/telemetry.md
"Cost of a collection"). With 64 live sessions of realistic state (eight
categories and unattributed, three limits, reported tokens, utilisation, two
waste kinds: 16 series each), between collections one session makes a call,
as when one agent of many does:

- ``collection_cpu_ms``: CPU of ``InMemoryMetricReader.get_metrics_data()``,
  the SDK's own work per point included, on a meter provider with the views
  ``setup()`` gives the one it creates (``telemetry/views.py``; none in a tree
  before them); ``own_provider_*``: the application's own provider built
  without views (given ctxscope's by its processor: ``offer_gauge_views``),
  for this tree and the base (``before_own_provider_*``: issue 16's own
  measure); ``sdk_default_*``: the same without any view, the SDK's default
  aggregation (as where a view of the application's decides the gauges);
- ``callbacks_cpu_ms``: ctxscope's callbacks alone (what the processor does
  per collection), the rest being the SDK's per-measurement work;
- the same after 1,000 sessions have come and gone (``churn_*``), and whether
  a new session's series are still its own there (the SDK's cardinality
  limit, 2,000 attribute sets an instrument, reached by ended series);
- fleet mode (``CTXSCOPE_METRICS_SESSION_KEY=off``): no per-session series;
- ``sdk_encoding_cpu_ms``: the OTLP request of that collection by the SDK's
  encoder (what an exporter the application built does per export);
  ``encoding_cpu_ms``: the same request as the gRPC exporter ``setup()``
  builds makes it (``telemetry/otlp_metric_encoding.py``; the bytes go to
  gRPC as they are, ``telemetry/grpc_bytes.py``), checked equal byte for byte;
  ``collection_and_encoding_cpu_ms``: the collection and that encoding;
- ``sdk_floor_cpu_ms``: one collection of as many synchronous gauge series
  set once, with no ctxscope at all: what the Python SDK's default
  aggregation costs for the points alone (ctxscope's views go below it).

Each figure is measured for this tree and, in the same run, for the base
revision (``CTXSCOPE_BENCH_BASE``, default ``HEAD``; its ``src`` exported with
``git archive``), in a subprocess each, the two interleaved ``REPEATS`` times
and the median of each figure kept, so ratios come from one run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SESSIONS = 64
ROUNDS = 40
CHURN = 1000
REPEATS = 3


def _views(own_provider: bool) -> list[object]:
    """The views ``setup()`` gives the meter provider it creates; none on the application's own provider."""
    if own_provider:
        return []
    try:
        from ctxscope.telemetry.views import gauge_views
    except ImportError:  # a tree before them: setup() created a provider without views
        return []
    return list(gauge_views())


def _measure(fleet: bool, own_provider: bool = False, sdk_default: bool = False) -> dict[str, float]:
    """Run in a subprocess whose ``sys.path`` holds the tree under test.

    ``own_provider``: a ``MeterProvider`` the application built itself, without ctxscope's views (the
    processor gives them to it where the tree does: ``views.offer_gauge_views``). ``sdk_default``: and
    none given (as where a view of the application's decides the gauges): the SDK's default aggregation.
    """
    if sdk_default:
        import ctxscope.telemetry.views as views_module

        views_module._FITS = False  # noqa: SLF001 - gauge_views() gives none: the SDK's default aggregation
    from opentelemetry.metrics import CallbackOptions
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    try:
        from ctxscope.telemetry.processor import ContextSpanProcessor
    except ImportError:  # a tree before the package layout (issue 16's own base, 8642d46)
        from ctxscope.processor import ContextSpanProcessor  # type: ignore[no-redef]
    from ctxscope.schema import Annotation, Attr, Category, Coverage, GenAI, Metric, Stage, WasteKind

    reader = InMemoryMetricReader()
    kwargs = {"session_key": False} if fleet else {}
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False, views=_views(own_provider))
    try:
        processor = ContextSpanProcessor(provider, max_sessions=SESSIONS, **kwargs)
    except TypeError:  # a tree without fleet mode
        return {}
    categories = {c: 1000 + 100 * i for i, c in enumerate(list(Category)[:8])}

    def call(session: int, n: int) -> None:
        # A call adds a prompt and a tool result; the rest of the context stays.
        cats = dict(categories)
        cats[Category.PROMPTS] += 50 * n
        cats[Category.RESULTS] += 400 * n
        ann = Annotation(stage=Stage.REQUEST_INPUT, basis="chars/4", coverage=Coverage.COMPLETE, baseline=n == 0,
                         categories=cats, estimated_tokens=sum(cats.values()),
                         reported_tokens=sum(cats.values()) + 500, window_tokens=200000,
                         effective_window_tokens=180000, compact_threshold_tokens=160000, model="gpt-4o",
                         waste={WasteKind.DUPLICATE: 10, WasteKind.BLOAT: 20})
        attrs = {Attr.SESSION_ID: f"s{session}", GenAI.REQUEST_MODEL: "gpt-4o", GenAI.PROVIDER_NAME: "openai",
                 **ann.to_attributes()}
        processor.observe_call(attrs, time.time_ns())

    def points(data: object) -> int:
        return sum(len(m.data.data_points) for rm in data.resource_metrics  # type: ignore[attr-defined]
                   for sm in rm.scope_metrics for m in sm.metrics)

    from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
    try:
        from ctxscope.telemetry.otlp_metric_encoding import MetricEncoder
        ours = MetricEncoder()
    except ImportError:  # a tree before it: setup()'s exporters encoded with the SDK's encoder
        ours = None
    encodings: dict[str, list[float]] = {"sdk_encoding_cpu_ms": [], "encoding_cpu_ms": []}

    def encode(data: object) -> None:
        """The OTLP request of one collection: the SDK's encoder, and what setup()'s gRPC exporter does."""
        started = time.process_time()
        sdk = encode_metrics(data).SerializeToString()  # type: ignore[arg-type]
        encodings["sdk_encoding_cpu_ms"].append(time.process_time() - started)
        if ours is None:
            encodings["encoding_cpu_ms"].append(encodings["sdk_encoding_cpu_ms"][-1])
            return
        started = time.process_time()
        encoded = ours.encode(data)  # type: ignore[arg-type]
        encodings["encoding_cpu_ms"].append(time.process_time() - started)
        assert encoded == sdk

    def collections(base: int) -> tuple[float, float, float, int]:
        if fleet:
            callbacks = []
        elif hasattr(processor, "_collection_callback"):  # one hook a collection (synchronous gauges)
            callbacks = [processor._collection_callback()]  # noqa: SLF001
        else:  # a tree of observable gauges: one callback an instrument
            callbacks = [processor._callback(spec) for spec in Metric.ALL]  # noqa: SLF001
        total, own, calls = [], [], []
        n = 0
        for r in range(ROUNDS):
            started = time.process_time()
            call(base + r % SESSIONS, r + 1)
            calls.append(time.process_time() - started)
            started = time.process_time()
            data = reader.get_metrics_data()
            total.append(time.process_time() - started)
            n = points(data)
            if base == 0:
                encode(data)
            call(base + r % SESSIONS, r + 2)
            started = time.process_time()
            for cb in callbacks:
                list(cb(CallbackOptions()))
            own.append(time.process_time() - started)
        return (statistics.median(total) * 1e3, statistics.median(own) * 1e3,
                statistics.median(calls) * 1e6, n)

    for s in range(SESSIONS):
        call(s, 0)
    reader.get_metrics_data()
    total, own, call_us, n = collections(0)
    out = {"collection_cpu_ms": total, "callbacks_cpu_ms": own, "observe_call_us": call_us,
           "collection_points": n, "points_per_session": n / SESSIONS}
    out.update({k: statistics.median(v) * 1e3 for k, v in encodings.items()})
    out["collection_and_encoding_cpu_ms"] = total + out["encoding_cpu_ms"]
    # Sessions come and go: each ended one reports its zeros once, then leaves.
    for s in range(SESSIONS, SESSIONS + CHURN):
        call(s, 0)
        if s % 16 == 0:
            reader.get_metrics_data()
    reader.get_metrics_data()
    reader.get_metrics_data()
    base = SESSIONS + CHURN - SESSIONS
    total, own, _, n = collections(base)
    call(10**6, 1)
    data = reader.get_metrics_data()
    own_series = any(m.name == Metric.TOKENS.name and any(
        p.attributes.get(Attr.SESSION_ID) == f"s{10**6}" for p in m.data.data_points)
        for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics)
    out.update({"churn_collection_cpu_ms": total, "churn_callbacks_cpu_ms": own, "churn_points": n,
                "churn_new_session_reported": own_series})
    if not fleet:
        out["sdk_floor_cpu_ms"] = _sdk_floor(int(out["collection_points"]))
    return out


def _sdk_floor(points: int, sessions: int = SESSIONS) -> float:
    """CPU ms of one collection of ``points`` synchronous gauge series and nothing else: the SDK's own floor.

    The same number of series as ctxscope's collection, spread over five
    gauges like its own, each set once; a collection then only reads them.
    """
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    meter = MeterProvider(metric_readers=[reader], shutdown_on_exit=False).get_meter("floor")
    gauges = [meter.create_gauge(f"floor.gauge.{i}") for i in range(5)]
    for i in range(points):
        gauges[i % 5].set(i, {"llm.context.session.id": f"s{i % sessions}", "gen_ai.request.model": "gpt-4o",
                              "gen_ai.provider.name": "openai", "label": str(i)})
    reader.get_metrics_data()
    times = []
    for _ in range(ROUNDS):
        started = time.process_time()
        reader.get_metrics_data()
        times.append(time.process_time() - started)
    return statistics.median(times) * 1e3


def _export(rev: str, into: Path) -> Path:
    archive = subprocess.run(["git", "archive", rev, "src"], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _run(src: Path, fleet: bool, own_provider: bool = False, sdk_default: bool = False) -> dict[str, float]:
    code = (f"import sys, json; sys.path[:0] = [{str(src)!r}, {str(Path(__file__).parent)!r}]; "
            f"import bench_collection as b; print(json.dumps(b._measure({fleet}, {own_provider}, {sdk_default})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "CTXSCOPE_STORE": "off"})
    return json.loads(done.stdout.strip().splitlines()[-1])


def _medians(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per figure, the median over the interleaved runs (a flag or a count: the last run's)."""
    out = dict(runs[-1])
    for key, value in out.items():
        if isinstance(value, float):
            out[key] = statistics.median(r[key] for r in runs)
    return out


def main() -> dict[str, float]:
    base_rev = os.environ.get("CTXSCOPE_BENCH_BASE", "HEAD")
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": [], "before_own": [], "own": [],
                                               "sdk_default": []}
    with tempfile.TemporaryDirectory() as tmp:
        base = _export(base_rev, Path(tmp))
        for _ in range(REPEATS):  # interleaved, so that the machine's load weighs on each alike
            runs["before"].append(_run(base, False))
            runs["after"].append(_run(ROOT / "src", False))
            runs["before_own"].append(_run(base, False, own_provider=True))
            runs["own"].append(_run(ROOT / "src", False, own_provider=True))
            runs["sdk_default"].append(_run(ROOT / "src", False, own_provider=True, sdk_default=True))
    before, after, before_own, own, sdk_default = (
        _medians(runs[k]) for k in ("before", "after", "before_own", "own", "sdk_default"))
    fleet = _run(ROOT / "src", True)
    print(f"  {SESSIONS} live sessions, one call between collections ({base_rev} -> this tree; "
          f"the provider setup() creates; median of {REPEATS} interleaved runs)")
    for key, label in (("collection_cpu_ms", "one collection, CPU ms"), ("callbacks_cpu_ms", "  ctxscope's callbacks"),
                       ("collection_points", "  points"),
                       ("sdk_encoding_cpu_ms", "its OTLP request, SDK's encoder"),
                       ("encoding_cpu_ms", "  setup()'s exporter (gRPC)"),
                       ("collection_and_encoding_cpu_ms", "collection and setup()'s encoding"),
                       ("observe_call_us", "observe_call, CPU us"),
                       ("churn_collection_cpu_ms", f"after {CHURN} ended sessions"),
                       ("churn_callbacks_cpu_ms", "  ctxscope's callbacks"), ("churn_points", "  points"),
                       ("churn_new_session_reported", "  a new session has its own series"),
                       ("sdk_floor_cpu_ms", "the SDK alone, as many gauge series")):
        b, a = before.get(key), after.get(key)
        ratio = f"  x{a / b:.2f}" if isinstance(a, float) and isinstance(b, float) and b else ""
        print(f"  {label:34} {b!s:>22} {a!s:>22}{ratio}")
    print(f"  the application's own MeterProvider, built without views: one collection "
          f"{before_own.get('collection_cpu_ms', 0):.2f} ms CPU ({base_rev}) -> "
          f"{own.get('collection_cpu_ms', 0):.2f} ms (this tree), {own.get('collection_points')} points; "
          f"with the SDK's OTLP encoder {own.get('collection_cpu_ms', 0) + own.get('sdk_encoding_cpu_ms', 0):.2f} ms")
    print(f"  the SDK's default aggregation (no ctxscope views at all): one collection "
          f"{sdk_default.get('collection_cpu_ms', 0):.2f} ms CPU")
    print(f"  fleet mode: one collection {fleet.get('collection_cpu_ms', 0):.2f} ms CPU, "
          f"{fleet.get('collection_points')} points; observe_call {fleet.get('observe_call_us', 0):.0f} us")
    figures: dict[str, float] = {f"before_{k}": v for k, v in before.items()}
    figures.update(after)
    figures.update({f"own_provider_{k}": v for k, v in own.items() if not k.startswith(("churn", "sdk"))})
    figures.update({f"before_own_provider_{k}": v for k, v in before_own.items()
                    if not k.startswith(("churn", "sdk"))})
    figures.update({f"sdk_default_{k}": v for k, v in sdk_default.items() if not k.startswith(("churn", "sdk"))})
    figures.update({f"fleet_{k}": v for k, v in fleet.items() if not k.startswith("churn")})
    return figures


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
