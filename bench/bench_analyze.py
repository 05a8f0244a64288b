"""Side-by-side benchmark of ``ctxscope analyze`` against ctxlens-cli, and a findings comparison.

    python bench/bench_analyze.py                 # speed and memory on a 50 MB Claude Code session
    python bench/bench_analyze.py --compare       # also: findings of both tools on ../shared/corpus

ctxlens-cli is not a project dependency: it is installed into its own venv
(``bench/out/venv-ctxlens``) on first use. Both tools run as subprocesses in
one run; wall time is measured around each, peak RSS from ``os.wait4`` (the
child's own rusage). ctxlens counts with its heuristic tokenizer (the only one
it has without network), so ctxscope runs with ``--tokenizer chars`` for a
like-for-like figure; the exact tiktoken run is reported as well.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
GEN = SHARED / "tools" / "gen_sessions.py"
CORPUS = SHARED / "corpus"
VENV = ROOT / "bench" / "out" / "venv-ctxlens"
CTXSCOPE = [sys.executable, "-c", "from ctxscope.cli import run; run()"]


def ensure_ctxlens() -> Path:
    exe = VENV / "bin" / "ctxlens"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "ctxlens-cli==0.1.1"], check=True)
    return exe


def measure(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, bytes]:
    """Wall seconds, peak RSS in KiB, stdout of one child."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        data = out.read()
    if proc.returncode not in (0, 2):
        raise SystemExit(f"{argv[0]} exited {proc.returncode}")
    return wall, usage.ru_maxrss, data


def speed(target_mb: int, repeat: int) -> dict[str, object]:
    ctxlens = ensure_ctxlens()
    work = Path(tempfile.mkdtemp(prefix="ctxscope-bench-"))
    session = work / f"cc_{target_mb}mb.jsonl"
    subprocess.run([sys.executable, str(GEN), "claude", "--target-mb", str(target_mb), "-o", str(session)],
                   check=True, stderr=subprocess.DEVNULL)
    env = dict(os.environ)
    env.setdefault("TIKTOKEN_CACHE_DIR", str(SHARED / "tiktoken"))
    runs: dict[str, list[tuple[float, int]]] = {"ctxlens": [], "ctxscope-chars": [], "ctxscope-tiktoken": []}
    for _ in range(repeat):
        wall, rss, _ = measure([str(ctxlens), "analyze", "--json", str(session)])
        runs["ctxlens"].append((wall, rss))
        wall, rss, _ = measure([*CTXSCOPE, "analyze", "--json", "--tokenizer", "chars", str(session)], env)
        runs["ctxscope-chars"].append((wall, rss))
        wall, rss, _ = measure([*CTXSCOPE, "analyze", "--json", str(session)], env)
        runs["ctxscope-tiktoken"].append((wall, rss))
    best = {name: (min(w for w, _ in r), max(m for _, m in r)) for name, r in runs.items()}
    lens_wall, lens_rss = best["ctxlens"]
    ours_wall, ours_rss = best["ctxscope-chars"]
    result = {
        "input_bytes": session.stat().st_size,
        "runs": repeat,
        "wall_s": {k: round(v[0], 3) for k, v in best.items()},
        "peak_rss_kib": {k: v[1] for k, v in best.items()},
        "speedup": round(lens_wall / ours_wall, 2),
        "memory_fraction": round(ours_rss / lens_rss, 3),
    }
    result["pass"] = result["speedup"] >= 5 and result["memory_fraction"] <= 0.25
    session.unlink()
    work.rmdir()
    return result


_TOOL_ID = re.compile(r"\b(toolu_[A-Za-z0-9]+|call_[A-Za-z0-9]+)\b")


def _head(reference: str) -> str:
    return reference.split(" (same body", 1)[0].split(",", 1)[0]


def compare() -> list[dict[str, object]]:
    """Per corpus session: waste totals of both tools, and whether ctxscope names each ctxlens duplicate."""
    sys.path.insert(0, str(ROOT / "src"))
    from ctxscope.transcripts._items import reference

    ctxlens = ensure_ctxlens()
    rows = []
    for path in sorted((CORPUS / "claude").rglob("*.jsonl")):
        if path.stat().st_size < 20_000 or "subagents" in path.parts:
            continue
        try:
            _, _, lens_out = measure([str(ctxlens), "analyze", "--json", str(path)])
            _, _, ours_out = measure([*CTXSCOPE, "analyze", "--json", "--no-subagents", "--tokenizer", "chars",
                                      str(path)])
        except SystemExit:
            continue
        lens, ours = json.loads(lens_out), json.loads(ours_out)
        refs: dict[str, str | None] = {}
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            content = (record.get("message") or {}).get("content") if isinstance(record, dict) else None
            for block in content if isinstance(content, list) else ():
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    refs[block.get("id")] = reference(str(block.get("name")), block.get("input") or {})
        sessions = [s for f in ours["files"] for s in f["sessions"]
                    if s["parent_session_id"] is None or path.name.startswith("agent-")]
        # ctxlens keys a reference by its first argument only (Read:file_path=X), ours by all
        # the normalised arguments (offset, limit...): compare on the first argument.
        found = {_head(f["reference"].removeprefix("repeated call ")) for s in sessions
                 for f in s["waste"]["findings"] if f["kind"] in ("duplicate", "stale")}
        tools_found = {ref.split(":", 1)[0] for ref in found}
        texts_found = any(ref.startswith("identical ") for ref in found)
        dup_items = [i for i in lens["waste"]["items"] if i["kind"].startswith("duplicate")]
        named = 0
        for item in dup_items:
            match = _TOOL_ID.search(item["detail"])
            if item["kind"] == "duplicate content":
                # The same body repeated: ctxlens names the first call id; ctxscope the
                # reference it keeps, so the tool must match (or, without a call id, a text).
                ref = refs.get(match.group(1)) if match else None
                named += (ref.split(":", 1)[0] in tools_found) if ref else texts_found
            else:
                ref = item["detail"].split(" repeated")[0]
                # A tool without arguments in ctxlens's key (ExitPlanMode): any finding of that tool.
                named += _head(ref) in found or (":" not in ref and ref in tools_found)
        ours_waste = {k: sum(s["waste"]["tokens"].get(k, 0) for s in sessions)
                      for k in ("duplicate", "stale", "bloat", "tool_definition_overage")}
        rows.append({"file": str(path.relative_to(CORPUS)), "ctxlens_duplicate": lens["waste"]["duplicate_tokens"],
                     "ctxlens_bloat": lens["waste"]["tool_result_bloat_tokens"],
                     "ctxscope": ours_waste, "ctxlens_duplicate_items": len(dup_items),
                     "named_by_ctxscope": named})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target-mb", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--compare", action="store_true", help="compare findings on ../shared/corpus too")
    args = parser.parse_args(argv)
    if not GEN.exists():
        print(f"bench: {GEN} is not here (needs ../shared)", file=sys.stderr)
        return 1
    result = speed(args.target_mb, args.repeat)
    print(json.dumps(result, indent=2))
    if args.compare:
        print(json.dumps(compare(), indent=1))
    return 0 if result["pass"] else 2


if __name__ == "__main__":
    sys.exit(main())
