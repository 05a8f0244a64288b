"""Differential check of the local store's sizes per part: the ledger's running sums against a from-scratch sum.

    python tools/diff_store_sizes.py [--seeds FIRST LAST [--reuse]] [FILE ...]

Every call of each session (generated ones from ``fuzz_freed_links.gen``: rewinds,
compactions, microcompactions; and each FILE) goes through a
:class:`TranscriptAccount` with ``part_sizes=True`` twice: texts kept, where
``Snapshot.part_chars`` / ``part_bytes`` must equal b82c906's record (characters and
UTF-8 bytes summed over the snapshot's items, a path not in ``parts`` folded into
its nested path or ``<category>/other``), and texts released once counted (replay's
way), where they must equal the kept run's. A call that differs is printed.
"""
from __future__ import annotations

import os
import random
import sys
from collections import defaultdict
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ctxscope.core.pipeline import TranscriptAccount  # noqa: E402
from ctxscope.core.tokens import CharsCounter  # noqa: E402
from ctxscope.transcripts import TranscriptFile  # noqa: E402


def _text_bytes(item: Any) -> int:
    text = item.text
    if not text:
        return int(item.chars)
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def from_scratch(snapshot: Any) -> tuple[dict[str, int], dict[str, int]]:
    """b82c906's record_from_observation: chars and bytes per part summed over the items."""
    parts = snapshot.parts
    by_path: defaultdict[tuple[Any, str], int] = defaultdict(int)
    bytes_by_path: defaultdict[tuple[Any, str], int] = defaultdict(int)
    for item in snapshot.items:
        by_path[item.category, item.part] += item.chars
        bytes_by_path[item.category, item.part] += _text_bytes(item)
    chars: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for (category, path), count in by_path.items():
        size = bytes_by_path[category, path]
        if path not in parts:
            nested = f"{category.value}/{path}" if path else category.value
            path = nested if nested in parts else f"{category.value}/other"
        chars[path] = chars.get(path, 0) + int(count)
        sizes[path] = sizes.get(path, 0) + int(size)
    return chars, sizes


def check_file(path: str) -> tuple[int, int]:
    """(calls, calls that differ) of one transcript file."""
    runs = []
    for keep in (True, False):
        accounts: dict[str, TranscriptAccount] = {}
        out = []
        for call in TranscriptFile(path).calls():
            account = accounts.get(call.session_id)
            if account is None:
                account = accounts[call.session_id] = TranscriptAccount(
                    call.session_id, counter=CharsCounter(), keep_text=keep, part_sizes=True)
            snapshot, _ = account.observe(call)
            sizes = (dict(snapshot.part_chars or {}), dict(snapshot.part_bytes or {}))
            out.append((call.session_id, call.index, sizes, from_scratch(snapshot) if keep else None))
        runs.append(out)
    bad = 0
    for (sid, index, kept, scratch), (_, _, released, _) in zip(*runs):
        if kept != scratch or released != kept:
            bad += 1
            if bad <= 3:
                print(f"DIFF {path} {sid} call {index}\n  ledger   {kept}\n  scratch  {scratch}\n"
                      f"  released {released}")
    return len(runs[0]), bad


def main(argv: list[str]) -> int:
    files = [a for a in argv if a not in ("--reuse", "--small")]  # the generator's own flags
    seeds = range(0)
    if files[:1] == ["--seeds"]:
        seeds = range(int(files[1]), int(files[2]))
        files = files[3:]
    import fuzz_freed_links as fuzz  # the generator (imported here: it reads sys.argv)

    os.makedirs("/tmp/ctxscope-sizes", exist_ok=True)
    calls = bad = 0
    for seed in seeds:
        rng = random.Random(seed)
        path = f"/tmp/ctxscope-sizes/{seed}.jsonl"
        fuzz.write(path, fuzz.gen(rng), rng)
        n, b = check_file(path)
        calls, bad = calls + n, bad + b
        if not b:
            os.remove(path)
    for path in files:
        n, b = check_file(path)
        calls, bad = calls + n, bad + b
    print(f"{calls} calls; {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
