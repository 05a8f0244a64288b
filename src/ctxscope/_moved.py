"""Old module paths of ctxscope, kept importable for one release (0.2), with a DeprecationWarning.

An old path is the very same module object as the new one (``sys.modules`` holds both names),
so code that patches ``ctxscope.tracker.X`` patches ``ctxscope.telemetry.tracker.X``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Sequence, cast

if TYPE_CHECKING:  # pragma: no cover
    from importlib.abc import Loader

MOVED: dict[str, str] = {
    "ctxscope.apis": "ctxscope.core.apis",
    "ctxscope.items": "ctxscope.core.items",
    "ctxscope.payload": "ctxscope.core.payload",
    "ctxscope.classify": "ctxscope.core.classify",
    "ctxscope.tokens": "ctxscope.core.tokens",
    "ctxscope.framing": "ctxscope.core.framing",
    "ctxscope.liveframing": "ctxscope.core.framing.incremental",
    "ctxscope.itemdiff": "ctxscope.core.diff",
    "ctxscope.ledger": "ctxscope.core.ledger",
    "ctxscope.calibration": "ctxscope.core.views",
    "ctxscope.selfcal": "ctxscope.core.learned_correction",
    "ctxscope.waste": "ctxscope.core.waste",
    "ctxscope.limits": "ctxscope.core.limits",
    "ctxscope.observation": "ctxscope.core.observation",
    "ctxscope.fidelity": "ctxscope.core.fidelity",
    "ctxscope.conversation": "ctxscope.core.conversation",
    "ctxscope.pipeline": "ctxscope.core.pipeline",
    "ctxscope.media": "ctxscope.core.media",
    "ctxscope.bounded_input": "ctxscope.core.bounded_input",
    "ctxscope.processor": "ctxscope.telemetry.processor",
    "ctxscope.metrics": "ctxscope.telemetry.metrics",
    "ctxscope.export": "ctxscope.telemetry.setup",
    "ctxscope.store": "ctxscope.telemetry.store",
    "ctxscope.tracker": "ctxscope.telemetry.tracker",
    "ctxscope.replay": "ctxscope.telemetry.replay",
    "ctxscope.shutdown": "ctxscope.telemetry.shutdown",
    "ctxscope.foreign": "ctxscope.interop",
    "ctxscope.follow": "ctxscope.transcripts.follow",
}


# Plain classes, not importlib.abc's: the import system only calls these methods, and
# importlib.abc (with importlib.resources) was a tenth of every command's start-up.
class _Alias:
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.target}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=3)
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        pass  # the target module is already executed


class MovedModules:
    """Finds ``ctxscope.<old>`` (and what is below an old package) as the module it moved to."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        for old, new in MOVED.items():
            if fullname == old or fullname.startswith(old + "."):
                return importlib.machinery.ModuleSpec(fullname, cast("Loader", _Alias(new + fullname[len(old):])))
        return None


def install() -> None:
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
