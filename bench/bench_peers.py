"""ctxscope beside the other instrumentations of the ``openai`` SDK, each in its own virtualenv, in one run.

Peers (one virtualenv each, cached under ``~/.cache/ctxscope-bench/peers``,
all with the ``openai`` version of the bench's own environment): a bare
baseline (no instrumentation), ctxscope (this checkout, ``pip install -e``),
the official ``opentelemetry-instrumentation-genai-openai``, OpenLLMetry's
``opentelemetry-instrumentation-openai`` and OpenInference's
``openinference-instrumentation-openai`` (each its current release). A peer
whose install fails is skipped, with pip's error line as the reason.

Every peer runs ``bench/peers/driver.py`` (see there: the tracer and meter
providers, the timers) against one :class:`ctxscope.testing.ProviderServer`
and one OTLP/gRPC receiver (oteltest's sink, counting spans and metric
points per ``service.name``), driven command by command from here so rounds
interleave across peers (the order rotates each round) and drift hits all.
Rows: ctxscope's default (content capture off), ctxscope with content capture
on (``SPAN_ONLY``), ctxscope counting ``chars/4`` (no encoding: the memory
option), and the three peers at their own defaults.

Figures:

- time inside the wrapper, median over rounds of (peer - baseline) paired by
  round, at 20 / 200 / 2,000 items, a conversation growing by one message a
  call; end-to-end medians are printed too;
- the first call of a fresh session at each size (the wrapper's time, minus
  the baseline's first call);
- RSS after ``MEMORY_CALLS`` calls in the 2,000-item session (it grows to
  2,000 + calls items), and at start (before the first call);
- CPU of one metric collection and export (the periodic reader's
  ``force_flush`` on the caller's thread) with 64 live sessions of 20 items;
- spans and metric points the receiver got from each peer over the run.

Knobs (environment): ``BENCH_PEERS_ROUNDS`` (30), ``BENCH_PEERS_MEMORY_CALLS``
(2,000), ``BENCH_PEERS_ONLY`` (comma-separated row names),
``BENCH_PEERS_REFRESH=1`` (rebuild the virtualenvs).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from importlib import metadata
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
DRIVER = Path(__file__).resolve().parent / "peers" / "driver.py"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ctxscope-bench" / "peers"
SHARED_TIKTOKEN = ROOT.parent / "shared" / "tiktoken"

SIZES = (20, 200, 2000)
ROUNDS = int(os.environ.get("BENCH_PEERS_ROUNDS", "30"))
MEMORY_CALLS = int(os.environ.get("BENCH_PEERS_MEMORY_CALLS", "2000"))
RSS_EVERY = 250  # calls of the 2,000-item session between two RSS readings
LIVE_SESSIONS = 64
COLLECTIONS = 7
METRIC_INTERVAL_MS = 5000
PIP_TIMEOUT_S = 900

# Every venv gets these; the peer's own packages come on top.
COMMON = ("opentelemetry-sdk", "opentelemetry-exporter-otlp-proto-grpc", "wrapt")
PEER_PACKAGES = {
    "baseline": (),
    "ctxscope": ("-e", f"{ROOT}[openai]"),
    "official": ("opentelemetry-instrumentation-genai-openai",),
    "openllmetry": ("opentelemetry-instrumentation-openai",),
    "openinference": ("openinference-instrumentation-openai",),
}


class Row(NamedTuple):
    name: str  # the table's row, the receiver's service.name
    label: str
    venv: str  # a key of PEER_PACKAGES
    env: Mapping[str, str] = MappingProxyType({})


ROWS = (
    Row("baseline", "baseline (no instrumentation)", "baseline"),
    Row("ctxscope", "ctxscope (default)", "ctxscope"),
    Row("ctxscope-content", "ctxscope, content capture on", "ctxscope",
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}),
    Row("ctxscope-chars", "ctxscope, chars/4 (no encoding)", "ctxscope", {"CTXSCOPE_TOKENIZER": "chars"}),
    # The OTLP exporters ctxscope.setup() builds (the SDK's, with ctxscope's encoding) in place of the SDK's own.
    Row("ctxscope-exporters", "ctxscope, setup()'s OTLP exporters", "ctxscope", {"BENCH_CTXSCOPE_EXPORTERS": "1"}),
    Row("official", "official opentelemetry-instrumentation-genai-openai", "official"),
    Row("openllmetry", "OpenLLMetry opentelemetry-instrumentation-openai", "openllmetry"),
    Row("openinference", "OpenInference openinference-instrumentation-openai", "openinference"),
)
# The distribution named in each row's label, for its version.
DIST_OF = {"ctxscope": "ctxscope", "official": "opentelemetry-instrumentation-genai-openai",
           "openllmetry": "opentelemetry-instrumentation-openai",
           "openinference": "openinference-instrumentation-openai"}


# ---------------------------------------------------------------------------
# Virtualenvs
# ---------------------------------------------------------------------------


def _pip_error(stderr: str) -> str:
    """pip's own error line (the last ``ERROR:`` line), else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return (errors or lines or ["pip failed without a message"])[-1][:300]


