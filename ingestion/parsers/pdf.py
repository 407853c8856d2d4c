"""PDF with PyMuPDF: one page each, text blocks in reading order without the header and footer
bands, headings from font size, tables as Markdown with their cells, embedded images with the
text beside them as caption, a PNG render for citations, and every block's bbox."""

from __future__ import annotations

import statistics
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _

from common.render import render_png
from ingestion import tables as grids
from ingestion.parsers.base import BBox, Block, ParsedPage, ParseError, Parser, markdown_table
from ingestion.stages import stage

RENDER_DPI = 110  # pictures PyMuPDF cannot extract alone are drawn from the page at this size
OCR_DPI = 200  # pages the OCR reads are rendered sharper: small print needs the pixels
MIN_IMAGE_PX = 64  # smaller images are icons and rules, not content
MAX_MARK = 24.0  # points: a drawing this small inside an empty table cell is a mark (✓, ●), not a rule
BAND = 0.06  # top and bottom share of the page where running headers and footers live
HEADING_RATIO = 1.2  # a line this much larger than the body text is a heading
MIN_TEXT_CHARS = 20  # fewer characters than this and the page is read by OCR instead
MOSTLY_IMAGE = 0.6  # pictures cover this share of a page with little text: OCR reads it too
LITTLE_TEXT_CHARS = 200
# T1 (Cork) encoding's slots below 0x20, as PyMuPDF returns them for a font without a Unicode
# map; 0x12-0x14 are left alone: in math fonts (cmex) the same slots are large brackets.
T1_CONTROLS = str.maketrans(
    {
        "\x10": "\u201c",
        "\x11": "\u201d",
        "\x15": "\u2013",
        "\x16": "\u2014",
        "\x17": "",
        "\x19": "\u0131",
        "\x1b": "ff",
        "\x1c": "fi",
        "\x1d": "fl",
        "\x1e": "ffi",
        "\x1f": "ffl",
    }
)


class PdfParser(Parser):
    mime_types = ("application/pdf",)
    splits = True

    def count(self, path: Path) -> int | None:
        import pymupdf

        try:
            with pymupdf.open(path, filetype="pdf") as document:
                return None if document.needs_pass else int(document.page_count)
        except Exception:  # damaged: pages() reports it
            return None

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        return self.page_range(path, 1, settings.MAX_PAGES)

    def page_range(self, path: Path, first: int, last: int) -> Iterator[ParsedPage]:
        import pymupdf

        try:
            with stage("open"):
                document = pymupdf.open(path, filetype="pdf")
        except Exception as exc:  # PyMuPDF raises several types for a damaged file
            raise ParseError(
                _("The PDF cannot be opened: it is damaged or not really a PDF (%s).") % _reason(exc, path)
            ) from exc
        with document:
            if document.needs_pass:
                raise ParseError(_("The PDF is password-protected: remove the password and upload it again."))
            if document.page_count == 0:
                raise ParseError(_("The PDF has no pages."))
            if document.page_count > settings.MAX_PAGES:
                raise ParseError(
                    _(
                        "The PDF has %(pages)s pages; the limit is %(limit)s (PORTAL_MAX_PAGES). "
                        "Split it into smaller files."
                    )
                    % {"pages": f"{document.page_count:,}", "limit": f"{settings.MAX_PAGES:,}"}
                )
            for index in range(first - 1, min(last, document.page_count)):
                try:
                    page = document.load_page(index)
                    yield _parse_page(page, index + 1)
                except ParseError:
                    raise
                except Exception as exc:
                    raise ParseError(
                        _("Page %(number)s of the PDF cannot be read: %(error)s") % {"number": index + 1, "error": exc}
                    ) from exc


def _reason(exc: Exception, path: Path) -> str:
    """PyMuPDF's message without the stored file's path on the server ("Failed to open file
    '/srv/.../originals/ab/ab12…' as type pdf."): people see this message."""
    return str(exc).replace(f"'{path}' ", "").replace(str(path), "")


