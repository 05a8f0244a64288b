"""Each kind of rule lives in one module: the grep the architecture issue asks for, as a test."""

from __future__ import annotations

import re
from pathlib import Path

from ctxscope.core import apis

SRC = Path(__file__).resolve().parents[2] / "src" / "ctxscope"


def _sources() -> dict[str, str]:
    return {str(p.relative_to(SRC)): p.read_text(encoding="utf-8") for p in sorted(SRC.rglob("*.py"))}


def test_environment_variables_are_read_in_config_alone():
    readers = {name for name, text in _sources().items() if re.search(r"os\.environ|os\.getenv|getenv\(", text)}
    assert readers == {"config.py"}


def test_api_ids_are_written_in_their_wire_format_modules_alone():
    ids = [wire.id for wire in apis.WIRE_FORMATS]
    writers = {name for name, text in _sources().items() for api in ids if f'"{api}"' in text or f"'{api}'" in text}
    assert writers and all(name.startswith("core/apis/") for name in writers), writers
