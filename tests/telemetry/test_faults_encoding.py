"""The tiktoken encoding load (issue 17 point 5, issue 12): never on the caller's thread, never a silent basis change.

A slow load is made real and deterministic: the encoding's cache file is a
FIFO, so tiktoken's own read blocks until the test writes the real file into
it (from ``../shared/tiktoken``), as long as the test wants.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from conftest import DATA, TIKTOKEN_CACHE

O200K_KEY = "fb374d419588a4632f3f557e76b4b70aebbca790"  # sha1 of tiktoken's o200k_base address
CTXSCOPE = str(Path(sys.executable).with_name("ctxscope"))
TRANSCRIPT = DATA / "transcripts" / "claude_4c2ddfdc.jsonl"

needs_cache = pytest.mark.skipif(not (TIKTOKEN_CACHE / O200K_KEY).is_file(),
                                 reason="../shared/tiktoken is not here (the offline o200k_base file)")


def slow_cache(tmp_path: Path) -> Path:
    """A tiktoken cache dir whose o200k_base file is a FIFO: a load blocks until a Feeder writes it."""
    folder = tmp_path / "tiktoken"
    folder.mkdir()
    os.mkfifo(folder / O200K_KEY)
    return folder


class Feeder(threading.Thread):
    """Writes the real encoding into the FIFO each time a reader opens it, until stopped.

    A load may read the rank file more than once (ctxscope's cache key is its
    content; tiktoken's constructor reads it again when that cache misses).
    """

    def __init__(self, folder: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.stopped = folder / O200K_KEY, threading.Event()

    def run(self) -> None:
        content = (TIKTOKEN_CACHE / O200K_KEY).read_bytes()
        while not self.stopped.is_set():
            try:  # non-blocking: no reader yet is ENXIO, and the loop can stop
                fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                time.sleep(0.01)
                continue
            os.set_blocking(fd, True)
            with os.fdopen(fd, "wb") as fifo:
                with contextlib.suppress(BrokenPipeError):
                    fifo.write(content)
            # The reader drains the pipe's last 64 KiB and closes; a write end opened before that would
            # run on into the same read (one file twice over): give it time to see the end of this one.
            self.stopped.wait(1.0)

    def stop(self) -> None:
        self.stopped.set()
        if self.is_alive():
            self.join(30)


def offline_env(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(TIKTOKEN_CACHE_DIR=str(cache), HTTPS_PROXY="http://127.0.0.1:9", https_proxy="http://127.0.0.1:9")
    return env


LIVE = textwrap.dedent("""
    import json, sys, time
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from ctxscope.core import tokens
    from ctxscope.instrumentation.openai import OpenAIInstrumentor
    from ctxscope.testing import ProviderServer

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    OpenAIInstrumentor().instrument(tracer_provider=provider)  # the process-wide tracker: tokenizer auto
    tokens.MEASURING_LOAD_WAIT_S = float(sys.argv[1])  # how long the worker waits for the loading encoding
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    with ProviderServer() as server:
        client = server.openai_client()
        started = time.monotonic()
        client.chat.completions.create(model="gpt-4o", messages=messages)
        first_s = time.monotonic() - started
        provider.force_flush()  # the first call measured now, off the call path, the load still blocked
        print("first call done", flush=True)
        sys.stdin.readline()  # the encoding is being fed now
        load = tokens._loads["o200k_base", tokens.ENGINE_COMPACT]
        load.done.wait(60)
        messages.append({"role": "assistant", "content": "Paris."})
        messages.append({"role": "user", "content": "And of Italy?"})
        client.chat.completions.create(model="gpt-4o", messages=messages)
    provider.force_flush()  # the calls are measured off the call path: their spans end once measured
    spans = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    print(json.dumps({"first_s": first_s,
                      "bases": [s.attributes["llm.context.basis"] for s in spans],
                      "fallback": [s.attributes.get("llm.context.basis_fallback") for s in spans],
                      "baseline": [s.attributes["llm.context.baseline"] for s in spans]}))
""")


def run_live(cache: Path, wait_s: str, feed_first: bool) -> tuple[dict, str]:
    """LIVE with the worker's wait ``wait_s``; the encoding fed before the first call (``feed_first``) or
    only after it was measured, 2.2 s later (past the old 2 s bound: a process that gave up stays on chars/4)."""
    proc = subprocess.Popen([sys.executable, "-c", LIVE, wait_s], env=offline_env(cache), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    feeder = Feeder(cache)
    try:
        if feed_first:
            feeder.start()  # the encoding arrives while the worker measures the first call
        assert proc.stdout.readline().strip() == "first call done"
        if not feed_first:
            time.sleep(2.2)
            feeder.start()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
        if feeder.is_alive():
            feeder.stop()
    assert proc.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), err


@needs_cache
def test_a_call_measured_while_the_encoding_loads_waits_for_it_off_the_call_path(tmp_path):
    """The load completes while the worker waits (bound 30 s here): the first call returns at once, and both
    calls count on tiktoken/o200k_base, no "loading" fallback: the first calls of a process are exact."""
    result, _ = run_live(slow_cache(tmp_path), "30", feed_first=True)
    assert result["bases"] == ["tiktoken/o200k_base", "tiktoken/o200k_base"]
    assert result["fallback"] == [None, None]
    assert result["baseline"] == [True, False]  # one basis from the first call: the second is growth
    assert result["first_s"] < 1.5  # the caller did not wait for the load


@needs_cache
def test_a_call_before_the_encoding_is_ready_is_not_held_and_says_so(tmp_path):
    """The load blocks past the worker's wait (0.5 s here): the first call returns anyway, counted chars/4 with
    basis_fallback=loading; once the load completes the next call uses tiktoken/o200k_base (a new baseline).
    On main the first call waited 2 s on the caller's thread and the whole process counted chars/4 after."""
    result, err = run_live(slow_cache(tmp_path), "0.5", feed_first=False)
    assert result["bases"] == ["chars/4", "tiktoken/o200k_base"]
    assert result["fallback"] == ["loading", None]
    assert result["baseline"] == [True, True]  # the basis changed: a new baseline, not growth
    assert result["first_s"] < 1.5  # no load on the caller's thread (the load was still blocked)
    assert "unavailable" not in err


def bases(document: str) -> set[str]:
    """Every "basis" named anywhere in an analyze --json document."""
    found: set[str] = set()
    stack = [json.loads(document)]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if isinstance(node.get("basis"), str):
                found.add(node["basis"])
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return found


def analyze(cache: Path, *args: str, nice: int = 0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CTXSCOPE, "analyze", str(TRANSCRIPT), "--json", *args], env=offline_env(cache),
                          capture_output=True, text=True, timeout=180,
                          preexec_fn=(lambda: os.nice(nice)) if nice else None)