def _parse_page(page: Any, number: int) -> ParsedPage:
    width, height = float(page.rect.width), float(page.rect.height)
    with stage("layout"):
        drawings = page.get_cdrawings()
        raw = page.get_text("dict", sort=True)["blocks"]
    tables = find_tables(page, drawings, raw)
    table_boxes = [tuple(table.bbox) for table in tables]
    with stage("layout"):
        texts = [b for b in raw if b.get("type") == 0 and not _inside_any(b["bbox"], table_boxes)]
        texts = [b for b in texts if not _in_band(b, height) and _block_text(b)]
        marks = _marks(drawings, raw)
        blocks = _text_blocks(texts)
    with stage("table_grid"):
        words = _words(page) if tables else []  # read once for all the page's tables
        blocks += [_table_block(page, table, marks, drawings, words) for table in tables]
    with stage("pictures"):
        blocks += _image_blocks(page, [b for b in raw if b.get("type") == 1], texts)
    blocks.sort(key=lambda block: (round((block.bbox or (0, 0, 0, 0))[1]), (block.bbox or (0, 0, 0, 0))[0]))
    chars = sum(len(block.text) for block in blocks if block.kind in ("heading", "text", "table"))
    pictures = [b["bbox"] for b in raw if b.get("type") == 1]
    covered = sum(max(x1 - x0, 0) * max(y1 - y0, 0) for x0, y0, x1, y1 in pictures) / (width * height or 1)
    needs_ocr = bool(pictures) and (chars < MIN_TEXT_CHARS or (covered >= MOSTLY_IMAGE and chars < LITTLE_TEXT_CHARS))
    render = None
    if needs_ocr:  # only the OCR needs a render now; citations get theirs on first view (knowledge.renders)
        with stage("render"):
            render = render_png(page, OCR_DPI)
    return ParsedPage(
        number=number,
        kind="pdf_page",
        blocks=tuple(blocks),
        width=width,
        height=height,
        render=render,
        needs_ocr=needs_ocr,
    )


def find_tables(page: Any, drawings: list[dict[str, Any]], raw: list[dict[str, Any]]) -> list[Any]:
    """The page's tables by PyMuPDF's detection (the layout model, then ruling lines), which
    costs ~90 ms a page: skipped on pages that draw nothing. An error inside PyMuPDF's
    detection (None) means no table."""
    if not drawings:
        return []
    with stage("table_detection"):
        found = page.find_tables()
    return list(found.tables) if found is not None else []


def _block_text(block: dict[str, Any]) -> str:
    lines = ["".join(span["text"] for span in line["spans"]).strip() for line in block.get("lines", [])]
    return fold("\n".join(line for line in lines if line))


def fold(text: str) -> str:
    """Text as people type it. NFKC: fonts often map CJK characters to compatibility code
    points (北 as U+F963) that look the same but match nothing people type; ligatures (ﬁ) and
    full-width digits too. Control characters from TeX's T1 font encoding, which PDFs made by
    LaTeX carry when a font has no Unicode map: "\x1crst" is "first", "70\x1579" is "70–79"
    (in three of the evaluation's PDFs, every fi, ff, fl, en dash and quote was one)."""
    return unicodedata.normalize("NFKC", text.translate(T1_CONTROLS))


def _size(block: dict[str, Any]) -> float:
    spans = [span for line in block["lines"] for span in line["spans"] if span["text"].strip()]
    chars = sum(len(span["text"]) for span in spans)
    return sum(span["size"] * len(span["text"]) for span in spans) / chars if chars else 0.0


def _text_blocks(raw: list[dict[str, Any]]) -> list[Block]:
    sizes = [_size(b) for b in raw]
    weights = [len(_block_text(b)) for b in raw]
    body = statistics.median([s for s, w in zip(sizes, weights, strict=True) for _ in range(min(w, 200))] or [0])
    heading_sizes = sorted(
        {
            round(s, 1)
            for s, b in zip(sizes, raw, strict=True)
            if body and s >= body * HEADING_RATIO and len(_block_text(b)) <= 200
        },
        reverse=True,
    )
    blocks = []
    for block, size in zip(raw, sizes, strict=True):
        text, bbox = _block_text(block), _bbox(block["bbox"])
        if round(size, 1) in heading_sizes:
            level = min(heading_sizes.index(round(size, 1)) + 1, 6)
            blocks.append(Block("heading", " ".join(text.split("\n")), bbox=bbox, level=level))
        else:
            blocks.append(Block("text", text, bbox=bbox))
    return blocks


def _table_block(
    page: Any, table: Any, marks: list[BBox], drawings: list[dict[str, Any]], words: list[tuple[grids.Word, bool]]
) -> Block:
    """A table as Markdown and cells, from the words inside its box (ingestion.tables: measured
    against PyMuPDF's own cell text, which merges the rows of a table without ruling lines and
    splits glyphs where a dotted leader runs); PyMuPDF's cells where the words form no grid.
    An empty cell with a drawn mark in it says so (grids.DRAWING)."""
    grid = table_grid(page, table, drawings, words)
    if grid is None:
        rows = [[fold((cell or "").strip()) for cell in row] for row in table.extract()]
        boxes = [[tuple(cell) if cell else (0.0, 0.0, 0.0, 0.0) for cell in row.cells] for row in table.rows]
        grid = grids.Grid(tuple(map(tuple, rows)), 1, tuple(tuple(map(_bbox, row)) for row in boxes))
    drawn = grids.drawn_cells(grid, marks)
    cells = tuple(
        tuple(grids.DRAWING if (r, c) in drawn else fold(text) for c, text in enumerate(row))
        for r, row in enumerate(grid.rows)
    )
    text = markdown_table(cells) if cells and cells[0] else ""
    if drawn:
        text += f"\n({len(drawn)} cells hold a drawn mark, not text: {grids.DRAWING})"
    return Block("table", text, bbox=_bbox(table.bbox), cells=cells, header_rows=grid.header_rows)


