"""Fuzzing the CLI (issue 17): mutated real recordings, transcripts and store files to inspect, analyze, diff, context.

Every run must exit 0, 1 or 2, print only one-line ``ctxscope: ...`` messages
on stderr (never a traceback), take under 10 s and stay under a memory bound.

The commands run in a worker process (``_fuzz_worker``-style, below) that
calls ``ctxscope.cli.main`` for each example: one Python start for all of
them, an address-space cap (``RLIMIT_AS``) so that a command reading without
bound dies instead of swapping, and its peak RSS checked after every run.

Sources: small slices in ``tests/data`` always; real files of
``../shared/corpus`` where it is present (skipped with a reason elsewhere).
Example counts: ``FUZZ_EXAMPLES`` (30) per test (tuned so the file adds about 10 s
on two busy cores; raise it with ``CTXSCOPE_FUZZ_EXAMPLES`` for a long run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import CORPUS, DATA

FUZZ_EXAMPLES = int(os.environ.get("CTXSCOPE_FUZZ_EXAMPLES", "30"))
MAX_RUN_S = 10.0
MAX_RSS_MB = 1024
ADDRESS_SPACE = 4 * 1024 ** 3

WORKER = textwrap.dedent("""
    import io, json, logging, resource, sys, time, traceback
    resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]), int(sys.argv[1])))

    class Current:
        # stderr as the running command sees it, also for the logging handler made once
        buffer = io.StringIO()
        def write(self, text):
            return Current.buffer.write(text)
        def flush(self):
            pass
        def isatty(self):
            return False

    logging.basicConfig(level=logging.WARNING, format="ctxscope: %(message)s", stream=Current())
    from ctxscope.cli import main
    protocol = sys.stdout
    for line in sys.stdin:
        argv = json.loads(line)
        Current.buffer = io.StringIO()
        sys.stdout, sys.stderr = io.StringIO(), Current()
        started = time.monotonic()
        try:
            code = main(argv)
        except BaseException:
            traceback.print_exc(file=Current.buffer)
            code = -1
        elapsed = time.monotonic() - started
        sys.stdout, sys.stderr = protocol, sys.__stderr__
        rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        protocol.write(json.dumps({"code": code, "stderr": Current.buffer.getvalue(), "elapsed": elapsed,
                                   "rss_kb": rss_kb}) + "\\n")
        protocol.flush()
""")


class Worker:
    def __init__(self, data_dir: Path) -> None:
        env = {**os.environ, "CTXSCOPE_DATA_DIR": str(data_dir), "OTEL_TRACES_EXPORTER": "none",
               "OTEL_METRICS_EXPORTER": "none"}
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER, str(ADDRESS_SPACE)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)

    def run(self, *argv: str) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(list(argv)) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the worker died running {argv} (exit {self.proc.wait(10)}): out of memory or a crash"
        return json.loads(line)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(10)


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    w = Worker(tmp_path_factory.mktemp("fuzz-data"))
    yield w
    w.close()


def check(result: dict, argv: tuple[str, ...]) -> None:
    """Exit 0, 1 or 2; stderr only one-line ctxscope messages; no traceback; in time; within memory."""
    err = result["stderr"]
    assert "Traceback" not in err, f"{argv}:\n{err}"
    assert result["code"] in (0, 1, 2), (argv, result["code"], err[-2000:])
    for line in err.splitlines():
        assert line.startswith("ctxscope: "), (argv, line)
    assert result["elapsed"] < MAX_RUN_S, (argv, result["elapsed"])
    assert result["rss_kb"] < MAX_RSS_MB * 1024, (argv, result["rss_kb"])


# ---------------------------------------------------------------------------
# Sources
# ---------------------------------------------------------------------------

def _small(paths, limit: int = 200_000) -> list[Path]:
    return sorted(p for p in paths if p.is_file() and p.stat().st_size <= limit)


TRANSCRIPTS = _small((DATA / "transcripts").glob("*.jsonl"))
RECORDINGS = [line for path in ("requests_anthropic.jsonl", "requests_openai_chat.jsonl")
              for line in (DATA / path).read_bytes().splitlines() if line.strip()]
if CORPUS.is_dir():
    CORPUS_TRANSCRIPTS = _small(list(CORPUS.glob("claude/**/*.jsonl")) + list(CORPUS.glob("codex/**/*.jsonl")))
    CORPUS_RECORDINGS = [line for path in CORPUS.glob("api/*/*.requests.jsonl")
                         for line in path.read_bytes().splitlines()[:60] if line.strip() and len(line) < 100_000]
else:
    CORPUS_TRANSCRIPTS, CORPUS_RECORDINGS = [], []
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="../shared/corpus is not here")

# Values that broke readers: non-finite and negative numbers, overflow, deep nesting, odd types.
NASTY = [b"NaN", b"Infinity", b"-Infinity", b"-1", b"-99999999999999999999", b"1e999", b"1.5", b'"12"',
         b"null", b"true", b"[]", b"{}", b"[" * 3000 + b"]" * 3000, b'{"a":' * 1200 + b"1" + b"}" * 1200,
         b'"' + b"x" * 5000 + b'"']


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with a few random edits: numbers swapped for nasty values, cuts, lost and doubled lines, garbage."""
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["number", "number", "truncate", "drop", "dup", "garbage", "bom", "flip",
                                     "nest"]))
        if not data:
            break
        if kind == "number":
            digits = [i for i in range(len(data))
                      if data[i:i + 1].isdigit() and (i == 0 or not data[i - 1:i].isdigit())]
            if digits:
                i = draw(st.sampled_from(digits))
                j = i
                while j < len(data) and (data[j:j + 1].isdigit() or data[j:j + 1] in b".eE+-"):
                    j += 1
                data = data[:i] + draw(st.sampled_from(NASTY)) + data[j:]
        elif kind == "truncate":
            data = data[:draw(st.integers(0, len(data)))]
        elif kind in ("drop", "dup"):
            lines = data.splitlines(keepends=True)
            i = draw(st.integers(0, len(lines) - 1))
            lines[i:i + 1] = [] if kind == "drop" else [lines[i], lines[i]]
            data = b"".join(lines)
        elif kind == "garbage":
            i = draw(st.integers(0, len(data)))
            data = data[:i] + draw(st.binary(min_size=1, max_size=40)) + data[i:]
        elif kind == "bom":
            data = b"\xef\xbb\xbf" + data
        elif kind == "flip":
            i = draw(st.integers(0, len(data) - 1))
            data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]
        elif kind == "nest":
            i = data.find(b'":')
            if i >= 0:
                depth = draw(st.sampled_from([50, 250, 1500]))
                data = data[:i + 2] + b"[" * depth + data[i + 2:].split(b",", 1)[0] + b"]" * depth + b"," + \
                    (data[i + 2:].split(b",", 1) + [b""])[1]
    return data


