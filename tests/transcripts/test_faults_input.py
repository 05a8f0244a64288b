"""Bad input to the real CLI (issue 17, points 2 and 8): one line naming file and line, no traceback, no hang.

Each case runs the installed ``ctxscope`` command as a subprocess with a
timeout, so a hang or a memory blow-up fails the test instead of the run.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ctxscope.telemetry.store import LocalStore

CTXSCOPE = str(Path(sys.executable).with_name("ctxscope"))
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hello"}]}
# 512 MB of address space: a command that reads /dev/zero whole dies (MemoryError) instead of swapping.
MEMORY_CAP = 512 * 1024 * 1024


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def cli(*args: str, timeout: float = 20, process: bool = False) -> subprocess.CompletedProcess[str]:
    """The CLI: in this process (``main``), or as the installed command when it could hang or blow up."""
    if not process:
        return _in_process(list(args))
    env = {**os.environ, "CTXSCOPE_DATA_DIR": os.environ.get("CTXSCOPE_DATA_DIR", "/nonexistent-ctxscope")}
    return subprocess.run([CTXSCOPE, *args], capture_output=True, text=True, timeout=timeout, env=env,
                          preexec_fn=_cap_memory)


def _in_process(argv: list[str]) -> subprocess.CompletedProcess[str]:
    import contextlib
    import io
    import logging

    from ctxscope.cli import main

    out, err = io.StringIO(), io.StringIO()
    handler = logging.StreamHandler(err)
    handler.setFormatter(logging.Formatter("ctxscope: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except BaseException:  # noqa: BLE001 - a traceback is what the test looks for
                import traceback

                traceback.print_exc(file=err)
                code = -1
    finally:
        root.removeHandler(handler)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def one_line_error(done: subprocess.CompletedProcess[str], expected: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert expected in lines[0], lines[0]


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def nested(depth: int) -> str:
    """A recording whose one message content nests ``depth`` arrays deep."""
    return json.dumps({"request": {"model": "gpt-4o", "messages": [
        {"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "a", "content": "["}]}})[:-4] + \
        "[" * depth + "]" * depth + "}]}}"


@pytest.mark.parametrize("depth", [1200, 100_000])
def test_inspect_deep_nesting_is_one_line(tmp_path, depth):
    """1,200 and 5,000 levels (past Python's recursion limit in the parser): refused at MAX_DEPTH, file named."""
    path = write(tmp_path, "deep.json", json.dumps({"request": CHAT})[:-1] + ', "x": ' + "[" * depth + "]" * depth
                 + "}")
    one_line_error(cli("inspect", path), f"{path}: JSON (expected a request body or a recording) nested too "
                                         "deeply (more than 200 levels)")


def test_inspect_nesting_below_the_parser_limit_but_deep_for_items_is_one_line(tmp_path):
    """900 levels parse in Python's json but overflowed item extraction: refused by the nesting limit."""
    # 450 x {"properties": {"a": ...}} = 900 levels of tool schema.
    schema = '{"properties": {"a": ' * 450 + "{}" + "}}" * 450
    text = ('{"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", '
            '"function": {"name": "f", "parameters": ' + schema + "}}]}")
    path = write(tmp_path, "deep-tools.json", text)
    one_line_error(cli("inspect", path), f"{path}: JSON (expected a request body or a recording) nested too deeply")


def test_inspect_nesting_at_the_limit_is_counted(tmp_path):
    """199 levels inside the body (200 with the body itself) are read and counted: exit 0."""
    value: object = {}
    for _ in range(197):
        value = {"a": value}
    body = {**CHAT, "metadata": value}
    path = write(tmp_path, "ok.json", json.dumps(body))
    done = cli("inspect", path, "--tokenizer", "chars", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["annotation"]["estimated_tokens"] > 0


@pytest.mark.parametrize("usage, expected", [
    ('{"prompt_tokens": Infinity}', ":3: Infinity is not a finite number"),
    ('{"prompt_tokens": NaN}', ":3: NaN is not a finite number"),
    ('{"prompt_tokens": -Infinity}', ":3: -Infinity is not a finite number"),
    ('{"prompt_tokens": 1e999}', ":3: 1e999 is not a finite number"),
    ('{"prompt_tokens": -5}', ":3: usage.prompt_tokens is negative (-5); token counts are 0 or more"),
    ('{"prompt_tokens": 12.5}', ":3: usage.prompt_tokens is not a whole number (12.5)"),
    ('{"prompt_tokens": "12"}', ":3: usage.prompt_tokens is not a number (str)"),
])
def test_inspect_bad_numbers_in_usage_are_one_line(tmp_path, usage, expected):
    """Non-finite, negative, fractional and string counts in a recording's usage: one line with file (and line)."""
    text = '{"request": ' + json.dumps(CHAT) + ',\n "response": {"id": "r",\n  "usage": ' + usage + "}}\n"
    path = write(tmp_path, "rec.json", text)
    one_line_error(cli("inspect", path), path + expected)


def test_inspect_bad_number_in_a_jsonl_line_names_that_line(tmp_path):
    """FILE:LINE of a JSONL file: the error names the line picked."""
    good = json.dumps({"request": CHAT, "response": {"usage": {"prompt_tokens": 9}}})
    bad = json.dumps({"request": CHAT, "response": {"usage": {"prompt_tokens": -1}}})
    path = write(tmp_path, "recs.jsonl", good + "\n" + bad + "\n")
    one_line_error(cli("inspect", path + ":2"), f"{path}:2: usage.prompt_tokens is negative (-1)")
    assert cli("inspect", path + ":1", "--tokenizer", "chars").returncode == 0


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_inspect_refuses_a_device_without_reading_it(device):
    """/dev/zero and /dev/urandom were read whole until memory ran out: refused at once."""
    one_line_error(cli("inspect", device, timeout=10, process=True),
                   f"{device}: is a character device, not a regular file")


def test_inspect_refuses_a_fifo_without_blocking(tmp_path):
    """A FIFO with no writer would block open() for ever: refused before opening it."""
    fifo = tmp_path / "body.json"
    os.mkfifo(fifo)
    one_line_error(cli("inspect", str(fifo), timeout=10, process=True), f"{fifo}: is a FIFO, not a regular file")


def test_inspect_refuses_a_symlink_to_a_device(tmp_path):
    """A symlink to /dev/zero named like a recording: its target is what counts."""
    link = tmp_path / "rec.json"
    link.symlink_to("/dev/zero")
    one_line_error(cli("inspect", str(link), timeout=10, process=True), f"{link}: is a character device")


def test_inspect_size_limit_and_the_option_that_raises_it(tmp_path):
    """A 1.5 MB body: over --max-input-mb 1 (refused, unread), within --max-input-mb 2 (counted)."""
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "a" * 1_572_864}]}
    path = write(tmp_path, "big.json", json.dumps(body))
    one_line_error(cli("inspect", path, "--max-input-mb", "1"),
                   f"{path}: 1.5 MB is over the 1 MB input limit; raise it with --max-input-mb")
    done = cli("inspect", path, "--max-input-mb", "2", "--tokenizer", "chars", "--json")
    assert done.returncode == 0, done.stderr
    # 1,572,864 chars / 4 = 393,216 prompt tokens.
    assert json.loads(done.stdout)["annotation"]["categories"]["prompts"] == 393_216