@pytest.fixture(scope="module")
def idle(tmp_path_factory) -> subprocess.CompletedProcess[str]:
    """`analyze --tokenizer tiktoken --json` with a ready local copy of the encoding, on this (idle) machine."""
    ready = tmp_path_factory.mktemp("ready-cache")
    (ready / O200K_KEY).write_bytes((TIKTOKEN_CACHE / O200K_KEY).read_bytes())
    done = analyze(ready, "--tokenizer", "tiktoken")
    assert done.returncode in (0, 2), done.stderr
    assert bases(done.stdout) == {"tiktoken/o200k_base"}
    return done


@needs_cache
def test_tiktoken_with_a_slow_cached_load_waits_for_it_instead_of_falling_back(tmp_path, idle):
    """A local copy that takes 3 s to read (past the old 2 s bound): `--tokenizer tiktoken` gives the same JSON
    as with a ready cache. On main it fell back to chars/4 silently and the JSON changed."""
    cache = slow_cache(tmp_path)
    feeder = Feeder(cache)
    timer = threading.Timer(3.0, feeder.start)
    timer.start()
    try:
        slow = analyze(cache, "--tokenizer", "tiktoken")
    finally:
        timer.join(30)
        feeder.stop()
    assert slow.stdout == idle.stdout
    assert slow.returncode == idle.returncode and "unavailable" not in slow.stderr


def _burn() -> None:
    while True:
        pass


