"""Snapshot the OTLP output of ``ctxscope replay``, to show a change to the span writer changed nothing.

    python tools/replay_otlp_snapshot.py save DIR [FILE...]   # replay FILEs (default: the corpus sessions)
    python tools/replay_otlp_snapshot.py compare A B           # what differs ("identical" if nothing)

``save`` runs ``ctxscope replay --tokenizer chars`` in a child process, with
OTLP/HTTP sent to a local receiver (the tests' oteltest sink,
``tests/_otlp_sink.py``), and writes ``DIR/otlp.json``: every span (name,
kind, status, scope, attributes, events, parent), its start and end and its
events' times (a replay writes the transcript's own times, so they must be
equal too), and every metric point, normalised as
``tools/demo_otlp_snapshot.py`` does (ids become indexes; the process's
resource attributes are left out). Without FILEs: every corpus session that
``tools/behaviour_snapshot.py`` reads (``../shared/corpus``), in one replay.
``PYTHONPATH=/other/checkout/src`` snapshots another tree with this venv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
sys.path.insert(0, str(ROOT / "tools"))
sys.path.insert(0, str(ROOT / "tests"))

from demo_otlp_snapshot import _LOCAL_PORT, _attributes, _metrics, _spans, compare  # noqa: E402

RUN_TIME = "<the run's time>"


def _sessions() -> list[str]:
    files = sorted(p for p in CORPUS.rglob("*") if p.suffix in (".jsonl", ".json", ".traj") and p.is_file())
    # Subagent files are replayed with their parent session (replay adds them).
    return [str(p) for p in files if "subagents" not in p.parts and "/api/" not in str(p)]


def _times(requests: list[Any], run_start_ns: int) -> list[dict[str, Any]]:
    """Start, end and event times of each span, in the order ``_spans`` puts them.

    A time after the run began is the run's own (a session-end marker, a call
    the transcript gave no time): it is written as such, not as its value.
    """
    def time_of(ns: int) -> int | str:
        return RUN_TIME if ns >= run_start_ns else ns

    raw = [span for request in requests for rs in request.resource_spans for ss in rs.scope_spans
           for span in ss.spans]
    raw.sort(key=lambda span: (span.start_time_unix_nano, span.name,
                               json.dumps(_attributes(span.attributes), sort_keys=True)))
    return [{"start": time_of(span.start_time_unix_nano), "end": time_of(span.end_time_unix_nano),
             "events": [time_of(event.time_unix_nano) for event in span.events]} for span in raw]


def save(target: Path, files: list[str]) -> None:
    from _otlp_sink import Receiver

    files = files or _sessions()
    with tempfile.TemporaryDirectory() as data_dir, Receiver("http/protobuf") as receiver:
        env = {**os.environ, "CTXSCOPE_DATA_DIR": data_dir, "CTXSCOPE_STORE": "off",
               "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
               "OTEL_METRIC_EXPORT_INTERVAL": "600000"}
        started, run_start_ns = time.monotonic(), time.time_ns()
        run = subprocess.run([sys.executable, "-c", "from ctxscope.cli import run; run()", "replay", "--tokenizer",
                              "chars", *files], env=env, cwd=ROOT, capture_output=True, text=True, timeout=3600)
        time.sleep(1.0)  # the receiver finishes decoding the last request
        with receiver.handler.lock:
            traces, metrics = list(receiver.handler.traces), list(receiver.handler.metrics)
    if not traces:
        sys.exit(f"replay_otlp_snapshot: the receiver got no spans (exit {run.returncode}):\n{run.stderr[-2000:]}")
    snapshot = {"exit": run.returncode, "stderr": _LOCAL_PORT.sub(r"\1:<port>", run.stderr).splitlines(),
                "spans": _spans(traces), "times": _times(traces, run_start_ns), "metrics": _metrics(metrics)}
    target.mkdir(parents=True, exist_ok=True)
    (target / "otlp.json").write_text(json.dumps(snapshot, indent=1, sort_keys=True))
    print(f"{len(snapshot['spans'])} spans and {sum(len(m['points']) for m in snapshot['metrics'].values())} "
          f"metric points of {len(files)} files saved to {target / 'otlp.json'} "
          f"({time.monotonic() - started:.1f} s)")


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "save":
        save(Path(argv[1]), argv[2:])
        return 0
    if len(argv) == 3 and argv[0] == "compare":
        return compare(Path(argv[1]), Path(argv[2]))
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
