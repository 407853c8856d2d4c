"""Where a citation's quote is on its page: the box the citation dialog draws on the page's
render, around the span the answer rests on rather than the whole chunk.

A PDF page's quote is looked up in its stored original with PyMuPDF (`search_for`, then
character by character with the text folded as ingestion folds it, which also finds Chinese
that runs across lines); a picture or a scanned page's quote in the lines its OCR read, with
their boxes (the OCR output is kept by the hash of the render it read: DerivedText). Boxes are
in the units of `location.bbox`: PDF points, or pixels of a picture.

Only the citations' own pages are read: their ids come from hits that retrieval already
limited to what the user may see, and the OCR output is looked up by the hash of one of those
pages' renders. Each document is opened once, at most MAX_CITATIONS quotes are looked for,
and nothing here fails an answer: a quote that cannot be placed has no box."""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

from assistant.retrieval.types import Hit
from common.storage import local_copy
from ingestion import reading_order
from ingestion.models import DerivedText
from ingestion.parsers.pdf import fold
from knowledge.models import Document, Page

log = logging.getLogger(__name__)

Box = list[float]
PDF = "application/pdf"
KINDS = ("pdf_page", "image")  # pages with a render the quote can be boxed on
MAX_CITATIONS = 6
HEAD_CHARS = 40  # a quote not found whole is looked for by its beginning
MIN_NEEDLE_CHARS = 4  # shorter pieces match anywhere
SLACK = 2.0  # points (or pixels) a line's box may stick out of the chunk's box


def quote_boxes(cited: Iterable[tuple[Hit, str]]) -> list[Box | None]:
    """The box of each (hit, quote) pair's quote on its page, in their order; None for a quote
    that cannot be placed (no quote, no render, not on the page, an unreadable original) and
    for those past the first MAX_CITATIONS that could be."""
    pairs = list(cited)
    boxes: list[Box | None] = [None] * len(pairs)
    wanted = [index for index, (hit, quote) in enumerate(pairs) if _boxable(hit, quote)][:MAX_CITATIONS]
    if not wanted:
        return boxes
    try:
        pages = Page.objects.select_related("document").in_bulk({pairs[index][0].page_id for index in wanted})
    except Exception as exc:  # never fail the answer for a box
        log.info("Quote boxes skipped: the pages could not be read (%s)", exc)
        return boxes
    by_document: dict[int, list[int]] = {}
    for index in wanted:
        hit = pairs[index][0]
        if hit.page_id in pages:
            by_document.setdefault(hit.document_id, []).append(index)
    for document_id, indexes in by_document.items():
        try:
            document = pages[pairs[indexes[0]][0].page_id].document
            with _opened_pdf(document) as pdf:
                for index in indexes:
                    boxes[index] = _placed(pdf, pages, *pairs[index])
        except Exception as exc:
            log.info("No quote boxes in document %s: %s", document_id, exc)
    return boxes


def _placed(pdf: Any, pages: dict[int, Page], hit: Hit, quote: str) -> Box | None:
    try:
        box = _quote_box(pdf, pages[hit.page_id], hit, quote)
    except Exception as exc:
        log.info("No quote box for chunk %s: %s", hit.chunk_id, exc)
        return None
    if box is None:
        log.debug("The quote of chunk %s is not on its page", hit.chunk_id)
    return box


def _boxable(hit: Hit, quote: str) -> bool:
    return bool(quote.strip()) and hit.page_kind in KINDS and hit.location.get("t_start") is None


@contextmanager
def _opened_pdf(document: Document) -> Iterator[Any]:
    """The document's original as an open PyMuPDF document, or None when it is not a PDF or
    cannot be opened (missing, damaged)."""
    if document.mime != PDF:
        yield None
        return
    import pymupdf

    with ExitStack() as stack:
        try:
            # The stored file on disk; in an object store a temporary copy, deleted at the end.
            original = stack.enter_context(local_copy(document.file))
            opened = stack.enter_context(pymupdf.open(original, filetype="pdf"))
        except Exception as exc:
            log.info("Quote boxes: the original of document %s cannot be opened (%s)", document.pk, exc)
            opened = None
        yield None if opened is None or opened.needs_pass else opened


def _quote_box(pdf: Any, page: Page, hit: Hit, quote: str) -> Box | None:
    clip = _chunk_box(hit.location.get("bbox"))
    box = None
    if pdf is not None and hit.page_kind == "pdf_page" and 1 <= page.number <= pdf.page_count:
        box = _pdf_box(pdf.load_page(page.number - 1), quote, clip)
    if box is None and page.needs_ocr and page.render:  # a picture, or a page the OCR read
        box = _ocr_box(page, quote, clip)
    return box


# -- a PDF page's text ----------------------------------------------------------------------