def venv_for(peer: str, openai_version: str, refresh: bool) -> tuple[Path | None, str]:
    """The peer's virtualenv (built once, then cached), or None and why not."""
    requirements = [f"openai=={openai_version}", *COMMON, *PEER_PACKAGES[peer]]
    stamp_text = json.dumps(requirements)
    if peer == "ctxscope":  # an editable install of this checkout: rebuilt when its dependencies change
        # The checkout's path too: another worktree's cached virtualenv would run that worktree's code.
        stamp_text += str(ROOT) + hashlib.sha1((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    key = hashlib.sha1(stamp_text.encode()).hexdigest()[:10]
    venv = CACHE / f"{peer}-{key}"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    if stamp.exists() and python.exists() and not refresh:
        return venv, ""
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    print(f"  building {venv} ({' '.join(requirements)})", flush=True)
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
    if made.returncode != 0:
        return None, _pip_error(made.stderr)
    try:
        pip = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                              *requirements], capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"pip install did not finish in {PIP_TIMEOUT_S} s"
    if pip.returncode != 0:
        shutil.rmtree(venv, ignore_errors=True)
        return None, _pip_error(pip.stderr)
    stamp.write_text(stamp_text)
    return venv, ""


# ---------------------------------------------------------------------------
# The receiver: spans and metric points per service.name
# ---------------------------------------------------------------------------


def _service(resource: Any) -> str:
    for kv in resource.attributes:
        if kv.key == "service.name":
            return str(kv.value.string_value)
    return "?"


def _points(metric: Any) -> int:
    kind = metric.WhichOneof("data")
    return len(getattr(metric, kind).data_points) if kind else 0


def receiver() -> tuple[Any, Any]:
    """An oteltest gRPC sink on a free port and its counting handler."""
    import socket

    from oteltest.sink import GrpcSink
    from oteltest.sink.handler import RequestHandler

    class Count(RequestHandler):
        def __init__(self) -> None:
            self.spans: dict[str, int] = {}
            self.points: dict[str, int] = {}
            self.context_spans: dict[str, int] = {}  # spans carrying llm.context.* attributes
            self.lock = threading.Lock()

        def handle_logs(self, request: Any, headers: Any) -> None:
            pass

        def handle_trace(self, request: Any, headers: Any) -> None:
            with self.lock:
                for rs in request.resource_spans:
                    name = _service(rs.resource)
                    for ss in rs.scope_spans:
                        self.spans[name] = self.spans.get(name, 0) + len(ss.spans)
                        annotated = sum(1 for s in ss.spans
                                        if any(kv.key.startswith("llm.context.") for kv in s.attributes))
                        self.context_spans[name] = self.context_spans.get(name, 0) + annotated

        def handle_metrics(self, request: Any, headers: Any) -> None:
            with self.lock:
                for rm in request.resource_metrics:
                    name = _service(rm.resource)
                    n = sum(_points(m) for sm in rm.scope_metrics for m in sm.metrics)
                    self.points[name] = self.points.get(name, 0) + n

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    handler = Count()
    sink = GrpcSink(handler, logging.getLogger("oteltest-sink"), port=port)
    sink.start()
    sink.endpoint = f"http://127.0.0.1:{port}"
    return sink, handler


# ---------------------------------------------------------------------------
# Drivers
# ---------------------------------------------------------------------------


class Peer:
    """One row's driver process and what it measured."""

    def __init__(self, row: Row, python: Path, env: dict[str, str], log: Path) -> None:
        self.row = row
        self.log = log.open("w")
        self.process = subprocess.Popen([str(python), str(DRIVER), row.venv], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=self.log, text=True,
                                        env={**env, **row.env, "BENCH_SERVICE": row.name})
        self.hello = self._answer()
        self.error: str | None = self.hello.get("error")
        self.wrapper: dict[int, list[float]] = {n: [] for n in SIZES}
        self.total: dict[int, list[float]] = {n: [] for n in SIZES}
        self.first: dict[int, float] = {}
        self.figures: dict[str, Any] = {}

    def _answer(self) -> dict[str, Any]:
        line = self.process.stdout.readline() if self.process.stdout else ""
        if not line:
            return {"error": f"the driver exited (status {self.process.poll()}; see {self.log.name})"}
        return json.loads(line)

    def ask(self, op: str, **args: Any) -> dict[str, Any]:
        if not self.send(op, **args):
            return {"error": self.error}
        return self.receive(op)

    def send(self, op: str, **args: Any) -> bool:
        """Send one command without waiting for its answer (``receive``); False if the driver failed."""
        if self.error:
            return False
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.process.stdin.flush()
        return True

    def receive(self, op: str) -> dict[str, Any]:
        answer = self._answer()
        if "error" in answer:
            self.error = f"{op}: {answer['error']}"
            print(f"  {self.row.name}: {self.error}\n{answer.get('traceback', '')}", file=sys.stderr, flush=True)
        return answer

    def close(self) -> None:
        if self.error is None:
            self.ask("exit")
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def _rotated(peers: list[Peer], r: int) -> list[Peer]:
    live = [p for p in peers if p.error is None]
    k = r % len(live) if live else 0
    return live[k:] + live[:k]


def run(peers: list[Peer]) -> None:
    timed(peers)
    collections(peers)


def timed(peers: list[Peer]) -> None:
    """Every size: a fresh session's first call, then ``ROUNDS`` paired rounds, peers taking turns."""
    for size in SIZES:
        print(f"  {size} items: first call, then {ROUNDS} rounds", flush=True)
        for peer in peers:
            peer.ask("start", items=size, tag=f"size-{size}")
        for peer in _rotated(peers, size):
            answer = peer.ask("call")
            if "wrapper_ms" in answer:
                peer.first[size] = answer["wrapper_ms"]
        for r in range(ROUNDS):
            for peer in _rotated(peers, r):
                answer = peer.ask("call")
                if "wrapper_ms" in answer:
                    peer.wrapper[size].append(answer["wrapper_ms"])
                    peer.total[size].append(answer["total_ms"])
    memory_calls(peers, done=ROUNDS + 1)


def memory_calls(peers: list[Peer], done: int) -> None:
    """The 2,000-item session's calls up to ``MEMORY_CALLS``, every peer at once, RSS along the way.

    Nothing is timed here, so the drivers need not take turns: each call goes
    to every driver before any answer is read, and the drivers (one process
    each) run side by side. RSS is read at every :data:`RSS_EVERY` calls and
    at the end (``rss_by_calls``), so a run cut short still shows the trend.
    """
    for calls in range(done + 1, MEMORY_CALLS + 1):
        sent = [peer for peer in peers if peer.send("call")]
        for peer in sent:
            peer.receive("call")
        if calls % RSS_EVERY == 0 and calls != MEMORY_CALLS:
            print(f"    {calls} calls: RSS " + ", ".join(f"{p.row.name} {_fmt(_rss(p, calls), 0)}" for p in peers),
                  flush=True)
    for peer in peers:
        peer.figures["rss_mb"] = _rss(peer, max(MEMORY_CALLS, done))


def _rss(peer: Peer, calls: int) -> float | None:
    rss = peer.ask("rss").get("rss_mb")
    peer.figures.setdefault("rss_by_calls", {})[calls] = rss
    return rss


def collections(peers: list[Peer]) -> None:
    print(f"  {LIVE_SESSIONS} live sessions: {COLLECTIONS} collections", flush=True)
    for peer in peers:
        peer.ask("sessions", n=LIVE_SESSIONS, items=20)
    cpu: dict[str, list[float]] = {p.row.name: [] for p in peers}
    for r in range(COLLECTIONS):
        for peer in _rotated(peers, r):
            peer.ask("call")  # one session changes between collections, as when one agent of many calls
            answer = peer.ask("collect")
            if "cpu_ms" in answer:
                cpu[peer.row.name].append(answer["cpu_ms"])
    for peer in peers:
        if cpu[peer.row.name]:
            peer.figures["collection_cpu_ms"] = statistics.median(cpu[peer.row.name])
        peer.ask("flush")


def _paired(peer: Peer, baseline: Peer, size: int) -> float | None:
    pairs = [p - b for p, b in zip(peer.wrapper[size], baseline.wrapper[size])]
    return statistics.median(pairs) if pairs else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def main() -> dict[str, Any] | None:
    from ctxscope.testing import ProviderServer

    openai_version = metadata.version("openai")  # the bench's own SDK: every venv gets this version
    refresh = os.environ.get("BENCH_PEERS_REFRESH") == "1"
    only = {n for n in os.environ.get("BENCH_PEERS_ONLY", "").split(",") if n}
    rows = [r for r in ROWS if not only or r.name in only or r.name == "baseline"]
    pythons: dict[str, Path] = {}
    skipped: dict[str, str] = {}
    for venv in dict.fromkeys(r.venv for r in rows):
        path, reason = venv_for(venv, openai_version, refresh)
        if path is None:
            skipped[venv] = reason
            print(f"  {venv}: skipped, install failed: {reason}", flush=True)
        else:
            pythons[venv] = path / "bin" / "python"
    if "baseline" not in pythons:
        print(f"  no baseline virtualenv ({skipped.get('baseline')}): nothing to compare with")
        return None
    logs = ROOT / "bench" / "out" / "peers"
    logs.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    started = time.monotonic()
    sink, counts = receiver()
    peers: list[Peer] = []
    try:
        with ProviderServer() as server:
            server.record_requests = False
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("CTXSCOPE_", "OTEL_", "TRACELOOP_", "OPENINFERENCE_"))}
            env.update({"BENCH_OTLP_ENDPOINT": sink.endpoint, "BENCH_OPENAI_BASE_URL": server.openai_base_url,
                        "BENCH_METRIC_INTERVAL_MS": str(METRIC_INTERVAL_MS), "CTXSCOPE_STORE": "off",
                        "PYTHONDONTWRITEBYTECODE": "1"})
            if SHARED_TIKTOKEN.is_dir():
                env.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED_TIKTOKEN))
            for row in rows:
                if row.venv not in pythons:
                    continue
                peer = Peer(row, pythons[row.venv], env, logs / f"{row.name}.log")
                if peer.error:
                    skipped[row.name] = peer.error
                    print(f"  {row.name}: skipped, the driver could not start: {peer.error}", flush=True)
                peers.append(peer)
            run(peers)
    finally:
        for peer in peers:
            peer.close()
        time.sleep(1.0)  # the last exports land
        sink.stop()
    elapsed = time.monotonic() - started
    load_after = os.getloadavg()
    return report(peers, skipped, counts, openai_version, elapsed, load_before, load_after)


