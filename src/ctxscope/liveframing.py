"""Deprecated: moved to :mod:`ctxscope.framing.incremental` (this shim goes after one release).

Importing it warns once (``DeprecationWarning``); its names are the very
objects of the new module.
"""

from __future__ import annotations

import warnings

from .framing.incremental import FramingCache
from .framing.parts import parts_to_items

__all__ = ["FramingCache", "parts_to_items"]

warnings.warn("ctxscope.liveframing is deprecated: import FramingCache from ctxscope.framing.incremental",
              DeprecationWarning, stacklevel=2)
