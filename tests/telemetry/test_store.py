"""The local store: owner-only files, counts only, the 4 MB cap and the 64-session LRU."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from ctxscope.errors import InputError
from ctxscope.core.ledger import SessionLedger
from ctxscope.core.observation import Observation, Usage
from ctxscope.schema import Category, Item
from ctxscope.telemetry.store import MAX_SESSIONS, LocalStore, StoreRefused, data_dir
from ctxscope.core.tokens import CharsCounter

SECRET = "SENTINEL-store-7f3a"


def observation(session: str = "s1", *, reported: int | None = 60) -> Observation:
    """A real ledger snapshot of a small request: system 40 chars, a tool result 80 chars."""
    ledger = SessionLedger(session, counter=CharsCounter())
    items = [
        Item(id="sys", category=Category.SYSTEM, part="system", chars=40, text=SECRET + "x" * 21),
        Item(id="call_1", category=Category.RESULTS, part="results/read_file", chars=80,
             text=SECRET + "y" * 61, label="read_file"),
    ]
    snapshot = ledger.observe(items, model="gpt-4o", window_tokens=1000)
    snapshot = ledger.report(snapshot, reported)
    return Observation(session_id=session, provider="openai", request_model="gpt-4o",
                       response_model="gpt-4o-2024-08-06", snapshot=snapshot,
                       usage=Usage(input_tokens=reported, output_tokens=7, reported_input=reported),
                       timestamp_ns=1_000)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_data_dir_follows_the_environment(tmp_path):
    """CTXSCOPE_DATA_DIR wins, then XDG_DATA_HOME/ctxscope, then ~/.local/share/ctxscope."""
    assert data_dir({"CTXSCOPE_DATA_DIR": str(tmp_path / "d"), "XDG_DATA_HOME": "/x"}) == tmp_path / "d"
    assert data_dir({"XDG_DATA_HOME": "/x"}) == Path("/x/ctxscope")
    assert data_dir({}) == Path.home() / ".local/share/ctxscope"


def test_record_holds_counts_and_paths_not_text(tmp_path):
    """A call's record: parts 10 and 20 tokens (chars/4), calibrated with unattributed 30, no text."""
    store = LocalStore(tmp_path)
    store.record(observation())
    path = store.path_for("s1")
    raw = path.read_text()
    assert SECRET not in raw and "read_file\"" not in raw.replace("results/read_file", "")
    (rec,) = store.read("s1")
    assert rec["parts"] == {"system": 10, "results/read_file": 20}
    assert rec["chars"] == {"system": 40, "results/read_file": 80}
    assert rec["calibrated"] == {"system": 10, "results": 20, "unattributed": 30}
    assert rec["apportioned"] == {"system": 10, "results/read_file": 20, "unattributed": 30}
    assert rec["annotation"]["reported_tokens"] == 60 and "changes" not in rec["annotation"]
    assert rec["usage"]["output_tokens"] == 7 and rec["session"] == "s1"


def test_files_are_owner_only_even_with_a_permissive_umask(tmp_path):
    """umask 000: the directories are still 0700 and the session file 0600."""
    old = os.umask(0)
    try:
        store = LocalStore(tmp_path / "data")
        store.append("s1", {"session": "s1", "ts": 1})
        store.save_calibration("gpt-4o", {"mode": "offset", "offset": 12})
    finally:
        os.umask(old)
    assert mode(tmp_path / "data") == 0o700
    assert mode(store.sessions_dir) == 0o700
    assert mode(store.path_for("s1")) == 0o600
    assert mode(store.calibration_dir) == 0o700
    assert mode(next(store.calibration_dir.glob("*.json"))) == 0o600


def test_an_existing_data_dir_keeps_its_mode_and_the_store_dirs_are_0700(tmp_path):
    """A user's 0755 project folder stays 0755 (colleagues still read it); sessions/ inside is 0700."""
    root = tmp_path / "project"
    root.mkdir()
    os.chmod(root, 0o755)
    store = LocalStore(root)
    store.append("s1", {"session": "s1"})
    assert mode(root) == 0o755
    assert mode(store.sessions_dir) == 0o700


