"""ScratchFile: bytes appended to an unnamed file, read back by offset."""

from __future__ import annotations

import pickle

import pytest

from ctxscope._scratch import ScratchFile


def test_bytes_come_back_from_where_they_were_appended():
    """b"abc" at 0 and b"defg" at 3: 3 bytes from 2 are b"cde"; 4 bytes from 5, where 2 are, raise."""
    scratch = ScratchFile()
    assert scratch.append(b"abc") == 0 and scratch.append(bytearray(b"defg")) == 3 and scratch.size == 7
    assert scratch.read(2, 3) == b"cde" and scratch.read(0, 0) == b""
    with pytest.raises(OSError):
        scratch.read(5, 4)


def test_a_copy_is_a_file_of_its_own_with_the_same_bytes():
    """A pickled copy reads b"abc" after the original is closed, and its appends are its own."""
    scratch = ScratchFile()
    scratch.append(b"abc")
    copied = pickle.loads(pickle.dumps(scratch))
    scratch.close()
    assert copied.append(b"d") == 3 and copied.read(0, 4) == b"abcd"


def test_where_o_tmpfile_fails_it_is_tempfile_s_unnamed_file(tmp_path, monkeypatch):
    """A TMPDIR that is not there (O_TMPFILE's open fails, as where the flag is missing): tempfile's
    TemporaryFile, in the first folder of its own list that works, holds the bytes."""
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    scratch = ScratchFile()
    assert scratch.append(b"xyz") == 0 and scratch.read(1, 2) == b"yz"
