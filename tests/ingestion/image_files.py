"""Pictures for the image and OCR tests, drawn with Pillow: text in Chinese and English, a
photo-like picture with EXIF, a scanned PDF page, and broken or oversized files."""

from __future__ import annotations

import io
import random
from pathlib import Path

from tests.ingestion.files import cjk_font


def text_image(lines: list[str], *, width: int = 900, size: int = 40, fmt: str = "PNG") -> bytes:
    """Black text on white, one line per entry, large enough for OCR to read reliably."""
    from PIL import Image, ImageDraw, ImageFont

    font_path = cjk_font()
    font = ImageFont.truetype(str(font_path), size)
    height = 60 + len(lines) * (size + 30)
    image = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(image)
    for n, line in enumerate(lines):
        draw.text((40, 30 + n * (size + 30)), line, fill="black", font=font)
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def photo_jpeg(*, taken: str = "2024:05:01 10:30:00", orientation: int = 6) -> bytes:
    """A noisy 320×200 landscape with an EXIF date and an orientation that turns it upright."""
    from PIL import Image

    rng = random.Random(7)
    image = Image.new("RGB", (320, 200))
    image.putdata(
        [(min(255, x + rng.randrange(40)), min(255, y + rng.randrange(40)), 90) for y in range(200) for x in range(320)]
    )
    exif = Image.Exif()
    exif[0x0112] = orientation
    exif.get_ifd(0x8769)[0x9003] = taken
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", exif=exif.tobytes())
    return buffer.getvalue()


def scanned_pdf(path: Path, lines: list[str]) -> Path:
    """One A4 page that is only a picture of text: no text layer at all."""
    import pymupdf

    document = pymupdf.open()
    page = document.new_page(width=595, height=842)
    picture = text_image(lines, width=1240, size=44)
    page.insert_image(pymupdf.Rect(40, 60, 555, 60 + 515 * _aspect(picture)), stream=picture)
    document.save(path)
    return path


def _aspect(png: bytes) -> float:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return image.height / image.width
