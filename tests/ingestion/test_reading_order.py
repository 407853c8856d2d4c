"""Reading order of OCR'd pictures and scans: two-column pages column by column, vertical
Chinese right to left, short CJK lines on a sign indexed both ways. Real pages rendered from
Debian's texlive-lang-chinese documentation (tests/files/ocr/README.md), read by the real
local OCR through the real pipeline; generated pictures where no real one was found."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from ingestion.reading_order import order
from knowledge.models import Chunk, Page
from tests.ingestion.files import cjk_font, ingest

FILES = Path(__file__).resolve().parent.parent / "files" / "ocr"
ZHUANGZI = (  # the passage the vertical test page sets in six faces, two columns each
    "庄子曰：「吾生也有涯，而知也无涯。以有涯随无涯，殆已！已而为知者，殆而已矣！为善无近名，为"
    "恶无近刑，缘督以为经，可以保身，可以全生，可以养亲，可以尽年。」"
)


pytestmark = pytest.mark.usefixtures("media")


def ingest_file(collection, name: str) -> tuple[str, list[str]]:
    """The page text and the chunk texts of a picture file ingested whole."""
    document = ingest(collection, name, (FILES / name).read_bytes())
    page = Page.objects.get(document=document)
    return page.text, [chunk.text for chunk in Chunk.objects.filter(document=document)]


def hanzi(text: str) -> str:
    return "".join(re.findall("[\u4e00-\u9fff]", text))


def squeezed(text: str) -> str:
    return "".join(text.split())


def test_it_reads_columns_one_after_the_other_but_keeps_a_table_row_by_row():
    def box(x: float, y: float, width: float) -> tuple[float, float, float, float]:
        return (x, y, x + width, y + 20)

    heading = ("A heading across the page", box(50, 10, 700))
    left = [(f"left {n}", box(50, 50 + 30 * n, 320)) for n in range(5)]
    right = [(f"right {n}", box(430, 50 + 30 * n, 320)) for n in range(5)]
    rows = [line for pair in zip(left, right, strict=True) for line in pair]  # as the OCR returns them
    assert [text for text, _box in order([heading, *rows])] == [
        "A heading across the page",
        *(f"left {n}" for n in range(5)),
        *(f"right {n}" for n in range(5)),
    ]
    # Four columns of short cells: a table, read row by row as the OCR returned it.
    table = [(f"r{row}c{col}", box(50 + 180 * col, 50 + 30 * row, 60)) for row in range(6) for col in range(4)]
    assert order(table) == table


@pytest.mark.django_db
def test_it_reads_a_real_two_column_scan_column_by_column(private_collection):
    text, _chunks = ingest_file(private_collection, "ctex-change-history-two-columns.png")
    flat = squeezed(text)
    # The left column's entries (v2.4.2 … v2.4.6) come before the right column's (v2.4.13 …).
    positions = [flat.index(version) for version in ("v2.4.2", "v2.4.4", "v2.4.6", "v2.4.14", "v2.4.15")]
    assert positions == sorted(positions)
    assert flat.index("新的标题格式选项hang") < flat.index("区分macold及macnew")
    # A page of text is not a sign: its short heading is not indexed backwards too.
    assert "版本历史" in flat
    assert "史历本版" not in flat


@pytest.mark.django_db
def test_it_reads_vertical_chinese_columns_right_to_left(private_collection):
    text, _chunks = ingest_file(private_collection, "upzhfandolfonts-vertical.png")
    columns = [hanzi(line) for line in text.splitlines() if len(hanzi(line)) > 20 and not re.search("[A-Za-z]", line)]
    # Six faces, each the passage in two columns: its first half, then, on the left, its second.
    assert columns == [hanzi(ZHUANGZI[:45]), hanzi(ZHUANGZI[45:])] * 6


def plaque(text: str) -> bytes:
    """Gold characters on a dark red board, one line, as a horizontal plaque hangs."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.truetype(str(cjk_font()), 96)
    image = Image.new("RGB", (130 * len(text) + 120, 220), (110, 20, 20))
    draw = ImageDraw.Draw(image)
    draw.rectangle((12, 12, image.width - 12, image.height - 12), outline=(200, 160, 60), width=8)
    for n, character in enumerate(text):
        draw.text((70 + 130 * n, 55), character, fill=(230, 190, 80), font=font)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.mark.django_db
def test_a_plaque_written_right_to_left_is_found_in_either_order(private_collection):
    # 少林寺 written right to left, as old plaques are: the OCR reads it left to right.
    document = ingest(private_collection, "plaque.png", plaque("寺林少"))
    text = " ".join(chunk.text for chunk in Chunk.objects.filter(document=document, kind="text"))
    assert "寺林少" in text
    assert "少林寺" in text


@pytest.mark.django_db
def test_a_short_heading_on_a_real_slide_is_indexed_both_ways(private_collection):
    _text, chunks = ingest_file(private_collection, "pgfornament-han-xiaoshan-slide.png")
    joined = "\n".join(chunks)
    assert "简介" in joined
    assert "介简" in joined
