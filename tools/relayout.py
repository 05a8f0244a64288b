"""Move ctxscope's modules into the packages that state the layers (a one-off refactoring tool).

    python tools/relayout.py            # git mv every module of MOVES, rewrite imports, write the shim table

What it does, in order:

1. every relative import under ``src/ctxscope`` becomes absolute
   (``from .ledger import X`` in ``ctxscope/tracker.py`` -> ``from ctxscope.ledger import X``), so
   a moved module's imports stay right wherever it goes;
2. ``git mv`` of each old module to its new place (packages get an ``__init__``);
3. every dotted name ``ctxscope.<old>`` in Python, TOML and Markdown files of the
   repository becomes ``ctxscope.<new>``, and ``src/ctxscope/<old>.py`` paths in the docs too;
4. ``src/ctxscope/_moved.py`` gets the table of old names, so that an old import path keeps
   working for one release (with a DeprecationWarning) and is the very same module object.

Idempotent on a tree already moved (a module no longer at its old place is left alone).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "ctxscope"

# old dotted module (under ctxscope.) -> new dotted module. Packages move whole.
MOVES: dict[str, str] = {
    # the pure core: no OpenTelemetry SDK, no provider SDK
    "apis": "core.apis",
    "items": "core.items",
    "payload": "core.payload",
    "classify": "core.classify",
    "tokens": "core.tokens",
    "framing": "core.framing",
    "liveframing": "core.framing.incremental",  # was already an alias of framing.incremental
    "itemdiff": "core.diff",
    "ledger": "core.ledger",
    "calibration": "core.views",
    "selfcal": "core.learned_correction",
    "waste": "core.waste",
    "limits": "core.limits",
    "observation": "core.observation",
    "fidelity": "core.fidelity",
    "conversation": "core.conversation",
    "pipeline": "core.pipeline",
    "media": "core.media",
    "bounded_input": "core.bounded_input",
    # telemetry: OpenTelemetry SDK parts
    "processor": "telemetry.processor",
    "metrics": "telemetry.metrics",
    "export": "telemetry.setup",
    "store": "telemetry.store",
    "tracker": "telemetry.tracker",
    "replay": "telemetry.replay",
    "shutdown": "telemetry.shutdown",
    # reading other instrumentations' spans
    "foreign": "interop",
    # transcripts: one reader stack
    "follow": "transcripts.follow",
}
PACKAGES = ("core", "telemetry")
PACKAGE_DOCS = {
    "core": '"""The pure core: items, counting, framing, ledger, views, learned correction, waste, limits.\n\n'
            'Nothing here imports the OpenTelemetry SDK or a provider SDK '
            '(``tests/core/test_pure_core.py`` imports the whole package with them blocked).\n"""\n',
    "telemetry": '"""OpenTelemetry parts: the span processor and its instruments, set-up, the local store,\n'
                 'the live tracker, and the span writer of replayed transcripts.\n"""\n',
}

_RELATIVE = re.compile(r"^(\s*)from (\.+)([\w.]*) import ", re.M)


