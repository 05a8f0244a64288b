"""Media by the provider's rules, each with a value worked out by hand (ctxscope.core.media).

The media are built in the test with the standard library: a WAV with ``wave``,
MP3 frames from hand-written headers, a two-page PDF written object by object,
a PNG of which only the header matters. Figures are checked at the public
surface (the items of a request body), where the live path, inspect and the
fidelity report read them.
"""

from __future__ import annotations

import base64
import io
import logging
import wave
import zlib

import pytest

from ctxscope.core import media
from ctxscope.core.items import items_from_request

# -- builders -------------------------------------------------------------------------


def wav_bytes(seconds: float, rate: int = 16000) -> bytes:
    """A mono 16-bit PCM WAV of silence."""
    out = io.BytesIO()
    with wave.open(out, "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        handle.writeframes(b"\x00\x00" * int(seconds * rate))
    return out.getvalue()


# MPEG-1 Layer III, no CRC (FF FB), 128 kbit/s (index 9), 48 kHz (index 1), no padding:
# a frame is 144 x 128000 / 48000 = 384 bytes and 1152 samples = 24 ms.
MP3_HEADER = bytes([0xFF, 0xFB, 0x94, 0x00])
MP3_FRAME = MP3_HEADER + b"\x00" * (384 - 4)


def mp3_bytes(frames: int, id3: bool = True) -> bytes:
    """MP3 frames after an ID3v2 tag of 20 bytes (its size written as a syncsafe integer)."""
    tag = b"ID3\x04\x00\x00" + bytes([0, 0, 0, 10]) + b"\x00" * 10 if id3 else b""
    return tag + MP3_FRAME * frames + b"TAG" + b"\x00" * 125  # an ID3v1 tag ends the stream


def pdf_bytes() -> bytes:
    """A two-page US Letter PDF: page 1's text in a plain stream, page 2's Flate-compressed."""
    page1 = b"BT /F1 12 Tf 72 700 Td (Hello page one) Tj ET"
    page2 = zlib.compress(b"BT /F1 12 Tf 72 700 Td [(Second) -250 ( page)] TJ ET")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 /MediaBox [0 0 612 792] >>",
        b"<< /Type /Page /Parent 2 0 R /Contents 5 0 R >>",
        b"<< /Type /Page /Parent 2 0 R /Contents 6 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(page1) + page1 + b"\nendstream",
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(page2) + page2 + b"\nendstream",
    ]
    body = b"%PDF-1.4\n"
    for number, obj in enumerate(objects, 1):
        body += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    return body + b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"


