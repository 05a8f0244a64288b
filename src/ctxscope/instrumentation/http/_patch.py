"""A library method replaced by a plain function, and put back: the transport layer's hooks.

Every request through an instrumented client passes the hook, and nearly
all of them are not model calls: the pass-through is the hot path. A plain
function costs one Python call on it; a ``wrapt`` proxy bound as a method
costs several microseconds more (``bench/bench_transport.py``: the
unrelated-URL figure). The wrapper keeps ``__wrapped__`` (the original), as
``functools.wraps`` does, for whoever looks below it.

Pure: no OpenTelemetry, no HTTP library.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable

_log = logging.getLogger("ctxscope.instrumentation")


class Switch:
    """On while the hook is installed; a hook another wrapper covers stays in place, switched off."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True


class Patch:
    """``owner.name`` replaced by a wrapper of the original; :meth:`undo` puts the original back."""

    __slots__ = ("owner", "name", "original", "wrapper", "switch")

    def __init__(self, owner: type, name: str, make: Callable[[Any, Switch], Callable[..., Any]]) -> None:
        self.owner = owner
        self.name = name
        self.original = vars(owner)[name]  # KeyError: the class does not define it (not ours to patch)
        self.switch = Switch()
        wrapper = make(self.original, self.switch)
        functools.update_wrapper(wrapper, self.original)  # name, doc, __wrapped__
        self.wrapper = wrapper
        setattr(owner, name, wrapper)

    def undo(self) -> None:
        """The original back in place; if another wrapper was put over ours since, ours is only switched off."""
        self.switch.on = False
        if vars(self.owner).get(self.name) is self.wrapper:
            setattr(self.owner, self.name, self.original)
        else:
            _log.debug("ctxscope: %s.%s was wrapped over ctxscope's hook; the hook stays, switched off",
                       self.owner.__qualname__, self.name)
