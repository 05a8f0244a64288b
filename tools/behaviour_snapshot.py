"""Snapshot what ctxscope prints on the whole corpus, to show a refactor changed nothing.

    python tools/behaviour_snapshot.py save DIR      # analyze --json of every corpus session,
                                                     # inspect --json of every corpus request line
    python tools/behaviour_snapshot.py compare A B   # what differs between two snapshots

Runs the CLI in-process (``ctxscope.cli.main``) with the tiktoken basis when the
offline cache is there (``../shared/tiktoken``), else chars. Needs ``../shared``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
TIKTOKEN = ROOT.parent / "shared" / "tiktoken"


def _run(argv: list[str]) -> tuple[int, str]:
    from ctxscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue()


def _sessions() -> list[Path]:
    files = sorted(p for p in CORPUS.rglob("*") if p.suffix in (".jsonl", ".json", ".traj") and p.is_file())
    # Subagent files are analysed with their parent session.
    return [p for p in files if "subagents" not in p.parts and "/api/" not in str(p)]


def save(target: Path) -> None:
    if TIKTOKEN.is_dir():
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(TIKTOKEN))
    basis = "tiktoken" if TIKTOKEN.is_dir() else "chars"
    target.mkdir(parents=True, exist_ok=True)
    snapshot: dict[str, object] = {}
    for path in _sessions():
        code, out = _run(["analyze", "--json", "--tokenizer", basis, str(path)])
        snapshot[f"analyze {path.relative_to(CORPUS)}"] = {"exit": code, "out": _json(out)}
    for path in sorted((CORPUS / "api").rglob("*.jsonl")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number in range(1, len(lines) + 1):
            code, out = _run(["inspect", "--json", "--tokenizer", basis, f"{path}:{number}"])
            snapshot[f"inspect {path.relative_to(CORPUS)}:{number}"] = {"exit": code, "out": _json(out)}
    (target / "snapshot.json").write_text(json.dumps(snapshot, indent=1, sort_keys=True))
    print(f"{len(snapshot)} outputs saved to {target / 'snapshot.json'}")


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _diff(a: object, b: object, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                out.append(f"{path}.{key}: {'added' if key not in a else 'removed'}")
            else:
                _diff(a[key], b[key], f"{path}.{key}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{index}]", out)
    elif a != b:
        out.append(f"{path}: {str(a)[:80]} -> {str(b)[:80]}")


def compare(before: Path, after: Path) -> int:
    a = json.loads((before / "snapshot.json").read_text())
    b = json.loads((after / "snapshot.json").read_text())
    changed = 0
    for key in sorted(set(a) | set(b)):
        lines: list[str] = []
        _diff(a.get(key), b.get(key), "", lines)
        if lines:
            changed += 1
            print(f"== {key}: {len(lines)} differences")
            for line in lines[:8]:
                print("   ", line)
    print(f"{changed} of {len(set(a) | set(b))} outputs differ")
    return 1 if changed else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "save":
        save(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
