"""Decoding text files whose encoding nobody declared: UTF-8 (with or without BOM), UTF-16
(BOM), and the Chinese legacy encodings GBK / GB18030, which Windows tools still write."""

from __future__ import annotations

import codecs

from django.utils.translation import gettext as _

from ingestion.parsers.base import ParseError

BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
# Text may hold a few control characters (form feeds, tabs); a binary file holds many.
MAX_CONTROL_RATIO = 0.01


class NotTextError(ParseError):
    """The bytes are no text at all (a binary file): sniffing calls such a file of unknown type.
    Other ParseErrors are about text that cannot be used (empty, damaged)."""


def decode_text(data: bytes, *, partial: bool = False) -> tuple[str, str]:
    """The text and the encoding it was in; ParseError when it is not text. `partial`: `data`
    is only the start of a file (a sniffing sample), so its last character may be cut."""
    if not data.strip():
        if partial:
            return "", "utf-8"  # blank so far: the whole file decides
        raise ParseError(_("The file is empty."))
    for bom, encoding in BOMS:
        if data.startswith(bom):
            return _checked(_decode_marked(data, encoding, partial), encoding)
    if b"\x00" in data[:4096]:
        raise NotTextError(_("The file is binary, not text (it contains NUL bytes)."))
    for encoding in ("utf-8", "gb18030"):
        try:
            return _checked(data.decode(encoding), "gbk" if encoding == "gb18030" and _is_gbk(data) else encoding)
        except UnicodeDecodeError:
            continue
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None or best.encoding is None:
        raise NotTextError(_("The file's text encoding could not be recognised; save it as UTF-8 and upload it again."))
    return _checked(str(best), best.encoding)


def _decode_marked(data: bytes, encoding: str, partial: bool) -> str:
    """Text whose byte-order mark names its encoding; a cut or damaged file is a ParseError,
    not a UnicodeDecodeError (a UTF-16 file cut at an odd length made the upload fail with a 500)."""
    try:
        return codecs.getincrementaldecoder(encoding)().decode(data, final=not partial)
    except UnicodeDecodeError as exc:
        raise ParseError(
            _("The file is marked as %(encoding)s text but cannot be decoded as it (%(error)s). Save it again.")
            % {"encoding": encoding.upper().removesuffix("-SIG"), "error": exc.reason}
        ) from exc


def _is_gbk(data: bytes) -> bool:
    try:
        data.decode("gbk")
    except UnicodeDecodeError:
        return False
    return True


def _checked(text: str, encoding: str) -> tuple[str, str]:
    controls = sum(1 for char in text if ord(char) < 32 and char not in "\n\r\t\f")
    if text and controls / len(text) > MAX_CONTROL_RATIO:
        raise NotTextError(_("The file looks binary, not text (too many control characters)."))
    # A few NUL characters past the first 4 KB (padding, a stray byte) are dropped: PostgreSQL
    # text cannot hold them, and the page would fail to save.
    return text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n"), encoding