def report(peers: list[Peer], skipped: dict[str, str], counts: Any, openai_version: str, elapsed: float,
           load_before: tuple[float, ...], load_after: tuple[float, ...]) -> dict[str, Any]:
    baseline = next(p for p in peers if p.row.name == "baseline")
    figures: dict[str, Any] = {"openai": openai_version, "rounds": ROUNDS, "memory_calls": MEMORY_CALLS,
                               "elapsed_s": round(elapsed), "load_before": load_before[:3],
                               "load_after": load_after[:3], "skipped": skipped, "rows": {}}
    print(f"\n  openai {openai_version}; {ROUNDS} paired rounds a size; {elapsed:.0f} s;"
          f" load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    print("\n  | time inside the wrapper, median ms | 20 items | 200 | 2,000 |"
          " first call, 2,000 items | RSS MB | collection CPU ms | spans | points |")
    print("  |---|---|---|---|---|---|---|---|---|")
    for peer in peers:
        if peer.error and not peer.wrapper[SIZES[0]]:
            continue
        name = peer.row.name
        version = peer.hello.get("versions", {}).get(DIST_OF.get(peer.row.venv, ""), "")
        label = f"{peer.row.label} {version}".strip()
        medians = {size: _paired(peer, baseline, size) for size in SIZES} if peer is not baseline else {
            size: statistics.median(peer.wrapper[size]) if peer.wrapper[size] else None for size in SIZES}
        first = {size: (peer.first[size] - baseline.first.get(size, 0.0)) if size in peer.first else None
                 for size in SIZES}
        row = {"label": label, "wrapper_median_ms": medians, "first_call_ms": first,
               "total_median_ms": {s: statistics.median(v) if v else None for s, v in peer.total.items()},
               "rss_start_mb": peer.hello.get("rss_mb"), "rss_mb": peer.figures.get("rss_mb"),
               "rss_by_calls": peer.figures.get("rss_by_calls"),
               "collection_cpu_ms": peer.figures.get("collection_cpu_ms"),
               "spans": counts.spans.get(name, 0), "context_spans": counts.context_spans.get(name, 0),
               "points": counts.points.get(name, 0), "versions": peer.hello.get("versions"),
               "error": peer.error}
        figures["rows"][name] = row
        print(f"  | {label} | {_fmt(medians[20])} | {_fmt(medians[200])} | {_fmt(medians[2000])} |"
              f" {_fmt(first[2000], 1)} | {_fmt(row['rss_mb'], 0)} | {_fmt(row['collection_cpu_ms'])} |"
              f" {row['spans']:,} | {row['points']:,} |")
    print("\n  (baseline row: the timers' own cost, subtracted from every other row round by round)")
    print("\n  first call of a fresh session (wrapper ms, minus the baseline's):")
    for name, row in figures["rows"].items():
        print(f"    {name:18} " + "  ".join(f"{s}: {_fmt(row['first_call_ms'][s], 1)}" for s in SIZES))
    print("\n  end to end, median ms per call (baseline included):")
    for name, row in figures["rows"].items():
        print(f"    {name:18} " + "  ".join(f"{s}: {_fmt(row['total_median_ms'][s], 1)}" for s in SIZES))
    print("\n  RSS at start -> after the run (MB); spans with llm.context.* attributes:")
    for name, row in figures["rows"].items():
        print(f"    {name:18} {_fmt(row['rss_start_mb'], 0)} -> {_fmt(row['rss_mb'], 0)}   "
              f"{row['context_spans']:,} of {row['spans']:,}")
    official = figures["rows"].get("official")
    if official:
        print("\n  ratios to the official instrumentation, same run (wrapper medians at 20 / 200 / 2,000; RSS):")
        for name, row in figures["rows"].items():
            if not name.startswith("ctxscope"):
                continue
            ratios = [_ratio(row["wrapper_median_ms"][s], official["wrapper_median_ms"][s]) for s in SIZES]
            rss = _ratio(row["rss_mb"], official["rss_mb"])
            row["ratio_to_official"] = {"wrapper": dict(zip(SIZES, ratios)), "rss": rss}
            print(f"    {name:18} wrapper " + " / ".join(_fmt(r) for r in ratios) + f"   RSS {_fmt(rss)}")
    for name, reason in skipped.items():
        print(f"  skipped {name}: {reason}")
    return figures


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    main()