def table_grid(
    page: Any,
    table: Any,
    drawings: list[dict[str, Any]] | None = None,
    words: list[tuple[grids.Word, bool]] | None = None,
) -> grids.Grid | None:
    """The grid that the words inside `table`'s box form, its header rows bounded by the
    rules drawn there; None for a table set sideways (PyMuPDF's cells are used then)."""
    x0, y0, x1, y1 = table.bbox
    inside = [
        (w, across)
        for w, across in (_words(page) if words is None else words)
        if x0 <= (w[0] + w[2]) / 2 <= x1 and y0 <= (w[1] + w[3]) / 2 <= y1
    ]
    level = [w for w, across in inside if across]
    if len(level) < len(inside) / 2:  # a table set sideways: its lines run down the page
        return None
    rules = [
        tuple(d["rect"])
        for d in (page.get_cdrawings() if drawings is None else drawings)
        if min(d["rect"][2] - d["rect"][0], d["rect"][3] - d["rect"][1]) < 1.5
        and d["rect"][0] < x1
        and d["rect"][2] > x0
        and y0 - 2 <= d["rect"][1] <= y1 + 2
    ]
    return grids.grid_from_words(level, tuple(table.bbox), rules)


def _words(page: Any) -> list[tuple[grids.Word, bool]]:
    """The page's words from its characters, split at spaces and gaps only, each with whether
    its line runs across the page. PyMuPDF's own words also split at control characters, and
    TeX's T1 fonts type the en dash of "50–54" as one (fold): its words would read "50" and "54"."""
    words: list[tuple[grids.Word, bool]] = []
    for block in page.get_text("rawdict")["blocks"]:
        for line in block.get("lines", []):
            across = abs(line["dir"][1]) < 0.1  # written left to right, not turned
            chars = [char for span in line["spans"] for char in span["chars"]]
            word: list[dict[str, Any]] = []
            for char in [*chars, None]:
                gap = (
                    char is not None
                    and word
                    and char["bbox"][0] - word[-1]["bbox"][2] > 0.15 * (char["bbox"][3] - char["bbox"][1])
                )
                if char is None or char["c"].isspace() or gap:
                    if word:
                        text = fold("".join(c["c"] for c in word)).strip()
                        box = (word[0]["bbox"][0], min(c["bbox"][1] for c in word), word[-1]["bbox"][2])
                        words += [((*box, max(c["bbox"][3] for c in word), text), across)] if text else []
                    word = []
                if char is not None and not char["c"].isspace():
                    word.append(char)
    return words


def _marks(drawings: list[dict[str, Any]], raw: list[dict[str, Any]]) -> list[BBox]:
    """Small drawings and images: check marks, dots and symbols drawn rather than typed."""
    boxes = [d["rect"] for d in drawings] + [b["bbox"] for b in raw if b.get("type") == 1]
    return [
        _bbox(box)
        for box in boxes
        if max(box[2] - box[0], box[3] - box[1]) <= MAX_MARK and min(box[2] - box[0], box[3] - box[1]) >= 1.5
    ]


def _image_blocks(page: Any, images: list[dict[str, Any]], texts: list[dict[str, Any]]) -> list[Block]:
    import pymupdf

    blocks = []
    for image in images:
        if min(image.get("width", 0), image.get("height", 0)) < MIN_IMAGE_PX:
            continue
        bbox = _bbox(image["bbox"])
        try:
            png = pymupdf.Pixmap(image["image"]).tobytes("png")
        except Exception:  # an image stream PyMuPDF cannot decode alone: render its area instead
            png = render_png(page, RENDER_DPI, clip=bbox)
        blocks.append(Block("image", _caption(bbox, texts), bbox=bbox, image=png))
    return blocks


def _caption(bbox: BBox, texts: list[dict[str, Any]], reach: float = 60.0) -> str:
    """The text right below the image, else right above it: where captions are."""
    below = [b for b in texts if -2 <= b["bbox"][1] - bbox[3] < reach]
    above = [b for b in texts if -2 <= bbox[1] - b["bbox"][3] < reach]
    if below:
        return _block_text(min(below, key=lambda b: b["bbox"][1]))[:300]
    if above:
        return _block_text(max(above, key=lambda b: b["bbox"][3]))[:300]
    return ""


def _in_band(block: dict[str, Any], height: float) -> bool:
    _x0, y0, _x1, y1 = block["bbox"]
    short = len(_block_text(block)) < 100
    return short and (y1 <= height * BAND or y0 >= height * (1 - BAND))


def _inside_any(bbox: Any, boxes: list[tuple[float, ...]]) -> bool:
    x0, y0, x1, y1 = bbox
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    return any(bx0 <= cx <= bx1 and by0 <= cy <= by1 for bx0, by0, bx1, by1 in boxes)


def _bbox(box: Any) -> BBox:
    x0, y0, x1, y1 = (round(float(v), 1) for v in box)
    return (x0, y0, x1, y1)
