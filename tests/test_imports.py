"""Every module of the package imports, and names renamed for the linter still answer to their old ones.

An unused-import clean-up once removed a re-export (``request_formats.APIS``) that ``ctxscope.core.items``
imported: every module that imports ``items`` then failed at import time. This walks the whole package.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import ctxscope

MODULES = sorted(m.name for m in pkgutil.walk_packages(ctxscope.__path__, "ctxscope."))


def test_the_package_has_its_modules():
    assert {"ctxscope.core.items", "ctxscope.transcripts.detect"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_every_module_imports(name):
    importlib.import_module(name)


@pytest.mark.parametrize("module, old, new", [
    ("ctxscope.core.bounded_input", "ExtraData", "ExtraDataError"),
    ("ctxscope.core.tokens", "EncodingUnavailable", "EncodingUnavailableError"),
    ("ctxscope.transcripts.detect", "UnknownFormat", "UnknownFormatError"),
    ("ctxscope.transcripts", "UnknownFormat", "UnknownFormatError"),
])
def test_renamed_exceptions_keep_their_old_names(module, old, new):
    loaded = importlib.import_module(module)
    assert getattr(loaded, old) is getattr(loaded, new)
    assert issubclass(getattr(loaded, new), Exception)
    # Where a module lists its public names, both are listed.
    assert {old, new} <= set(getattr(loaded, "__all__", (old, new)))


def test_items_exports_the_apis_it_walks():
    from ctxscope.core import apis
    from ctxscope.core import items

    assert items.APIS == apis.APIS == (apis.API_OPENAI_CHAT, apis.API_OPENAI_RESPONSES, apis.API_ANTHROPIC)
