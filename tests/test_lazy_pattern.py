"""ctxscope._lazy_pattern: a pattern compiled at its first use, once, and not at import."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from ctxscope._lazy_pattern import lazy_pattern


def test_compiled_at_the_first_call_then_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """No compile when made; one at the first call, with the flags; the same Pattern after."""
    made: list[tuple[str, int]] = []
    real = re.compile

    def counting(pattern: str, flags: int = 0) -> re.Pattern[str]:
        made.append((pattern, flags))
        return real(pattern, flags)

    monkeypatch.setattr(re, "compile", counting)
    heading = lazy_pattern(r"^# (\w+)", re.M)
    assert made == []
    first = heading()
    assert made == [(r"^# (\w+)", re.M)]
    assert heading() is first and len(made) == 1
    assert [m.group(1) for m in first.finditer("x\n# one\n# two")] == ["one", "two"]


def test_importing_classify_and_bounded_input_compiles_none_of_their_lazy_patterns() -> None:
    """The rules-file, skill and region patterns, and the error path's constant pattern, wait for a text."""
    code = ("import re\n"
            "from ctxscope.core import bounded_input, classify\n"
            "lazy = [classify._REGION_RE, classify._CONTENTS_RE, classify._SECTION_END_RE, classify._AGENTS_MD_RE,\n"
            "        classify._SKILL_NAME_RE, classify._SKILL_PATH_RE, classify._SKILL_BASE_RE,\n"
            "        classify._FRONTMATTER_NAME_RE, classify._GIT_STATUS_RE, bounded_input._CONSTANT_RE]\n"
            "print(sum(f.cache_info().currsize for f in lazy))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "0"