SETTINGS = settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.function_scoped_fixture])


def _inspect(worker, tmp_path: Path, recording: bytes, data: st.DataObject) -> None:
    path = tmp_path / "rec.json"
    path.write_bytes(data.draw(mutated(recording)))
    argv = ("inspect", str(path), "--tokenizer", "chars", *data.draw(st.sampled_from([(), ("--json",)])))
    check(worker.run(*argv), argv)


def _transcripts(worker, tmp_path: Path, source: Path, data: st.DataObject) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    original = source.read_bytes()
    a.write_bytes(data.draw(mutated(original)))
    b.write_bytes(data.draw(mutated(original)))
    for argv in (("analyze", str(a), "--tokenizer", "chars", "--json"), ("analyze", str(a), "--tokenizer", "chars"),
                 ("diff", str(a), str(b), "--tokenizer", "chars")):
        check(worker.run(*argv), argv)


@SETTINGS
@given(data=st.data(), recording=st.sampled_from(RECORDINGS))
def test_inspect_mutated_fixture_recordings(worker, tmp_path, data, recording):
    """inspect on mutated recordings of tests/data (always runs)."""
    _inspect(worker, tmp_path, recording, data)


@SETTINGS
@given(data=st.data(), source=st.sampled_from(TRANSCRIPTS))
def test_analyze_and_diff_mutated_fixture_transcripts(worker, tmp_path, data, source):
    """analyze and diff on mutated transcripts of tests/data (always runs)."""
    _transcripts(worker, tmp_path, source, data)


@needs_corpus
@SETTINGS
@given(data=st.data(), recording=st.sampled_from(CORPUS_RECORDINGS or [b"{}"]))
def test_inspect_mutated_corpus_recordings(worker, tmp_path, data, recording):
    """inspect on mutated real recordings of ../shared/corpus/api."""
    _inspect(worker, tmp_path, recording, data)


@needs_corpus
@SETTINGS
@given(data=st.data(), source=st.sampled_from(CORPUS_TRANSCRIPTS or [Path("/nonexistent")]))
def test_analyze_and_diff_mutated_corpus_transcripts(worker, tmp_path, data, source):
    """analyze and diff on mutated real Claude Code and Codex transcripts of ../shared/corpus."""
    _transcripts(worker, tmp_path, source, data)


@pytest.fixture(scope="module")
def store_file(tmp_path_factory) -> bytes:
    """A real local store file: the Claude Code fixture replayed into an embedded store."""
    data_dir = tmp_path_factory.mktemp("replayed")
    env = {**os.environ, "CTXSCOPE_DATA_DIR": str(data_dir)}
    for key in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        env.pop(key, None)
    done = subprocess.run([sys.executable, "-c", "from ctxscope.cli import run; run()", "replay",
                           str(DATA / "transcripts" / "claude_4c2ddfdc.jsonl"), "--tokenizer", "chars"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    files = list((data_dir / "sessions").glob("*.jsonl"))
    assert len(files) == 1
    return files[0].read_bytes()


@SETTINGS
@given(data=st.data())
def test_context_on_a_mutated_store_file(worker, tmp_path_factory, store_file, data):
    """context (--list, the report, --json) on a real store file with random edits."""
    root = tmp_path_factory.mktemp("store")
    sessions = root / "sessions"
    sessions.mkdir()
    (sessions / "agent-0000000000000000.jsonl").write_bytes(data.draw(mutated(store_file)))
    for argv in (("context", "--data-dir", str(root), "--list"), ("context", "--data-dir", str(root)),
                 ("context", "--data-dir", str(root), "--json")):
        check(worker.run(*argv), argv)