def _pdf_box(page: Any, quote: str, clip: Box | None) -> Box | None:
    """The quote's lines on the PDF page, within the chunk's box, clipped to the page: found by
    PyMuPDF's search, else character by character (Chinese across a line break, characters
    the font maps to compatibility code points)."""
    bounds = [float(page.rect.x0), float(page.rect.y0), float(page.rect.x1), float(page.rect.y1)]
    characters: _Text | None = None
    for needle in _needles(quote):
        inside = [rect for rect in map(_box_of, page.search_for(needle)) if _overlaps(rect, clip)]
        if inside:
            return _clipped(_union(inside), bounds)
        if characters is None:
            chars = [
                (char["c"], _box_of(char["bbox"]))
                for block in page.get_text("rawdict")["blocks"]
                for line in block.get("lines", [])
                for span in line["spans"]
                for char in span["chars"]
            ]
            characters = _Text(chars, clip)
        box = characters.box(needle)
        if box is not None:
            return _clipped(box, bounds)
    return None


# -- OCR lines --------------------------------------------------------------------------------


def _ocr_box(page: Page, quote: str, clip: Box | None) -> Box | None:
    """The OCR lines that hold the quote, from the OCR output of the page's render, in page units."""
    with page.render.open("rb") as handle:
        data = handle.read()
    output = (
        DerivedText.objects.filter(task=DerivedText.Task.OCR, input_sha256=hashlib.sha256(data).hexdigest())
        .order_by("-created_at")
        .values_list("output", flat=True)
        .first()
    )
    if not output:
        return None
    from PIL import Image

    with Image.open(io.BytesIO(data)) as picture:  # reads the header only
        pixels_wide = picture.width
    scale = (page.width or pixels_wide) / pixels_wide
    # In the order the index reads them (columns, vertical text), so a quote across lines matches.
    read = reading_order.order([(str(text), (box[0], box[1], box[2], box[3])) for text, box in output])
    lines = _Text([(text, [float(value) * scale for value in box]) for text, box in read], clip)
    return next((box for box in map(lines.box, _needles(quote)) if box is not None), None)


# -- matching ---------------------------------------------------------------------------------


class _Text:
    """Pieces of a page's text (lines, or characters) with their boxes, searchable with the
    text folded as ingestion folds it (NFKC), without case or whitespace. Pieces outside the
    chunk's box are left out."""

    def __init__(self, pieces: Sequence[tuple[str, Box]], clip: Box | None) -> None:
        self.boxes: list[Box] = []
        text: list[str] = []
        self.owners: list[int] = []  # the piece of each character of the text
        for piece, box in pieces:
            if not _overlaps(box, clip):
                continue
            for char in _fold(piece):
                text.append(char)
                self.owners.append(len(self.boxes))
            self.boxes.append(box)
        self.text = "".join(text)

    def box(self, needle: str) -> Box | None:
        """The union of the boxes of the pieces that hold `needle`'s first occurrence."""
        folded = _fold(needle)
        start = self.text.find(folded) if len(folded) >= MIN_NEEDLE_CHARS else -1
        if start < 0:
            return None
        held = set(self.owners[start : start + len(folded)])
        return _union([self.boxes[index] for index in sorted(held)])


def _needles(quote: str) -> list[str]:
    """What to look for: the whole quote, its longest part between "…" gaps, its beginning."""
    whole = " ".join(quote.split())
    parts = sorted((" ".join(part.split()) for part in whole.split("…")), key=len, reverse=True)
    needles = [whole, parts[0], parts[0][:HEAD_CHARS].strip()]
    unique = list(dict.fromkeys(needle for needle in needles if len(needle) >= MIN_NEEDLE_CHARS))
    return unique


def _fold(text: str) -> str:
    return "".join(fold(text).casefold().split())


# -- boxes ------------------------------------------------------------------------------------


def _box_of(rect: Any) -> Box:
    x0, y0, x1, y1 = (float(value) for value in tuple(rect)[:4])
    return [x0, y0, x1, y1]


def _chunk_box(value: object) -> Box | None:
    if isinstance(value, list | tuple) and len(value) == 4:
        try:
            return [float(v) for v in value]
        except (TypeError, ValueError):
            return None
    return None


def _overlaps(box: Box, clip: Box | None) -> bool:
    if clip is None:
        return True
    return (
        box[0] < clip[2] + SLACK and box[2] > clip[0] - SLACK and box[1] < clip[3] + SLACK and box[3] > clip[1] - SLACK
    )


def _union(boxes: Sequence[Box]) -> Box:
    return [
        round(min(box[0] for box in boxes), 1),
        round(min(box[1] for box in boxes), 1),
        round(max(box[2] for box in boxes), 1),
        round(max(box[3] for box in boxes), 1),
    ]


def _clipped(box: Box, bounds: Box) -> Box:
    x0, y0 = max(box[0], bounds[0]), max(box[1], bounds[1])
    x1, y1 = min(box[2], bounds[2]), min(box[3], bounds[3])
    return [round(x0, 1), round(y0, 1), round(max(x1, x0), 1), round(max(y1, y0), 1)]
