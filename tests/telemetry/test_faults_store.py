"""The local store under faults (issue 17, points 3, 6, 7): kills mid-rotation, oversize records, leftovers."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ctxscope.cli import main
from ctxscope.telemetry.store import LocalStore, RecordTooLarge

CAP = 64 * 1024  # a small per-file cap so that a writer rotates every ~60 records


def test_a_record_over_half_the_cap_is_refused_and_the_file_is_kept(tmp_path, caplog):
    """Cap 4,096: a 2,100-byte record is refused (the older 3 records stay byte for byte), one warning."""
    store = LocalStore(tmp_path, max_file_bytes=4096)
    for n in range(3):
        store.append("s1", {"session": "s1", "n": n})
    before = store.path_for("s1").read_bytes()
    with pytest.raises(RecordTooLarge, match="over half the per-file cap"):
        store.append("s1", {"session": "s1", "pad": "x" * 2100})
    assert store.path_for("s1").read_bytes() == before
    assert [r["n"] for r in store.read("s1")] == [0, 1, 2]


def test_the_default_cap_keeps_older_records_when_a_2_mb_record_comes(tmp_path, caplog, monkeypatch):
    """The reported case: 4 MB cap, a record over 2 MB (was: the file emptied to 0 bytes). Refused alone, 1 warning."""
    import ctxscope.telemetry.store as store_module

    store = LocalStore(tmp_path)
    store.append("s1", {"session": "s1", "n": 0})
    before = store.path_for("s1").read_bytes()
    # The tracker's writer path (record), with a record as large as a 2,000-part session would make.
    monkeypatch.setattr(store_module, "record_from_observation",
                        lambda obs: {"session": "s1", "pad": "x" * (2 * 1024 * 1024 + 10)})
    with caplog.at_level("DEBUG", logger="ctxscope.telemetry.store"):
        for _ in range(3):
            store.record(_Obs("s1"))  # type: ignore[arg-type]
    assert store.path_for("s1").read_bytes() == before
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "over half the per-file cap" in warnings[0].getMessage()


class _Obs:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id


def test_temporaries_of_a_dead_writer_are_removed_on_open_and_never_listed(tmp_path):
    """A .tmp-<pid>-*.jsonl of a dead pid: not listed; gone at the next open; a live writer's is kept."""
    store = LocalStore(tmp_path)
    store.append("s1", {"session": "s1", "ts": 1})
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(dead.stdout)
    leftover = store.sessions_dir / f".tmp-{dead_pid}-abc.jsonl"
    leftover.write_bytes(store.path_for("s1").read_bytes())  # a whole copy, as a rotation writes it
    live = store.sessions_dir / f".tmp-{os.getpid()}-def.jsonl"
    live.write_bytes(b"")
    assert [s.session_id for s in store.sessions()] == ["s1"]
    LocalStore(tmp_path).append("s2", {"session": "s2", "ts": 2})
    assert not leftover.exists()
    assert live.exists()  # this process is alive: its rotation may be under way


WRITER = textwrap.dedent("""
    import itertools, os, sys
    from ctxscope.telemetry.store import LocalStore
    store = LocalStore(sys.argv[1], max_file_bytes=int(sys.argv[2]))
    start = int(sys.argv[3])
    print("ready", flush=True)
    for n in itertools.count(start):
        session = f"agent-{n % 3}"
        store.append(session, {"v": 1, "ts": n, "session": session, "provider": "openai",
                               "request_model": "gpt-4o", "usage": {"reported_input": n},
                               "annotation": {"basis": "chars/4"}, "parts": {"prompts": n},
                               "apportioned": {"prompts": n}, "calibrated": {"prompts": n},
                               "pad": "p" * 900})
""")


