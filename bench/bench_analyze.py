"""Side-by-side benchmark of ``ctxscope analyze`` against ctxlens-cli, memory in the session's size, and replay.

    python bench/bench_analyze.py                 # everything below, ratios from one run
    python bench/bench_analyze.py --quick         # the dense 50 MB session only (no 200 MB, no replay)
    python bench/bench_analyze.py --replay-only   # replay of the dense 50 MB session only, before and after
    python bench/bench_analyze.py --compare       # also: findings of both tools on ../shared/corpus
    python bench/bench_analyze.py --compacting --before REV  # only: peak RSS, compacting 50 and 200 MB, REV and now

Sessions (``../shared/tools/gen_sessions.py``): ``default`` (few, large calls:
``claude --target-mb 50``), ``dense50`` (realistic density, ~110 calls a MB:
``claude --target-mb 50 --bash-scale 0.06 --file-lines 100 --thinking-words 250
--seed 7``) and ``dense200`` (the same at 200 MB: peak memory only). With
``--compacting``: ``compact50`` and ``compact200``, the dense sessions with
``--compact-every 300`` (a compaction every 300 responses, as real long
sessions have), ctxscope alone (``--tokenizer chars``), this checkout and
``--before REV``'s ``src``: the peak RSS of each and the 200/50 ratios, the
memory a compaction frees (issue 14's own ``dense200`` figure is unchanged: it
never compacts).

ctxlens-cli is not a project dependency: it is installed into its own venv
(``bench/out/venv-ctxlens``) on first use. Every tool runs as a subprocess;
wall time is measured around each, CPU time (user + system) and peak RSS from
``os.wait4`` (the command's own rusage, taken by a small launcher: ``_LAUNCH``). On a shared machine the CPU ratio is
the steadier figure: wall time also counts the waits for a core. ctxlens
counts with its heuristic tokenizer (the only one it has without network), so
ctxscope runs with ``--tokenizer chars`` for the like-for-like figure; the
exact tiktoken run is reported as well (skipped without ``../shared/tiktoken``).
Each tool runs as installed: with its modules' bytecode (written by one untimed
warm-up run into ``bench/out/pycache``), not compiled again in every run as
``PYTHONDONTWRITEBYTECODE`` would have an editable checkout do.

Replay: ``ctxscope replay --tokenizer chars`` of ``dense50`` into a local OTLP
receiver (oteltest's HTTP sink, in this process), with this checkout's ``src``
and with the ``src`` of ``--before REV`` (exported by ``git archive`` into
``bench/out/before-REV``; default: the last commit before issue 14's work),
and this checkout once more with the span exporter off (``OTEL_TRACES_EXPORTER=none``):
what exporting the spans costs, measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import logging
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
TIKTOKEN = SHARED / "tiktoken"
VENV = ROOT / "bench" / "out" / "venv-ctxlens"
PYCACHE = ROOT / "bench" / "out" / "pycache"
CTXSCOPE = [sys.executable, "-c", "from ctxscope.cli import run; run()"]
# The last commit before the work of issue 14 (the "today" of its replay target).
BEFORE = "8642d46"
DENSE = ["--bash-scale", "0.06", "--file-lines", "100", "--thinking-words", "250", "--seed", "7"]
COMPACTING = [*DENSE, "--compact-every", "300"]
SESSIONS = {"default": ("50", []), "dense50": ("50", DENSE), "dense200": ("200", DENSE),
            "compact50": ("50", COMPACTING), "compact200": ("200", COMPACTING)}
# What issue 14 asks (docs/analyze.md, "Performance").
TARGET_SPEEDUP = 10.0
TARGET_MEMORY = 0.2
TARGET_TIKTOKEN = 2.0
TARGET_FLAT = 1.10
TARGET_REPLAY = 5.0


def ensure_ctxlens() -> Path:
    exe = VENV / "bin" / "ctxlens"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(VENV / "bin" / "pip"), "install", "-q", "ctxlens-cli==0.1.1"], check=True)
    return exe


# Each measured command runs as the grandchild of a small launcher, not as the bench's own child:
# Linux keeps, across exec, the memory high-water mark of the process image it replaces, so a
# child forked from this process (which holds a sink, git archives, JSON) reports at least this
# process's peak RSS as its own (35,432 KiB for every compact200 run, both trees, against 23,2xx
# and 29,2xx by /usr/bin/time). The launcher, a bare interpreter (-S -I: ~8 MB, under any measured
# peak), forks, execs the command, and writes the command's own rusage to the descriptor it is given.
_LAUNCH = ("import os,sys\n"
           "pid=os.fork()\n"
           "if pid==0:\n"
           " os.execvp(sys.argv[2],sys.argv[2:])\n"
           "_,st,ru=os.wait4(pid,0)\n"
           "os.write(int(sys.argv[1]),('%d %r %r'%(ru.ru_maxrss,ru.ru_utime,ru.ru_stime)).encode())\n"
           "sys.exit(os.waitstatus_to_exitcode(st))\n")


def measure(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, int, bytes, float]:
    """Wall seconds, peak RSS in KiB, stdout, CPU seconds (user + system) of one command (see _LAUNCH)."""
    report_r, report_w = os.pipe()
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen([sys.executable, "-S", "-I", "-c", _LAUNCH, str(report_w), *argv], stdout=out,
                                stderr=subprocess.DEVNULL, env=env, pass_fds=(report_w,))
        os.close(report_w)
        proc.wait()
        wall = time.perf_counter() - start
        with os.fdopen(report_r, "rb") as report:
            figures = report.read().split()
        out.seek(0)
        data = out.read()
    if proc.returncode not in (0, 2) or len(figures) != 3:
        raise SystemExit(f"{argv[0]} exited {proc.returncode}")
    return wall, int(figures[0]), data, float(figures[1]) + float(figures[2])


def generate(name: str, work: Path) -> Path:
    target_mb, extra = SESSIONS[name]
    session = work / f"{name}.jsonl"
    subprocess.run([sys.executable, str(GEN), "claude", "--target-mb", target_mb, *extra, "-o", str(session)],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return session


def _env(src: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TIKTOKEN_CACHE_DIR", str(TIKTOKEN))
    # As installed: pip writes every module's bytecode at install time, an editable
    # checkout under PYTHONDONTWRITEBYTECODE compiles all of ctxscope again in every
    # run (~0.13 s of CPU, counted against ctxscope only). Bytecode goes to one
    # folder for every tool, written by the warm-up run (``warm_up``), read after.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    if src is not None:
        env["PYTHONPATH"] = str(src)
    return env


def _best(runs: list[tuple[float, int, float]]) -> dict[str, float]:
    return {"wall_s": round(min(r[0] for r in runs), 3), "cpu_s": round(min(r[2] for r in runs), 3),
            "peak_rss_kib": max(r[1] for r in runs)}


def speed(session: Path, repeat: int, lens: bool = True, src: Path | None = None) -> dict[str, object]:
    """ctxlens, ctxscope chars and ctxscope tiktoken on one session, alternating, best of ``repeat``.

    ``src``: ctxscope's ``src`` to run instead of this checkout's (first on ``PYTHONPATH``).
    """
    env = _env(src)
    tools: dict[str, list[str]] = {}
    if lens:
        tools["ctxlens"] = [str(ensure_ctxlens()), "analyze", "--json", str(session)]
    tools["ctxscope-chars"] = [*CTXSCOPE, "analyze", "--json", "--tokenizer", "chars", str(session)]
    if TIKTOKEN.is_dir() and lens:
        tools["ctxscope-tiktoken"] = [*CTXSCOPE, "analyze", "--json", "--tokenizer", "tiktoken", str(session)]
    runs: dict[str, list[tuple[float, int, float]]] = {name: [] for name in tools}
    warm_up(list(tools.values()), env)
    for _ in range(repeat):
        for name, argv in tools.items():
            wall, rss, _, cpu = measure(argv, env)
            runs[name].append((wall, rss, cpu))
    best = {name: _best(r) for name, r in runs.items()}
    result: dict[str, object] = {"input_bytes": session.stat().st_size, "runs": repeat, "tools": best}
    if lens:
        lens_best, ours = best["ctxlens"], best["ctxscope-chars"]
        result["speedup_wall"] = round(lens_best["wall_s"] / ours["wall_s"], 2)
        result["speedup_cpu"] = round(lens_best["cpu_s"] / ours["cpu_s"], 2)
        result["memory_fraction"] = round(ours["peak_rss_kib"] / lens_best["peak_rss_kib"], 3)
        if "ctxscope-tiktoken" in best:
            result["tiktoken_over_chars_cpu"] = round(best["ctxscope-tiktoken"]["cpu_s"] / ours["cpu_s"], 2)
    return result


def warm_up(commands: list[list[str]], env: dict[str, str]) -> None:
    """One untimed run of each command on a one-line session: its modules' bytecode is written."""
    with tempfile.TemporaryDirectory() as folder:
        tiny = Path(folder) / "warm.jsonl"
        tiny.write_text('{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"w",'
                        '"message":{"role":"user","content":"hi"}}\n')
        for argv in commands:
            subprocess.run([*argv[:-1], str(tiny)], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=False)


