"""Fuzzing the parsers and the chunker with Hypothesis: random bytes and mutated valid files
either parse or raise ParseError (whose message people read), never another exception, and
never hang. The sniffer, the text decoder and the chunker are fed the same way.

Bounded for CI: FUZZ_EXAMPLES examples a test (PORTAL_FUZZ_EXAMPLES, default 12; the
examples are then the same every run) and a per-example deadline; the whole file takes well
under a minute on two cores. For a longer local hunt with fresh examples each run:

    PORTAL_FUZZ_EXAMPLES=2000 .venv/bin/python -m pytest -q -p no:cacheprovider tests/hardening/test_fuzz.py
"""

from __future__ import annotations

import io
import os
import signal
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ingestion.chunking import ChunkSettings, chunk_page, split_text
from ingestion.encoding import decode_text
from ingestion.parsers.base import Block, ParsedPage, ParseError
from ingestion.parsers.formats import parser_for
from ingestion.sniff import sniff_bytes

EXAMPLES = int(os.environ.get("PORTAL_FUZZ_EXAMPLES", "12"))
HANG_SECONDS = 60  # one example running this long is a hang, whatever the machine's load
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=timedelta(seconds=15),  # generous: the CI machine is shared; HANG_SECONDS catches hangs
    derandomize="PORTAL_FUZZ_EXAMPLES" not in os.environ,  # CI sees the same examples every run
    database=None,  # no .hypothesis folder in the work tree
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
MORE = settings(FUZZ, max_examples=EXAMPLES * 10)  # for the cheap targets
TEXT_TYPES = ("text/plain", "text/markdown", "text/csv", "text/vtt", "application/x-subrip")
NAMES = ("a.txt", "a.md", "a.csv", "a.pdf", "a.docx", "a.png", "a.srt", "")


class Hang(Exception):  # noqa: N818 (not an error a parser may raise: the test fails on it)
    pass


@contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def stop(_signum: int, _frame: object) -> None:
        raise Hang(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(autouse=True)
def no_slide_renders(monkeypatch):
    """Slide renders come from LibreOffice, a separate program, not from the parser under test."""
    monkeypatch.setattr("ingestion.parsers.pptx.libreoffice", lambda: None)


def parse(data: bytes, name: str, mime: str | None = None) -> list[ParsedPage]:
    """What the pipeline does with an upload: sniff (unless `mime`), find the parser, count,
    read every page and chunk it. ParseError is the only failure allowed."""
    with time_limit(HANG_SECONDS), tempfile.TemporaryDirectory(prefix="fuzz-") as folder:
        path = Path(folder) / "original"
        path.write_bytes(data)
        refusal = None
        try:
            parser = parser_for(mime or sniff_bytes(data, name))
            parser.count(path)
            pages = list(parser.pages(path))
        except ParseError as exc:
            refusal, pages = str(exc), []
        assert refusal is None or refusal.strip(), "a ParseError without a message"
        for page in pages:
            chunk_page(page)
        return pages


# --- seeds: small valid files of every format ------------------------------------------


def small_pdf() -> bytes:
    """Text, a ruled table and a picture: the parser's text, table and image paths."""
    import pymupdf

    from tests.ingestion.files import png

    document = pymupdf.open()
    page = document.new_page(width=300, height=300)
    page.insert_text((20, 30), "Travel policy", fontsize=16)
    page.insert_text((20, 50), "Hotels are capped by city tier.", fontsize=9)
    for row in range(3):
        for column in range(2):
            page.draw_rect(pymupdf.Rect(20 + column * 60, 70 + row * 15, 80 + column * 60, 85 + row * 15))
            page.insert_text((24 + column * 60, 82 + row * 15), f"r{row}c{column}", fontsize=7)
    page.insert_image(pymupdf.Rect(20, 150, 120, 230), stream=png(80, 64))
    return bytes(document.tobytes(garbage=3, deflate=True))


def made(make: Callable[[Path], Path], name: str) -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        return make(Path(folder) / name).read_bytes()


@cache
def seeds() -> dict[str, bytes]:
    from tests.ingestion.files import png
    from tests.ingestion.image_files import photo_jpeg
    from tests.ingestion.office_files import briefing_pptx, handbook_docx
    from tests.ingestion.sheet_files import budget_xlsx, gbk_semicolon_csv

    return {
        "a.pdf": small_pdf(),
        "a.docx": made(handbook_docx, "a.docx"),
        "a.pptx": made(briefing_pptx, "a.pptx"),
        "a.xlsx": made(budget_xlsx, "a.xlsx"),
        "a.csv": made(gbk_semicolon_csv, "a.csv"),
        "a.png": png(64, 48),
        "a.jpg": photo_jpeg(),
        "a.md": "# 标题\n\n正文 text.\n\n## Sub\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```\n# no\n```\n".encode(),
        "a.srt": b"1\n00:00:01,000 --> 00:00:02,500\nHello there\n\n2\n00:00:03,000 --> 00:00:04,000\nBye\n",
    }


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` with a few byte-level changes: flips, cuts, insertions, repeated slices."""
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "repeat", "zero"]))
        at = draw(st.integers(0, max(len(out) - 1, 0)))
        if kind == "flip" and out:
            out[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del out[at:]
        elif kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=64))
        elif kind == "repeat":
            out[at:at] = out[at : at + draw(st.integers(1, 512))] * draw(st.integers(2, 20))
        elif kind == "zero":
            size = draw(st.integers(1, 64))
            out[at : at + size] = bytes(len(out[at : at + size]))
    return bytes(out)


@st.composite
def mutated_member(draw: st.DrawFn, data: bytes) -> bytes:
    """An Office file rebuilt with one member's bytes mutated: the XML readers see the damage
    (a byte flipped in the zip itself mostly only breaks a checksum)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    xml = sorted(name for name in members if name.endswith((".xml", ".rels")))
    name = draw(st.sampled_from(xml))
    members[name] = draw(mutated(members[name]))
    if draw(st.booleans()):
        members.pop(draw(st.sampled_from(sorted(members))))  # and perhaps a part missing
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, content in members.items():
            archive.writestr(member, content)
    return buffer.getvalue()


# --- the targets --------------------------------------------------------------------------


@MORE
@given(data=st.binary(max_size=9000), partial=st.booleans())
def test_decoding_random_bytes_gives_text_or_a_parse_error(data, partial):
    try:
        text, encoding = decode_text(data, partial=partial)
    except ParseError:
        return
    assert "\x00" not in text
    assert encoding


@MORE
@given(data=st.binary(max_size=9000), name=st.sampled_from(NAMES))
def test_sniffing_random_bytes_gives_a_type_or_a_parse_error(data, name):
    try:
        mime = sniff_bytes(data, name)
    except ParseError:
        return
    assert "/" in mime


@MORE
@given(
    text=st.text(max_size=3000),
    encoding=st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "gb18030"]),
    mime=st.sampled_from(TEXT_TYPES),
)
def test_text_formats_parse_any_text_or_say_why_not(text, encoding, mime):
    pages = parse(text.encode(encoding, errors="ignore"), "a.txt", mime=mime)
    assert all(page.number >= 1 for page in pages)


@FUZZ
@given(data=st.binary(max_size=4000), mime=st.sampled_from(TEXT_TYPES))
def test_text_formats_take_random_bytes(data, mime):
    parse(data, "a.txt", mime=mime)


MAGIC = {
    "application/pdf": b"%PDF-1.7\n",
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff\xe0",
    "image/gif": b"GIF89a",
    "image/tiff": b"II*\x00",
    "image/webp": b"RIFF\x00\x01\x00\x00WEBPVP8 ",
}
OFFICE = (
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
)


@FUZZ
@given(data=st.binary(max_size=4000), mime=st.sampled_from(sorted(MAGIC) + list(OFFICE)))
def test_binary_formats_take_random_bytes_behind_their_signature(data, mime):
    parse(MAGIC.get(mime, b"PK\x03\x04") + data, "a", mime=mime)


@FUZZ
@given(data=st.data(), name=st.sampled_from(["a.pdf", "a.docx", "a.pptx", "a.xlsx", "a.png", "a.jpg"]))
def test_mutated_files_parse_or_say_why_not(data, name):
    parse(data.draw(mutated(seeds()[name])), name)


@FUZZ
@given(data=st.data(), name=st.sampled_from(["a.csv", "a.md", "a.srt"]))
def test_mutated_text_files_parse_or_say_why_not(data, name):
    parse(data.draw(mutated(seeds()[name])), name)


@FUZZ
@given(data=st.data(), name=st.sampled_from(["a.docx", "a.pptx", "a.xlsx"]))
def test_office_files_with_damaged_parts_parse_or_say_why_not(data, name):
    parse(data.draw(mutated_member(seeds()[name])), name)


def test_every_file_the_mutations_start_from_parses():
    """The mutations start from files that do parse: a fuzz run that only ever saw refusals
    would prove little."""
    for name, data in seeds().items():
        assert parse(data, name), name


# --- the chunker ---------------------------------------------------------------------------


BLOCK_TEXT = st.text(st.characters(codec="utf-8"), max_size=1500) | st.sampled_from(
    ["", " ", "\n\n", "。。。", "a" * 2000, "句子。" * 300, "word " * 400]
)
BLOCKS = st.builds(
    Block,
    kind=st.sampled_from(["heading", "text", "table", "image", "notes", "audio"]),
    text=BLOCK_TEXT,
    bbox=st.none() | st.tuples(*[st.floats(-1e4, 1e4, allow_nan=False)] * 4),
    level=st.integers(0, 9),
    cells=st.lists(st.lists(st.text(max_size=40), min_size=1, max_size=5).map(tuple), max_size=30).map(tuple),
    t_start=st.none() | st.floats(0, 1e5, allow_nan=False),
    t_end=st.none() | st.floats(0, 1e5, allow_nan=False),
)
CHUNK_SETTINGS = st.integers(50, 800).flatmap(
    lambda size: st.builds(ChunkSettings, size=st.just(size), overlap=st.integers(0, size // 2 - 1))
)


@MORE
@given(
    blocks=st.lists(BLOCKS, max_size=12),
    path=st.lists(st.text(max_size=30), max_size=3).map(tuple),
    chunking=CHUNK_SETTINGS,
)
def test_the_chunker_takes_any_page(blocks, path, chunking):
    page = ParsedPage(number=1, kind="section", blocks=tuple(blocks), heading_path=path)
    with time_limit(HANG_SECONDS):
        drafts = chunk_page(page, chunking)
    for draft in drafts:
        assert draft.text.strip()
        assert draft.location["page"] == 1
        if draft.kind in ("text", "notes", "transcript"):
            assert len(draft.text) <= chunking.size


@MORE
@given(text=BLOCK_TEXT, chunking=CHUNK_SETTINGS)
def test_split_text_covers_every_word_within_the_size(text, chunking):
    spans = split_text(text, chunking.size, chunking.overlap)
    covered: set[int] = set()
    for start, end in spans:
        assert 0 <= start < end <= len(text)
        assert end - start <= chunking.size
        covered.update(range(start, end))
    assert all(i in covered for i, char in enumerate(text) if not char.isspace())
