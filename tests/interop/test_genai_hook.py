"""ctxscope as the completion hook of the official ``opentelemetry-instrumentation-genai-openai``.

That instrumentation needs ``opentelemetry-util-genai`` >= 1.3, which the
``foreign`` extra's ``openai-v2`` cannot live with, so the test builds a venv
of its own (``.venvs/genai-hook`` beside the repository, kept between runs;
``CTXSCOPE_TEST_VENVS`` moves it): ctxscope (this tree, editable), the
``openai`` extra and the official instrumentation, from the package index.
The same scripted agent (tests/agents/openai_chat_agent.py) runs twice under
``opentelemetry-instrument``, exporting to a real OTLP receiver: with the
official instrumentation and ``OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK=ctxscope``
(ctxscope's own instrumentors off, content capture off), and with ctxscope's
own instrumentor alone. The compositions must be the same; the secret in
every message must be in no byte exported.
"""

from __future__ import annotations

from _paths import ROOT, TESTS

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pytest.importorskip("oteltest.sink")

from _otlp_sink import Collect, Receiver, attrs, free_port, wait_for  # noqa: E402

AGENTS = TESTS / "agents"
SECRET = b"SENTINEL-7f3a9c"
PACKAGES = ["opentelemetry-instrumentation-genai-openai>=1.3b0"]


def _venv() -> Path:
    """The test's own venv with the official instrumentation (built once, then reused)."""
    base = Path(os.environ.get("CTXSCOPE_TEST_VENVS", ROOT / ".venvs"))
    venv = base / "genai-hook"
    python = venv / "bin" / "python"
    stamp = venv / ".installed"
    wanted = " ".join(PACKAGES)
    if stamp.exists() and stamp.read_text() == wanted:
        return venv
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=120)
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[openai]", *PACKAGES],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail("could not build the genai-hook venv: " + done.stderr[-2000:])
        pytest.skip("the official genai-openai instrumentation could not be installed (no package index?)")
    stamp.write_text(wanted)
    return venv


class Everything(Collect):
    """Keeps logs too, and every request's bytes as they came."""

    def __init__(self) -> None:
        super().__init__()
        self.raw: list[bytes] = []
        self.raw_lock = threading.Lock()

    def _keep(self, request) -> None:
        with self.raw_lock:
            self.raw.append(request.SerializeToString())

    def handle_logs(self, request, headers):
        self._keep(request)

    def handle_metrics(self, request, headers):
        self._keep(request)
        super().handle_metrics(request, headers)

    def handle_trace(self, request, headers):
        self._keep(request)
        super().handle_trace(request, headers)


class EverythingReceiver(Receiver):
    """The OTLP receiver of _otlp_sink, keeping every byte (:class:`Everything`)."""

    def __enter__(self) -> "EverythingReceiver":
        import logging

        from oteltest.sink import HttpSink

        self.handler = Everything()
        port = free_port()
        self.endpoint = f"http://127.0.0.1:{port}"
        self.server = HttpSink(self.handler, logging.getLogger("oteltest-sink"), port=port)
        self.server.start()
        return self


def _run(venv: Path, tmp_path: Path, endpoint: str, extra_env: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CTXSCOPE_"))}
    env.update({"CTXSCOPE_TOKENIZER": "chars", "CTXSCOPE_DATA_DIR": str(tmp_path / "store"),
                "PYTHONPATH": str(AGENTS), "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_SERVICE_NAME": "hook-agent",
                **extra_env})
    done = subprocess.run([str(venv / "bin" / "opentelemetry-instrument"), str(venv / "bin" / "python"),
                           str(AGENTS / "openai_chat_agent.py")], env=env, capture_output=True, text=True,
                          timeout=240, cwd=str(tmp_path))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("AGENT-RESULT "))
    return json.loads(line[len("AGENT-RESULT "):])


def _compositions(handler: Collect) -> list[dict]:
    """Per annotated ctxscope span, in order: its categories, estimate and reported input."""
    out = []
    for span in handler.spans():
        values = attrs(span.attributes)
        if "llm.context.estimated_tokens" not in values or values.get("llm.context.stage") != "request-input":
            continue
        out.append({"categories": {k.split(".")[-1]: v for k, v in values.items()
                                   if k.startswith("llm.context.categories.")},
                    "estimated": values["llm.context.estimated_tokens"],
                    "reported": values.get("llm.context.reported_tokens")})
    return out


def test_the_hook_gives_ctxscopes_own_composition_and_no_content_leaves(tmp_path):
    """Official genai-openai + the ctxscope hook (content capture off) = ctxscope's instrumentor; no secret exported."""
    venv = _venv()
    runs = {}
    for name, extra in {
        "hook": {"OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK": "ctxscope",
                 "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "ctxscope_openai,ctxscope_anthropic,ctxscope_http"},
        "own": {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai"},
        # Every way in at once: still one measurement per call (ctxscope's instrumentor's).
        "all": {"OTEL_INSTRUMENTATION_GENAI_COMPLETION_HOOK": "ctxscope"},
    }.items():
        (tmp_path / name).mkdir()
        with EverythingReceiver("http/protobuf") as receiver:
            result = _run(venv, tmp_path / name, receiver.endpoint, extra)
            wait_for(lambda: len(_compositions(receiver.handler)) >= 2)
        runs[name] = (result, receiver.handler)
    (hook_result, hook), (own_result, own) = runs["hook"], runs["own"]
    assert hook_result == own_result
    assert _compositions(hook) == _compositions(own)
    assert len(_compositions(own)) == 2
    # chars/4: system "You are terse. SENTINEL-7f3a9c" 8, prompt "hello there" 3; the second call adds the
    # tool call's arguments {"path":"notes.txt"} 5 and the result "the notes say SENTINEL-7f3a9c" 8.
    first, second = _compositions(own)
    assert (first["categories"]["system"], first["categories"]["prompts"]) == (8, 3)
    assert (second["categories"]["assistant"], second["categories"]["results"]) == (5, 8)
    assert _compositions(runs["all"][1]) == _compositions(own)
    # The official instrumentation's own spans are there too (one per call), without content.
    official = [s for s in hook.spans()
                if s.name.startswith("chat") and not attrs(s.attributes).get("llm.context.stage")]
    assert len(official) == 2
    for handler in (hook, own):
        assert handler.raw and not any(SECRET in blob for blob in handler.raw)