def png_header(width: int, height: int) -> bytes:
    return (b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + width.to_bytes(4, "big") + height.to_bytes(4, "big")
            + b"\x08\x02\x00\x00\x00")


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def chat(model: str, part: dict) -> dict:
    return {"model": model, "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, part]}]}


def media_items(body: dict, api: str | None = None) -> list:
    return [i for i in items_from_request(body, api) if i.part.startswith("prompts/media")]


# -- audio ----------------------------------------------------------------------------


def test_wav_of_three_seconds_is_thirty_audio_tokens():
    """A 3.0 s WAV (48,000 frames at 16 kHz): 96,000 data bytes over a byte rate of 32,000 = 3.0 s,
    one token a 100 ms (OpenAI realtime costs) = 30 tokens, whatever its size (96 KB)."""
    data = wav_bytes(3.0)
    assert media.wav_duration(data) == 3.0
    part = {"type": "input_audio", "input_audio": {"data": b64(data), "format": "wav"}}
    [audio] = media_items(chat("gpt-4o-audio-preview", part))
    assert (audio.part, audio.fixed_tokens) == ("prompts/media/audio", 30)


def test_truncated_and_streamed_wav_count_the_bytes_there():
    """A streamed WAV (data size 0xFFFFFFFF) or a cut one: the data bytes present, 1.5 s of 3.0 -> 15 tokens."""
    data = wav_bytes(3.0)
    cut = data[:44 + 48000]  # header + half the samples
    assert media.wav_duration(cut) == 1.5
    streamed = data[:40] + b"\xff\xff\xff\xff" + data[44:]
    assert media.wav_duration(streamed) == 3.0


def test_mp3_of_known_duration_walks_its_frames():
    """125 frames of 1152 samples at 48 kHz (24 ms, 384 bytes each) after an ID3v2 tag, then an
    ID3v1 tag: 125 x 0.024 = 3.0 s -> 30 tokens."""
    data = mp3_bytes(125)
    assert media.mp3_duration(data) == pytest.approx(3.0)
    part = {"type": "input_audio", "input_audio": {"data": b64(data), "format": "mp3"}}
    [audio] = media_items(chat("gpt-4o-audio-preview", part))
    assert audio.fixed_tokens == 30
    assert media.mp3_duration(mp3_bytes(125, id3=False)) == pytest.approx(3.0)


def test_mp3_with_padding_and_mpeg2_frames():
    """MPEG-2 Layer III at 24 kHz, 64 kbit/s, padded: 72 x 64000 / 24000 + 1 = 193 bytes and 576 samples
    (24 ms) a frame; 50 frames = 1.2 s -> 12 tokens."""
    header = bytes([0xFF, 0xF3, 0x86, 0x00])  # MPEG-2 (10), layer III, bitrate 8 (64k), rate 1 (24k), padding
    frame = header + b"\x00" * (193 - 4)
    assert media.mp3_duration(frame * 50) == pytest.approx(1.2)
    assert media.audio_tokens(1.2) == 12


def test_unknown_audio_falls_back_to_its_size_and_says_so_once(caplog):
    """An Ogg stream has no duration ctxscope reads: one token per 1,600 bytes (16,000 bytes -> 10),
    and one warning however many such parts come."""
    ogg = b"OggS" + b"\x00" * (16000 - 4)
    part = {"type": "input_audio", "input_audio": {"data": b64(ogg), "format": "ogg"}}
    media._warned.clear()
    with caplog.at_level(logging.WARNING, logger="ctxscope.core.media"):
        [audio] = media_items(chat("gpt-4o-audio-preview", part))
        media_items(chat("gpt-4o-audio-preview", part))
    assert audio.fixed_tokens == 10
    warnings = [r for r in caplog.records if "cannot read the duration of ogg audio" in r.getMessage()]
    assert len(warnings) == 1


# -- PDFs -----------------------------------------------------------------------------


def test_two_page_pdf_pages_size_and_text():
    """The reader finds the page tree's /Count 2, the Letter MediaBox and both pages' text
    (the second from a Flate stream, its TJ array joined)."""
    info = media.read_pdf(pdf_bytes())
    assert info.pages == 2
    assert info.page_size == (612.0, 792.0)
    assert info.text == "Hello page one\nSecond page"


def test_two_page_pdf_on_gpt_4o_is_its_text_and_two_page_images():
    """OpenAI: the extracted text counted as text, and each page a 512 px render in 32 px patches:
    612x792 pt -> 396x512 px -> 13 x 16 = 208 tokens a page, 416 for two."""
    part = {"type": "file", "file": {"file_data": "data:application/pdf;base64," + b64(pdf_bytes()),
                                     "filename": "two.pdf"}}
    pages, text = media_items(chat("gpt-4o", part))
    assert (pages.fixed_tokens, pages.text) == (416, "")
    assert (text.fixed_tokens, text.text) == (None, "Hello page one\nSecond page")


def test_two_page_pdf_on_claude_is_its_text_and_two_capped_page_images():
    """Anthropic: each page an image at the 1.15 MP cap: 612x792 pt at 150 dpi = 1275x1650 px, scaled by
    sqrt(1,150,000 / 2,103,750) to 1,150,000 px^2 / 750 = 1533.3 -> 1534 a page, 3068 for two."""
    body = {"model": "claude-sonnet-4-5", "max_tokens": 5, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                        "data": b64(pdf_bytes())}}]}]}
    pages, text = media_items(body)
    assert pages.fixed_tokens == 3068
    assert text.text == "Hello page one\nSecond page"


