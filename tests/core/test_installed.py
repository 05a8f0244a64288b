"""Distributions' versions read from their dist-info folders (core/installed.py), as importlib.metadata reads them."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest

from ctxscope.core.installed import distribution_version


@pytest.mark.parametrize(("package", "distribution"), [("tiktoken", "tiktoken"), ("regex", "regex")])
def test_the_folder_version_is_the_metadata_version(package: str, distribution: str) -> None:
    """tiktoken's and regex's versions from their folders equal importlib.metadata's."""
    pytest.importorskip(package)
    assert distribution_version(package, distribution) == version(distribution)


def test_not_installed_is_none() -> None:
    """A package that is not there has no version (and nothing is raised)."""
    assert distribution_version("ctxscope_no_such_package", "ctxscope-no-such-package") is None


def test_the_encoding_cache_key_imports_no_metadata() -> None:
    """Reading tiktoken's version for the encoding caches' key leaves importlib.metadata unimported."""
    pytest.importorskip("tiktoken")
    code = ("import sys; from ctxscope.core.encoding_load import _tiktoken_version; v = _tiktoken_version();"
            "print(v, 'importlib.metadata' in sys.modules, 'tiktoken' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [version("tiktoken"), "False", "False"]
