from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from ingestion import actions
from ingestion.chunking import chunk_page
from ingestion.parsers import pptx as pptx_parser
from ingestion.parsers.base import ParsedPage, ParseError
from ingestion.parsers.docx import DocxParser, image_png
from ingestion.parsers.formats import check_indexable, parser_for
from ingestion.parsers.pptx import PptxParser
from ingestion.sniff import DOCX, PPTX, ZIP, sniff, sniff_bytes
from knowledge.models import Document
from tests.ingestion.files import png
from tests.ingestion.office_files import (
    FOOTER,
    HEADER,
    briefing_pptx,
    content_controls_docx,
    handbook_docx,
    jpeg,
    plain_zip,
    with_member,
)

PNG = b"\x89PNG\r\n\x1a\n"
TITLE = "Travel handbook 差旅手册"


@pytest.fixture(autouse=True)
def no_libreoffice(monkeypatch):
    """Slides are parsed without renders unless a test brings its own LibreOffice."""
    monkeypatch.setattr(pptx_parser, "libreoffice", lambda: None)


@pytest.fixture
def handbook(tmp_path) -> Path:
    return handbook_docx(tmp_path / "handbook.docx")


@pytest.fixture
def briefing(tmp_path) -> Path:
    return briefing_pptx(tmp_path / "briefing.pptx")


def kinds(page: ParsedPage) -> list[str]:
    return [block.kind for block in page.blocks]


def test_it_sniffs_word_and_powerpoint_files_to_their_parsers(handbook, briefing):
    assert sniff(handbook) == DOCX
    assert sniff(briefing) == PPTX
    assert isinstance(parser_for(DOCX), DocxParser)
    assert isinstance(parser_for(PPTX), PptxParser)


def test_it_reads_a_word_document_as_one_section_per_heading(handbook):
    pages = list(parser_for(DOCX).pages(handbook))
    assert [page.heading_path for page in pages] == [
        (),
        (TITLE, "Reimbursement"),
        (TITLE, "Reimbursement", "Hotels"),
        (TITLE, "Reimbursement", "Receipts"),
        (TITLE, "Contacts"),
    ]  # the title alone and "Empty chapter" have no body: no section
    assert [page.number for page in pages] == [1, 2, 3, 4, 5]
    assert {page.kind for page in pages} == {"section"}
    intro, reimbursement, hotels, _receipts, contacts = pages
    assert intro.text == "Draft for review."
    assert kinds(reimbursement) == ["heading", "text", "text"]
    assert (reimbursement.blocks[0].text, reimbursement.blocks[0].level) == ("Reimbursement", 1)
    assert reimbursement.blocks[2].text == "差旅费用凭发票报销。"
    assert (hotels.blocks[0].text, hotels.blocks[0].level) == ("Hotels", 2)
    assert kinds(contacts) == ["heading", "text", "image"]
    assert contacts.blocks[2].text == "Write to hr@example.com."  # nothing after it: the text before


def test_it_leaves_out_headers_and_footers(handbook):
    text = "\n".join(page.text for page in parser_for(DOCX).pages(handbook))
    assert HEADER not in text
    assert FOOTER not in text


def test_it_reads_content_controls_but_not_a_table_of_contents(tmp_path):
    path = content_controls_docx(tmp_path / "form.docx")
    (page,) = parser_for(DOCX).pages(path)
    assert page.heading_path == ("Policy",)
    assert page.text == "Policy\n\nFilled in from a form."


def test_it_repeats_a_merged_cell_in_every_position_it_spans(handbook):
    hotels = list(parser_for(DOCX).pages(handbook))[2]
    assert kinds(hotels) == ["heading", "table"]
    table = hotels.blocks[1]
    assert table.cells == (
        ("City", "Tier", "Cap"),
        ("Beijing", "1", "600"),
        ("Shanghai", "1", "600"),  # vertically merged with Beijing's tier
        ("Chengdu", "Ask HR", "Ask HR"),  # one cell across tier and cap
    )
    assert table.text == ("|City|Tier|Cap|\n|---|---|---|\n|Beijing|1|600|\n|Shanghai|1|600|\n|Chengdu|Ask HR|Ask HR|")


