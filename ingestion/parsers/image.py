"""Pictures (PNG, JPEG, WebP, GIF's first frame, TIFF's first page): one page each, turned
upright by its EXIF orientation, with its EXIF date and size; the enrichment stage reads its
words by OCR (with boxes) and, where a vision model is configured, captions it."""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.translation import gettext as _

from ingestion.parsers.base import Block, ParsedPage, ParseError, Parser

MAX_RENDER_SIDE = 2000  # pixels: enough for OCR and for display, bounded in size
# Pillow's DecompressionBombError says "Image size (400000000 pixels) exceeds limit of …".
BOMB_PIXELS = re.compile(r"\((\d+) pixels\)")
EXIF_ORIENTATION, EXIF_DATETIME, EXIF_IFD, EXIF_DATETIME_ORIGINAL = 0x0112, 0x0132, 0x8769, 0x9003


class ImageParser(Parser):
    mime_types = ("image/png", "image/jpeg", "image/webp", "image/gif", "image/tiff")

    def pages(self, path: Path) -> Iterator[ParsedPage]:
        picture, meta = open_image(path.read_bytes())
        render = png_bytes(picture)
        width, height = picture.size
        yield ParsedPage(
            number=1,
            kind="image",
            blocks=(Block("image", "", bbox=(0.0, 0.0, float(width), float(height)), image=render),),
            width=float(width),
            height=float(height),
            render=render,
            needs_ocr=True,
            meta=meta,
        )


def open_image(data: bytes) -> tuple[Any, dict[str, object]]:
    """The decoded picture, upright and at most MAX_RENDER_SIDE on a side, and what its EXIF says.
    Refuses decompression bombs before decoding them and truncated files with a readable error."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            # Pillow warns from its own limit (89 MP) up; PORTAL_MAX_IMAGE_MEGAPIXELS decides
            # instead, checked on the size the header states before anything is decoded.
            # Pillow's hard refusal (DecompressionBombError) stays on.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            opened = Image.open(io.BytesIO(data))  # reads the header only
            width, height = opened.size
            check_pixels(width * height)
            opened.seek(0)  # the first frame of a GIF or the first page of a TIFF
            exif = opened.getexif()
            opened.load()
    except Image.DecompressionBombError as exc:
        # Refused by Pillow inside Image.open, so no size to read but the one its message states.
        stated = BOMB_PIXELS.search(str(exc))
        if stated:
            check_pixels(int(stated.group(1)))
        raise ParseError(_("The image is too large to open safely (%s).") % exc) from exc
    except UnidentifiedImageError as exc:  # its message is the repr of our buffer: say it plainly
        raise ParseError(_("The image cannot be read: it is damaged or not really an image.")) from exc
    except (OSError, SyntaxError, ValueError) as exc:
        raise ParseError(_("The image cannot be read: it is damaged or incomplete (%s).") % exc) from exc
    meta: dict[str, object] = {"format": opened.format or "", "width": width, "height": height}
    orientation = exif.get(EXIF_ORIENTATION)
    if orientation:
        meta["orientation"] = int(orientation)
    taken = exif.get_ifd(EXIF_IFD).get(EXIF_DATETIME_ORIGINAL) or exif.get(EXIF_DATETIME)
    if taken:
        meta["taken_at"] = _exif_date(str(taken))
    picture = ImageOps.exif_transpose(opened).convert("RGB")
    picture.thumbnail((MAX_RENDER_SIDE, MAX_RENDER_SIDE))
    return picture, meta


def check_pixels(pixels: int) -> None:
    """Refuse a picture over PORTAL_MAX_IMAGE_MEGAPIXELS, saying its size and the limit."""
    if pixels > settings.MAX_IMAGE_MEGAPIXELS * 1_000_000:
        raise ParseError(
            _(
                "The image is %(size)s megapixels, more than the %(limit)s megapixels allowed "
                "(PORTAL_MAX_IMAGE_MEGAPIXELS)."
            )
            % {"size": f"{pixels / 1_000_000:,.1f}", "limit": settings.MAX_IMAGE_MEGAPIXELS}
        )


def png_bytes(picture: Any) -> bytes:
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG", optimize=False)
    return buffer.getvalue()


def _exif_date(value: str) -> str:
    """EXIF's "2024:05:01 10:30:00" as ISO 8601, or the value as it is when it is not that."""
    date, _sep, time = value.strip().partition(" ")
    parts = date.split(":")
    if len(parts) == 3 and all(part.isdigit() for part in parts):
        return "-".join(parts) + (f"T{time}" if time else "")
    return value.strip()
