"""Context windows and prices: genai-prices, the fallback table, and the user's overrides."""

from __future__ import annotations

import logging
from decimal import Decimal

import pytest

from ctxscope import limits
from ctxscope.config import (
    CTXSCOPE_COMPACT_THRESHOLD_TOKENS,
    CTXSCOPE_EFFECTIVE_WINDOW_TOKENS,
    CTXSCOPE_WINDOW_TOKENS,
)


@pytest.fixture(autouse=True)
def clean(monkeypatch):
    for name in (CTXSCOPE_WINDOW_TOKENS, CTXSCOPE_EFFECTIVE_WINDOW_TOKENS, CTXSCOPE_COMPACT_THRESHOLD_TOKENS):
        monkeypatch.delenv(name, raising=False)
    limits.reset()
    yield
    limits.reset()


def test_window_from_genai_prices():
    """gpt-4o has a 128,000-token window in genai-prices; a dated Claude name matches its model."""
    assert limits.limits_for("gpt-4o", "openai") == limits.Limits(window_tokens=128_000, source="genai-prices")
    assert limits.limits_for("claude-opus-4-1-20250805", "anthropic").window_tokens == 200_000


def test_fallback_table_and_unknown():
    """A model genai-prices does not know: the family table, else no window."""
    assert limits.limits_for("claude-nonexistent-9", "anthropic") == limits.Limits(window_tokens=200_000,
                                                                                    source="table")
    assert limits.limits_for("my-local-model", None) == limits.Limits()


def test_configure_overrides_and_percentage_threshold():
    """configure(): window, effective window, and a threshold of 80% of the effective window."""
    limits.configure(effective_window_tokens=150_000, compact_threshold_tokens="80%", model="claude-*")
    got = limits.limits_for("claude-opus-4-1", "anthropic")
    assert got == limits.Limits(200_000, 150_000, 120_000, "genai-prices")
    assert limits.limits_for("gpt-4o", "openai").effective_window_tokens is None  # pattern did not match
    limits.configure(window_tokens=1000)
    assert limits.limits_for("gpt-4o", "openai").window_tokens == 1000
    assert limits.limits_for("gpt-4o", "openai").source == "override"


def test_configure_rejects_bad_values():
    """A value that is not a positive number is a ValueError at configuration time."""
    with pytest.raises(ValueError, match="positive number"):
        limits.configure(window_tokens=-5)
    with pytest.raises(ValueError):
        limits.configure(compact_threshold_tokens="150%")


def test_environment_variables(monkeypatch):
    """Env: a plain number for all models, pattern pairs, and a percentage threshold of the window."""
    monkeypatch.setenv(CTXSCOPE_WINDOW_TOKENS, "gpt-4o*=100000, claude-*=90000")
    monkeypatch.setenv(CTXSCOPE_COMPACT_THRESHOLD_TOKENS, "50%")
    limits.reset()
    assert limits.limits_for("gpt-4o", "openai") == limits.Limits(100_000, None, 50_000, "override")
    assert limits.limits_for("claude-opus-4-1", "anthropic").window_tokens == 90_000
    assert limits.limits_for("o3", "openai").compact_threshold_tokens == 100_000  # 50% of 200,000


def test_bad_environment_value_is_logged_and_ignored(monkeypatch, caplog):
    """A malformed env value logs one warning and leaves the defaults."""
    monkeypatch.setenv(CTXSCOPE_EFFECTIVE_WINDOW_TOKENS, "lots")
    limits.reset()
    with caplog.at_level(logging.WARNING, logger="ctxscope"):
        got = limits.limits_for("gpt-4o", "openai")
    assert got.effective_window_tokens is None
    assert "CTXSCOPE_EFFECTIVE_WINDOW_TOKENS" in caplog.text


def test_prices_with_cache_rates():
    """claude-opus-4-1: $15 in, $75 out, $1.50 cache read, $18.75 cache write per million."""
    prices = limits.prices_for("claude-opus-4-1", "anthropic")
    assert (prices.input, prices.output, prices.cache_read, prices.cache_write) == (
        Decimal("15"), Decimal("75"), Decimal("1.5"), Decimal("18.75"))
    assert limits.prices_for("my-local-model") is None


def test_cost_of_a_call_by_hand():
    """gpt-4o, 1M prompt of which 500k cached, 100k out: 0.5*2.5 + 0.5*1.25 + 0.1*10 = $2.875."""
    cost = limits.cost_usd("gpt-4o", "openai", input_tokens=1_000_000, cache_read_tokens=500_000,
                           output_tokens=100_000)
    assert cost == Decimal("2.875")
    assert limits.cost_usd("my-local-model", None, input_tokens=10) is None


def test_lookups_are_kept_on_disk_per_genai_prices_version(monkeypatch, tmp_path):
    """A model looked up once is answered from the cache directory's lookups file, not the database."""
    import json

    pytest.importorskip("genai_prices")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    limits.reset()
    assert limits.limits_for("gpt-4o", "openai").window_tokens == 128_000
    assert limits.prices_for("gpt-4o", "openai").input == Decimal("2.5")
    saved = json.loads((tmp_path / "ctxscope" / "genai-prices-lookups.json").read_text())
    assert saved["models"]["openai|gpt-4o"]["window"] == 128_000
    # The file is what answers now: a value put there is read back...
    saved["models"]["openai|gpt-4o"]["window"] = 4242
    (tmp_path / "ctxscope" / "genai-prices-lookups.json").write_text(json.dumps(saved))
    limits.reset()
    assert limits.limits_for("gpt-4o", "openai").window_tokens == 4242
    # ...until genai-prices changes (another version, another day): the database again.
    saved["stamp"] = ["0.0.0", saved["stamp"][1]]
    (tmp_path / "ctxscope" / "genai-prices-lookups.json").write_text(json.dumps(saved))
    limits.reset()
    assert limits.limits_for("gpt-4o", "openai").window_tokens == 128_000
