"""Pictures and scans: the image parser (EXIF, bombs, broken files) and the enrichment stage
with the real local OCR, through the real pipeline on PostgreSQL + pgvector."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from ingestion.models import DerivedText
from ingestion.parsers.base import ParseError
from ingestion.parsers.formats import parser_for
from ingestion.sniff import sniff_bytes
from knowledge.models import Chunk, Page, PageImage
from providers import registry
from tests.ingestion.files import ingest
from tests.ingestion.image_files import photo_jpeg, scanned_pdf, text_image

INVOICE = ["Invoice 2024 total 350 yuan", "差旅费用凭发票报销"]


pytestmark = pytest.mark.usefixtures("media")


def parse(data: bytes, tmp_path, name: str = "picture"):
    path = tmp_path / name
    path.write_bytes(data)
    return list(parser_for(sniff_bytes(data, name)).pages(path))


def test_a_photo_is_turned_upright_and_keeps_its_exif_date(tmp_path):
    (page,) = parse(photo_jpeg(taken="2024:05:01 10:30:00", orientation=6), tmp_path)
    assert page.kind == "image"
    assert page.needs_ocr is True
    assert (page.width, page.height) == (200, 320)  # orientation 6: rotated a quarter turn
    assert page.meta["taken_at"] == "2024-05-01T10:30:00"
    assert page.meta["orientation"] == 6
    assert page.meta["format"] == "JPEG"
    assert page.render is not None
    assert page.render.startswith(b"\x89PNG")
    (block,) = page.blocks
    assert block.kind == "image"
    assert block.image == page.render


@pytest.mark.parametrize("fmt", ["GIF", "WEBP", "TIFF", "JPEG"])
def test_every_picture_format_is_sniffed_and_read(tmp_path, fmt):
    data = text_image(["hello"], width=300, fmt=fmt)
    (page,) = parse(data, tmp_path)
    assert sniff_bytes(data).startswith("image/")
    assert (page.width, page.height) == (300, 130)


def test_a_truncated_jpeg_is_a_readable_error(tmp_path):
    data = photo_jpeg()
    with pytest.raises(ParseError, match="damaged or incomplete"):
        parse(data[: len(data) // 2], tmp_path)


def test_a_decompression_bomb_is_refused_before_decoding(tmp_path, settings):
    from PIL import Image

    settings.MAX_IMAGE_MEGAPIXELS = 1
    buffer = io.BytesIO()
    Image.new("1", (1500, 1000)).save(buffer, format="PNG")  # 1.5 MP in a few hundred bytes
    assert len(buffer.getvalue()) < 5000
    with pytest.raises(ParseError, match="PORTAL_MAX_IMAGE_MEGAPIXELS"):
        parse(buffer.getvalue(), tmp_path)


def test_a_picture_over_pillows_own_limit_is_refused_by_the_portal_setting(tmp_path, settings, monkeypatch):
    from PIL import Image, ImageFile

    def no_decoding(self: Any) -> Any:
        raise AssertionError("the picture was decoded")

    buffer = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(buffer, format="PNG")  # 100 MP: over Pillow's 89 MP warning
    monkeypatch.setattr(ImageFile.ImageFile, "load", no_decoding)
    settings.MAX_IMAGE_MEGAPIXELS = 99
    with pytest.raises(ParseError) as refused:
        parse(buffer.getvalue(), tmp_path)
    assert str(refused.value) == (
        "The image is 100.0 megapixels, more than the 99 megapixels allowed (PORTAL_MAX_IMAGE_MEGAPIXELS)."
    )


def test_a_bomb_over_pillows_hard_limit_says_its_size_and_pillow_still_refuses_it(tmp_path, settings):
    bomb = (Path(__file__).parent.parent / "files" / "bad" / "bomb.png").read_bytes()  # 20,000 x 20,000
    settings.MAX_IMAGE_MEGAPIXELS = 100
    with pytest.raises(ParseError, match=r"400\.0 megapixels, more than the 100 megapixels allowed"):
        parse(bomb, tmp_path)
    settings.MAX_IMAGE_MEGAPIXELS = 1000  # the setting allows it; Pillow's bomb protection does not
    with pytest.raises(ParseError, match="too large to open safely"):
        parse(bomb, tmp_path)


class CountingOCR:
    def __init__(self) -> None:
        self.inner = registry.ocr()
        self.model_id = self.inner.model_id
        self.calls = 0

    def read(self, image: Any) -> Any:
        self.calls += 1
        return self.inner.read(image)


@pytest.fixture
def ocr(monkeypatch) -> CountingOCR:
    counting = CountingOCR()
    monkeypatch.setattr(registry, "ocr", lambda: counting)
    return counting


@pytest.mark.django_db
def test_words_in_a_picture_are_read_with_their_boxes_and_cached(private_collection, ocr):
    data = text_image(INVOICE)
    document = ingest(private_collection, "发票.png", data)
    page = Page.objects.get(document=document)
    assert "Invoice 2024" in page.text
    assert "差旅费用" in page.text
    chunks = list(Chunk.objects.filter(document=document))
    text = " ".join(chunk.text for chunk in chunks)
    assert "350" in text
    assert "发票报销" in text
    (chunk,) = [c for c in chunks if "Invoice" in c.text]
    x0, y0, x1, y1 = chunk.location["bbox"]
    assert 0 <= x0 < x1 <= 900
    assert 0 <= y0 < y1 <= page.height
    image = PageImage.objects.get(page=page)
    assert image.file.read().startswith(b"\x89PNG")
    assert ocr.calls == 1
    assert DerivedText.objects.filter(task="ocr", model_id=ocr.model_id).count() == 1

    # The same picture again, under another name: read from the cache, not by the model.
    ingest(private_collection, "copy.png", data)
    assert ocr.calls == 1


@pytest.mark.django_db
def test_a_scanned_pdf_page_is_read_by_ocr_with_boxes_in_page_points(private_collection, ocr, tmp_path):
    data = scanned_pdf(tmp_path / "scan.pdf", ["Reimbursement form", "报销单 2024年5月"]).read_bytes()
    document = ingest(private_collection, "scan.pdf", data)
    page = Page.objects.get(document=document)
    assert page.needs_ocr is True
    assert "Reimbursement form" in page.text
    (chunk,) = Chunk.objects.filter(document=document, kind="text")
    assert "报销单" in chunk.text
    x0, y0, x1, y1 = chunk.location["bbox"]
    assert 40 <= x0 < x1 <= 595
    assert 60 <= y0 < y1 <= 842
    assert ocr.calls == 1


@pytest.mark.django_db
def test_a_lone_character_the_ocr_reads_is_not_indexed(private_collection, ocr, tmp_path):
    """A line the OCR reads as one digit is a fragment of the picture: it stays in the OCR's
    cached reading but becomes no chunk and no part of one; one Chinese character is a word."""
    from ingestion.enrich import worth_indexing

    data = scanned_pdf(tmp_path / "scan.pdf", ["Reimbursement form", "8", "报销单 2024年5月"]).read_bytes()
    document = ingest(private_collection, "scan.pdf", data)
    (reading,) = DerivedText.objects.filter(task="ocr", model_id=ocr.model_id)
    assert "8" in [line[0].strip() for line in reading.output], reading.output  # the OCR did read it
    texts = [chunk.text for chunk in Chunk.objects.filter(document=document)]
    assert any("Reimbursement form" in text for text in texts)
    assert not any("8" in text.split() for text in texts), texts
    assert (worth_indexing("8"), worth_indexing(" | "), worth_indexing("出"), worth_indexing("A4")) == (
        False,
        False,
        True,
        True,
    )
