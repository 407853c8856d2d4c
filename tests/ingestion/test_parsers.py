from __future__ import annotations

import re
from pathlib import Path

import pytest

from ingestion.parsers.base import ParseError
from ingestion.parsers.formats import parser_for, supported_types
from ingestion.sniff import sniff
from tests.ingestion.files import ZERO_PAGE_PDF, handbook_pdf


@pytest.fixture
def handbook(tmp_path):
    return handbook_pdf(tmp_path / "handbook.pdf")


def test_a_latex_pdf_whose_fonts_have_no_unicode_map_reads_as_typed():
    """The survival package's vignette (r-cran-survival, LGPL-2+: eval/manifest-en.jsonl) is set
    in T1-encoded fonts without a Unicode map: PyMuPDF returns fi as \\x1c and the en dash of
    an age band as \\x15, which no one types and no search finds."""
    path = Path(__file__).resolve().parents[2] / "eval" / "files" / "en" / "adjcurve.pdf"
    pages = list(parser_for(sniff(path)).pages(path))
    text = "\n".join(page.text for page in pages)
    assert not re.search(r"[\x10-\x11\x15-\x1f]", text)
    assert "those in the 70–89th" in pages[2].text
    assert "70–74" in pages[4].text  # Table 2's age bands
    assert "first line therapy" in " ".join(text.split())
    assert "effect of interest" in " ".join(text.split())


def test_it_reads_a_pdf_page_by_page_with_bboxes(handbook):
    first, scan = list(parser_for(sniff(handbook)).pages(handbook))
    kinds = [block.kind for block in first.blocks]
    assert kinds == ["heading", "text", "table", "image", "text"]
    heading, body, table, image, _caption = first.blocks
    assert heading.text == "Travel policy 差旅政策"
    assert heading.level == 1
    assert body.text.startswith("Employees are reimbursed")
    assert "city tier" in body.text
    assert table.cells == (("City", "Cap"), ("Beijing", "600"), ("Chengdu", "400"))
    assert "|Beijing|600|" in table.text.replace(" ", "")
    assert image.text == "Figure 1: the reimbursement flow."  # the caption below it
    assert image.image is not None
    assert image.image.startswith(b"\x89PNG")
    assert image.bbox is not None
    x0, y0, x1, y1 = image.bbox
    assert (x0, y0, x1, y1) == pytest.approx((72, 300, 272, 420), abs=1)
    assert all(block.bbox for block in first.blocks)
    assert "Company handbook - page 1" not in first.text  # the footer band is dropped
    assert first.render is None  # drawn on first view (knowledge.renders), not while indexing
    assert (first.width, first.height, first.needs_ocr) == (595, 842, False)
    assert scan.needs_ocr is True
    assert scan.render is not None  # the OCR reads it
    assert scan.render.startswith(b"\x89PNG")
    assert scan.number == 2


def test_it_changes_the_hash_only_when_content_changes(handbook, tmp_path):
    again = handbook_pdf(tmp_path / "again.pdf")
    first = [p.content_sha256 for p in parser_for("application/pdf").pages(handbook)]
    second = [p.content_sha256 for p in parser_for("application/pdf").pages(again)]
    assert first == second
    assert first[0] != first[1]


def test_it_refuses_encrypted_and_damaged_pdfs(handbook, tmp_path):
    import pymupdf

    locked = tmp_path / "locked.pdf"
    with pymupdf.open(handbook) as document:
        aes = pymupdf.PDF_ENCRYPT_AES_256  # type: ignore[attr-defined]
        document.save(locked, encryption=aes, user_pw="secret", owner_pw="owner")
    with pytest.raises(ParseError, match="password-protected"):
        list(parser_for("application/pdf").pages(locked))
    truncated = tmp_path / "truncated.pdf"
    truncated.write_bytes(handbook.read_bytes()[:300])
    with pytest.raises(ParseError, match="PDF"):
        list(parser_for("application/pdf").pages(truncated))


def test_it_splits_markdown_into_sections_with_heading_paths(tmp_path):
    path = tmp_path / "guide.md"
    path.write_text(
        "Intro line.\n\n# 报销指南\n\n总则段落。\n\n## 住宿\n\n一线城市每晚 600 元。\n\n```\n# not a heading\n```\n\n"
        "## Meals\n\nUp to 100 a day.\n\n# Appendix\n\nSee HR.\n",
        encoding="utf-8",
    )
    pages = list(parser_for(sniff(path, "guide.md")).pages(path))
    assert [p.heading_path for p in pages] == [
        (),
        ("报销指南",),
        ("报销指南", "住宿"),
        ("报销指南", "Meals"),
        ("Appendix",),
    ]
    assert "# not a heading" in pages[2].text
    assert [p.number for p in pages] == [1, 2, 3, 4, 5]
    assert all(p.kind == "section" for p in pages)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-8-sig", "utf-16", "gbk", "gb18030"])
def test_it_reads_text_in_any_common_encoding(tmp_path, encoding):
    path = tmp_path / "notes.txt"
    path.write_bytes("差旅报销须在十五个工作日内提交。\n\nClaims are due in 15 days.\n".encode(encoding))
    assert sniff(path, "notes.txt") == "text/plain"
    (page,) = parser_for("text/plain").pages(path)
    assert page.text == "差旅报销须在十五个工作日内提交。\n\nClaims are due in 15 days."


