"""What `ctxscope analyze` loads to start: its own command's modules, not the other seven's (issue 14)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import DATA

ROOT = Path(__file__).resolve().parents[2]
MAIN = DATA / "transcripts" / "claude_4c2ddfdc.jsonl"

# Modules analyze has no use for, each a measurable share of a short run's start-up:
# the other commands' (the local store, the watcher, fidelity), package metadata
# (email, zipfile, csv: ~50 ms CPU) and statistics (fractions: ~15 ms); the request-body
# side (the wire formats' registry, the session keys, the items of a body, the request
# framing models: a transcript reads Anthropic's usage and Claude's proxy encoding alone)
# shutil (argparse's formatters import it for the terminal's width), and the compact BPE table
# with its loader (chars counts without an encoding).
NOT_FOR_ANALYZE = ("ctxscope.telemetry.store", "ctxscope.watch", "ctxscope.core.fidelity",
                   "ctxscope.report.context", "importlib.metadata", "statistics", "opentelemetry",
                   "ctxscope.core.apis._registry", "ctxscope.core.apis.anthropic_messages",
                   "ctxscope.core.conversation", "ctxscope.core.items", "ctxscope.core.framing.request",
                   "ctxscope.core.framing.incremental", "shutil", "ctxscope.core.bpe",
                   "ctxscope.core.encoding_load")


def _modules_after(argv: list[str]) -> tuple[int, str, set[str]]:
    code = ("import io, json, sys, contextlib\n"
            "from ctxscope.cli import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            f"    code = main({argv!r})\n"
            "print(json.dumps([code, out.getvalue(), sorted(sys.modules)]))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    exit_code, out, modules = json.loads(done.stdout.splitlines()[-1])
    return exit_code, out, set(modules)


def test_analyze_imports_only_what_it_uses():
    """A whole analyze of a 7-call session, its JSON printed, without any module of NOT_FOR_ANALYZE."""
    code, out, modules = _modules_after(["analyze", "--json", "--tokenizer", "chars", str(MAIN)])
    assert code == 0
    assert json.loads(out)["files"][0]["sessions"][0]["calls"] == 7  # it did the work
    loaded = sorted(m for m in modules if m.split(".")[0] in ("ctxscope", "importlib", "statistics", "opentelemetry",
                                                              "shutil")
                    and any(m == name or m.startswith(name + ".") for name in NOT_FOR_ANALYZE))
    assert loaded == []


def test_help_still_lists_every_command():
    """Without a command first (--help), every command is registered, as before."""
    done = subprocess.run([sys.executable, "-c", "from ctxscope.cli import run; run()", "--help"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    listed = done.stdout.split("COMMAND", 1)[1]
    for name in ("inspect", "fidelity", "analyze", "report", "diff", "context", "replay", "watch"):
        assert f"    {name}" in listed


def test_version_is_the_installed_one():
    """--version prints the package metadata's version (looked up only then), on stdout, exit 0."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        expected = version("ctxscope")
    except PackageNotFoundError:
        expected = "0+unknown"
    done = subprocess.run([sys.executable, "-c", "from ctxscope.cli import run; run()", "--version"],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert done.returncode == 0
    assert done.stdout == f"ctxscope {expected}\n"


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from ctxscope.cli import run; run()", *argv],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))


def test_the_command_writes_everything_before_it_ends(tmp_path):
    """`ctxscope analyze` as a command: stdout, a -o file, stderr and the exit code are all there
    (a 7-call session; then a file without calls: exit 1 and its line)."""
    done = _run("analyze", "--json", "--tokenizer", "chars", str(MAIN))
    assert done.returncode == 0
    assert json.loads(done.stdout)["files"][0]["sessions"][0]["calls"] == 7
    report = tmp_path / "report.json"
    done = _run("analyze", "--json", "--tokenizer", "chars", "-o", str(report), str(MAIN))
    assert (done.returncode, done.stdout) == (0, "")
    assert json.loads(report.read_text(encoding="utf-8"))["files"][0]["sessions"][0]["calls"] == 7
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"type": "summary", "summary": "nothing"}\n', encoding="utf-8")
    done = _run("analyze", "--tokenizer", "chars", str(empty))
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == f"ctxscope: no usable calls in {empty}"
