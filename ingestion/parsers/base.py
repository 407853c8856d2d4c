"""What parsers produce, and how a file type finds its parser.

A parser turns one file into pages, yielded one at a time so that a 1,000-page PDF never
holds all its renders at once. A page is the unit of incremental work: its content hash
decides whether it must be redone. Parsers raise ParseError with a message a person can
act on; they never return empty content for a file they could not read.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

BlockKind = Literal["heading", "text", "table", "image", "picture", "notes", "audio"]
PageKind = Literal["pdf_page", "slide", "section", "image", "video_segment", "text_block"]
BBox = tuple[float, float, float, float]


class ParseError(Exception):
    """The file cannot be read as its type; the message says why and what to do."""


@dataclass(frozen=True)
class Block:
    kind: BlockKind
    text: str
    bbox: BBox | None = None  # in page points (PDF) or None where a format has no geometry
    level: int = 0  # heading level, 1 = top
    cells: tuple[tuple[str, ...], ...] = ()  # a table's rows
    header_rows: int = 0  # how many of `cells` head the table; 0: inferred from the cells
    image: bytes | None = field(default=None, repr=False)  # an image block's PNG
    # An image whose words OCR should read (photos, scans, slides' pictures, video frames).
    read_text: bool = False
    # An audio block: 16 kHz mono WAV that speech recognition turns into timed text.
    audio: bytes | None = field(default=None, repr=False)
    t_start: float | None = None  # seconds from the start of a video or recording
    t_end: float | None = None


@dataclass(frozen=True)
class ParsedPage:
    number: int  # 1-based, in the document's own order
    kind: PageKind
    blocks: tuple[Block, ...]
    heading_path: tuple[str, ...] = ()  # the headings above this page (sections)
    width: float | None = None
    height: float | None = None
    render: bytes | None = field(default=None, repr=False)  # PNG, for citations
    needs_ocr: bool = False  # no usable text layer: the OCR stage reads the render
    # What the file says about the page beyond its content: EXIF date and orientation, a
    # video's duration, a link's URL. Shown with citations; part of the content hash.
    meta: dict[str, object] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n\n".join(block.text for block in self.blocks if block.text)

    @property
    def content_sha256(self) -> str:
        """Changes exactly when what the page contributes to the index changes."""
        digest = hashlib.sha256(self.kind.encode())
        for part in self.heading_path:
            digest.update(b"\x1fh" + part.encode())
        for block in self.blocks:
            digest.update(f"\x1e{block.kind}:{block.level}:{block.bbox}:{block.t_start}:{block.t_end}".encode())
            digest.update(b"r" if block.read_text else b"-")
            digest.update(block.text.encode())
            for row in block.cells:
                digest.update(b"\x1d" + "\x1f".join(row).encode())
            for media in (block.image, block.audio):
                if media is not None:
                    digest.update(hashlib.sha256(media).digest())
        digest.update(json.dumps(self.meta, sort_keys=True, default=str).encode())
        digest.update(b"\x1cocr" if self.needs_ocr else b"\x1ctext")
        return digest.hexdigest()


class Parser(ABC):
    """One file format. Subclasses set `mime_types` and are listed in formats.PARSERS."""

    mime_types: ClassVar[tuple[str, ...]] = ()
    # Its pages cost about what embedding their text costs (no OCR, renders or models): a small
    # file of this format takes the quick queue whatever its page count (ingestion/runs.py).
    cheap_pages: ClassVar[bool] = False
    # It can parse a range of pages alone (`page_range`), so a long file's pages can be split
    # among workers (ingestion.pipeline, settings.INGEST_PART_PAGES).
    splits: ClassVar[bool] = False

    @abstractmethod
    def pages(self, path: Path) -> Iterator[ParsedPage]:
        """Yield the file's pages in order; raise ParseError for a file it cannot read."""

    def page_range(self, path: Path, first: int, last: int) -> Iterator[ParsedPage]:
        """Yield pages `first` to `last` (numbered from 1, both included), as `pages` would;
        only parsers that set `splits`."""
        raise NotImplementedError(f"{type(self).__name__} cannot parse a range of pages")

    def check(self, path: Path) -> None:
        """Raise ParseError when the file cannot be read as this type, before it is stored:
        a damaged new version of a document is refused so the version it would replace stays.
        Parses the first page (opening the file, its limits, one page's content); formats
        whose first page costs much more than opening them (videos, slide renders) override it."""
        pages = self.pages(path)
        try:
            next(pages, None)
        finally:
            if isinstance(pages, Generator):
                pages.close()  # leave the rest unparsed, and let the parser close the file now

    def count(self, path: Path) -> int | None:
        """How many pages `pages` will yield, when that is cheap to know before parsing (for
        "page 3 of 10" progress); None otherwise, or when the file cannot be read (`pages`
        says why)."""
        return None


def markdown_row(cells: Sequence[str]) -> str:
    return "|" + "|".join(cell.replace("|", "\\|").replace("\n", " ") for cell in cells) + "|"


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table with the first row as its header: how every parser writes tables."""
    lines = [markdown_row(row) for row in rows]
    return "\n".join([lines[0], "|" + "---|" * len(rows[0]), *lines[1:]])