def test_50_sigkills_during_rotation_leave_each_session_listed_once_and_every_file_parsing(tmp_path):
    """A writer appending ~1 KB records under a 64 KB cap (a rotation every ~30 records a session), killed with
    SIGKILL 50 times at random moments: afterwards `context --list` lists the 3 sessions once each, every file
    parses, no dead writer's temporary is left once a writer opened the store, and record numbers only grow."""
    root = tmp_path / "data"
    rng = random.Random(17)
    start = 0
    leftovers_seen = 0
    for _ in range(50):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(root), str(CAP), str(start)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.01, 0.07))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
        sessions_dir = root / "sessions"
        leftovers_seen += len(list(sessions_dir.glob(".tmp-*")))
        # While leftovers lie there, the list still names each session once.
        listed = [s.session_id for s in LocalStore(root).sessions()]
        assert sorted(listed) == sorted(set(listed)), listed
        start += 100_000
    # A writer opens the store: the dead writers' temporaries go.
    LocalStore(root, max_file_bytes=CAP).append("agent-0", {"v": 1, "ts": 10**9, "session": "agent-0"})
    assert list((root / "sessions").glob(".tmp-*")) == []
    code = main(["context", "--data-dir", str(root), "--list", "--json"])
    assert code == 0
    for session in ("agent-0", "agent-1", "agent-2"):
        records = LocalStore(root).read(session)  # raises on any line that does not parse
        stamps = [r["ts"] for r in records]
        assert stamps == sorted(stamps) and len(stamps) == len(set(stamps))
        # The cap is on the file's bytes (compact JSON lines), not on a re-serialisation with spaces.
        assert LocalStore(root).path_for(session).stat().st_size <= CAP
    # Leftovers seen is informative: kills that landed in a rotation (3 in 40 on main).
    print(f"temporaries left by the 50 kills before cleanup: {leftovers_seen}")


def test_a_rotation_leftover_is_not_listed_by_the_cli(tmp_path, capsys):
    """`context --list`: three sessions, each once, beside a dead writer's full copy (was: listed twice)."""
    store = LocalStore(tmp_path)
    for n in range(3):
        store.append(f"agent-{n}", {"v": 1, "ts": n, "session": f"agent-{n}"})
    # What a writer killed between writing its temporary and renaming it leaves: a full copy, dead pid.
    (store.sessions_dir / ".tmp-999999999-x.jsonl").write_bytes(store.path_for("agent-1").read_bytes())
    assert main(["context", "--data-dir", str(tmp_path), "--list", "--json"]) == 0
    listed = [s["session_id"] for s in json.loads(capsys.readouterr().out)]
    assert sorted(listed) == ["agent-0", "agent-1", "agent-2"]


def test_a_writer_stopped_in_a_rotation_leaves_the_file_as_it_was_within_the_cap(tmp_path, monkeypatch):
    """The record that overflows the cap goes in with the rotation's one atomic replace: stopped before
    the replace (as a SIGKILL there would), the file is the one before, within the cap, no temporary left."""
    store = LocalStore(tmp_path, max_file_bytes=2_000)
    for n in range(19):  # 19 records of 100 bytes: 1,900 bytes, under the cap
        record = {"session": "s1", "n": n, "pad": ""}
        record["pad"] = "p" * (100 - len(json.dumps(record, separators=(",", ":"))) - 1)
        store.append("s1", record)
    before = store.path_for("s1").read_bytes()
    assert len(before) == 1_900
    # {"session":"s1","n":19,"pad":""} is 32 bytes: with 200 of pad and a newline, 233.
    big = {"session": "s1", "n": 19, "pad": "p" * 200}

    def stopped(*args: object) -> None:
        raise KeyboardInterrupt  # the process stops here, before the new file replaces the old

    monkeypatch.setattr(os, "replace", stopped)  # the store's os.replace (os is one module)
    with pytest.raises(KeyboardInterrupt):
        store.append("s1", big)  # 1,900 + 233 > 2,000: a rotation
    assert store.path_for("s1").read_bytes() == before
    assert not list(store.sessions_dir.glob(".tmp-*"))
    monkeypatch.undo()
    store.append("s1", big)
    # The newest records up to half the cap, the new one among them: 233 + 7 x 100 = 933 (one more: 1,033).
    assert [r["n"] for r in store.read("s1")] == list(range(12, 20))
    assert store.path_for("s1").stat().st_size == 933
