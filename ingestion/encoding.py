"""Decoding text files whose encoding nobody declared: UTF-8 (with or without BOM), UTF-16
(BOM), and the Chinese legacy encodings GBK / GB18030, which Windows tools still write."""

from __future__ import annotations

import codecs

from django.utils.translation import gettext as _

from ingestion.parsers.base import ParseError

BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
# Text may hold a few control characters (form feeds, tabs); a binary file holds many.
MAX_CONTROL_RATIO = 0.01


def decode_text(data: bytes) -> tuple[str, str]:
    """The text and the encoding it was in; ParseError when it is not text."""
    if not data.strip():
        raise ParseError(_("The file is empty."))
    for bom, encoding in BOMS:
        if data.startswith(bom):
            return _checked(data.decode(encoding), encoding)
    if b"\x00" in data[:4096]:
        raise ParseError(_("The file is binary, not text (it contains NUL bytes)."))
    for encoding in ("utf-8", "gb18030"):
        try:
            return _checked(data.decode(encoding), "gbk" if encoding == "gb18030" and _is_gbk(data) else encoding)
        except UnicodeDecodeError:
            continue
    from charset_normalizer import from_bytes

    best = from_bytes(data).best()
    if best is None or best.encoding is None:
        raise ParseError(_("The file's text encoding could not be recognised; save it as UTF-8 and upload it again."))
    return _checked(str(best), best.encoding)


def _is_gbk(data: bytes) -> bool:
    try:
        data.decode("gbk")
    except UnicodeDecodeError:
        return False
    return True


def _checked(text: str, encoding: str) -> tuple[str, str]:
    controls = sum(1 for char in text if ord(char) < 32 and char not in "\n\r\t\f")
    if text and controls / len(text) > MAX_CONTROL_RATIO:
        raise ParseError(_("The file looks binary, not text (too many control characters)."))
    return text.replace("\r\n", "\n").replace("\r", "\n"), encoding