def test_inspect_max_input_mb_must_be_positive(tmp_path):
    path = write(tmp_path, "b.json", json.dumps(CHAT))
    one_line_error(cli("inspect", path, "--max-input-mb", "0"), "--max-input-mb must be a positive number, got 0")
    one_line_error(cli("inspect", path, "--max-input-mb", "nan"), "--max-input-mb must be a positive number")


# ---------------------------------------------------------------------------
# context: the store's folder holds what the store never wrote
# ---------------------------------------------------------------------------

def _store_with_one_session(tmp_path: Path) -> LocalStore:
    store = LocalStore(tmp_path / "data")
    store.append("agent-1", {"v": 1, "ts": 5, "session": "agent-1", "provider": "openai",
                             "request_model": "gpt-4o", "usage": {"reported_input": 10},
                             "annotation": {"basis": "chars/4"}, "parts": {"prompts": 10},
                             "apportioned": {"prompts": 10}, "calibrated": {"prompts": 10}})
    return store


def context(store: LocalStore, *args: str, timeout: float = 20,
            process: bool = False) -> subprocess.CompletedProcess[str]:
    return cli("context", "--data-dir", str(store.root), *args, timeout=timeout, process=process)


@pytest.mark.parametrize("kind", ["fifo", "zero-link"])
def test_context_skips_special_files_without_hanging(tmp_path, kind):
    """A FIFO, or a symlink to /dev/zero, named *.jsonl in sessions/: listed neither, read never, one warning."""
    store = _store_with_one_session(tmp_path)
    odd = store.sessions_dir / "odd-0000000000000000.jsonl"
    if kind == "fifo":
        os.mkfifo(odd)
    else:
        odd.symlink_to("/dev/zero")
    done = context(store, "--list", "--json", timeout=10, process=True)
    assert done.returncode == 0, done.stderr
    assert [s["session_id"] for s in json.loads(done.stdout)] == ["agent-1"]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(f" {odd}: not a regular file; skipped"), done.stderr
    done = context(store, "--json", timeout=10, process=True)
    assert done.returncode == 0 and json.loads(done.stdout)["session_id"] == "agent-1"


def test_context_refuses_a_session_file_replaced_by_a_device_link(tmp_path):
    """The session's own file swapped for a symlink to /dev/zero: refused at once, not read."""
    store = _store_with_one_session(tmp_path)
    path = store.path_for("agent-1")
    path.unlink()
    path.symlink_to("/dev/zero")
    # Picked by id: the list skips it, so name the session.
    done = context(store, "--session", "agent-1", timeout=10, process=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize("line, expected", [
    ('{"v":1,"session":"agent-1","usage":{"reported_input":NaN}}', ":2: not a JSON record (NaN is not a finite number"),
    ('{"v":1,"session":"agent-1","parts":' + "[" * 300 + "]" * 300 + "}",
     ":2: not a JSON record (JSON nested too deeply"),
    ('{"v":1,"session":"agent-1","parts":{"prompts":"many"}}', ":2: not a record as the local store writes it"),
    ('[1, 2]', ":2: not a JSON record (not an object)"),
])
def test_context_damaged_records_are_one_line_with_file_and_line(tmp_path, line, expected):
    """A store file with a bad second record: exit 1, one line naming file:2."""
    store = _store_with_one_session(tmp_path)
    path = store.path_for("agent-1")
    with path.open("a") as handle:
        handle.write(line + "\n")
    done = context(store, "--session", "agent-1", "--json")
    one_line_error(done, f"{path}{expected}")


@pytest.mark.parametrize("command", [["analyze"], ["diff", "{p}"], ["replay"]])
def test_transcript_commands_refuse_a_fifo_without_blocking(tmp_path, command):
    """analyze, diff and replay on a FIFO named *.jsonl: refused unread (was: blocked for ever in open)."""
    fifo = tmp_path / "session.jsonl"
    os.mkfifo(fifo)
    args = [a.format(p=fifo) for a in command]
    one_line_error(cli(args[0], str(fifo), *args[1:], timeout=10, process=True),
                   f"{fifo}: is a FIFO, not a regular file; not read")
