#!/usr/bin/env python3
"""`analyze --json` on every corpus session, before and after a change: what moved, file by file.

    python bench/compare_corpus.py --before REF [--after REF] [--tokenizer chars] [--corpus DIR] [-v]

REF is a git revision of this repository (its ``src`` is exported with ``git archive`` into
``bench/out/compare/<rev>``, nothing is checked out) or ``.`` for the working tree. Each side runs
``ctxscope.cli`` with this interpreter and that side's ``src`` first on ``PYTHONPATH``. For each
main session it compares calls, compactions, used and peak tokens, composition, waste totals and
the per-call estimates, and prints one line per file that differs with the fields that moved;
``-v`` prints the values. Exit 0 always: it shows, the reader judges what was meant.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "out", "compare")
DEFAULT_CORPUS = os.path.join(ROOT, "..", "shared", "corpus")
TIKTOKEN = os.path.join(ROOT, "..", "shared", "tiktoken")  # the offline encodings (no network here)


def source_of(ref: str) -> str:
    if ref == ".":
        return os.path.join(ROOT, "src")
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", ref], check=True, capture_output=True,
                         text=True).stdout.strip()
    target = os.path.join(OUT, rev)
    if not os.path.isdir(os.path.join(target, "src")):
        os.makedirs(target, exist_ok=True)
        with tempfile.TemporaryFile() as archive:
            subprocess.run(["git", "-C", ROOT, "archive", rev, "src"], check=True, stdout=archive)
            archive.seek(0)
            with tarfile.open(fileobj=archive) as tar:
                tar.extractall(target, filter="data")
    return os.path.join(target, "src")


def sessions(paths: list[str]) -> list[str]:
    out = []
    for root in paths:
        for folder, _, names in os.walk(root):
            if "subagents" in folder.split(os.sep):
                continue
            out += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".jsonl")]
    return sorted(out)


def analyze(src: str, path: str, tokenizer: str) -> dict | str:
    """The JSON report of one side, or why there is none (a side that fails is never "identical")."""
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if os.path.isdir(TIKTOKEN):
        # Without it an offline tiktoken run fails on both sides alike: nothing would be compared.
        env.setdefault("TIKTOKEN_CACHE_DIR", TIKTOKEN)
    code = "import sys; from ctxscope.cli import main; sys.exit(main(sys.argv[1:]))"
    p = subprocess.run([sys.executable, "-c", code, "analyze", path, "--json", "--tokenizer", tokenizer,
                        "--no-subagents"], capture_output=True, text=True, env=env)
    try:
        return json.loads(p.stdout)
    except ValueError:
        return f"exit {p.returncode}: {(p.stderr.strip().splitlines() or ['no output'])[-1]}"


def summary(doc: dict | str) -> dict:
    if isinstance(doc, str):
        return {"error": doc}
    out = {}
    for f in doc.get("files", []):
        for s in f.get("sessions", []):
            waste = s.get("waste", {})
            out[s["session_id"]] = {
                "calls": s["calls"], "compactions": s["compactions"], "used_tokens": s["used_tokens"],
                "peak_tokens": s["peak_tokens"], "window_tokens": s.get("window_tokens"),
                "composition": s["composition"], "waste_total": waste.get("total"),
                "waste_tokens": waste.get("tokens"), "findings": len(waste.get("findings", [])),
                "estimated": [g["estimated_tokens"] for g in s.get("growth", [])],
                "reported": [g["reported_tokens"] for g in s.get("growth", [])],
            }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", default=".")
    ap.add_argument("--tokenizer", default="chars")
    ap.add_argument("--corpus", action="append")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    before_src, after_src = source_of(args.before), source_of(args.after)
    roots = args.corpus or [os.path.join(DEFAULT_CORPUS, "claude"), os.path.join(DEFAULT_CORPUS, "codex")]
    moved: dict[str, int] = {}
    files = same = 0
    failed = 0
    for path in sessions(roots):
        a = summary(analyze(before_src, path, args.tokenizer))
        b = summary(analyze(after_src, path, args.tokenizer))
        files += 1
        if "error" in a or "error" in b:
            failed += 1
            print(f"{os.path.relpath(path, DEFAULT_CORPUS)}: not compared: {a.get('error') or b.get('error')}")
            continue
        if a == b:
            same += 1
            continue
        fields = sorted({k for sid in set(a) | set(b) for k in (set(a.get(sid, {})) | set(b.get(sid, {})))
                         if (a.get(sid) or {}).get(k) != (b.get(sid) or {}).get(k)})
        if set(a) != set(b):
            fields.append("sessions")
        for k in fields:
            moved[k] = moved.get(k, 0) + 1
        print(f"{os.path.relpath(path, DEFAULT_CORPUS)}: {', '.join(fields)}")
        if args.verbose:
            for sid in sorted(set(a) | set(b)):
                for k in fields:
                    va, vb = (a.get(sid) or {}).get(k), (b.get(sid) or {}).get(k)
                    if va != vb:
                        print(f"    {sid} {k}: {str(va)[:200]} -> {str(vb)[:200]}")
    print(f"{files} files: {same} identical, {failed} not compared (a side without a report); "
          "fields that moved (files): "
          + ", ".join(f"{k} {n}" for k, n in sorted(moved.items(), key=lambda kv: -kv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
