"""CPU cost of ``ctxscope watch``: idle with 200 files, and per appended megabyte.

Runs the real command as a subprocess (exporting over OTLP/gRPC to an
oteltest receiver in this process) and reads its CPU time (user + system)
from ``/proc/<pid>/stat`` (Linux), so only the watch is measured.

1. Idle: 200 real-shaped session files (copies of a real Claude Code
   session, tests/data) in 20 project folders; the watch started, then
   nothing changes for ``--idle-seconds`` (default 20 s, scaled down from
   10 minutes: the figure is extrapolated linearly to 10 minutes, as the
   idle loop's cost is per unit of time). With inotify and with polling
   (every 2 s, the default).
2. Appending: a synthetic Claude Code session (``../shared/tools/gen_sessions.py``,
   ``--target-mb``) appended to a watched file in 64 KB slices (cut at line
   ends); CPU seconds of the watch per appended megabyte, chars/4 and tiktoken
   (the default ``auto`` basis).

``python bench/bench_watch.py [--idle-seconds 20] [--mb 4]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
SOURCE = ROOT / "tests" / "data" / "transcripts" / "claude_4c2ddfdc.jsonl"
GEN = SHARED / "tools" / "gen_sessions.py"
FILES = 200
SESSION_ID = b"4c2ddfdc-b619-4525-8d03-1950fb1b0257"
SLICE = 64 * 1024
TIMEOUT_S = 120

sys.path.insert(0, str(ROOT / "tests"))


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def start(folder: Path, work: Path, endpoint: str, *extra: str, tokenizer: str = "chars") -> subprocess.Popen:
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
           "CTXSCOPE_DATA_DIR": str(work / "data"), "OTEL_METRIC_EXPORT_INTERVAL": "60000"}
    if (SHARED / "tiktoken").is_dir():
        env.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "tiktoken"))
    proc = subprocess.Popen([sys.executable, "-c", "from ctxscope.cli import run; run()", "watch", str(folder),
                             "--state", str(work / "state.json"), "--tokenizer", tokenizer, *extra],
                            env=env, stderr=subprocess.PIPE, text=True)
    ready = threading.Event()

    def read() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            if "watching" in line:
                ready.set()
            else:
                sys.stderr.write(line)

    threading.Thread(target=read, daemon=True).start()
    if not ready.wait(60):
        raise SystemExit("watch did not start")
    return proc


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(30)


def idle(endpoint: str, seconds: float, notify: str) -> dict:
    work = Path(tempfile.mkdtemp(prefix="bench-watch-"))
    try:
        folder = work / "projects"
        text = SOURCE.read_bytes()
        for n in range(FILES):
            sub = folder / f"-project-{n % 20}"
            sub.mkdir(parents=True, exist_ok=True)
            # Each file its own session (as on a real machine): the session id rewritten.
            (sub / f"session-{n:03d}.jsonl").write_bytes(text.replace(SESSION_ID, b"%s-%03d" % (SESSION_ID[:-4], n)))
        proc = start(folder, work, endpoint, "--notify", notify, "--from-start", "--idle", "1")
        time.sleep(5)  # the first read of every file and the idle ends are done
        before = cpu_seconds(proc.pid)
        time.sleep(seconds)
        used = cpu_seconds(proc.pid) - before
        rss = rss_mb(proc.pid)
        stop(proc)
        return {"notify": notify, "files": FILES, "seconds": seconds, "cpu_s": round(used, 3), "rss_mb": rss,
                "cpu_s_per_10_min": round(used * 600 / seconds, 3),
                "cpu_share": f"{100 * used / seconds:.3f}%"}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def appending(endpoint: str, handler, megabytes: float, tokenizer: str) -> dict:  # type: ignore[no-untyped-def]
    work = Path(tempfile.mkdtemp(prefix="bench-watch-"))
    try:
        folder = work / "projects"
        folder.mkdir()
        session = work / "session.jsonl"
        subprocess.run([sys.executable, str(GEN), "claude", "--target-mb", str(megabytes), "--seed", "7",
                        "-o", str(session)], check=True, capture_output=True)
        data = session.read_bytes()
        expected = sum(1 for _ in _calls(session))
        proc = start(folder, work, endpoint, "--idle", "600", tokenizer=tokenizer)
        target = folder / "live.jsonl"
        spans_before = _chat_spans(handler)
        before = cpu_seconds(proc.pid)
        started = time.monotonic()
        with open(target, "ab") as out:
            pos = 0
            while pos < len(data):
                end = data.find(b"\n", min(pos + SLICE, len(data) - 1)) + 1 or len(data)
                out.write(data[pos:end])
                out.flush()
                pos = end
                time.sleep(0.005)
        while _chat_spans(handler) - spans_before < expected and time.monotonic() - started < TIMEOUT_S:
            time.sleep(0.05)
        used = cpu_seconds(proc.pid) - before
        rss = rss_mb(proc.pid)
        got = _chat_spans(handler) - spans_before
        stop(proc)
        mb = len(data) / 1e6
        return {"tokenizer": tokenizer, "megabytes": round(mb, 2), "calls": got, "expected_calls": expected,
                "cpu_s": round(used, 3), "cpu_s_per_mb": round(used / mb, 3), "rss_mb": rss}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _calls(path: Path):  # type: ignore[no-untyped-def]
    from ctxscope.transcripts import TranscriptFile

    return TranscriptFile(str(path)).calls()


def _chat_spans(handler) -> int:  # type: ignore[no-untyped-def]
    return sum(1 for s in handler.spans() if s.name.startswith("chat"))


def main(idle_seconds: float = 20.0, mb: float = 4.0) -> dict:
    """Both measurements; returns the figures (``bench/run.py`` prints them as one JSON line)."""
    if not sys.platform.startswith("linux"):
        print("bench_watch reads /proc: Linux only", file=sys.stderr)
        return {}
    from _otlp_sink import Receiver

    figures: dict = {}
    with Receiver() as receiver:
        for notify in ("auto", "poll"):
            result = idle(receiver.endpoint, idle_seconds, notify)
            print(json.dumps(result), flush=True)
            figures[f"idle_{notify}_cpu_s_per_10_min"] = result["cpu_s_per_10_min"]
            figures[f"idle_{notify}_rss_mb"] = result["rss_mb"]
        if GEN.is_file():
            for tokenizer in ("chars", "auto"):
                result = appending(receiver.endpoint, receiver.handler, mb, tokenizer)
                print(json.dumps(result), flush=True)
                figures[f"append_{tokenizer}_cpu_s_per_mb"] = result["cpu_s_per_mb"]
                figures[f"append_{tokenizer}_calls_missing"] = result["expected_calls"] - result["calls"]
        else:
            print(f"{GEN} is not here: the append measurement is skipped", file=sys.stderr)
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--mb", type=float, default=4.0)
    options = parser.parse_args()
    print(json.dumps(main(options.idle_seconds, options.mb)))
