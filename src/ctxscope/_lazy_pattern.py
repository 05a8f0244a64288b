"""A regular expression compiled at its first use, not at import.

``re.compile`` runs :mod:`re`'s parser and compiler in Python: about 0.3-1.5 M
instructions a pattern. A pattern that only some texts reach (a skill's
frontmatter, a rules file's heading) or only an error path (a non-finite JSON
constant) costs that at every start-up when compiled at import. ``lazy_pattern``
gives a function that compiles it once, the first time it is called, and
returns the same :class:`re.Pattern` after (a cached call, a few hundred
instructions, where the call site's own substring test has already passed).
"""

from __future__ import annotations

import functools
import re
from typing import Callable

__all__ = ["lazy_pattern"]


def lazy_pattern(pattern: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """``re.compile(pattern, flags)``, done at the first call of the returned function."""

    @functools.cache
    def compiled() -> re.Pattern[str]:
        return re.compile(pattern, flags)

    return compiled
