"""The genai-prices version that keys the lookups cache: read from its dist-info folder, as the metadata says."""

from __future__ import annotations

import importlib.util

import pytest

from ctxscope.core import limits


def test_version_from_the_folder_is_the_metadata_version():
    """The installed genai-prices' version, without importlib.metadata, equals importlib.metadata's."""
    if importlib.util.find_spec("genai_prices") is None:
        pytest.skip("genai-prices is not installed (the prices extra)")
    from importlib.metadata import version

    limits._genai_prices_version.cache_clear()
    assert limits._genai_prices_version() == version("genai-prices")
    stamp = limits._lookup_stamp()
    assert stamp is not None and stamp[0] == version("genai-prices") and len(stamp[1]) == 10  # YYYY-MM-DD


def test_no_genai_prices_no_stamp(monkeypatch):
    """Without genai-prices there is no stamp: the lookups cache is not used."""
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a, **k: None)
    limits._genai_prices_version.cache_clear()
    try:
        assert limits._genai_prices_version() is None
        assert limits._lookup_stamp() is None
    finally:
        limits._genai_prices_version.cache_clear()
