"""Markdown and plain text: heading-aware sections, in whatever encoding the file came in."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from ingestion.encoding import decode_text
from ingestion.parsers.base import Block, ParsedPage, Parser

ATX_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
FENCE = re.compile(r"^(```|~~~)")
# Plain text has no headings: cut it into sections of about this many characters, at paragraphs.
TEXT_SECTION_CHARS = 4000


class _SectionsParser(Parser):
    """Text cut into sections by its own structure: counting them is parsing them, which costs
    milliseconds, so the upload list can say "section 3 of 12" as it does for PDF pages."""

    cheap_pages = True

    def count(self, path: Path) -> int | None:
        try:
            return sum(1 for _page in self.pages(path))
        except Exception:  # unreadable: pages() says why
            return None


class MarkdownParser(_SectionsParser):
    mime_types = ("text/markdown",)

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        text, _encoding = decode_text(path.read_bytes())
        number = 0
        for heading_path, level, lines in _sections(text.split("\n")):
            body = "\n".join(lines).strip()
            blocks = [Block("heading", heading_path[-1], level=level)] if heading_path else []
            blocks += [Block("text", paragraph) for paragraph in _paragraphs(body)]
            if not blocks:
                continue
            number += 1
            yield ParsedPage(number=number, kind="section", blocks=tuple(blocks), heading_path=heading_path)


def _sections(lines: list[str]) -> Iterator[tuple[tuple[str, ...], int, list[str]]]:
    """(heading path, level, body lines) for the text before the first heading and under each one."""
    path: list[tuple[int, str]] = []
    body: list[str] = []
    level = 0
    in_fence = False
    for line in lines:
        if FENCE.match(line.strip()):
            in_fence = not in_fence
        match = None if in_fence else ATX_HEADING.match(line)
        if match is None:
            body.append(line)
            continue
        yield tuple(title for _level, title in path), level, body
        level, title = len(match.group(1)), match.group(2).strip()
        path = [(lvl, t) for lvl, t in path if lvl < level] + [(level, title)]
        body = []
    yield tuple(title for _level, title in path), level, body


def _paragraphs(body: str) -> list[str]:
    return [part.strip() for part in re.split(r"\n[ \t]*\n", body) if part.strip()]


class TextParser(_SectionsParser):
    mime_types = ("text/plain",)

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        text, _encoding = decode_text(path.read_bytes())
        section: list[str] = []
        size = 0
        number = 0
        for paragraph in _paragraphs(text):
            if section and size + len(paragraph) > TEXT_SECTION_CHARS:
                number += 1
                yield ParsedPage(number=number, kind="section", blocks=tuple(Block("text", p) for p in section))
                section, size = [], 0
            section.append(paragraph)
            size += len(paragraph)
        if section:
            yield ParsedPage(number=number + 1, kind="section", blocks=tuple(Block("text", p) for p in section))