def test_it_keeps_word_pictures_as_png_with_their_captions(handbook):
    receipts = list(parser_for(DOCX).pages(handbook))[3]
    assert kinds(receipts) == ["heading", "text", "image", "image", "text", "text"]
    _heading, stamped, in_paragraph, alone, caption, last = receipts.blocks
    assert in_paragraph.text == stamped.text == "Stamped receipt example:"  # its own paragraph
    assert alone.text == caption.text == "Figure 1: 报销流程 the claim flow."  # the next paragraph
    assert last.text == "Submit receipts within 15 days."  # its 32 px icon is left out
    for image in (in_paragraph, alone):
        assert image.image is not None
        assert image.image.startswith(PNG)  # the JPEG too
        assert image.read_text is True


def test_it_converts_pictures_to_png_and_skips_icons_and_undrawable_ones():
    cmyk = image_png(jpeg(100, 80, mode="CMYK"))
    assert cmyk is not None
    assert cmyk.startswith(PNG)
    assert image_png(png(63, 200)) is None
    assert image_png(b"\x01\x00\x09\x00 not a picture Pillow can draw") is None


def test_it_hashes_a_word_document_the_same_each_time(handbook, tmp_path):
    again = handbook_docx(tmp_path / "again.docx")
    first = [page.content_sha256 for page in parser_for(DOCX).pages(handbook)]
    assert first == [page.content_sha256 for page in parser_for(DOCX).pages(again)]


def test_it_reads_a_presentation_slide_by_slide_in_reading_order(briefing):
    first, second, third = parser_for(PPTX).pages(briefing)
    assert [page.number for page in (first, second, third)] == [1, 2, 3]
    assert {page.kind for page in (first, second, third)} == {"slide"}
    assert (first.width, first.height, first.render) == (720, 540, None)
    assert first.heading_path == ("Travel policy 差旅政策",)
    assert kinds(first) == ["heading", "text", "text"]
    heading, bullets, grouped = first.blocks
    assert (heading.text, heading.level) == ("Travel policy 差旅政策", 1)
    assert bullets.text == "Book hotels through the portal\n差旅费用凭发票报销"
    assert bullets.bbox is not None
    assert 0 <= bullets.bbox[0] < bullets.bbox[2] <= 720
    assert 0 <= bullets.bbox[1] < bullets.bbox[3] <= 540
    assert grouped.text == "Questions? Ask HR."
    # The group was moved to (5, 6) inches and stretched to twice its width after the text box
    # went in at (1, 1): the box is where the group puts it, not where it was drawn.
    assert grouped.bbox == (360, 432, 648, 468)


def test_it_reads_a_slides_table_and_speaker_notes(briefing):
    second = list(parser_for(PPTX).pages(briefing))[1]
    assert second.heading_path == ("Hotel caps",)
    assert kinds(second) == ["heading", "table", "text", "notes"]
    _heading, table, text, notes = second.blocks
    assert table.cells == (("City", "Cap"), ("Beijing", "600"), ("Other cities: ask HR", "Other cities: ask HR"))
    assert table.text.startswith("|City|Cap|\n|---|---|\n|Beijing|600|")
    assert table.bbox == (72, 144, 504, 252)
    assert (text.text, text.bbox) == ("Caps are per night.", (72, 288, 504, 324))
    assert (notes.text, notes.bbox) == ("Remind everyone that caps include breakfast.", None)


def test_it_keeps_a_slides_pictures_as_png(briefing):
    third = list(parser_for(PPTX).pages(briefing))[2]
    assert third.heading_path == ()
    assert kinds(third) == ["image", "text"]  # the 40 px icon is left out
    image, text = third.blocks
    assert image.image is not None
    assert image.image.startswith(PNG)
    assert (image.text, image.read_text, image.bbox) == ("", True, (144, 72, 432, 288))
    assert text.text == "The claim flow."