def test_it_sniffs_the_type_from_content_not_the_name(tmp_path, handbook):
    disguised = tmp_path / "report.txt"
    disguised.write_bytes(handbook.read_bytes())
    assert sniff(disguised, "report.txt") == "application/pdf"
    binary = tmp_path / "data.txt"
    binary.write_bytes(bytes(range(256)) * 8)
    assert sniff(binary, "data.txt") == "application/octet-stream"
    with pytest.raises(ParseError, match="cannot be indexed"):
        parser_for("application/octet-stream")
    empty = tmp_path / "empty.md"
    empty.write_bytes(b"")
    with pytest.raises(ParseError, match="empty"):
        sniff(empty, "empty.md")
    assert {"application/pdf", "text/markdown", "text/plain"} <= set(supported_types())


def test_it_refuses_a_pdf_over_the_page_limit(tmp_path, settings):
    import pymupdf

    settings.MAX_PAGES = 5000
    document = pymupdf.open()
    for _ in range(10_000):
        document.new_page(width=50, height=50)
    path = tmp_path / "tiny.pdf"
    document.save(path)
    with pytest.raises(ParseError, match="10,000 pages; the limit is 5,000"):
        list(parser_for("application/pdf").pages(path))


def test_it_sniffs_bytes_in_memory_as_it_sniffs_files(tmp_path, handbook):
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("word/document.xml", "<w:document/>")
    from ingestion.sniff import DOCX, sniff_bytes

    assert sniff_bytes(buffer.getvalue(), "report.pdf") == DOCX
    assert sniff_bytes(handbook.read_bytes(), "x.txt") == sniff(handbook) == "application/pdf"
    assert sniff_bytes("# 标题".encode("gbk"), "a.md") == "text/markdown"


def test_compatibility_characters_from_pdf_fonts_are_folded(tmp_path):
    """Fonts often map 北 to U+F963 (CJK compatibility): it looks the same and matches nothing."""
    import pymupdf

    from ingestion.terms import terms
    from tests.ingestion.files import cjk_font

    font = cjk_font()
    document = pymupdf.open()
    page = document.new_page()
    page.insert_text((72, 100), "\uf963京出差 １４号", fontsize=12, fontname="cjk", fontfile=str(font))
    document.save(tmp_path / "compat.pdf")
    (parsed,) = parser_for("application/pdf").pages(tmp_path / "compat.pdf")
    assert "北京出差 14号" in parsed.text
    assert {"北京", "14"} <= set(terms("\uf963京出差 １４号"))


def test_a_poster_sized_page_is_rendered_within_the_pixel_cap(tmp_path, settings):
    """A 5,000-point page holding only a picture is read by OCR; at 200 dpi its render would be
    193 million pixels (580 MB) from a file of a few KB. It is drawn at the dpi that fits."""
    import io

    import pymupdf
    from PIL import Image

    from common.render import MAX_RENDER_PIXELS, render_png
    from ingestion.parsers import pdf

    picture = io.BytesIO()
    Image.new("RGB", (300, 300), "white").save(picture, "PNG")
    document = pymupdf.open()
    page = document.new_page(width=5000, height=5000)
    page.insert_image(pymupdf.Rect(0, 0, 5000, 5000), stream=picture.getvalue())
    path = tmp_path / "poster.pdf"
    document.save(path)
    (parsed,) = parser_for("application/pdf").pages(path)
    assert parsed.needs_ocr
    assert parsed.render is not None
    width, height = Image.open(io.BytesIO(parsed.render)).size
    assert width * height <= MAX_RENDER_PIXELS
    assert width >= 4_900  # as large as the cap allows, not shrunk further
    with pymupdf.open(path) as again:  # the citation render and a clipped area likewise
        whole = Image.open(io.BytesIO(render_png(again.load_page(0), pdf.RENDER_DPI))).size
        clip = Image.open(io.BytesIO(render_png(again.load_page(0), pdf.OCR_DPI, clip=(0, 0, 5000, 2500)))).size
    assert whole[0] * whole[1] <= MAX_RENDER_PIXELS
    assert clip[0] * clip[1] <= MAX_RENDER_PIXELS
    assert clip[0] > whole[0]  # half the area: a higher dpi fits


def test_a_pdfs_running_header_is_left_out_like_its_footer(tmp_path):
    import pymupdf

    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    page.insert_text((72, 30), "ACME Corp - internal", fontsize=8)  # inside the top 6 %
    page.insert_text((72, 120), "Hotels are capped by city tier.", fontsize=11)
    page.insert_text((72, 820), "page 1 of 1", fontsize=8)
    document.save(tmp_path / "banded.pdf")
    (parsed,) = parser_for("application/pdf").pages(tmp_path / "banded.pdf")
    assert parsed.text == "Hotels are capped by city tier."


def test_a_zero_page_pdf_is_refused_by_the_parser(tmp_path):
    path = tmp_path / "empty.pdf"
    path.write_bytes(ZERO_PAGE_PDF)
    with pytest.raises(ParseError, match="no pages"):
        list(parser_for("application/pdf").pages(path))


def test_every_parser_is_in_the_formats_table_once():
    from ingestion.parsers.base import Parser
    from ingestion.parsers.formats import BY_TYPE, PARSERS

    def concrete(cls: type) -> set[type]:
        subs = cls.__subclasses__()
        found = {sub for sub in subs if getattr(sub, "mime_types", ()) and sub.__module__.startswith("ingestion.")}
        return found.union(*(concrete(sub) for sub in subs))

    assert concrete(Parser) == set(PARSERS)  # a parser written but not listed reads nothing
    assert len(BY_TYPE) == sum(len(parser.mime_types) for parser in PARSERS)  # no type read by two