def _module_of(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def absolute_imports(path: Path) -> None:
    module = _module_of(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def absolute(match: re.Match[str]) -> str:
        indent, dots, rest = match.group(1), match.group(2), match.group(3)
        base = package.split(".")
        if len(dots) > 1:
            base = base[: len(base) - (len(dots) - 1)]
        target = ".".join(base + ([rest] if rest else []))
        return f"{indent}from {target} import "

    text = path.read_text(encoding="utf-8")
    new = _RELATIVE.sub(absolute, text)
    if new != text:
        path.write_text(new, encoding="utf-8")


def _git(*args: str) -> None:
    subprocess.run(["git", *args], cwd=ROOT, check=True)


def move_files() -> None:
    for package in PACKAGES:
        directory = SRC / package
        directory.mkdir(exist_ok=True)
        init = directory / "__init__.py"
        if not init.exists():
            init.write_text(PACKAGE_DOCS[package], encoding="utf-8")
    for old, new in MOVES.items():
        source = SRC.joinpath(*old.split("."))
        target = SRC.joinpath(*new.split("."))
        if source.is_dir():
            if target.exists():
                continue
            _git("mv", str(source), str(target))
        elif source.with_suffix(".py").exists():
            _git("mv", str(source.with_suffix(".py")), str(target.with_suffix(".py")))


def _dotted_pattern() -> re.Pattern[str]:
    names = sorted(MOVES, key=len, reverse=True)
    return re.compile(r"(?<![\w.])ctxscope\.(" + "|".join(re.escape(n) for n in names) + r")(?![\w])")


_FROM_IMPORT = re.compile(r"^(\s*)from ctxscope((?:\.\w+)*) import ([\w ,]+?)(\s*#.*)?$", re.M)


def _split_from_imports(text: str) -> str:
    """``from ctxscope import apis`` -> ``from ctxscope.core import apis``: a moved module imported by name."""

    def split(match: re.Match[str]) -> str:
        indent, package, names, comment = match.group(1), match.group(2), match.group(3), match.group(4) or ""
        kept, moved = [], []
        for entry in (n.strip() for n in names.split(",") if n.strip()):
            name, _, alias = entry.partition(" as ")
            full = (package[1:] + "." if package else "") + name.strip()
            if full in MOVES:
                parent, _, last = MOVES[full].rpartition(".")
                binding = alias.strip() or name.strip()
                moved.append(f"{indent}from ctxscope.{parent} import {last}"
                             + (f" as {binding}" if binding != last else ""))
            else:
                kept.append(entry)
        if not moved:
            return match.group(0)
        lines = ([f"{indent}from ctxscope{package} import {', '.join(kept)}{comment}"] if kept else []) + moved
        return "\n".join(lines)

    return _FROM_IMPORT.sub(split, text)


def rewrite_names(paths: list[Path]) -> None:
    pattern = _dotted_pattern()
    path_pattern = re.compile(r"src/ctxscope/(" + "|".join(re.escape(n.replace(".", "/"))
                                                        for n in sorted(MOVES, key=len, reverse=True))
                              + r")(\.py|/)")
    for path in paths:
        text = path.read_text(encoding="utf-8")
        new = _split_from_imports(text) if path.suffix == ".py" else text
        new = pattern.sub(lambda m: "ctxscope." + MOVES[m.group(1)], new)
        new = path_pattern.sub(lambda m: "src/ctxscope/" + MOVES[m.group(1).replace("/", ".")].replace(".", "/")
                               + m.group(2), new)
        if new != text:
            path.write_text(new, encoding="utf-8")


def write_shim_table() -> None:
    rows = "".join(f'    "ctxscope.{old}": "ctxscope.{new}",\n' for old, new in MOVES.items())
    (SRC / "_moved.py").write_text(f'''"""Old module paths of ctxscope, kept importable for one release (0.2), with a DeprecationWarning.

An old path is the very same module object as the new one (``sys.modules`` holds both names),
so code that patches ``ctxscope.tracker.X`` patches ``ctxscope.telemetry.tracker.X``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType
from typing import Sequence

MOVED: dict[str, str] = {{
{rows}}}


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{{spec.name}} moved to {{self.target}}; the old path goes in the next release",
                      DeprecationWarning, stacklevel=3)
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        pass  # the target module is already executed


class MovedModules(importlib.abc.MetaPathFinder):
    """Finds ``ctxscope.<old>`` (and what is below an old package) as the module it moved to."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        for old, new in MOVED.items():
            if fullname == old or fullname.startswith(old + "."):
                return importlib.machinery.ModuleSpec(fullname, _Alias(new + fullname[len(old):]))
        return None


def install() -> None:
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
''', encoding="utf-8")


def install_shims() -> None:
    init = SRC / "__init__.py"
    text = init.read_text(encoding="utf-8")
    line = "from ctxscope._moved import install as _install_moved_paths"
    if line not in text:
        text = text.rstrip("\n") + f"\n\n# Old module paths (0.1) stay importable for one release.\n{line}  # noqa: E402\n\n_install_moved_paths()\n"
        init.write_text(text, encoding="utf-8")


def main() -> int:
    for path in sorted(SRC.rglob("*.py")):
        absolute_imports(path)
    move_files()
    files = [p for p in ROOT.rglob("*") if p.suffix in (".py", ".md", ".toml", ".cfg", ".ini")
             and ".venv" not in p.parts and ".git" not in p.parts and p.name != "relayout.py"
             and p.name != "_moved.py" and "egg-info" not in str(p)]
    rewrite_names(files)
    write_shim_table()
    install_shims()
    print(f"moved {len(MOVES)} modules; rewrote names in {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
