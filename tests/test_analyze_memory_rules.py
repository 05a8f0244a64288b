"""bench/analyze_memory.py: every function its attribution rules name is a function of the named file.

A rule names functions, not lines (so that it measures another tree too): a function renamed or
folded into another leaves its rule matching nothing, and its allocations land in another
structure's row or in "other" without a word (session 30 folded ``_call_key`` into ``_key_of``;
``_node`` went when freed links were read back through ``feed``).
"""

from __future__ import annotations

import ast
import importlib.util

from _paths import ROOT

SRC = ROOT / "src" / "ctxscope"


def _rules() -> list[tuple[str, set[str] | None, str]]:
    spec = importlib.util.spec_from_file_location("analyze_memory", ROOT / "bench" / "analyze_memory.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.RULES)


def _functions(path: str) -> set[str]:
    tree = ast.parse((SRC / path).read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_named_function_is_in_its_file() -> None:
    missing = [(path, sorted(names - _functions(path))) for path, names, _ in _rules()
               if names is not None and not names <= _functions(path)]
    assert missing == []

