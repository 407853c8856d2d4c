"""The formats the portal reads, in one table: each parser class and the content types
(sniffed from the bytes: ingestion.sniff) it reads. A new format is a module with its
Parser subclass, and a line here."""

from __future__ import annotations

from pathlib import PurePosixPath

from django.utils.translation import gettext as _

from ingestion.parsers.base import ParseError, Parser
from ingestion.parsers.docx import DocxParser
from ingestion.parsers.image import ImageParser
from ingestion.parsers.link import VideoLinkParser
from ingestion.parsers.pdf import PdfParser
from ingestion.parsers.pptx import PptxParser
from ingestion.parsers.sheets import CsvParser, XlsxParser
from ingestion.parsers.subtitles import SubtitleParser
from ingestion.parsers.text import MarkdownParser, TextParser
from ingestion.parsers.video import VideoParser
from ingestion.sniff import OFFICE_NAMES, ZIP

PARSERS: tuple[type[Parser], ...] = (
    PdfParser,
    DocxParser,
    PptxParser,
    XlsxParser,
    CsvParser,
    MarkdownParser,
    TextParser,
    ImageParser,
    VideoParser,
    SubtitleParser,
    VideoLinkParser,
)
BY_TYPE: dict[str, type[Parser]] = {mime: parser for parser in PARSERS for mime in parser.mime_types}


def parser_for(mime: str) -> Parser:
    parser = BY_TYPE.get(mime)
    if parser is None:
        raise ParseError(
            _("Files of type %(type)s cannot be indexed (supported: %(supported)s).")
            % {"type": mime, "supported": ", ".join(supported_types())}
        )
    return parser()


def supported_types() -> list[str]:
    return sorted(BY_TYPE)


def check_indexable(mime: str, name: str) -> None:
    """Raise ParseError unless a parser reads files of type `mime`. The type is always the
    content's; where the name says Word, PowerPoint or Excel, the message says what is wrong
    with the content instead of listing the types that can be indexed."""
    try:
        parser_for(mime)
    except ParseError as exc:
        suffix = PurePosixPath(name.lower()).suffix
        if suffix not in OFFICE_NAMES:
            raise
        if mime == ZIP:
            message = _(
                "The file looks like a damaged or incomplete Office document (zip): save it again from its program."
            )
        else:
            message = _(
                "The name ends in %(suffix)s, but the content is not an Office document (those are zip archives): "
                "check that this is the right file, or save it again from its program."
            ) % {"suffix": suffix}
        raise ParseError(message) from exc
