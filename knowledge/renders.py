"""Page renders for citations, made when first asked for.

Parsing a PDF does not render its pages: most pages are never shown, and a PNG per page
would cost ingestion a fifth of its time and the disk a file per page. The first request
for a page's render draws it from the stored original and keeps it; formats that can only
be drawn while parsing (slides through LibreOffice, pictures, video frames, pages the OCR
read) keep the render their parser made."""

from __future__ import annotations

from django.core.files.base import ContentFile

from common.storage import local_copy
from knowledge.models import Page

PDF = "application/pdf"
RENDER_DPI = 110


def ensure_render(page: Page) -> bool:
    """Whether the page has a render now, drawing it from the original if it can.
    FileNotFoundError when the original it would be drawn from is missing from storage."""
    if page.render:
        return True
    if page.document.mime != PDF:
        return False
    import pymupdf

    from common.render import render_png

    # A path, not the bytes: PyMuPDF reads only the pages it needs from a file. In an object
    # store that is a temporary copy. FileNotFoundError when the original is gone.
    with local_copy(page.document.file) as original, pymupdf.open(original, filetype="pdf") as document:
        if page.number > document.page_count:
            return False
        png = render_png(document.load_page(page.number - 1), RENDER_DPI)
    page.render.save(f"{page.number}.png", ContentFile(png), save=False)
    Page.objects.filter(pk=page.pk, render="").update(render=page.render.name)
    return True


def can_render(page: Page) -> bool:
    return bool(page.render) or page.document.mime == PDF