@needs_cache
def test_analyze_gives_identical_json_idle_and_with_both_cores_busy(tmp_path, idle):
    """Issue 12: the encoding cached, `analyze --tokenizer tiktoken` idle and while a busy loop per core holds
    every core: byte-identical JSON, basis tiktoken/o200k_base."""
    import multiprocessing

    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / O200K_KEY).write_bytes((TIKTOKEN_CACHE / O200K_KEY).read_bytes())
    burners = [multiprocessing.Process(target=_burn, daemon=True) for _ in range(os.cpu_count() or 2)]
    for burner in burners:
        burner.start()
    try:
        busy = analyze(cache, "--tokenizer", "tiktoken")
    finally:
        for burner in burners:
            burner.kill()
            burner.join()
    assert idle.returncode in (0, 2) and busy.returncode == idle.returncode, busy.stderr
    assert busy.stdout == idle.stdout
    assert bases(busy.stdout) == {"tiktoken/o200k_base"}


def test_tiktoken_unavailable_is_a_one_line_error_not_a_fallback(tmp_path):
    """No cache and no network: `--tokenizer tiktoken` exits 1 with one line; `auto` counts chars/4 and says so."""
    empty = tmp_path / "empty"
    empty.mkdir()
    strict = analyze(empty, "--tokenizer", "tiktoken")
    assert strict.returncode == 1 and "Traceback" not in strict.stderr
    lines = strict.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "ctxscope: --tokenizer tiktoken: the o200k_base encoding cannot be loaded ("), strict.stderr
    auto = analyze(empty, "--tokenizer", "auto")
    assert auto.returncode in (0, 2), auto.stderr
    assert bases(auto.stdout) == {"chars/4"}
    warned = [line for line in auto.stderr.splitlines() if "unavailable" in line]
    assert len(warned) == 1 and "counting with chars/4" in warned[0]


WHICH_LOADS = textwrap.dedent("""
    import json, sys, time
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from ctxscope.core import tokens
    from ctxscope.instrumentation.openai import OpenAIInstrumentor
    from ctxscope.testing import ProviderServer

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    OpenAIInstrumentor().instrument(tracer_provider=provider)
    seen = {"instrumented": sorted(name for name, _ in tokens._loads)}
    with ProviderServer() as server:
        client = server.openai_client()
        for n, model in enumerate(sys.argv[1:], 1):
            client.chat.completions.create(model=model, messages=[{"role": "user", "content": "Hi " + model}])
            deadline = time.monotonic() + 30
            while len([s for s in exporter.get_finished_spans() if s.name.startswith("chat")]) < n:
                assert time.monotonic() < deadline, "no span"
                time.sleep(0.01)
            seen[model] = sorted(name for name, _ in tokens._loads)  # the call's span has ended: its counting is done
    print(json.dumps(seen))
""")


def loads_seen(tmp_path: Path, *models: str, **env: str) -> dict[str, list[str]]:
    """Which encodings a fresh process has started loading: after instrumenting, then after a call of each model."""
    environ = {k: v for k, v in offline_env(tmp_path / "no-cache").items() if k != "CTXSCOPE_TOKENIZER"}
    environ.update(CTXSCOPE_DATA_DIR=str(tmp_path / "data"), **env)
    done = subprocess.run([sys.executable, "-c", WHICH_LOADS, *models], env=environ, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_an_encoding_loads_when_the_first_model_that_needs_it_is_counted_and_not_before(tmp_path):
    """Instrumenting loads nothing; a gpt-4 call starts cl100k_base only; a gpt-4o call then adds o200k_base;
    a second gpt-4o call starts nothing more (once a process). No cache here: which loads start is the point."""
    seen = loads_seen(tmp_path, "gpt-4-turbo", "gpt-4o", "gpt-4o-mini")
    assert seen == {"instrumented": [], "gpt-4-turbo": ["cl100k_base"],
                    "gpt-4o": ["cl100k_base", "o200k_base"], "gpt-4o-mini": ["cl100k_base", "o200k_base"]}


def test_counting_chars_loads_no_encoding(tmp_path):
    """CTXSCOPE_TOKENIZER=chars: no model needs an encoding, so none is ever loaded (no tiktoken memory)."""
    seen = loads_seen(tmp_path, "gpt-4o", CTXSCOPE_TOKENIZER="chars")
    assert seen == {"instrumented": [], "gpt-4o": []}