def test_a_slides_picture_is_captioned_with_the_slides_title(tmp_path):
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])  # Title Only
    slide.shapes.title.text = "Claim flow 报销流程"
    slide.shapes.add_picture(io.BytesIO(png(200, 150)), Inches(2), Inches(2), width=Inches(4))
    deck.save(str(tmp_path / "flow.pptx"))
    (page,) = parser_for(PPTX).pages(tmp_path / "flow.pptx")
    (picture,) = [block for block in page.blocks if block.kind == "image"]
    assert picture.text == "Claim flow 报销流程"
    assert picture.read_text is True


def test_it_chunks_a_slide_into_table_text_and_notes(briefing):
    second = list(parser_for(PPTX).pages(briefing))[1]
    chunks = chunk_page(second)
    assert [chunk.kind for chunk in chunks] == ["table", "text", "notes"]
    assert {chunk.heading_path for chunk in chunks} == {("Hotel caps",)}
    assert chunks[2].text == "Remind everyone that caps include breakfast."


def fake_libreoffice(folder: Path, pages: int, exit_code: int = 0, hang: bool = False) -> str:
    """Stands in for `soffice --convert-to pdf`: writes a PDF of `pages` blank pages."""
    script = folder / "soffice"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys, time, pymupdf\n"
        f"if {hang}:\n    time.sleep(60)\n"
        "from pathlib import Path\n"
        "args = sys.argv[1:]\n"
        f"if {exit_code}:\n    sys.exit({exit_code})\n"
        "document = pymupdf.open()\n"
        f"for _ in range({pages}):\n    document.new_page(width=720, height=540)\n"
        "document.save(Path(args[args.index('--outdir') + 1]) / (Path(args[-1]).stem + '.pdf'))\n"
    )
    script.chmod(0o755)
    return str(script)


def test_it_renders_slides_through_libreoffice_when_installed(briefing, tmp_path, monkeypatch):
    monkeypatch.setattr(pptx_parser, "libreoffice", lambda: fake_libreoffice(tmp_path, pages=3))
    renders = [page.render for page in parser_for(PPTX).pages(briefing)]
    assert all(render is not None and render.startswith(PNG) for render in renders)


def test_it_matches_renders_to_slides_when_libreoffice_leaves_out_hidden_ones(tmp_path, monkeypatch):
    from pptx import Presentation

    deck = Presentation(str(briefing_pptx(tmp_path / "deck.pptx")))
    deck.slides[1]._element.set("show", "0")
    hidden = tmp_path / "hidden.pptx"
    deck.save(str(hidden))
    monkeypatch.setattr(pptx_parser, "libreoffice", lambda: fake_libreoffice(tmp_path, pages=2))
    renders = [page.render for page in parser_for(PPTX).pages(hidden)]
    assert [render is not None for render in renders] == [True, False, True]


def test_it_parses_slides_without_renders_when_libreoffice_fails(briefing, tmp_path, monkeypatch):
    monkeypatch.setattr(pptx_parser, "libreoffice", lambda: fake_libreoffice(tmp_path, pages=3, exit_code=1))
    pages = list(parser_for(PPTX).pages(briefing))
    assert [page.render for page in pages] == [None, None, None]
    assert pages[0].heading_path == ("Travel policy 差旅政策",)


def test_it_refuses_a_zip_that_is_no_office_document(tmp_path):
    fake = plain_zip(tmp_path / "report.docx", {"notes.txt": "just text"})
    assert sniff(fake, "report.docx") == "application/zip"
    with pytest.raises(ParseError, match="cannot be indexed"):
        parser_for(sniff(fake, "report.docx"))
    with pytest.raises(ParseError, match=r"word/document\.xml is missing"):
        list(DocxParser().pages(fake))
    with pytest.raises(ParseError, match=r"ppt/presentation\.xml is missing"):
        list(PptxParser().pages(fake))


