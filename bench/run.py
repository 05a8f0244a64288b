"""Run every bench/bench_*.py's ``main()`` and print its figures (``make bench``).

Each bench module prints its own lines and may return a mapping of figures,
which is printed again as one JSON line (``BENCH <module> {...}``) so runs can
be compared by a script. tiktoken reads the offline cache in
``../shared/tiktoken`` when it exists and TIKTOKEN_CACHE_DIR is not set.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED_TIKTOKEN = ROOT.parent / "shared" / "tiktoken"


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(f"bench.{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    """Run the bench modules named in ``argv`` (stems, e.g. ``bench_core``), or all."""
    if SHARED_TIKTOKEN.is_dir():
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED_TIKTOKEN))
    src = ROOT / "src"
    if str(src) not in sys.path:
        sys.path.insert(0, str(src))
    wanted = set(argv if argv is not None else sys.argv[1:])
    failed = 0
    for path in sorted(HERE.glob("bench_*.py")):
        if wanted and path.stem not in wanted:
            continue
        print(f"== {path.stem}", flush=True)
        started = time.perf_counter()
        try:
            figures = _load(path).main()
        except Exception:  # one broken bench must not hide the others' figures
            failed += 1
            traceback.print_exc()
            continue
        if figures:
            print(f"BENCH {path.stem} {json.dumps(figures, sort_keys=True)}")
        print(f"   ({time.perf_counter() - started:.1f}s)", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
