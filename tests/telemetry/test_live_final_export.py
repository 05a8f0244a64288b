"""A short-lived agent's latest state reaches a real OTLP receiver before the zeros (issue 15, point 1).

A CLI agent, a CI job or an eval run ends long before the first periodic
export (60 s by default): the exit must export the live composition once,
then the zeros. Each run is a fresh ``opentelemetry-instrument`` process with
the default export interval, against oteltest's receiver.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("oteltest.sink")
pytest.importorskip("openai")
from _otlp_sink import Receiver, attrs, spans_of, wait_for  # noqa: E402

from ctxscope.schema import Metric, MetricAttr  # noqa: E402

SESSION = "short-run"

# Three calls of one session; ``wait`` makes the agent wait for SIGTERM after them.
AGENT = '''
import sys, time
import ctxscope
from ctxscope.testing import ProviderServer, Reply

with ProviderServer() as server:
    server.reply(Reply.text("first answer"), Reply.text("second answer"), Reply.text("third answer"))
    client = server.openai_client()
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello there"}]
    with ctxscope.session("short-run"):
        for follow_up in ("and again", "once more", None):
            r = client.chat.completions.create(model="gpt-4o", messages=messages)
            if follow_up:
                messages += [{"role": "assistant", "content": r.choices[0].message.content},
                             {"role": "user", "content": follow_up}]
print("agent done", flush=True)
if "wait" in sys.argv:
    time.sleep(60)
'''

# The third call, chars/4 with OpenAI chat framing: system "You are terse." 4, prompts 3 + 3 + 3 = 9,
# assistant "first answer" 3 + "second answer" 4 = 7, overhead 3 + the role per message (system 2,
# user 1, assistant 3: 5 + 4 + 6 + 4 + 6 + 4) + 3 for the reply priming = 32: 52 estimated. The server
# reports its strings, roles included: 2+4 + 1+3 + 3+3 + 1+3 + 3+4 + 1+3, plus 10 hidden = 41. Scaled
# by 41/52 with largest remainder: 3.15, 7.10, 5.52, 25.23 -> 3, 7, 6, 25 (the one left goes to assistant).
FINAL = {"system": 3, "prompts": 7, "assistant": 6, "overhead": 25, "unattributed": 0}


def tokens_in(request: Any, session: str) -> dict[str, float]:
    """``llm.context.tokens`` of one session in one OTLP metrics request, by category."""
    out = {}
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name == Metric.TOKENS.name:
                    for p in m.gauge.data_points:
                        a = attrs(p.attributes)
                        if a.get(MetricAttr.SESSION_ID) == session:
                            out[a[MetricAttr.CATEGORY]] = p.as_int or p.as_double
    return out


def agent_env(tmp_path: Path, receiver: Receiver, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CTXSCOPE_"))}
    env.update({"CTXSCOPE_TOKENIZER": "chars", "CTXSCOPE_DATA_DIR": str(tmp_path / "store"),
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                "OTEL_EXPORTER_OTLP_PROTOCOL": receiver.protocol,
                # Other OpenAI instrumentations of the dev extra register "openai" too.
                "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai", **extra})
    env.pop("OTEL_METRIC_EXPORT_INTERVAL", None)  # the default, 60 s: the run ends long before
    return env


def agent_command(tmp_path: Path, *args: str) -> list[str]:
    script = tmp_path / "agent.py"
    script.write_text(AGENT)
    return [str(Path(sys.executable).parent / "opentelemetry-instrument"), sys.executable, str(script), *args]


def exports_of(handler: Any) -> list[dict[str, float]]:
    """The session's token series in each metrics request that has any, in arrival order."""
    with handler.lock:
        requests = list(handler.metrics)
    return [t for t in (tokens_in(r, SESSION) for r in requests) if t]


def assert_final_then_zeros(handler: Any) -> None:
    wait_for(lambda: len(exports_of(handler)) >= 2 and set(exports_of(handler)[-1].values()) == {0},
             what=f"no live export followed by zeros: {exports_of(handler)}")
    exports = exports_of(handler)
    # Exactly two collections ever saw the session: the live one at exit, then the zeros.
    assert exports == [FINAL, {c: 0 for c in FINAL}]
    calls = [s for s in spans_of(handler.traces) if s.name == "chat gpt-4o"]
    assert len(calls) == 3


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_a_short_run_exports_its_final_composition_then_zeros(tmp_path, protocol):
    """A 3-call agent ending before the first 60 s export sends its last composition, then zeros."""
    with Receiver(protocol) as receiver:
        done = subprocess.run(agent_command(tmp_path), env=agent_env(tmp_path, receiver),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "agent done"
        assert "Traceback" not in done.stderr, done.stderr
        assert_final_then_zeros(receiver.handler)


def test_sigterm_exports_the_final_composition_then_zeros(tmp_path):
    """SIGTERM after the calls: the same two exports, and the process still dies of SIGTERM."""
    with Receiver("http/protobuf") as receiver:
        agent = subprocess.Popen(agent_command(tmp_path, "wait"), env=agent_env(tmp_path, receiver),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert agent.stdout.readline().strip() == "agent done"
            agent.send_signal(signal.SIGTERM)
            agent.wait(timeout=30)
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
        stderr = agent.stderr.read()
        # The default action is kept: the parent still sees a death by SIGTERM.
        assert agent.returncode == -signal.SIGTERM, stderr
        assert "Traceback" not in stderr, stderr
        assert_final_then_zeros(receiver.handler)


def test_setup_in_code_exports_the_final_composition_at_interpreter_exit(tmp_path):
    """``ctxscope.setup()`` without an explicit shutdown: interpreter exit exports both."""
    with Receiver("http/protobuf") as receiver:
        env = agent_env(tmp_path, receiver)
        env.pop("OTEL_EXPORTER_OTLP_ENDPOINT")
        script = tmp_path / "agent.py"
        script.write_text("import ctxscope\n"
                          f"ctxscope.setup('in-code', endpoint='{receiver.endpoint}', protocol='http/protobuf')\n"
                          + AGENT)
        started = time.monotonic()
        done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        assert time.monotonic() - started < 30
        assert_final_then_zeros(receiver.handler)