def test_pdf_glyph_codes_map_through_the_tounicode_cmap():
    """Hex glyph codes (<0102>) are text only through the font's ToUnicode CMap (bfchar and bfrange)."""
    cmap = (b"/CIDInit /ProcSet findresource begin begincmap\n2 beginbfchar\n<01> <0048>\n<02> <0069>\nendbfchar\n"
            b"1 beginbfrange\n<03> <04> <0061>\nendbfrange\nendcmap")
    content = b"BT /F1 12 Tf <0102> Tj 20 0 Td <0304> Tj ET"
    raw = (b"%PDF-1.4\n1 0 obj\n<< /Type /Pages /Count 1 >>\nendobj\n"
           b"2 0 obj\n<< /Length 1 >>\nstream\n" + cmap + b"\nendstream\nendobj\n"
           b"3 0 obj\n<< /Length 1 >>\nstream\n" + content + b"\nendstream\nendobj\n")
    assert media.read_pdf(raw).text == "Hiab"


def test_unreadable_document_keeps_the_documented_estimate():
    """Bytes that are not a PDF: one page of DOCUMENT_PAGE_TOKENS (2,000), no text item."""
    part = {"type": "file", "file": {"file_data": "data:application/pdf;base64," + b64(b"not a pdf at all")}}
    [doc] = media_items(chat("gpt-4o", part))
    assert doc.fixed_tokens == 2000


def test_truncated_pdf_still_counts_its_pages():
    """A PDF cut inside its last stream: the page objects before the cut count (2 /Type /Page)."""
    raw = pdf_bytes()
    cut = raw[:raw.index(b"6 0 obj") + 40]
    info = media.read_pdf(cut)
    assert info.pages == 2 and info.text.startswith("Hello page one")


# -- images per model family ------------------------------------------------------------


def test_1024_square_image_on_gpt_4o_is_765():
    """gpt-4o tiles: 1024x1024 fits 2048, short side to 768 -> 768x768, 2 x 2 tiles: 85 + 4 x 170 = 765."""
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(png_header(1024, 1024))}}
    [image] = media_items(chat("gpt-4o", part))
    assert image.fixed_tokens == 765


def test_1024_square_image_on_gpt_4_1_mini_is_1659():
    """gpt-4.1-mini patches: 32 x 32 = 1024 patches (under 1536), x 1.62 = 1658.88 -> 1659."""
    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(png_header(1024, 1024))}}
    [image] = media_items(chat("gpt-4.1-mini", part))
    assert image.fixed_tokens == 1659


@pytest.mark.parametrize("model, width, height, detail, expected", [
    ("gpt-4.1-nano", 540, 360, "auto", 502),   # 17 x 12 = 204 patches x 2.46 = 501.84 -> 502
    ("o4-mini", 1800, 2400, "auto", 2498),     # scaled to 1056x1408: 33 x 44 = 1452 patches x 1.72 = 2497.4
    ("gpt-5-mini", 597, 566, "low", 411),      # 19 x 18 = 342 x 1.2 = 410.4; low detail changes nothing
    ("gpt-4o", 4000, 3000, "low", 85),         # tiles at low detail: the base
    ("gpt-5", 1024, 1024, "auto", 630),        # gpt-5 tiles: 70 + 4 x 140
    ("o3", 512, 512, "auto", 225),             # o-series tiles: 75 + 150
    ("gpt-4o-mini", 512, 512, "auto", 8500),   # 2833 + 5667
    ("some-new-model", 1024, 1024, "auto", 765),  # an unlisted family takes gpt-4o's rule
])
def test_image_rule_per_family(model, width, height, detail, expected):
    """The vision guide's rule of each family, by hand."""
    assert media.image_tokens("openai", model, width, height, detail) == expected


def test_patch_scaling_of_the_guide_example():
    """The guide's example: 1800x2400 -> r = sqrt(1536 x 1024 / 4,320,000) = 0.6034, shrunk to fit 33
    whole patches across: 1056x1408 -> 33 x 44 = 1452."""
    assert media.openai_patches(1800, 2400) == 1452
    assert media.openai_patches(1024, 1024) == 1024


