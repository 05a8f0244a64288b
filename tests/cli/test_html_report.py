"""The HTML report in a real headless Chromium: the chart renders and its labels are there."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from conftest import DATA

from ctxscope.cli import main

MAIN = DATA / "transcripts" / "claude_4c2ddfdc.jsonl"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _report(tmp_path: Path) -> Path:
    out = tmp_path / "report.html"
    assert main(["analyze", str(MAIN), "--html", "-o", str(out), "--tokenizer", "chars"]) == 0
    return out


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                          text=True, timeout=60, cwd=tmp_path)


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB(A) PNG (what Chromium writes) into rows of raw pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 4
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8
            channels = {2: 3, 6: 4}[colour]
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(height):
        filt, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = prev[x]
            c = prev[x - channels] if x >= channels else 0
            if filt == 1:
                line[x] = (line[x] + a) & 255
            elif filt == 2:
                line[x] = (line[x] + b) & 255
            elif filt == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, rows


def test_report_is_self_contained(tmp_path: Path):
    """The page loads nothing from the network: no src/href to http(s), no script."""
    text = _report(tmp_path).read_text()
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    assert "<script" not in text
    assert oct(os.stat(tmp_path / "report.html").st_mode & 0o777) == "0o600"


def test_dom_has_chart_and_labels(tmp_path: Path):
    """Chromium's DOM holds the SVG chart, one area per category present and its legend labels."""
    report = _report(tmp_path)
    dom = _chromium(tmp_path, "--dump-dom", report.as_uri()).stdout
    assert "Composition over calls" in dom
    # One area per category the session holds (as the terminal report lists them), each once.
    areas = re.findall(r'data-category="([a-z]+)"', dom)
    # system: the inferred system+tools prefix; overhead: the Claude proxy-encoding item.
    assert sorted(areas) == ["assistant", "environment", "overhead", "prompts", "results", "system", "unattributed"]
    assert "36,526" in dom  # the last call's reported input, by hand from the file
    assert "calls (tokens, calibrated)" in dom
    assert "Session 4c2ddfdc-b619-4525-8d03-1950fb1b0257" in dom


def test_screenshot_shows_the_chart_colours(tmp_path: Path):
    """The screenshot is not blank: the unattributed area (red) and the results key (orange) are painted."""
    report = _report(tmp_path)
    shot = tmp_path / "shot.png"
    _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1000,900", report.as_uri())
    width, height, rows = _png_pixels(shot.read_bytes())
    assert (width, height) == (1000, 900)
    channels = len(rows[0]) // width
    colours = set()
    for row in rows[::3]:
        for x in range(0, len(row), channels * 3):
            colours.add(tuple(row[x:x + 3]))
    assert len(colours) > 8  # not a blank page

    def near(target: tuple[int, int, int]) -> bool:
        # Areas are drawn at 85% opacity over white, legend keys at full colour.
        blended = tuple(round(0.85 * t + 0.15 * 255) for t in target)
        return any(all(abs(c[i] - want[i]) <= 8 for i in range(3)) for c in colours for want in (blended, target))

    assert near((0xE6, 0x7E, 0x22)), "results area not painted"
    assert near((0xC0, 0x39, 0x2B)), "unattributed area not painted"