DAMAGED = "The file looks like a damaged or incomplete Office document (zip): save it again from its program."


def test_it_says_a_zip_named_as_an_office_file_is_damaged_or_incomplete(handbook, tmp_path):
    truncated = tmp_path / "truncated.docx"
    truncated.write_bytes(handbook.read_bytes()[:300])  # the zip signature, no directory
    no_office = plain_zip(tmp_path / "notes.zip", {"notes.txt": "just text"})
    assert sniff(truncated, "budget.xlsx") == sniff(no_office, "report.docx") == ZIP  # the content decides
    for path, name in ((truncated, "budget.xlsx"), (no_office, "report.docx"), (no_office, "deck.PPTX")):
        with pytest.raises(ParseError) as refused:
            check_indexable(sniff(path, name), name)
        assert str(refused.value) == DAMAGED, name
    with pytest.raises(ParseError, match="Files of type application/zip cannot be indexed"):
        check_indexable(ZIP, "notes.zip")  # a zip that does not claim to be Office


def test_it_says_an_office_name_on_content_that_is_no_zip_is_not_an_office_document(tmp_path):
    seven_zip = b"7z\xbc\xaf\x27\x1c\x00\x04" + bytes(range(200)) * 4
    assert sniff_bytes(seven_zip, "deck.pptx") == "application/octet-stream"
    with pytest.raises(ParseError, match=r"The name ends in \.pptx, but the content is not an Office document"):
        check_indexable(sniff_bytes(seven_zip, "deck.pptx"), "deck.pptx")
    with pytest.raises(ParseError, match="cannot be indexed"):
        check_indexable(sniff_bytes(seven_zip, "archive.7z"), "archive.7z")
    # Text named .docx is text: the name never decides the type.
    text = b"# Notes\n\nPlain text saved with the wrong name.\n"
    assert sniff_bytes(text, "notes.docx") == "text/plain"
    check_indexable("text/plain", "notes.docx")


def test_it_refuses_an_upload_of_a_broken_office_file_in_those_words(private_collection, handbook):
    with pytest.raises(ValidationError) as refused:
        actions.do_add_document(private_collection, "handbook.docx", handbook.read_bytes()[:300], enqueue=False)
    assert refused.value.messages == [f"handbook.docx: {DAMAGED}"]
    assert not Document.objects.filter(collection=private_collection).exists()


def test_it_refuses_truncated_and_damaged_office_files(handbook, briefing, tmp_path):
    truncated = tmp_path / "truncated.docx"
    truncated.write_bytes(handbook.read_bytes()[:300])
    with pytest.raises(ParseError, match="broken zip"):
        list(DocxParser().pages(truncated))
    damaged = with_member(handbook, tmp_path / "damaged.docx", "word/document.xml", "<w:document")
    with pytest.raises(ParseError, match="Word document cannot be opened"):
        list(DocxParser().pages(damaged))
    damaged_deck = with_member(briefing, tmp_path / "damaged.pptx", "ppt/presentation.xml", "<p:presentation")
    with pytest.raises(ParseError, match="presentation cannot be opened"):
        list(PptxParser().pages(damaged_deck))


def test_it_gives_up_on_a_libreoffice_that_hangs(briefing, tmp_path, monkeypatch):
    monkeypatch.setattr(pptx_parser, "CONVERT_TIMEOUT_S", 1)
    monkeypatch.setattr(pptx_parser, "libreoffice", lambda: fake_libreoffice(tmp_path, pages=3, hang=True))
    assert [page.render for page in parser_for(PPTX).pages(briefing)] == [None, None, None]


def test_a_presentation_says_how_many_slides_it_has_before_they_are_read(briefing, tmp_path):
    parser = parser_for("application/vnd.openxmlformats-officedocument.presentationml.presentation")
    assert parser.count(briefing) == len(list(parser.pages(briefing))) > 1
    broken = tmp_path / "broken.pptx"
    broken.write_bytes(b"PK\x03\x04 not a presentation")
    assert parser.count(broken) is None  # reading it says why