def test_anthropic_images_keep_the_pixel_rule():
    """Claude: 1000x1000 px is under the cap: 1,000,000 / 750 = 1333.3 -> 1334 on any Claude model."""
    assert media.image_tokens("anthropic", "claude-opus-4-7", 1000, 1000) == 1334


def test_a_new_model_re_extracts_the_media():
    """The same history sent to another model family is counted by that family's rule (extractor reuse)."""
    from ctxscope.core.items import RequestExtractor

    part = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(png_header(1024, 1024))}}
    extractor = RequestExtractor()
    body = chat("gpt-4o", part)
    first = [i.fixed_tokens for i in extractor.extract(body) if i.fixed_tokens]
    second = [i.fixed_tokens for i in extractor.extract({**body, "model": "gpt-4.1-mini"}) if i.fixed_tokens]
    assert (first, second) == ([765], [1659])


def test_readers_never_raise_on_damaged_bytes():
    """Random cuts and flipped bytes of a PDF, a WAV and an MP3: each reader answers (a value or None)."""
    import random

    rng = random.Random(13)
    samples = [pdf_bytes(), wav_bytes(0.2), mp3_bytes(20)]
    for sample in samples:
        for _ in range(300):
            data = bytearray(sample[:rng.randrange(len(sample) + 1)])
            for _ in range(rng.randrange(4)):
                if data:
                    data[rng.randrange(len(data))] = rng.randrange(256)
            data = bytes(data)
            media.read_pdf(data)
            media.audio_duration(data)
            media.image_tokens_of("openai", "gpt-4.1-mini", data)


def test_mp3_duration_from_its_head_matches_the_frame_walk():
    """Constant bitrate: the size less the tags (20 + 128 bytes) at 128 kbit/s: 48,000 x 8 / 128,000 = 3.0 s,
    the walk's figure, without decoding the middle of the file."""
    data = mp3_bytes(125)
    assert media.mp3_duration_from_head(data[:4096], len(data), data[-128:]) == pytest.approx(3.0)
    assert media.mp3_duration(data) == pytest.approx(3.0)


def test_vbr_mp3_reads_its_xing_frame_count():
    """A Xing header (flags 1: frame count 250) in the first frame: 250 x 1152 / 48,000 = 6.0 s -> 60 tokens,
    however few frames follow; a VBR stream without one is walked frame by frame."""
    xing = MP3_HEADER + b"\x00" * 32 + b"Xing" + (1).to_bytes(4, "big") + (250).to_bytes(4, "big")
    first = xing + b"\x00" * (384 - len(xing))
    data = first + MP3_FRAME * 3
    part = {"type": "input_audio", "input_audio": {"data": b64(data), "format": "mp3"}}
    [audio] = media_items(chat("gpt-4o-audio-preview", part))
    assert audio.fixed_tokens == 60
    # Two bitrates and no header: 10 frames of 24 ms at 128k and 10 at 64k (192 bytes each) = 0.48 s.
    low = bytes([0xFF, 0xFB, 0x54, 0x00]) + b"\x00" * (192 - 4)  # index 5: 64 kbit/s
    mixed = MP3_FRAME * 10 + low * 10
    assert media.mp3_duration_from_head(mixed, len(mixed)) is None
    assert media.mp3_duration(mixed) == pytest.approx(0.48)


