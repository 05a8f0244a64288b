"""An unreachable backend delays exit by ctxscope's budget at most, not the exporters' 10 s per export (issue 17.4).

The endpoint is a black hole: a socket that listens and never accepts, so the
TCP handshake completes (in the kernel's backlog) and every request then waits
for an answer that never comes, as with a firewall dropping packets.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("openai")

from ctxscope.telemetry.shutdown import DEFAULT_SHUTDOWN_TIMEOUT_MS  # noqa: E402

AGENT = '''
import ctxscope
from ctxscope.testing import ProviderServer, Reply

with ProviderServer() as server:
    server.reply(Reply.text("first answer"), Reply.text("second answer"), Reply.text("third answer"))
    client = server.openai_client()
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello there"}]
    with ctxscope.session("black-holed"):
        for follow_up in ("and again", "once more", None):
            r = client.chat.completions.create(model="gpt-4o", messages=messages)
            if follow_up:
                messages += [{"role": "assistant", "content": r.choices[0].message.content},
                             {"role": "user", "content": follow_up}]
print("agent done", flush=True)
'''


@pytest.fixture
def black_hole():
    """``http://127.0.0.1:PORT`` of a socket that never accepts."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def exit_delay(tmp_path: Path, endpoint: str, protocol: str, **extra: str) -> tuple[float, str]:
    """Seconds from the agent's last line to its exit under ``opentelemetry-instrument``; its stderr."""
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CTXSCOPE_"))}
    env.update({"CTXSCOPE_TOKENIZER": "chars", "CTXSCOPE_DATA_DIR": str(tmp_path / "store"),
                "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
                "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai", **extra})
    agent = subprocess.Popen([str(Path(sys.executable).parent / "opentelemetry-instrument"), sys.executable,
                              str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert agent.stdout.readline().strip() == "agent done"
        done_at = time.monotonic()
        agent.wait(timeout=60)
        delay = time.monotonic() - done_at
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    stderr = agent.stderr.read()
    assert agent.returncode == 0, stderr
    return delay, stderr


@pytest.fixture(scope="module")
def teardown_s(tmp_path_factory) -> dict[str, float]:
    """Per protocol, the same agent's exit delay against a working receiver: the interpreter's own teardown."""
    pytest.importorskip("oteltest.sink")
    from _otlp_sink import Receiver

    out = {}
    for protocol in ("grpc", "http/protobuf"):
        with Receiver(protocol) as receiver:
            delay, stderr = exit_delay(tmp_path_factory.mktemp("reachable"), receiver.endpoint, protocol)
        assert "did not finish within" not in stderr, stderr
        out[protocol] = delay
    return out


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_black_holed_backend_delays_exit_by_the_budget_at_most(tmp_path, black_hole, teardown_s, protocol):
    """Default settings: the exit waits at most the 3 s budget more than with a working backend, one warning."""
    delay, stderr = exit_delay(tmp_path, black_hole, protocol)
    budget = DEFAULT_SHUTDOWN_TIMEOUT_MS / 1000
    # The exporters alone would wait 10 s per pending export (spans, metrics twice): 11-22 s before.
    # 3 s of margin: on a loaded shared machine the interpreter's own teardown varies by seconds.
    assert budget - 0.2 < delay < teardown_s[protocol] + budget + 3.0, (teardown_s, delay, stderr)
    assert stderr.count("did not finish within") == 1, stderr
    assert "Traceback" not in stderr, stderr


def test_the_budget_is_configurable(tmp_path, black_hole, teardown_s):
    """``CTXSCOPE_SHUTDOWN_TIMEOUT_MS=500``: the exit waits about half a second for the export."""
    delay, stderr = exit_delay(tmp_path, black_hole, "http/protobuf", CTXSCOPE_SHUTDOWN_TIMEOUT_MS="500")
    assert 0.4 < delay < teardown_s["http/protobuf"] + 0.5 + 3.0, (teardown_s, delay, stderr)
    assert "did not finish within 0.5 s" in stderr, stderr
