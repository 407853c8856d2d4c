"""A file's type from its content, not from its name; and whether the name's extension tells the
same (a `.pdf` holding a web page is refused, naming what it holds: `name_mismatch`)."""

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


TEXT_TYPES = frozenset({TEXT, MARKDOWN, CSV, VTT, SRT})
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/tiff", "image/webp"})
VIDEO_TYPES = frozenset({MP4, MOV, WEBM})
# What each extension the portal knows announces. A file whose content is something else is
# refused, naming what it holds ("lie.pdf" holding a web page is not indexed as text). A
# picture is a picture and a video a video whatever their container: a PNG named .jpg is common
# (the public evaluation has one, from Debian's GIMP manual) and opens everywhere. Office names
# also take a zip: formats.check_indexable says that one is damaged. Any text suits a text name; names
# not listed here (and no extension at all) leave the content to decide.
NAMED_TYPES: dict[str, frozenset[str]] = {
    ".pdf": frozenset({PDF}),
    ".docx": frozenset({DOCX, ZIP}),
    ".pptx": frozenset({PPTX, ZIP}),
    ".xlsx": frozenset({XLSX, ZIP}),
    **dict.fromkeys((".png", ".jpg", ".jpeg", ".jpe", ".jfif", ".gif", ".tif", ".tiff", ".webp"), IMAGE_TYPES),
    **dict.fromkeys((".mp4", ".m4v", ".m4a", ".mov", ".qt", ".webm", ".mkv"), VIDEO_TYPES),
    **dict.fromkeys(
        (".txt", ".text", ".log", *MARKDOWN_NAMES, *CSV_NAMES, ".srt", ".vtt", ".htm", ".html", ".xml", ".json"),
        TEXT_TYPES,
    ),
}
# Binary formats no parser reads, recognised only to say what a misnamed file holds.
BINARY_SIGNATURES = (
    (b"\x7fELF", "elf"),
    (b"MZ", "exe"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "ole"),
    (b"7z\xbc\xaf\x27\x1c", "7z"),
    (b"\x1f\x8b", "gzip"),
    (b"Rar!\x1a\x07", "rar"),
)
HTML_START = re.compile(
    rb"\A(?:\xef\xbb\xbf)?\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*<(?:!doctype\s+html|html|head|body)\b", re.I | re.S
)


def name_mismatch(handle: File | BinaryIO, mime: str, name: str) -> str | None:
    """Why a file whose content (`mime`, as sniffed) is not what its name's extension announces
    is refused, naming what it holds: "“lie.pdf” is named .pdf but holds an HTML page."; None
    when they agree or the extension announces nothing the portal knows."""
    filename = PurePosixPath(name).name
    suffix = PurePosixPath(filename.lower()).suffix
    expected = NAMED_TYPES.get(suffix)
    if expected is None or mime in expected:
        return None
    handle.seek(0)
    head = handle.read(1024)
    handle.seek(0)
    binary = next((kind for signature, kind in BINARY_SIGNATURES if head.startswith(signature)), None)
    if expected is TEXT_TYPES and mime == "application/octet-stream" and binary is None:
        return None  # maybe text in an encoding nobody can tell: formats.check_indexable says it cannot be read
    found = _described(mime, head, binary)
    return _("“%(name)s” is named %(suffix)s but holds %(found)s.") % {
        "name": filename,
        "suffix": suffix,
        "found": found,
    }


def _described(mime: str, head: bytes, binary: str | None) -> str:
    if mime in TEXT_TYPES:
        return _("an HTML page") if HTML_START.match(head) else _("plain text")
    described = {
        PDF: _("a PDF document"),
        DOCX: _("a Word document"),
        PPTX: _("a PowerPoint presentation"),
        XLSX: _("an Excel workbook"),
        ZIP: _("a zip archive"),
        "image/png": _("a PNG image"),
        "image/jpeg": _("a JPEG image"),
        "image/gif": _("a GIF image"),
        "image/tiff": _("a TIFF image"),
        "image/webp": _("a WebP image"),
        MP4: _("an MP4 video"),
        MOV: _("a QuickTime video"),
        WEBM: _("a WebM video"),
        "elf": _("a Linux program (ELF)"),
        "exe": _("a Windows program"),
        "ole": _("an older Office file (.doc, .xls or .ppt)"),
        "7z": _("a 7-Zip archive"),
        "gzip": _("a gzip archive"),
        "rar": _("a RAR archive"),
    }
    return described.get(binary or mime, _("data of a type the portal does not know"))


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
