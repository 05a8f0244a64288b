"""How long the media readers take on the live path: a PDF's pages and text, an MP3's frames, a WAV header.

Run: ``.venv/bin/python bench/bench_media.py`` (or ``make bench``). Prints the
median time of reading each medium from its base64 data (what a request body
carries), next to the base64 decode alone, so the ratio says what the reading
itself costs. The media are built here: a 50-page PDF with a text line per
page (Flate-compressed content streams), a 10-minute 128 kbit/s MP3 (25,000
frames of 24 ms), a 10-minute 16 kHz WAV.
"""

from __future__ import annotations

import base64
import statistics
import time
import zlib
from functools import partial
from typing import Callable

from ctxscope.core import payload

ROUNDS = 20


def _pdf(pages: int) -> bytes:
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>",
               b"<< /Type /Pages /Count %d /MediaBox [0 0 612 792] >>" % pages]
    for n in range(pages):
        content = zlib.compress(b"BT /F1 12 Tf 72 700 Td (Page %d: lorem ipsum dolor sit amet, consectetur) Tj ET" % n
                                * 40)
        objects.append(b"<< /Type /Page /Parent 2 0 R >>")
        objects.append(b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(content) + content + b"\nendstream")
    body = b"%PDF-1.4\n"
    for number, obj in enumerate(objects, 1):
        body += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    return body + b"%%EOF\n"


def _mp3(frames: int) -> bytes:
    return (bytes([0xFF, 0xFB, 0x94, 0x00]) + b"\x55" * 380) * frames


def _wav(seconds: int) -> bytes:
    data = b"\x00\x00" * 16000 * seconds
    header = (b"RIFF" + (36 + len(data)).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
              + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + (16000).to_bytes(4, "little")
              + (32000).to_bytes(4, "little") + (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
              + b"data" + len(data).to_bytes(4, "little"))
    return header + data


def _median_ms(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> dict[str, float]:
    cases = {
        "pdf_50_pages": (base64.b64encode(_pdf(50)).decode(), lambda d: payload.document_b64("openai", d, "gpt-4o")),
        "mp3_10_min": (base64.b64encode(_mp3(25000)).decode(), lambda d: payload.audio_tokens_b64(d, "mp3")),
        "wav_10_min": (base64.b64encode(_wav(600)).decode(), lambda d: payload.audio_tokens_b64(d, "wav")),
    }
    figures: dict[str, float] = {}
    for name, (data, read) in cases.items():
        decode = _median_ms(partial(base64.b64decode, data))
        total = _median_ms(partial(read, data))
        figures[f"{name}_ms"] = round(total, 2)
        figures[f"{name}_decode_ms"] = round(decode, 2)
        print(f"{name}: {total:.2f} ms to read ({len(data) / 1e6:.1f} MB of base64; "
              f"decoding alone {decode:.2f} ms, x{total / decode:.1f})")
    return figures


if __name__ == "__main__":
    main()
