"""Old import paths kept for one release: a module object that warns, then forwards."""

from __future__ import annotations

import importlib
import types
import warnings
from typing import Any

__all__ = ["DeprecatedModule"]


class DeprecatedModule(types.ModuleType):
    """The old ``ctxscope.session`` module path, kept for one release: it warns and forwards."""

    def __init__(self, name: str, target: str) -> None:
        super().__init__(name)
        self._target = target

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        warnings.warn(f"{self.__name__} is deprecated: import from {self._target} (or ctxscope) instead",
                      DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(self._target), attribute)
