"""``ctxscope context``: a stored session reported part by part, with costs worked out by hand."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from ctxscope.cli import main
from ctxscope.core.ledger import SessionLedger
from ctxscope.core.limits import prices_for
from ctxscope.core.observation import Observation, Usage
from ctxscope.schema import Category, Item
from ctxscope.telemetry.store import LocalStore
from ctxscope.core.tokens import CharsCounter

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
    # Its input cost: 200 uncached at $2.5 + 300 cached at $1.25 per MTok = 0.000875; read_file 200/500 of it.
    assert rows["results/read_file"] == {"part": "results/read_file", "category": "results", "tokens": 200,
                                         "chars": 800, "bytes": 800, "apportioned": 200, "share_of_window": 0.02,
                                         "cost_usd": "0.000350"}
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
    parts = {r["part"]: (r["tokens"], r["apportioned"], r["calls"], r["cost_usd"]) for r in doc["chat"]["parts"]}
    # system: 0.001 * 100/400 + 0.000875 * 100/500 = 0.00025 + 0.000175
    assert parts == {"system": (200, 200, 2, "0.000425"), "results/read_file": (400, 400, 2, "0.000850"),
                     "results/grep": (100, 100, 1, "0.000175"), "unattributed": (0, 200, 2, "0.000425")}
    assert (doc["chat"]["input_cost_usd"], doc["chat"]["output_cost_usd"], doc["chat"]["cost_usd"]) == \
        ("0.001875", "0.000700", "0.002575")
    assert doc["chat"]["cost_from_estimates_calls"] == 0


def test_unknown_price_says_unknown(tmp_path, capsys):
    """A model genai-prices does not know: every cost is 'unknown', never a guess."""
    record_session(LocalStore(tmp_path), model="my-local-model-7b")
    doc = run_json(capsys, "--data-dir", str(tmp_path))
    assert {r["cost_usd"] for r in doc["chat"]["parts"]} == {"unknown"}
    assert doc["chat"]["cost_usd"] == "unknown"
    assert {r["cost_usd"] for r in doc["latest"]["parts"]} == {"unknown"}


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


def record_calls(store: LocalStore, session: str, calls, model: str = "gpt-4o", ts: int = 10) -> None:
    ledger = SessionLedger(session, counter=CharsCounter())
    for n, (items, usage) in enumerate(calls):
        snapshot = ledger.report(ledger.observe(items, model=model, window_tokens=10_000), usage.reported_input)
        store.record(Observation(session_id=session, provider="openai", request_model=model,
                                 response_model=model, snapshot=snapshot, usage=usage, timestamp_ns=ts + n))


def test_a_chat_counts_its_compaction_calls(tmp_path, capsys):
    """agent-1 (2 calls) and its summariser agent-1/compaction (1 call): 3 calls over the chat, compaction/... parts."""
    store = LocalStore(tmp_path)
    record_session(store)
    # The summariser: the history (system 100 + read_file 200) plus "summarise" 25, reported 325, 40 out.
    record_calls(store, "agent-1/compaction", [
        ([item("sys", C.SYSTEM, "system", 400), item("c1", C.RESULTS, "results/read_file", 800),
          item("ask", C.PROMPTS, "prompts/text", 100)], Usage(input_tokens=325, output_tokens=40, reported_input=325))],
        ts=20)
    doc = run_json(capsys, "--data-dir", str(tmp_path))
    assert (doc["chat_id"], doc["calls"]) == ("agent-1", 3)
    assert doc["chat"]["side_calls"] == {"compaction": 1} and doc["chat"]["conversation_calls"] == 2
    parts = {r["part"]: (r["tokens"], r["calls"], r["cost_usd"]) for r in doc["chat"]["parts"]}
    # 325 at $2.5 / MTok = 0.0008125, split 100/200/25 of 325.
    assert parts["compaction/system"] == (100, 1, "0.000250")
    assert parts["compaction/results/read_file"] == (200, 1, "0.000500")
    assert parts["compaction/prompts/text"] == (25, 1, "0.000062")  # 0.0000625, to even
    assert parts["system"] == (200, 2, "0.000425")  # the conversation's own, as before
    # The latest call stays the conversation's: its context is the chat's context.
    assert doc["used_tokens"] == 500
    # 0.001875 + 0.0008125 in; 0.0007 + 0.0004 out.
    assert (doc["chat"]["input_cost_usd"], doc["chat"]["output_cost_usd"]) == ("0.002688", "0.001100")
    assert [c["chat_id"] for c in doc["chats"]] == ["agent-1"]
    assert doc["chats"][0]["sessions"] == ["agent-1", "agent-1/compaction"]
    # Asked by the side session's id, the same chat.
    assert run_json(capsys, "--data-dir", str(tmp_path), "--session", "agent-1/compaction")["calls"] == 3


def test_chats_are_kept_latest_first(tmp_path, capsys):
    """Two chats: the list holds both, latest first; the default report is the latest."""
    store = LocalStore(tmp_path)
    record_session(store, "old-chat")
    record_calls(store, "new-chat", [([item("sys", C.SYSTEM, "system", 40)],
                                      Usage(input_tokens=10, output_tokens=1, reported_input=10))], ts=100)
    doc = run_json(capsys, "--data-dir", str(tmp_path))
    assert [c["chat_id"] for c in doc["chats"]] == ["new-chat", "old-chat"]
    assert doc["chat_id"] == "new-chat"


def test_costs_without_usage_are_unknown_or_say_estimated(tmp_path, capsys):
    """No usage at all: the input cost from the estimate (100 tokens, $0.00025) says so; output unknown, never 0."""
    store = LocalStore(tmp_path)
    record_calls(store, "blind", [([item("sys", C.SYSTEM, "system", 400)], Usage())])
    doc = run_json(capsys, "--data-dir", str(tmp_path))
    chat = doc["chat"]
    assert chat["input_cost_usd"] == "0.000250" and chat["cost_from_estimates_calls"] == 1
    assert chat["output_cost_usd"] == "unknown" and chat["cost_usd"] == "unknown"
    (row,) = chat["parts"]
    assert (row["part"], row["cost_usd"], row["cost_from_estimates"]) == ("system", "0.000250", True)
    assert doc["latest"]["cost_from_estimates"] is True
    assert main(["context", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "input cost from ctxscope's estimates for 1 of 1 calls (no reported usage)" in out
    assert "output unknown" in out


def test_bytes_are_utf8(tmp_path, capsys):
    """A part of 100 'é': 100 chars, 200 UTF-8 bytes."""
    store = LocalStore(tmp_path)
    record_calls(store, "accents", [([Item(id="p", category=C.PROMPTS, part="prompts/text", chars=100,
                                           text="\u00e9" * 100)],
                                     Usage(input_tokens=25, output_tokens=1, reported_input=25))])
    doc = run_json(capsys, "--data-dir", str(tmp_path))
    (row,) = doc["latest"]["parts"]
    assert (row["chars"], row["bytes"]) == (100, 200)
    assert doc["chat"]["parts"][0]["bytes"] == 200
