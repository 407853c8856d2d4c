"""Word documents with python-docx: one section per heading (Title, Heading 1-9 and styles based
on them), its path the headings above it, then its paragraphs, tables and pictures in document
order. Headers and footers are left out: they repeat on every page and answer no question."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import docx
from django.utils.translation import gettext as _
from docx.document import Document
from docx.oxml.ns import nsmap, qn
from docx.oxml.table import CT_Tbl
from docx.oxml.text.paragraph import CT_P
from docx.table import Table
from docx.text.paragraph import Paragraph
from lxml import etree

from ingestion.parsers.archive import check_archive
from ingestion.parsers.base import Block, ParsedPage, ParseError, Parser, markdown_table
from ingestion.sniff import DOCX

log = logging.getLogger(__name__)

MIN_IMAGE_PX = 64  # smaller pictures are icons and bullets, not content
CAPTION_CHARS = 300
HEADING_STYLE = re.compile(r"^Heading ([1-9])$")
MAX_STYLE_DEPTH = 10  # a style's base chain; a damaged file may even loop
PNG_MODES = {"1", "L", "LA", "I", "P", "RGB", "RGBA"}  # the rest (CMYK, YCbCr...) is converted
NAMESPACES = {prefix: nsmap[prefix] for prefix in ("w", "a", "r")}
EMBEDDED_PICTURES = etree.XPath(".//a:blip/@r:embed", namespaces=NAMESPACES)
TABLE_OF_CONTENTS = etree.XPath(
    "w:sdtPr/w:docPartObj/w:docPartGallery[@w:val='Table of Contents']", namespaces=NAMESPACES
)


class DocxParser(Parser):
    mime_types = (DOCX,)

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        check_archive(path, required=("word/document.xml", "[Content_Types].xml"))
        document = _open(path)
        number = 0
        try:
            for section in _sections(document):
                body = _body_blocks(section.items, document)
                if not body:
                    continue
                number += 1
                yield _page(section, body, number)
        except Exception as exc:  # python-docx and lxml raise many types for damaged content
            raise ParseError(_("The Word document cannot be read: %s") % exc) from exc


@dataclass
class _Section:
    path: tuple[str, ...]  # the headings above and including this one; () before the first
    level: int  # the heading block's level: Title and Heading 1 are 1
    items: list[CT_P | CT_Tbl] = field(default_factory=list)  # in document order


def _open(path: Path) -> Document:
    try:
        return docx.Document(str(path))
    except Exception as exc:  # PackageNotFoundError, KeyError, XMLSyntaxError, ValueError...
        raise ParseError(
            _("The Word document cannot be opened: it is damaged or not really a .docx file (%s).") % exc
        ) from exc


def _page(section: _Section, body: list[Block], number: int) -> ParsedPage:
    heading = [Block("heading", section.path[-1], level=section.level)] if section.path else []
    return ParsedPage(number=number, kind="section", blocks=(*heading, *body), heading_path=section.path)


def _sections(document: Document) -> Iterator[_Section]:
    """The text before the first heading, then each heading with what follows it up to the next."""
    stack: list[tuple[int, str]] = []  # (rank, title): Title ranks 0 so it stays above Heading 1
    section = _Section((), 0)
    for element in _block_elements(document.element.body):
        rank = _heading_rank(Paragraph(element, document)) if isinstance(element, CT_P) else None
        if rank is None:
            section.items.append(element)
            continue
        yield section
        title = " ".join(Paragraph(element, document).text.split())
        stack = [(r, t) for r, t in stack if r < rank] + [(rank, title)]
        section = _Section(tuple(t for _r, t in stack), max(rank, 1))
    yield section


def _block_elements(container: etree._Element) -> Iterator[CT_P | CT_Tbl]:
    """Paragraphs and tables in document order, including those in content controls (w:sdt),
    which python-docx's iter_inner_content skips, but not a table of contents: it only
    repeats the headings, with page numbers."""
    for child in container.iterchildren():
        if isinstance(child, CT_P | CT_Tbl):
            yield child
        elif child.tag == qn("w:sdt") and not TABLE_OF_CONTENTS(child):
            content = child.find(qn("w:sdtContent"))
            if content is not None:
                yield from _block_elements(content)


def _heading_rank(paragraph: Paragraph) -> int | None:
    """0 for Title, n for Heading n, None for body text. A house style based on a heading
    style is a heading too; an empty heading paragraph is only spacing."""
    if not paragraph.text.strip():
        return None
    style = paragraph.style
    for _depth in range(MAX_STYLE_DEPTH):
        if style is None:
            return None
        if style.name == "Title":
            return 0
        match = HEADING_STYLE.match(style.name or "")
        if match:
            return int(match.group(1))
        style = style.base_style
    return None


def _body_blocks(items: list[CT_P | CT_Tbl], document: Document) -> list[Block]:
    texts = [Paragraph(item, document).text.strip() if isinstance(item, CT_P) else "" for item in items]
    blocks: list[Block] = []
    for index, item in enumerate(items):
        if isinstance(item, CT_Tbl):
            blocks.extend(_table_blocks(Table(item, document)))
            continue
        if texts[index]:
            blocks.append(Block("text", texts[index]))
        pictures = [png for rid in dict.fromkeys(EMBEDDED_PICTURES(item)) if (png := _picture(document, str(rid)))]
        caption = _caption(texts, index) if pictures else ""
        blocks += [Block("image", caption, image=png, read_text=True) for png in pictures]
    return blocks


def _caption(texts: Sequence[str], index: int) -> str:
    """The picture's own paragraph, else the nearest text after it (where captions go), else before."""
    after = (text for text in texts[index:] if text)
    before = (text for text in reversed(texts[:index]) if text)
    return (next(after, None) or next(before, ""))[:CAPTION_CHARS]


def _picture(document: Document, rid: str) -> bytes | None:
    relationship = document.part.rels.get(rid)
    if relationship is None or relationship.is_external:  # a linked picture lives elsewhere
        return None
    return image_png(relationship.target_part.blob)


def _table_blocks(table: Table) -> list[Block]:
    rows = _table_rows(table)
    if not any(any(row) for row in rows):
        return []
    return [Block("table", markdown_table(rows), cells=rows)]


def _table_rows(table: Table) -> tuple[tuple[str, ...], ...]:
    """Each row's text by grid column. python-docx gives a merged cell once per grid position
    it spans, so its text repeats there and every row reads on its own; a row that starts or
    ends early (gridBefore/After) is padded to the full width."""
    rows = []
    for row in table.rows:
        texts = [cell.text.strip() for cell in row.cells]
        rows.append([""] * row.grid_cols_before + texts + [""] * row.grid_cols_after)
    width = max((len(row) for row in rows), default=0)
    return tuple(tuple(row + [""] * (width - len(row))) for row in rows)


def image_png(data: bytes) -> bytes | None:
    """The picture as PNG, or None when it is icon-sized or in a format Pillow cannot draw
    (EMF and WMF drawings, most often): the document's text is indexed without it."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(data)) as picture:
            if min(picture.size) < MIN_IMAGE_PX:
                return None
            picture.load()
            converted = picture if picture.mode in PNG_MODES else picture.convert("RGBA")
            buffer = io.BytesIO()
            converted.save(buffer, format="PNG")
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        log.info("skipped a picture Pillow cannot read: %s", exc)
        return None
    return buffer.getvalue()