def test_a_shared_sticky_dir_keeps_its_sticky_bit(tmp_path):
    """A 1777 data dir of the user's own (as /tmp is root's) keeps 1777; the store lives in a 0700 subdir."""
    root = tmp_path / "shared"
    root.mkdir()
    os.chmod(root, 0o1777)
    store = LocalStore(root)
    store.append("s1", {"session": "s1"})
    assert stat.S_IMODE(root.stat().st_mode) == 0o1777
    assert mode(store.sessions_dir) == 0o700


def _others_dir(tmp_path: Path) -> Path:
    """A directory others can write that is not this user's (as root: one given to nobody)."""
    if os.geteuid() == 0:
        path = tmp_path / "theirs"
        path.mkdir()
        os.chmod(path, 0o1777)
        os.chown(path, 65534, 65534)
        return path
    tmp = Path("/tmp")
    st = tmp.stat()
    if st.st_uid == os.geteuid() or not st.st_mode & 0o002:
        pytest.skip("no directory writable by others and owned by someone else here")
    return tmp


def test_a_dir_others_can_write_and_not_ours_is_refused_once(tmp_path, caplog):
    """CTXSCOPE_DATA_DIR naming someone else's world-writable dir: nothing written, its mode kept, one warning."""
    root = _others_dir(tmp_path)
    before = stat.S_IMODE(root.stat().st_mode)
    store = LocalStore(root)
    with pytest.raises(StoreRefused, match="writable by others and not yours"):
        store.append("s1", {"session": "s1"})
    with caplog.at_level("DEBUG", logger="ctxscope.telemetry.store"):
        store.record(observation("s1"))
        store.record(observation("s1"))
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "writable by others" in warnings[0].getMessage()
    assert warnings[0].exc_info is None
    assert stat.S_IMODE(root.stat().st_mode) == before
    assert not (root / "sessions").exists()


def test_a_sessions_entry_that_is_not_our_directory_is_refused(tmp_path):
    """sessions/ as a symlink (planted to redirect writes) is refused, not followed."""
    root = tmp_path / "data"
    root.mkdir()
    (tmp_path / "elsewhere").mkdir()
    (root / "sessions").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(StoreRefused, match="not a directory of yours"):
        LocalStore(root).append("s1", {"session": "s1"})
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_cap_drops_the_oldest_half(tmp_path):
    """Cap 10,000 bytes, records of 100 bytes: past the cap only the newest <= 5,000 bytes stay."""
    store = LocalStore(tmp_path, max_file_bytes=10_000)
    for n in range(101):
        record = {"session": "s1", "n": n, "pad": ""}
        size = len(json.dumps(record, separators=(",", ":"))) + 1
        record["pad"] = "p" * (100 - size)
        store.append("s1", record)
    # 100 records fill 10,000 bytes; the 101st makes 10,100 > cap: keep the newest 50.
    records = store.read("s1")
    assert [r["n"] for r in records] == list(range(51, 101))
    assert store.path_for("s1").stat().st_size == 5_000
    assert mode(store.path_for("s1")) == 0o600
    assert not list(store.sessions_dir.glob(".tmp-*"))


def test_at_most_64_sessions_least_recently_written_removed(tmp_path):
    """The 65th session removes the one written longest ago (s0 was rewritten, so s1 goes)."""
    store = LocalStore(tmp_path)
    for n in range(MAX_SESSIONS):
        path = store.append(f"s{n}", {"session": f"s{n}", "ts": n})
        os.utime(path, ns=(n * 10**9, n * 10**9))
    path = store.append("s0", {"session": "s0", "ts": 100})
    os.utime(path, ns=(100 * 10**9, 100 * 10**9))
    store.append("s-new", {"session": "s-new", "ts": 101})
    ids = {s.session_id for s in store.sessions()}
    assert len(ids) == MAX_SESSIONS
    assert "s1" not in ids and "s0" in ids and "s-new" in ids


