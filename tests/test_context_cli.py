"""``ctxscope context``: a stored session reported part by part, with costs worked out by hand."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from ctxscope.cli import main
from ctxscope.ledger import SessionLedger
from ctxscope.limits import prices_for
from ctxscope.observation import Observation, Usage
from ctxscope.schema import Category, Item
from ctxscope.store import LocalStore
from ctxscope.tokens import CharsCounter

C = Category


def item(id_: str, category: Category, part: str, chars: int) -> Item:
    return Item(id=id_, category=category, part=part, chars=chars, text="x" * chars)


def record_session(store: LocalStore, session: str = "agent-1", model: str = "gpt-4o") -> None:
    """Two calls (chars/4): system 100 + read_file 200 reported 400; then + grep 100 reported 500 (300 cached)."""
    ledger = SessionLedger(session, counter=CharsCounter())
    calls = [
        ([item("sys", C.SYSTEM, "system", 400), item("c1", C.RESULTS, "results/read_file", 800)],
         Usage(input_tokens=400, output_tokens=50, reported_input=400)),
        ([item("sys", C.SYSTEM, "system", 400), item("c1", C.RESULTS, "results/read_file", 800),
          item("c2", C.RESULTS, "results/grep", 400)],
         Usage(input_tokens=200, output_tokens=20, cache_read_input_tokens=300, reported_input=500)),
    ]
    for n, (items, usage) in enumerate(calls):
        snapshot = ledger.report(ledger.observe(items, model=model, window_tokens=10_000), usage.reported_input)
        store.record(Observation(session_id=session, provider="openai", request_model=model,
                                 response_model=model, snapshot=snapshot, usage=usage, timestamp_ns=10 + n))


def run_json(capsys, *args: str) -> dict:
    assert main(["context", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_latest_call_part_by_part(tmp_path, capsys):
    """Latest call: apportioned 100/200/100 + unattributed 100 = reported 500; read_file is 2.0% of 10,000."""
    record_session(LocalStore(tmp_path))
    doc = run_json(capsys, "--data-dir", str(tmp_path))
    assert (doc["session_id"], doc["calls"], doc["used_tokens"], doc["free_tokens"]) == ("agent-1", 2, 500, 9500)
    rows = {r["part"]: r for r in doc["latest"]["parts"]}
    assert rows["results/read_file"] == {"part": "results/read_file", "category": "results", "tokens": 200,
                                         "chars": 800, "apportioned": 200, "share_of_window": 0.02}
    assert {p: r["apportioned"] for p, r in rows.items()} == {"system": 100, "results/read_file": 200,
                                                              "results/grep": 100, "unattributed": 100}
    assert doc["latest"]["calibrated"] == {"system": 100, "results": 300, "unattributed": 100}
    assert doc["apportioned_label"] == "apportioned"


def test_parts_summed_over_the_session_with_cost(tmp_path, capsys):
    """gpt-4o $2.5 in, $1.25 cached, $10 out per MTok: call costs 0.001 and 0.000875 split by apportioned tokens."""
    prices = prices_for("gpt-4o", "openai")
    assert (prices.input, prices.cache_read, prices.output) == (Decimal("2.5"), Decimal("1.25"), Decimal("10"))
    record_session(LocalStore(tmp_path))
    doc = run_json(capsys, "--data-dir", str(tmp_path))
    parts = {r["part"]: (r["tokens"], r["apportioned"], r["calls"], r["cost_usd"]) for r in doc["session"]["parts"]}
    # system: 0.001 * 100/400 + 0.000875 * 100/500 = 0.00025 + 0.000175
    assert parts == {"system": (200, 200, 2, "0.000425"), "results/read_file": (400, 400, 2, "0.000850"),
                     "results/grep": (100, 100, 1, "0.000175"), "unattributed": (0, 200, 2, "0.000425")}
    assert (doc["session"]["input_cost_usd"], doc["session"]["output_cost_usd"], doc["session"]["cost_usd"]) == \
        ("0.001875", "0.000700", "0.002575")


def test_unknown_price_says_unknown(tmp_path, capsys):
    """A model genai-prices does not know: every cost is 'unknown', never a guess."""
    record_session(LocalStore(tmp_path), model="my-local-model-7b")
    doc = run_json(capsys, "--data-dir", str(tmp_path))
    assert {r["cost_usd"] for r in doc["session"]["parts"]} == {"unknown"}
    assert doc["session"]["cost_usd"] == "unknown"


def test_text_report_and_session_choice(tmp_path, capsys):
    """Text output names the session and its parts; --session takes a unique prefix; the default is the latest."""
    store = LocalStore(tmp_path)
    record_session(store, "older-session")
    record_session(store, "agent-1")
    store.append("agent-1", {**store.read("agent-1")[-1], "ts": 99})
    assert main(["context", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("session agent-1  (openai gpt-4o, 3 calls, basis chars/4)\n")
    assert "context now 500 tokens of 10,000 window (5.0%), free 9,500" in out
    assert "results/read_file" in out and "cost (USD): input " in out
    assert main(["context", "--data-dir", str(tmp_path), "--session", "older"]) == 0
    assert capsys.readouterr().out.startswith("session older-session ")


def test_list_sessions(tmp_path, capsys):
    """--list: most recent first, with model and provider."""
    store = LocalStore(tmp_path)
    record_session(store, "a")
    store.append("b", {"session": "b", "ts": 50, "request_model": "claude-x", "provider": "anthropic"})
    listed = run_json(capsys, "--data-dir", str(tmp_path), "--list")
    assert [(s["session_id"], s["model"], s["provider"]) for s in listed] == [("b", "claude-x", "anthropic"),
                                                                              ("a", "gpt-4o", "openai")]


@pytest.mark.parametrize("argv, message", [
    (["--session", "nope"], "no session 'nope'; see `ctxscope context --list`"),
    ([], "no recorded sessions"),
])
def test_errors_are_one_line(tmp_path, capsys, argv, message):
    """Unknown session or empty store: exit 1, one line on stderr naming the store, no traceback."""
    if argv:
        record_session(LocalStore(tmp_path))
    assert main(["context", "--data-dir", str(tmp_path), *argv]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and str(tmp_path) in err and "Traceback" not in err
