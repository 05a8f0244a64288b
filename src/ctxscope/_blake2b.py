"""BLAKE2b for ctxscope's keys and digests, without importing ``hashlib`` at start-up.

``hashlib.blake2b`` is the class of CPython's ``_blake2`` module; importing
``hashlib`` itself loads OpenSSL (about 12 M instructions of a short
``analyze``, docs/analyze.md). An interpreter built without ``_blake2`` gets
``hashlib``'s.
"""

from __future__ import annotations

try:
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - an interpreter without the module
    from hashlib import blake2b

__all__ = ["blake2b"]
