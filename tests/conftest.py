"""Shared test set-up: the offline tiktoken cache and the shared corpus, where present."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus"
TIKTOKEN_CACHE = SHARED / "tiktoken"

# Point tiktoken at the shared offline cache before anything loads an encoding.
if TIKTOKEN_CACHE.is_dir() and "TIKTOKEN_CACHE_DIR" not in os.environ:
    os.environ["TIKTOKEN_CACHE_DIR"] = str(TIKTOKEN_CACHE)


def _tiktoken_available() -> bool:
    from ctxscope.core.tokens import load_encoding

    return load_encoding("o200k_base") is not None


requires_corpus = pytest.mark.skipif(
    not CORPUS.is_dir(), reason="../shared/corpus is not here (runs in CI, where it exists)")


def corpus_texts() -> Iterator[str]:
    """Every string of every JSON line of the corpus, as the test server walks a body (with repeats)."""
    import json

    from ctxscope.testing import _strings

    for path in sorted(CORPUS.rglob("*.json*")):
        for line in path.read_text(errors="replace").splitlines():
            try:
                yield from _strings(json.loads(line))
            except ValueError:
                continue


@pytest.fixture(scope="session")
def tiktoken_ready() -> None:
    """Skip a test that needs exact tiktoken counts where no encoding can be loaded."""
    if not _tiktoken_available():
        pytest.skip("tiktoken o200k_base cannot be loaded here (no network, no ../shared/tiktoken)")


@pytest.fixture
def o200k(tiktoken_ready: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Callable[[], Any], list[int]]:
    """tiktoken's real o200k constructor, counting its runs; ctxscope's cache in a fresh folder."""
    from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    runs: list[int] = []

    def constructor() -> Any:
        runs.append(1)
        return ENCODING_CONSTRUCTORS["o200k_base"]()

    return constructor, runs


@pytest.fixture(params=["sdk_default", "ctxscope_views"])
def gauge_views_or_none(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """A meter provider's views for ctxscope's gauges, both ways they are collected.

    ``ctxscope_views``: ctxscope's gauge views (what setup() passes and the
    processor gives every other SDK provider); ``sdk_default``: none, and none
    given either (as on an SDK the lean aggregation does not fit): the SDK's
    default aggregation.
    """
    import ctxscope.telemetry.views as views_module

    if request.param == "sdk_default":
        monkeypatch.setattr(views_module, "_FITS", False)
        return []
    return views_module.gauge_views()
