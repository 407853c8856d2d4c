"""Pages into chunks: heading-aware first, then recursively by paragraph, line, sentence
(。！？ and .!?), clause (；，), space and finally characters, with overlap. Every chunk
keeps where it came from (page, bbox, heading path) so that citations can point at it."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ingestion import tables
from ingestion.parsers.base import BBox, Block, ParsedPage, markdown_row

SEPARATORS = ("\n\n", "\n", "。", "！", "？", ".", "!", "?", "；", ";", "，", ",", " ", "")
ChunkKind = Literal["text", "table", "image", "picture", "summary", "frame", "notes", "transcript"]


@dataclass(frozen=True)
class ChunkSettings:
    size: int = 400  # characters
    overlap: int = 50

    def __post_init__(self) -> None:
        if self.size < 50 or not 0 <= self.overlap < self.size // 2:
            raise ValueError("chunk size must be at least 50 characters and overlap under half of it")


@dataclass(frozen=True)
class ChunkDraft:
    kind: ChunkKind
    text: str
    page: int
    bbox: BBox | None
    heading_path: tuple[str, ...]
    image: bytes | None = field(default=None, repr=False)
    t_start: float | None = None  # seconds, for video frames and transcripts
    t_end: float | None = None
    # What the embedder reads instead of the text with its headings, where that differs: a
    # table's rows said as sentences without the Markdown that holds the same cells again.
    embed: str | None = field(default=None, repr=False)

    @property
    def location(self) -> dict[str, object]:
        location: dict[str, object] = {
            "page": self.page,
            "bbox": list(self.bbox) if self.bbox else None,
            "heading_path": list(self.heading_path),
        }
        if self.image is not None:  # the stored picture: PageImage of this page with this hash
            location["image"] = hashlib.sha256(self.image).hexdigest()
        if self.t_start is not None:
            location["t_start"] = round(self.t_start, 2)
            location["t_end"] = round(self.t_end if self.t_end is not None else self.t_start, 2)
        return location

    @property
    def content_sha256(self) -> str:
        digest = hashlib.sha256(
            f"{self.kind}\x1f{self.page}\x1f{self.bbox}\x1f{self.t_start}:{self.t_end}\x1f".encode()
        )
        digest.update("\x1f".join(self.heading_path).encode() + b"\x1e" + self.text.encode())
        if self.image is not None:
            digest.update(hashlib.sha256(self.image).digest())
        return digest.hexdigest()


def chunk_page(page: ParsedPage, settings: ChunkSettings | None = None) -> list[ChunkDraft]:
    settings = settings or ChunkSettings()
    path = list(page.heading_path)
    drafts: list[ChunkDraft] = []
    run: list[Block] = []  # consecutive text blocks of one kind under one heading

    def flush() -> None:
        drafts.extend(_text_chunks(run, page.number, tuple(path), settings))
        run.clear()

    for block in page.blocks:
        if block.kind == "heading":
            flush()
            if not path or path[-1] != block.text:  # a section's own heading is already in its path
                path[:] = [*path[: max(block.level - 1, 0)], block.text]
        elif block.kind in ("text", "notes"):
            if run and _run_kind(run[-1]) != _run_kind(block):
                flush()
            if block.text:
                run.append(block)
        elif block.kind == "audio":
            continue  # speech recognition turns audio into text blocks before chunking
        else:
            flush()
            drafts.extend(_other_chunks(block, page.number, tuple(path), settings))
    flush()
    return drafts


def _run_kind(block: Block) -> ChunkKind:
    if block.kind == "notes":
        return "notes"
    return "transcript" if block.t_start is not None else "text"


def _text_chunks(blocks: list[Block], page: int, path: tuple[str, ...], settings: ChunkSettings) -> list[ChunkDraft]:
    if not blocks:
        return []
    kind = _run_kind(blocks[0])
    text, ranges = "", []
    for block in blocks:
        if text:
            text += "\n\n"
        ranges.append((len(text), len(text) + len(block.text), block))
        text += block.text
    drafts = []
    for start, end in split_text(text, settings.size, settings.overlap):
        covered = [block for s, e, block in ranges if s < end and e > start]
        starts = [b.t_start for b in covered if b.t_start is not None]
        ends = [b.t_end if b.t_end is not None else b.t_start for b in covered if b.t_start is not None]
        drafts.append(
            ChunkDraft(
                kind,
                text[start:end],
                page,
                _union([block.bbox for block in covered]),
                path,
                t_start=min(starts) if starts else None,
                t_end=max(e for e in ends if e is not None) if starts else None,
            )
        )
    return drafts


def _other_chunks(block: Block, page: int, path: tuple[str, ...], settings: ChunkSettings) -> list[ChunkDraft]:
    if block.kind == "picture":  # what the picture shows, in words (ingestion.pictures)
        return [
            ChunkDraft(
                "picture",
                block.text,
                page,
                block.bbox,
                path,
                image=block.image,
                t_start=block.t_start,
                t_end=block.t_end,
            )
        ]
    if block.kind == "image":
        # An image is indexed by the words around it, in it (OCR) and about it (a vision caption);
        # with none of those there is nothing to find it by.
        if not block.text.strip():
            return []
        kind: ChunkKind = "frame" if block.t_start is not None else "image"
        return [
            ChunkDraft(
                kind, block.text, page, block.bbox, path, image=block.image, t_start=block.t_start, t_end=block.t_end
            )
        ]
    if not block.text.strip():
        return []  # a table with nothing in it: an empty chunk would only be noise in the index
    return _table_chunks(block, page, path, settings)


def _table_chunks(block: Block, page: int, path: tuple[str, ...], settings: ChunkSettings) -> list[ChunkDraft]:
    """A table as Markdown with its rows said as sentences below it, each carrying its row
    header and full column path ("AIC — GLM, NB, ML, fm_nbin: 24359.1"): a question about one
    cell then finds the sentence that names it, and the Markdown keeps the table whole for
    reading. In the same chunk rather than their own, so a table stays one chunk (or one per
    group of rows) for citations. A long table: groups of rows, each repeating the header rows
    so it reads on its own, sized with their sentences."""
    if not block.cells:
        return [ChunkDraft("table", block.text, page, block.bbox, path)]
    depth = block.header_rows or tables.header_depth(block.cells)
    said = {row.index: row.sentence for row in tables.table_rows(block.cells, block.header_rows or None)}
    # Tables may take twice the text size, and three times with their rows' sentences.
    limit = settings.size * (3 if said else 2)
    if len(block.text) + sum(len(s) + 1 for s in said.values()) + 2 <= limit or len(block.cells) <= depth + 1:
        return [_table_draft(block.text, list(said.values()), page, block, path)]
    header = block.cells[:depth]
    head = "\n".join([markdown_row(header[0]), "|" + "---|" * len(header[0]), *map(markdown_row, header[1:])])
    drafts: list[ChunkDraft] = []
    lines: list[str] = []
    sentences: list[str] = []
    length = len(head)
    for index in range(depth, len(block.cells)):
        line, sentence = markdown_row(block.cells[index]), said.get(index, "")
        grown = len(line) + 1 + (len(sentence) + 1 if sentence else 0)
        if lines and length + grown + 2 > limit:
            drafts.append(_table_draft(head + "\n" + "\n".join(lines), sentences, page, block, path))
            lines, sentences, length = [], [], len(head)
        lines.append(line)
        sentences += [sentence] if sentence else []
        length += grown
    if lines:
        drafts.append(_table_draft(head + "\n" + "\n".join(lines), sentences, page, block, path))
    return drafts


def _table_draft(markdown: str, sentences: Sequence[str], page: int, block: Block, path: tuple[str, ...]) -> ChunkDraft:
    """The Markdown with its rows' sentences below it, for reading and the lexical channel;
    the embedder reads the sentences alone: they say every cell with its row and column, so
    the Markdown would only make it read each cell twice (half of a large sheet's embedding
    time: bench/README.md, "Ingestion per stage")."""
    said = "\n".join(sentences)
    text = markdown + "\n\n" + said if sentences else markdown
    return ChunkDraft("table", text, page, block.bbox, path, embed=said or None)


def split_text(text: str, size: int, overlap: int) -> list[tuple[int, int]]:
    """Spans of `text`, each at most `size` characters, cut at the coarsest boundary that
    fits, the next one starting up to `overlap` characters before the previous one ends."""
    pieces = _pieces(text, 0, len(text), SEPARATORS, size)
    spans: list[tuple[int, int]] = []
    start, end = pieces[0] if pieces else (0, 0)
    for piece_start, piece_end in pieces[1:]:
        if piece_end - start <= size:
            end = piece_end
            continue
        spans.append((start, end))
        back = min(overlap, size - (piece_end - piece_start))
        start, end = max(piece_start - back, end - overlap, 0), piece_end
    if end > start:
        spans.append((start, end))
    return [span for span in (_strip(text, s, e) for s, e in spans) if span[1] > span[0]]


def _pieces(text: str, start: int, end: int, separators: tuple[str, ...], size: int) -> list[tuple[int, int]]:
    if end - start <= size:
        return [(start, end)] if end > start else []
    separator, rest = separators[0], separators[1:]
    if separator == "":
        return [(k, min(k + size, end)) for k in range(start, end, size)]
    segment = text[start:end]
    if separator not in segment:
        return _pieces(text, start, end, rest, size)
    pieces, cursor = [], start
    while cursor < end:
        found = text.find(separator, cursor, end)
        stop = end if found < 0 else found + len(separator)  # the separator stays with its sentence
        pieces.extend(_pieces(text, cursor, stop, rest, size))
        cursor = stop
    return pieces


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _union(boxes: Sequence[BBox | None]) -> BBox | None:
    real = [box for box in boxes if box]
    if not real:
        return None
    return (min(b[0] for b in real), min(b[1] for b in real), max(b[2] for b in real), max(b[3] for b in real))
