"""Everything the file reader yields, saved from one source tree, to compare with another's (issue 14).

    PYTHONPATH=OLD/src python tools/reader_tree_diff.py save A.pickle FIRST LAST [FILE...]
    python tools/reader_tree_diff.py save B.pickle FIRST LAST [FILE...]
    python tools/reader_tree_diff.py compare A.pickle B.pickle

``save`` reads, with the tree on the path, the sessions tools/fuzz_freed_links.py generates for
the seeds ``range(FIRST, LAST)`` (every third one as written, the others with lines the generator
never writes put in: invalid UTF-8, blank space of each kind alone and before a record, a record
type ctxscope does not know, non-object JSON, a BOM past the first line, lines past a line limit
lowered to 400 bytes, a truncated or unterminated last line) and then each FILE (the line limit
as shipped, or ``W_MAX`` bytes) three ways: ``calls()``, ``read(final=True)`` and the file
followed as it is written in pieces. It keeps every field of every call (dataclasses taken
apart, not compared by their ``__eq__``), the problems, and the line, offset and resume offset
after each poll. Run both sides with the same ``PYTHONHASHSEED``: a digest is a hash.
``W_SMALL=1`` and ``W_REUSE=1`` pass ``--small`` and ``--reuse`` to the generator.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import pickle
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.argv += [flag for flag, env in (("--small", "W_SMALL"), ("--reuse", "W_REUSE")) if os.environ.get(env) == "1"]
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_freed_links  # noqa: E402 - reads --small and --reuse from sys.argv

from ctxscope.transcripts import TranscriptFile, source  # noqa: E402

_LONG = b"L" * 900
EXTRA_LINES = [
    b'{"type":"user","uuid":"bad\xff\xfe","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"x"}}\n',
    b" \x0b\x0c\t\r\n", b"\x0b\n", b"\x0c\x0c\x0c\n",
    b'\x0c{"type":"progress","uuid":"pz","parentUuid":null,"sessionId":"s"}\n',
    b'\t{"type":"weird_new_type","uuid":"wz","parentUuid":null,"sessionId":"s","newField":[1,2]}\n',
    b"{}\n", b"1\n", b"[]\n", b'""\n', b"\r\n", b"\r", b"  \n", b"nul\n",
    b'\xef\xbb\xbf{"type":"progress","uuid":"bz","parentUuid":null,"sessionId":"s"}\n',
    b'{"type":"user","uuid":"long","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"'
    + _LONG + b'"}}\n',
    b'{"type": "summary", "summary": "t", "leafUuid": "u1"}\n',
    b'{"type":"file-history-snapshot","messageId":"x","snapshot":{}}\n',
]


def plain(value: Any) -> Any:
    """A value as tuples of its fields, all the way down: equal only where every field is."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return type(value).__name__, tuple((f.name, plain(getattr(value, f.name))) for f in dataclasses.fields(value))
    if isinstance(value, enum.Enum):
        return type(value).__name__, value.value
    if isinstance(value, (list, tuple)):
        return tuple(plain(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return "set", tuple(sorted(repr(plain(v)) for v in value))
    if isinstance(value, dict):
        return "dict", tuple((repr(k), plain(v)) for k, v in value.items())
    if value is None or isinstance(value, (str, int, float, bytes)):
        return value
    names = getattr(value, "__slots__", None) or list(getattr(value, "__dict__", ()))
    return type(value).__name__, tuple((n, plain(getattr(value, n, None))) for n in names) if names else repr(value)


def _mutated(data: bytes, rng: random.Random) -> bytes:
    lines = data.splitlines(keepends=True)
    for _ in range(rng.randint(0, 6)):
        lines.insert(rng.randint(0, len(lines)), rng.choice(EXTRA_LINES))
    out = b"".join(line if line.endswith(b"\n") else line + b"\n" for line in lines)
    cut = rng.random()
    if cut < 0.2 and len(out) > 10:
        return out[:rng.randint(len(out) // 2, len(out) - 1)]  # a truncated last line
    if cut < 0.3:
        return out.rstrip(b"\n")  # no final newline
    return out


def read_three_ways(path: str, data: bytes, rng: random.Random) -> dict[str, Any]:
    out: dict[str, Any] = {}
    file = TranscriptFile(path)
    out["calls"] = plain(list(file.calls()))
    out["calls_state"] = (file.line, file.offset, plain(file.problems), file.format)
    file = TranscriptFile(path)
    out["read"] = plain(file.read(final=True))
    out["read_state"] = (file.line, file.offset, plain(file.problems), file.resume_offset)
    followed = path + ".followed"
    open(followed, "wb").close()
    file = TranscriptFile(followed, documents=False)
    timed, states = [], []
    for _ in fuzz_freed_links.written_in_pieces(followed, data, rng, 300):
        timed.extend(file.read())
        states.append((file.line, file.offset, file.resume_offset))
    timed.extend(file.read(final=True))
    timed.extend(file.finish())
    out["followed"] = plain(timed)
    out["followed_state"] = (states, file.line, file.offset, plain(file.problems))
    os.remove(followed)
    return out


def _guarded(path: str, data: bytes, rng: random.Random) -> Any:
    try:
        return read_three_ways(path, data, rng)
    except Exception as exc:  # noqa: BLE001 - a crash is a result to compare too
        return "crash", repr(exc)


def save(out: str, first: int, last: int, files: list[str]) -> None:
    results: dict[Any, Any] = {}
    with tempfile.TemporaryDirectory() as scratch:
        source.MAX_LINE_BYTES = 400  # lines past the limit happen in generated sessions
        for seed in range(first, last):
            rng = random.Random(seed)
            path = os.path.join(scratch, f"{seed}.jsonl")
            data = fuzz_freed_links.write(path, fuzz_freed_links.gen(rng), rng)
            if seed % 3:
                data = _mutated(data, rng)
                Path(path).write_bytes(data)
            results[seed] = _guarded(path, data, rng)
        source.MAX_LINE_BYTES = int(os.environ.get("W_MAX", 32 * 1024 * 1024))
        for index, name in enumerate(files):
            data = Path(name).read_bytes()
            path = os.path.join(scratch, f"f{index}{os.path.splitext(name)[1]}")
            Path(path).write_bytes(data)
            # Followed in pieces only when small: a poll a few hundred bytes is slow on megabytes.
            results[name] = _guarded(path, data if len(data) < 3_000_000 else b"", random.Random(index))
    with open(out, "wb") as handle:
        pickle.dump(results, handle)
    print(f"{len(results)} inputs saved to {out}")


def compare(a: str, b: str) -> int:
    with open(a, "rb") as handle:
        before = pickle.load(handle)
    with open(b, "rb") as handle:
        after = pickle.load(handle)
    differ = [key for key in before if before[key] != after.get(key)]
    for key in differ[:5]:
        print("differs:", key, [part for part in before[key] if before[key][part] != after[key][part]]
              if isinstance(before[key], dict) and isinstance(after[key], dict) else "")
    calls = sum(len(r["calls"]) for r in before.values() if isinstance(r, dict))
    print(f"{len(before)} inputs, {calls} calls: {len(differ)} differ")
    return 1 if differ else 0


def main() -> int:
    args = [arg for arg in sys.argv[1:] if arg not in ("--small", "--reuse")]
    if len(args) >= 4 and args[0] == "save":
        save(args[1], int(args[2]), int(args[3]), args[4:])
        return 0
    if len(args) == 3 and args[0] == "compare":
        return compare(args[1], args[2])
    raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main())
