"""A PDF page drawn as a PNG within a pixel budget: parsing draws pages for OCR and for
pictures PyMuPDF cannot extract (ingestion/parsers/pdf.py), and a citation's page is drawn
when first asked for (knowledge/renders.py)."""

from __future__ import annotations

import math
from typing import Any

# No render is larger than this: a page may be up to 200 inches a side (PDF's limit), which at
# the OCR's 200 dpi would be 1.6 billion pixels (4.8 GB) from a file of a few hundred bytes;
# such a page is drawn at the dpi that fits. 25 MP is an A0 poster at 130 dpi.
MAX_RENDER_PIXELS = 25_000_000


def render_png(page: Any, dpi: int, clip: tuple[float, float, float, float] | None = None) -> bytes:
    """The page (or its `clip` area, in page points) drawn as a PNG at `dpi`, or at the lower
    dpi that keeps it within MAX_RENDER_PIXELS."""
    import pymupdf

    area = pymupdf.Rect(clip) if clip is not None else page.rect
    square_inches = (area.width / 72) * (area.height / 72)
    if square_inches > 0:
        dpi = max(1, min(dpi, math.floor(math.sqrt(MAX_RENDER_PIXELS / square_inches))))
    data: bytes = page.get_pixmap(dpi=dpi, clip=area if clip is not None else None).tobytes("png")
    return data
