"""One call's accounting on every path: fidelity and the foreign-span processor agree with ``inspect``.

Each call site used to put a call through the ledger itself (and they had
drifted: one looked the model's window up, another not; one knew
``usage.iterations``, another not). Now they go through
:mod:`ctxscope.pipeline`; these tests hand the same recorded call to two
sites and compare what they say: estimate, window, limits, reported input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import DATA
from ctxscope import apis, fidelity
from ctxscope.cli.inspect import Loaded, inspect
from ctxscope.tokens import counter_for


def _recordings() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(DATA.glob("requests_*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            out.append((f"{path.name}:{number}", json.loads(line)))
    return out


RECORDINGS = _recordings()


def _accounting(annotation: Any) -> dict[str, Any]:
    return {"estimated": annotation.estimated_tokens, "reported": annotation.reported_tokens,
            "window": annotation.window_tokens, "effective": annotation.effective_window_tokens,
            "threshold": annotation.compact_threshold_tokens, "model": annotation.model,
            "categories": dict(annotation.categories)}


def test_the_recordings_cover_both_providers_and_a_window():
    """The slices hold calls of both providers, with usage, and of a model whose window is known."""
    apis_seen = {fidelity.detect_api(r["request"], r.get("uri", "")) for _, r in RECORDINGS}
    assert {apis.API_OPENAI_CHAT, apis.API_ANTHROPIC} <= apis_seen
    windows = [inspect(Loaded(name, None, r["request"], r.get("response")), tokenizer="chars")[1]
               .annotation.window_tokens for name, r in RECORDINGS]
    assert any(w for w in windows)


@pytest.mark.parametrize("name,record", RECORDINGS, ids=[n for n, _ in RECORDINGS])
def test_fidelity_accounts_a_call_as_inspect_does(name: str, record: dict[str, Any]):
    """Same body, same response: fidelity's framed estimate, window, limits and reported input are inspect's."""
    body, response = record["request"], record.get("response")
    api = fidelity.detect_api(body, record.get("uri", ""))
    model = str(body.get("model") or "unknown")
    reported = fidelity.reported_input(response, api)
    counter = counter_for(model, "chars")
    est = fidelity.estimate(body, api, counter, model, reported)
    _, snapshot = inspect(Loaded(name, None, body, response), tokenizer="chars")
    assert est.snapshot is not None
    assert _accounting(est.snapshot.annotation) == _accounting(snapshot.annotation)
    assert est.framed == snapshot.annotation.estimated_tokens


def test_fidelity_reports_the_first_sampling_of_iterations_as_inspect_does(tmp_path: Path):
    """An Anthropic usage with iterations: both sites take the first ``message`` sampling's input (40)."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 100, "messages": [{"role": "user", "content": "hi"}]}
    usage = {"input_tokens": 90, "cache_read_input_tokens": 10, "output_tokens": 5, "iterations": [
        {"type": "message", "input_tokens": 30, "cache_read_input_tokens": 10, "output_tokens": 2},
        {"type": "message", "input_tokens": 60, "output_tokens": 3}]}
    response = {"type": "message", "usage": usage, "content": []}
    reported = fidelity.reported_input(response, apis.API_ANTHROPIC)
    est = fidelity.estimate(body, apis.API_ANTHROPIC, counter_for(body["model"], "chars"), body["model"], reported)
    _, snapshot = inspect(Loaded("x", None, body, response), tokenizer="chars")
    assert est.snapshot is not None
    assert est.snapshot.annotation.reported_tokens == snapshot.annotation.reported_tokens == 40
    assert est.snapshot.annotation.window_tokens == snapshot.annotation.window_tokens == 200_000
