"""The README's public surface, imported exactly as the README shows it."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import ctxscope

README = Path(__file__).resolve().parents[1] / "README.md"


def test_all_is_what_the_readme_table_lists():
    table = README.read_text(encoding="utf-8").split("The public surface is what", 1)[1].split("Also public", 1)[0]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| ")][1:]
    names = {name for cell in first_cells for name in re.findall(r"`([A-Za-z_]+)(?:\(\w*\))?`", cell)}
    assert names == set(ctxscope.__all__)
    for name in ctxscope.__all__:
        assert getattr(ctxscope, name) is not None


def test_session_is_a_context_manager_and_a_decorator():
    assert not isinstance(ctxscope.session, type(ctxscope))  # not a module made callable
    with ctxscope.session("ticket-4711") as key:
        assert key == "ticket-4711" and ctxscope.current_session_id() == "ticket-4711"
    assert ctxscope.current_session_id() is None

    @ctxscope.session("decorated")
    def inside() -> str | None:
        return ctxscope.current_session_id()

    assert inside() == "decorated"


def test_the_old_module_paths_still_import_with_a_deprecation_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from ctxscope.session import mark_compaction
    assert mark_compaction is ctxscope.mark_compaction
    assert [w.category for w in caught] == [DeprecationWarning]
    # The documented ctxscope.session.compacting() keeps working too.
    assert ctxscope.session.compacting is ctxscope.compacting


def test_version_is_the_installed_one():
    from importlib.metadata import version

    assert ctxscope.__version__ == version("ctxscope")