def export_before(rev: str) -> Path:
    """``src`` of ``rev`` (``git archive``) in ``bench/out/before-<rev>``: the "today" of a before/after."""
    where = ROOT / "bench" / "out" / f"before-{rev}"
    if not (where / "src" / "ctxscope").is_dir():
        where.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where / "src"


def replay(session: Path, before_rev: str, repeat: int) -> dict[str, object] | None:
    """``ctxscope replay`` of ``session`` into a local OTLP receiver, before and after."""
    try:
        from oteltest.sink import HttpSink
        from oteltest.sink.handler import RequestHandler
    except ImportError:
        print("bench: replay skipped (needs oteltest: pip install oteltest)", file=sys.stderr)
        return None

    class Count(RequestHandler):
        spans = 0

        def handle_logs(self, request, headers):  # type: ignore[no-untyped-def]
            pass

        def handle_metrics(self, request, headers):  # type: ignore[no-untyped-def]
            pass

        def handle_trace(self, request, headers):  # type: ignore[no-untyped-def]
            self.spans += sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)

    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    handler = Count()
    sink = HttpSink(handler, logging.getLogger("bench-sink"), port=port)
    sink.start()
    out: dict[str, object] = {"before": before_rev}
    try:
        # "after-no-span-export": this checkout with the span exporter off (OTEL_TRACES_EXPORTER=none),
        # the metrics still exported: what the span export (the SDK's OTLP encoding) costs, in the same run.
        sides = {"before": export_before(before_rev), "after": ROOT / "src", "after-no-span-export": ROOT / "src"}
        runs: dict[str, list[tuple[float, int, float]]] = {name: [] for name in sides}
        spans: dict[str, int] = {}
        for _ in range(repeat):
            for name, src in sides.items():
                env = _env(src)
                env.update({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
                            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_METRIC_EXPORT_INTERVAL": "60000"})
                if name == "after-no-span-export":
                    env["OTEL_TRACES_EXPORTER"] = "none"
                if not runs[name]:
                    warm_up([[*CTXSCOPE, "replay", "--tokenizer", "chars", str(session)]], env)
                got = handler.spans
                wall, rss, _, cpu = measure([*CTXSCOPE, "replay", "--tokenizer", "chars", str(session)], env)
                time.sleep(0.5)  # the last export's request is handled
                spans[name] = handler.spans - got
                runs[name].append((wall, rss, cpu))
        best = {name: _best(r) for name, r in runs.items()}
        out.update({"tools": best, "spans": spans,
                    "speedup_wall": round(best["before"]["wall_s"] / best["after"]["wall_s"], 2),
                    "speedup_cpu": round(best["before"]["cpu_s"] / best["after"]["cpu_s"], 2)})
    finally:
        sink.stop()
    return out


def compacting(work: Path, repeat: int, before_rev: str) -> dict[str, object]:
    """Peak RSS of ``analyze --tokenizer chars`` on the compacting 50 and 200 MB sessions, and their ratio.

    This checkout and ``before_rev``'s ``src`` on each session, in one run.
    """
    before = export_before(before_rev)
    result: dict[str, object] = {"before": before_rev}
    rss: dict[str, int] = {}
    for name in ("compact50", "compact200"):
        session = generate(name, work)
        for side, src in (("before", before), ("after", None)):
            figures = speed(session, repeat, lens=False, src=src)
            result[f"{name}_{side}"] = figures
            rss[f"{name}_{side}"] = figures["tools"]["ctxscope-chars"]["peak_rss_kib"]  # type: ignore[index]
        session.unlink()
    for side in ("before", "after"):
        result[f"rss_200_over_50_{side}"] = round(rss[f"compact200_{side}"] / rss[f"compact50_{side}"], 3)
    result["rss_200_over_50"] = result["rss_200_over_50_after"]
    return result


def run_all(repeat: int, quick: bool, before_rev: str, replay_only: bool = False,
            compacting_only: bool = False) -> dict[str, object]:
    work = Path(tempfile.mkdtemp(prefix="ctxscope-bench-"))
    result: dict[str, object] = {}
    try:
        if compacting_only:
            result["compacting"] = compacting(work, repeat, before_rev)
            result["pass"] = verdict(result)
            return result
        names = ["dense50"] if quick or replay_only else ["default", "dense50"]
        sessions = {name: generate(name, work) for name in names}
        for name in [] if replay_only else names:
            result[name] = speed(sessions[name], repeat)
        if replay_only:
            result["replay"] = replay(sessions["dense50"], before_rev, repeat)
        elif not quick:
            big = generate("dense200", work)
            result["dense200"] = speed(big, 1, lens=False)
            big.unlink()
            rss50 = result["dense50"]["tools"]["ctxscope-chars"]["peak_rss_kib"]  # type: ignore[index]
            rss200 = result["dense200"]["tools"]["ctxscope-chars"]["peak_rss_kib"]  # type: ignore[index]
            result["rss_200_over_50"] = round(rss200 / rss50, 3)
            result["replay"] = replay(sessions["dense50"], before_rev, repeat)
    finally:
        for path in work.iterdir():
            path.unlink()
        work.rmdir()
    result["pass"] = verdict(result)
    return result


def verdict(result: dict[str, object]) -> dict[str, bool]:
    """Each target of issue 14 that this run measured: met or not (CPU ratios: see the docstring)."""
    out: dict[str, bool] = {}
    for name in ("default", "dense50"):
        figures = result.get(name)
        if isinstance(figures, dict):
            out[f"{name}_speedup"] = figures["speedup_cpu"] >= TARGET_SPEEDUP
            out[f"{name}_memory"] = figures["memory_fraction"] <= TARGET_MEMORY
            if "tiktoken_over_chars_cpu" in figures:
                out[f"{name}_tiktoken"] = figures["tiktoken_over_chars_cpu"] <= TARGET_TIKTOKEN
    if "rss_200_over_50" in result:
        out["flat_memory"] = result["rss_200_over_50"] <= TARGET_FLAT  # type: ignore[operator]
    compacted = result.get("compacting")
    if isinstance(compacted, dict):
        out["compacting_flat_memory"] = compacted["rss_200_over_50"] <= TARGET_FLAT
    replayed = result.get("replay")
    if isinstance(replayed, dict):
        # A faster replay that delivers fewer spans is not faster: every span must arrive.
        spans = replayed.get("spans", {})
        out["replay"] = (replayed["speedup_cpu"] >= TARGET_REPLAY
                         and spans.get("after") == spans.get("before"))
        out["replay_every_span"] = spans.get("after") == spans.get("before")
    return out


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
            _, _, lens_out, _ = measure([str(ctxlens), "analyze", "--json", str(path)])
            _, _, ours_out, _ = measure([*CTXSCOPE, "analyze", "--json", "--no-subagents", "--tokenizer", "chars",
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
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tool; the best is kept")
    parser.add_argument("--quick", action="store_true", help="dense50 only: no default session, 200 MB, replay")
    parser.add_argument("--before", default=BEFORE, metavar="REV", help=f"replay's before side (default {BEFORE})")
    parser.add_argument("--replay-only", action="store_true", help="only replay's figure (dense50, before and after)")
    parser.add_argument("--compare", action="store_true", help="compare findings on ../shared/corpus too")
    parser.add_argument("--compacting", action="store_true",
                        help="only the compacting 50 and 200 MB sessions' peak RSS (ctxscope chars)")
    # Known options only: bench/run.py calls main() with its own argv (the bench names).
    args, _ = parser.parse_known_args(argv)
    if not GEN.exists():
        print(f"bench: {GEN} is not here (needs ../shared)", file=sys.stderr)
        return 1
    result = run_all(args.repeat, args.quick, args.before, args.replay_only, args.compacting)
    print(json.dumps(result, indent=2))
    if args.compare:
        print(json.dumps(compare(), indent=1))
    return 0 if all(result["pass"].values()) else 2  # type: ignore[union-attr]


if __name__ == "__main__":
    sys.exit(main())
