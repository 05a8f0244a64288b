"""Differential fuzz of exact counting (core/bpe.py): ctxscope's counters against tiktoken's own encoder.

    python tools/fuzz_counts.py GENERATED SLICES [SESSION...]

Counts GENERATED texts made of the ASCII rewrite's edge characters (the
whitespace kinds, contractions, digits, marks, both cases) with some Unicode
mixed in, and SLICES random slices (1-2,000 characters) of the SESSION files'
lines (default: /work/sessions/default.jsonl), with ``tokens.counter_for(...,
"tiktoken")`` and with ``tiktoken.get_encoding(name).encode(text,
disallowed_special=())``, on o200k_base and cl100k_base. Prints the texts that
differ (the first few) and how many; exits 1 if any does. Needs the encodings
offline (``TIKTOKEN_CACHE_DIR``) or a network.
"""
import random
import sys

import tiktoken

from ctxscope.core import tokens

EDGE = [*" \t\n\r\x0b\x0c'sStTdDmMrReEvVlL/.,:;_-()[]{}\"#%0123456789aAzZ", "'s", "'ll", "  ", "\n\n", " \n", "\t "]
UNICODE = ["é", "ß", "中", "😀", "\u00a0", "\u2028", "ǅ", "٣", "\u0301"]
MODELS = {"o200k_base": "gpt-4o", "cl100k_base": "gpt-4"}


def generated(rng: random.Random) -> str:
    pool = EDGE + (UNICODE if rng.random() < 0.3 else [])
    return "".join(rng.choice(pool) for _ in range(rng.randint(1, 60)))


def main() -> int:
    n_generated, n_slices = int(sys.argv[1]), int(sys.argv[2])
    sessions = sys.argv[3:] or ["/work/sessions/default.jsonl"]
    rng = random.Random(30)
    lines: list[str] = []
    for path in sessions:
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines.extend(line for line in handle if len(line) > 1)
    texts = [generated(rng) for _ in range(n_generated)]
    for _ in range(n_slices):
        line = rng.choice(lines)
        start = rng.randrange(len(line))
        texts.append(line[start:start + rng.randint(1, 2000)])
    differ = 0
    for name, model in MODELS.items():
        ours = tokens.counter_for(model, "tiktoken")
        theirs = tiktoken.get_encoding(name)
        for text in texts:
            if ours.count(text) != len(theirs.encode(text, disallowed_special=())):
                differ += 1
                if differ <= 5:
                    print(f"{name}: {text[:80]!r}")
        print(f"{name}: {len(texts)} texts; differ so far: {differ}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
