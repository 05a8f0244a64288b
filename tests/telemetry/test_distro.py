"""ctxscope beside opentelemetry-distro's configurator (issue 15, point 3).

``opentelemetry-instrument`` runs one configurator, the first it finds: with
opentelemetry-distro installed that is the distro's, not ctxscope's. The
metrics must still reach the OTLP receiver and the calls the local store.
The distro is installed for these runs only (``pip install --target``, put on
``PYTHONPATH``: first on the path, its configurator is found first), in the
version of the installed ``opentelemetry-instrumentation`` it pins.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

pytest.importorskip("oteltest.sink")
pytest.importorskip("openai")
from _otlp_sink import Receiver, spans_of, wait_for  # noqa: E402
from test_live_final_export import AGENT, FINAL, SESSION, exports_of  # noqa: E402

from ctxscope.telemetry.store import LocalStore  # noqa: E402

# The third call's parts, chars/4 with OpenAI chat framing (worked out in test_live_final_export).
LAST_PARTS = {"system": 4, "prompts/text": 9, "assistant/text": 7, "overhead": 32}
DISTRO_WON = "Configuration of ctxscope not loaded, configurator already loaded"


@pytest.fixture(scope="module")
def distro(tmp_path_factory) -> Path:
    """A directory holding opentelemetry-distro (no dependencies: the venv has them)."""
    wanted = f"opentelemetry-distro=={version('opentelemetry-instrumentation')}"
    target = tmp_path_factory.mktemp("distro")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                           str(target), wanted], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.skip(f"{wanted} cannot be installed here: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return target


def run_agent(tmp_path: Path, distro: Path, **extra: str) -> subprocess.CompletedProcess:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CTXSCOPE_"))}
    env.update({"PYTHONPATH": str(distro), "CTXSCOPE_TOKENIZER": "chars",
                "CTXSCOPE_DATA_DIR": str(tmp_path / "store"),
                "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai", **extra})
    done = subprocess.run([str(Path(sys.executable).parent / "opentelemetry-instrument"), sys.executable,
                           str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "agent done"
    assert DISTRO_WON in done.stderr, done.stderr  # the distro's configurator ran, not ctxscope's
    return done


def context_sessions(store: Path) -> list[str]:
    done = subprocess.run([str(Path(sys.executable).parent / "ctxscope"), "context", "--list", "--json",
                           "--data-dir", str(store)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [s["session_id"] for s in json.loads(done.stdout)]


def test_beside_the_distro_metrics_reach_the_receiver_and_calls_the_store(tmp_path, distro):
    """Endpoint and CTXSCOPE_STORE=on under the distro's configurator: the receiver and `ctxscope context` both."""
    with Receiver("http/protobuf") as receiver:
        run_agent(tmp_path, distro, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
                  OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf", CTXSCOPE_STORE="on")
        handler = receiver.handler
        wait_for(lambda: len(exports_of(handler)) >= 2)
        assert exports_of(handler) == [FINAL, {c: 0 for c in FINAL}]
        assert len([s for s in spans_of(handler.traces) if s.name == "chat gpt-4o"]) == 3
    assert context_sessions(tmp_path / "store") == [SESSION]
    assert [r["parts"] for r in LocalStore(tmp_path / "store").read(SESSION)][-1] == LAST_PARTS


def test_the_quick_path_beside_the_distro_keeps_the_local_store(tmp_path, distro):
    """No endpoint (the distro then exports to localhost): the calls are in the local store all the same."""
    run_agent(tmp_path, distro)
    assert context_sessions(tmp_path / "store") == [SESSION]
    records = LocalStore(tmp_path / "store").read(SESSION)
    assert len(records) == 3 and records[-1]["parts"] == LAST_PARTS