def test_claude_code_transcript_counts_a_pdf_like_a_request_body(tmp_path):
    """A PDF attached in a Claude Code session is the same two items as in a request body: the page images
    (2 x 1534) and the extracted text, so analyze, replay and the live path agree."""
    import json

    from ctxscope.transcripts import TranscriptFile

    document = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                               "data": b64(pdf_bytes())}}
    user = {"type": "user", "uuid": "u1", "parentUuid": None, "sessionId": "s",
            "message": {"role": "user", "content": [{"type": "text", "text": "read this"}, document]}}
    reply = {"type": "assistant", "uuid": "a1", "parentUuid": "u1", "sessionId": "s", "requestId": "r1",
             "message": {"id": "m1", "role": "assistant", "model": "claude-sonnet-4-5",
                         "content": [{"type": "text", "text": "ok"}],
                         "usage": {"input_tokens": 10, "cache_creation_input_tokens": 0,
                                   "cache_read_input_tokens": 0}}}
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps(user) + "\n" + json.dumps(reply) + "\n", encoding="utf-8")
    [call] = list(TranscriptFile(str(path)).calls())
    docs = [i for i in call.items if i.part == "prompts/media/document"]
    assert [(i.fixed_tokens, i.text) for i in docs] == [(3068, ""), (None, "Hello page one\nSecond page")]


def _media_body(model: str) -> dict:
    """'hi', a 1024 px PNG, a 3.0 s WAV and the two-page PDF in one user message."""
    png = "data:image/png;base64," + b64(png_header(1024, 1024))
    return {"model": model, "messages": [{"role": "user", "content": [
        {"type": "text", "text": "hi"},
        {"type": "image_url", "image_url": {"url": png}},
        {"type": "input_audio", "input_audio": {"data": b64(wav_bytes(3.0)), "format": "wav"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64," + b64(pdf_bytes()),
                                  "filename": "two.pdf"}}]}]}


# chars/4, no framing: "hi" 1 + image 1659 (gpt-4.1-mini patches) + audio 30 + PDF pages 2 x 208
# + the PDF's 26 characters of text 7 = 2113.
MEDIA_TOKENS_GPT_4_1_MINI = 1 + 1659 + 30 + 416 + 7


def test_live_path_inspect_and_fidelity_count_media_alike(monkeypatch, tmp_path, capsys):
    """The same body through the real openai SDK (the live tracker), `ctxscope inspect` and the fidelity
    estimate: 2,113 tokens of content each, worked out by hand (one set of media rules)."""
    import json

    import openai  # noqa: F401 - the real SDK, against ctxscope.testing's server

    import ctxscope
    from _instr_support import attr, instrumented
    from ctxscope.core import fidelity
    from ctxscope.cli import main
    from ctxscope.instrumentation.openai import OpenAIInstrumentor
    from ctxscope.schema import Attr
    from ctxscope.testing import ProviderServer
    from ctxscope.core.tokens import CharsCounter

    body = _media_body("gpt-4.1-mini")
    with ProviderServer() as server, instrumented(server, monkeypatch, OpenAIInstrumentor) as tel:
        with ctxscope.session("media"):
            server.openai_client().chat.completions.create(**body)
        live = attr(tel.one_call(), Attr.ESTIMATED_TOKENS)
    assert live == MEDIA_TOKENS_GPT_4_1_MINI

    counted = fidelity.counted_items(body, "openai.chat", CharsCounter())
    assert sum(tokens for _, tokens in counted) == MEDIA_TOKENS_GPT_4_1_MINI

    path = tmp_path / "body.json"
    path.write_text(json.dumps(body), encoding="utf-8")
    capsys.readouterr()
    assert main(["inspect", str(path), "--tokenizer", "chars", "--no-framing"]) == 0
    estimated = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("estimated"))
    assert estimated.split() == ["estimated", f"{MEDIA_TOKENS_GPT_4_1_MINI:,}"]


def test_inspect_model_flag_picks_the_media_rule(tmp_path, capsys):
    """`inspect --model gpt-4o` on a gpt-4.1-mini body counts the image by gpt-4o's tiles: 765 for 1659,
    1 + 765 + 30 + 416 + 7 = 1,219."""
    import json

    from ctxscope.cli import main

    path = tmp_path / "body.json"
    path.write_text(json.dumps(_media_body("gpt-4.1-mini")), encoding="utf-8")
    capsys.readouterr()
    assert main(["inspect", str(path), "--tokenizer", "chars", "--no-framing", "--model", "gpt-4o"]) == 0
    estimated = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("estimated"))
    assert estimated.split() == ["estimated", "1,219"]