def test_sessions_list_most_recent_first(tmp_path):
    """sessions(): the latest record's ts orders them; model and provider from it."""
    store = LocalStore(tmp_path)
    store.append("a", {"session": "a", "ts": 5, "request_model": "m1", "provider": "openai"})
    store.append("b/with:odd chars", {"session": "b/with:odd chars", "ts": 9, "request_model": "m2"})
    store.append("a", {"session": "a", "ts": 7, "response_model": "m1-x", "provider": "openai"})
    listed = store.sessions()
    assert [(s.session_id, s.last_ns, s.model) for s in listed] == [("b/with:odd chars", 9, "m2"),
                                                                     ("a", 7, "m1-x")]


def test_damaged_record_names_file_and_line(tmp_path):
    """A line that is not JSON: InputError with path:line."""
    store = LocalStore(tmp_path)
    path = store.append("s1", {"session": "s1"})
    with path.open("a") as f:
        f.write("{not json\n")
    with pytest.raises(InputError, match=rf"{path}:2: not a JSON record .*delete it"):
        store.read("s1")


def test_calibration_sidecar_round_trip(tmp_path):
    """save_calibration then load_calibration gives the data back; another model gives None."""
    store = LocalStore(tmp_path)
    store.save_calibration("claude-sonnet-4", {"mode": "ratio", "ratio": 1.12, "pairs": 5})
    assert store.load_calibration("claude-sonnet-4") == {"model": "claude-sonnet-4", "mode": "ratio",
                                                         "ratio": 1.12, "pairs": 5}
    assert store.load_calibration("gpt-4o") is None


def test_record_never_raises(tmp_path, caplog):
    """A store that cannot write (a file where its directory should be) logs and returns."""
    (tmp_path / "blocked").write_text("")
    store = LocalStore(tmp_path / "blocked")
    store.record(observation())
    assert "could not write the local record" in caplog.text


def test_submit_writes_in_the_background_and_flush_waits(tmp_path):
    """The tracker's listener queues: 20 submitted observations are all on disk after flush(), in order."""
    store = LocalStore(tmp_path)
    for n in range(20):
        obs = observation()
        obs.timestamp_ns = n
        store.submit(obs)
    assert store.flush(10.0)
    assert [r["ts"] for r in store.read("s1")] == list(range(20))


def test_a_record_cut_off_mid_write_is_not_read_and_the_next_append_drops_it(tmp_path, caplog):
    """A SIGKILL between two pages of one write leaves a record without its end: readers skip it (a write in
    progress looks the same), the next writer cuts it away (once, a warning) and every line parses after."""
    store = LocalStore(tmp_path)
    path = store.append("s1", {"session": "s1", "ts": 1})
    store.append("s1", {"session": "s1", "ts": 2})
    whole = path.read_bytes()
    with path.open("ab") as f:
        f.write(b'{"session":"s1","ts":3,"pa')  # 26 bytes of a record, no newline
    assert [r["ts"] for r in store.read("s1")] == [1, 2]
    with caplog.at_level(logging.WARNING, logger="ctxscope.telemetry.store"):
        store.append("s1", {"session": "s1", "ts": 4})
    assert path.read_bytes() == whole + b'{"session":"s1","ts":4}\n'
    assert [r["ts"] for r in store.read("s1")] == [1, 2, 4]
    assert [r.getMessage() for r in caplog.records] == [
        f"ctxscope: {path}: dropped 26 bytes of a record its writer did not finish (stopped mid-write)"]


def test_a_whole_record_without_its_newline_is_kept(tmp_path, caplog):
    """Stopped just before the newline (or written so by hand): the record is whole, read and kept."""
    store = LocalStore(tmp_path)
    path = store.append("s1", {"session": "s1", "ts": 1})
    with path.open("ab") as f:
        f.write(b'{"session":"s1","ts":2}')
    assert [r["ts"] for r in store.read("s1")] == [1, 2]
    with caplog.at_level(logging.WARNING, logger="ctxscope.telemetry.store"):
        store.append("s1", {"session": "s1", "ts": 3})
    assert [r["ts"] for r in store.read("s1")] == [1, 2, 3]
    assert path.read_bytes().count(b"\n") == 3 and caplog.records == []
