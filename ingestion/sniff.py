"""A file's type from its content, not from its name (a `.txt` may be a PDF, a `.pdf` a zip)."""

from __future__ import annotations

import io
import re
import zipfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from django.core.files import File
from django.utils.translation import gettext as _

from common.image_types import image_type
from ingestion.encoding import NotTextError, decode_text
from ingestion.parsers.base import ParseError

PDF = "application/pdf"
MARKDOWN = "text/markdown"
TEXT = "text/plain"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
XLSX = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"
ZIP = "application/zip"
CSV = "text/csv"
VTT = "text/vtt"
SRT = "application/x-subrip"
MP4, WEBM, MOV = "video/mp4", "video/webm", "video/quicktime"
# Not a file type: a link to a video elsewhere (URL, title, description), stored as JSON.
VIDEO_LINK = "application/x-portal-video-link"
MARKDOWN_NAMES = (".md", ".markdown", ".mdown")
CSV_NAMES = (".csv", ".tsv")
OFFICE_NAMES = (".docx", ".pptx", ".xlsx")
SRT_CUE = re.compile(rb"\A(?:\xef\xbb\xbf)?\s*\d+\s*\r?\n\d{1,2}:\d{2}:\d{2}[,.]\d{1,3}\s*-->")


def sniff(path: Path, name: str = "") -> str:
    """The MIME type of the file at `path`; `name` (as uploaded) only tells Markdown from text."""
    with path.open("rb") as handle:
        head = handle.read(8192)
    return _sniff(head, name, path)


def sniff_file(handle: File | BinaryIO, name: str = "") -> str:
    """The same, for an open file (an upload streamed to disk): reads only what it needs."""
    handle.seek(0)
    head = handle.read(8192)
    handle.seek(0)
    return _sniff(head, name, handle)


def sniff_bytes(data: bytes, name: str = "") -> str:
    """The same, for a file already in memory (an upload): no copy to disk just to look."""
    return _sniff(data[:8192], name, io.BytesIO(data))


def _sniff(head: bytes, name: str, whole: Path | File | BinaryIO) -> str:
    if not head:
        raise ParseError(_("The file is empty."))
    if head.startswith(b"%PDF-"):
        return PDF
    image = image_type(head)
    if image:
        return image
    if head[4:8] == b"ftyp":
        return MOV if head[8:12] == b"qt  " else MP4
    if head[4:8] in (b"moov", b"mdat", b"wide", b"free"):  # QuickTime files without ftyp
        return MOV
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return WEBM
    if head.startswith(b"PK\x03\x04"):
        return _office_type(whole)
    try:
        # Text that is empty or damaged says so; only what is no text at all is of unknown type.
        decode_text(head if len(head) < 8192 else _whole_lines(head), partial=len(head) == 8192)
    except NotTextError:
        return "application/octet-stream"
    return _text_type(head, name.lower())


def check_indexable(mime: str, name: str) -> None:
    """Raise ParseError unless a parser reads files of type `mime`. The type is always the
    content's; where the name says Word, PowerPoint or Excel, the message says what is wrong
    with the content instead of listing the types that can be indexed."""
    from ingestion.parsers.base import parser_for

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


def _text_type(head: bytes, name: str) -> str:
    if head.lstrip(b"\xef\xbb\xbf").startswith(b"WEBVTT"):
        return VTT
    if SRT_CUE.match(head):
        return SRT
    if name.endswith(CSV_NAMES):
        return CSV
    return MARKDOWN if name.endswith(MARKDOWN_NAMES) else TEXT


def _office_type(whole: Path | File | BinaryIO) -> str:
    try:
        with zipfile.ZipFile(whole) as archive:
            names = set(archive.namelist())
    except zipfile.BadZipFile:
        return ZIP  # a zip by its signature, cut short or damaged: no parser reads it
    if "word/document.xml" in names:
        return DOCX
    if "ppt/presentation.xml" in names:
        return PPTX
    if "xl/workbook.xml" in names:
        return XLSX
    return ZIP


def _whole_lines(head: bytes) -> bytes:
    # Do not judge a multi-byte character cut at the end of the sample.
    cut = head.rfind(b"\n")
    return head[: cut + 1] if cut > 0 else head
