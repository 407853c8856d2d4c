"""PowerPoint with python-pptx: one page per slide with its title as heading, then text frames,
tables and pictures in reading order (top to bottom, then left to right, inside groups too),
each with its bbox in points, and the speaker notes last. Where LibreOffice is installed,
each slide also gets a PNG render for citations."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pptx
from django.conf import settings
from django.utils.translation import gettext as _
from pptx.presentation import Presentation
from pptx.shapes.autoshape import Shape
from pptx.shapes.base import BaseShape
from pptx.shapes.graphfrm import GraphicFrame
from pptx.shapes.group import GroupShape
from pptx.shapes.picture import Picture
from pptx.slide import Slide
from pptx.table import Table

from ingestion.parsers.archive import check_archive
from ingestion.parsers.base import BBox, Block, ParsedPage, ParseError, Parser, markdown_table
from ingestion.parsers.docx import image_png
from ingestion.parsers.guard import allow
from ingestion.sniff import PPTX

log = logging.getLogger(__name__)

EMU_PER_POINT = 12700
RENDER_DPI = 110
CONVERT_TIMEOUT_S = 180
# x scale, y scale, x offset, y offset: from a group's own coordinates to the slide's, in EMU
Transform = tuple[float, float, float, float]
IDENTITY: Transform = (1.0, 1.0, 0.0, 0.0)
Render = Callable[[int], bytes | None]  # slide index (0-based) to its PNG


class PptxParser(Parser):
    mime_types = (PPTX,)

    def count(self, path: Path) -> int | None:
        try:
            return len(_opened(path)[1])
        except Exception:  # damaged or too long: pages() says why
            return None

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        presentation, slides = _opened(path)
        size = (_points(presentation.slide_width), _points(presentation.slide_height))
        with _renders(path, [_hidden(slide) for slide in slides]) as render:
            for index, slide in enumerate(slides):
                try:
                    page = _slide_page(slide, index + 1, size, render(index))
                except Exception as exc:  # python-pptx and lxml raise many types for damaged content
                    raise ParseError(
                        _("Slide %(number)s of the presentation cannot be read: %(error)s")
                        % {"number": index + 1, "error": exc}
                    ) from exc
                yield page

    def check(self, path: Path) -> None:
        # Its first page would wait for LibreOffice to render every slide: opening it is enough.
        _opened(path)


def _opened(path: Path) -> tuple[Presentation, list[Slide]]:
    """The presentation and its slides, within PORTAL_MAX_PAGES."""
    check_archive(path, required=("ppt/presentation.xml", "[Content_Types].xml"))
    presentation = _open(path)
    slides = list(presentation.slides)
    if len(slides) > settings.MAX_PAGES:
        raise ParseError(
            _("The presentation has %(count)s slides; the limit is %(limit)s (PORTAL_MAX_PAGES).")
            % {"count": f"{len(slides):,}", "limit": f"{settings.MAX_PAGES:,}"}
        )
    return presentation, slides


def libreoffice() -> str | None:
    """The LibreOffice that renders slides, if installed; tests replace this to choose."""
    return shutil.which("soffice") or shutil.which("libreoffice")


def _open(path: Path) -> Presentation:
    try:
        return pptx.Presentation(str(path))
    except Exception as exc:  # PackageNotFoundError, KeyError, XMLSyntaxError, ValueError...
        raise ParseError(
            _("The presentation cannot be opened: it is damaged or not really a .pptx file (%s).") % exc
        ) from exc


def _slide_page(slide: Slide, number: int, size: tuple[float | None, float | None], render: bytes | None) -> ParsedPage:
    title_shape = slide.shapes.title
    title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
    blocks = [Block("heading", title, level=1)] if title else []
    placed = sorted(_placed(slide.shapes, IDENTITY), key=lambda item: (item[1][1], item[1][0]))
    for shape, bbox in placed:
        if title_shape is None or shape.element is not title_shape.element:
            blocks += _shape_blocks(shape, bbox, title)
    notes = _notes(slide)
    if notes:
        blocks.append(Block("notes", notes))
    return ParsedPage(
        number=number,
        kind="slide",
        blocks=tuple(blocks),
        heading_path=(title,) if title else (),
        width=size[0],
        height=size[1],
        render=render,
    )


def _placed(shapes: Iterable[BaseShape], transform: Transform) -> Iterator[tuple[BaseShape, BBox]]:
    """Every shape that is not a group, with its bbox on the slide. A group's children are
    stored in the group's own coordinates (chOff/chExt), which its frame (off/ext) maps onto
    the slide: python-pptx reports them unmapped, so a moved or resized group needs this."""
    for shape in shapes:
        if isinstance(shape, GroupShape):
            yield from _placed(shape.shapes, _compose(transform, _group_transform(shape)))
        else:
            yield shape, _bbox(shape, transform)


def _group_transform(group: GroupShape) -> Transform:
    # Any: python-pptx types ext, chOff and chExt as its XML descriptors, not as what they hold.
    xfrm: Any = group._element.xfrm
    if xfrm is None or None in (xfrm.off, xfrm.ext, xfrm.chOff, xfrm.chExt):
        return IDENTITY
    scale_x = xfrm.ext.cx / xfrm.chExt.cx if xfrm.chExt.cx else 1.0
    scale_y = xfrm.ext.cy / xfrm.chExt.cy if xfrm.chExt.cy else 1.0
    return (scale_x, scale_y, xfrm.off.x - xfrm.chOff.x * scale_x, xfrm.off.y - xfrm.chOff.y * scale_y)


def _compose(outer: Transform, inner: Transform) -> Transform:
    """`inner` then `outer`: a group inside a group."""
    outer_x, outer_y, outer_dx, outer_dy = outer
    inner_x, inner_y, inner_dx, inner_dy = inner
    return (outer_x * inner_x, outer_y * inner_y, outer_x * inner_dx + outer_dx, outer_y * inner_dy + outer_dy)


def _bbox(shape: BaseShape, transform: Transform) -> BBox:
    scale_x, scale_y, dx, dy = transform
    left, top = shape.left or 0, shape.top or 0
    right, bottom = left + (shape.width or 0), top + (shape.height or 0)
    x0, y0, x1, y1 = (
        round(value / EMU_PER_POINT, 1)
        for value in (left * scale_x + dx, top * scale_y + dy, right * scale_x + dx, bottom * scale_y + dy)
    )
    return (x0, y0, x1, y1)


def _shape_blocks(shape: BaseShape, bbox: BBox, title: str) -> list[Block]:
    if isinstance(shape, GraphicFrame) and shape.has_table:
        rows = _table_rows(shape.table)
        return [Block("table", markdown_table(rows), bbox=bbox, cells=rows)] if any(any(r) for r in rows) else []
    if isinstance(shape, Picture):
        png = _picture(shape)
        # A slide's picture is about what the slide's title says; OCR adds the words in it.
        return [Block("image", title, bbox=bbox, image=png, read_text=True)] if png else []
    if isinstance(shape, Shape) and shape.has_text_frame:
        text = _text(shape.text_frame.text)
        return [Block("text", text, bbox=bbox)] if text else []
    return []


def _picture(picture: Picture) -> bytes | None:
    try:
        blob = picture.image.blob
    except (KeyError, ValueError):  # a linked picture: the file holds no copy of it
        return None
    return image_png(blob)


def _table_rows(table: Table) -> tuple[tuple[str, ...], ...]:
    """Each row's cell texts; a merged cell's text repeats in every position it spans, so
    that each row reads on its own (PowerPoint leaves the spanned positions empty)."""
    grid = [[_text(cell.text) for cell in row.cells] for row in table.rows]
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            if not cell.is_merge_origin:
                continue
            for spanned in grid[r : r + cell.span_height]:
                spanned[c : c + cell.span_width] = [grid[r][c]] * len(spanned[c : c + cell.span_width])
    return tuple(tuple(row) for row in grid)


def _notes(slide: Slide) -> str:
    if not slide.has_notes_slide:
        return ""
    frame = slide.notes_slide.notes_text_frame
    return _text(frame.text) if frame is not None else ""


def _text(text: str) -> str:
    return text.replace("\v", "\n").strip()  # python-pptx writes a line break (a:br) as \v


def _hidden(slide: Slide) -> bool:
    return slide.element.get("show") in ("0", "false")


def _points(emu: int | None) -> float | None:
    return round(emu / EMU_PER_POINT, 1) if emu is not None else None


@contextmanager
def _renders(path: Path, hidden: list[bool]) -> Iterator[Render]:
    """Each slide's render from one LibreOffice PDF export of the deck. Without LibreOffice, or
    when it fails, slides have no render: the text is indexed all the same."""
    office = libreoffice()
    with tempfile.TemporaryDirectory(prefix="pptx-render-") as folder:
        pdf = _convert(office, path, Path(folder)) if office else None
        if pdf is None:
            yield lambda _index: None
            return
        import pymupdf

        from common.render import render_png

        with pymupdf.open(pdf) as document:
            pages = _pdf_pages(hidden, document.page_count)

            def render(index: int) -> bytes | None:
                page = pages[index]
                return None if page is None else render_png(document.load_page(page), RENDER_DPI)

            yield render


def _pdf_pages(hidden: list[bool], page_count: int) -> list[int | None]:
    """The PDF page of each slide. LibreOffice leaves hidden slides out of the PDF; when the
    count fits neither way, no render is better than the wrong slide's."""
    if page_count == len(hidden):
        return list(range(page_count))
    if page_count != hidden.count(False):
        return [None] * len(hidden)
    visible = iter(range(page_count))
    return [None if is_hidden else next(visible) for is_hidden in hidden]


def _convert(office: str, source: Path, folder: Path) -> Path | None:
    deck = folder / "deck.pptx"  # a known name, so the PDF's name is known too
    shutil.copyfile(source, deck)
    # Its own profile: two conversions sharing the default one make the second fail.
    profile = f"-env:UserInstallation={(folder / 'profile').as_uri()}"
    command = [office, profile, "--headless", "--convert-to", "pdf", "--outdir", str(folder), str(deck)]
    allow(CONVERT_TIMEOUT_S)  # the slide's own time limit waits for LibreOffice's
    with subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    ) as process:
        try:
            code = process.wait(timeout=CONVERT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # soffice starts soffice.bin: end them both
            process.wait()
            code = None
    pdf = folder / "deck.pdf"
    if code != 0 or not pdf.exists():
        log.warning("LibreOffice could not convert %s to PDF (exit %s): slides have no render", source.name, code)
        return None
    return pdf
