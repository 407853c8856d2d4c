"""A document's pages as stored: written from the parser's pages (text, headings, size, the
render), with what models read from them (OCR, speech, captions), and their pictures kept
once each. Their chunks are index.py's."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.core.files.base import ContentFile

from ingestion.enrich import enrich
from ingestion.parsers.base import ParsedPage
from knowledge.models import Document, Page, PageImage


def save_page(document: Document, parsed: ParsedPage) -> Page:
    page, created = Page.objects.get_or_create(
        document=document,
        number=parsed.number,
        defaults={"kind": parsed.kind, "content_sha256": parsed.content_sha256},
    )
    if created or page.content_sha256 != parsed.content_sha256 or (parsed.render and not page.render):
        page.kind, page.content_sha256 = parsed.kind, parsed.content_sha256
        page.heading_path, page.text = list(parsed.heading_path), parsed.text
        page.width, page.height, page.needs_ocr = parsed.width, parsed.height, parsed.needs_ocr
        page.meta = dict(parsed.meta)
        old = page.render.name if page.render else None
        if parsed.render:
            page.render.save(f"{parsed.number}.png", ContentFile(parsed.render), save=False)
        else:
            page.render = None  # drawn again from the new file on first view
        page.save()
        if old and old != page.render.name:
            page.render.storage.delete(old)
        _save_images(page, parsed)
    elif any(block.kind == "image" for block in parsed.blocks) and not page.images.exists():
        _save_images(page, parsed)  # indexed before pictures were kept
    return page


def enriched_page(page: Page, parsed: ParsedPage) -> ParsedPage:
    """The page with what models read from it (OCR, speech, captions); its text as shown in
    citations includes those words. Pages with nothing for a model to read pass through."""
    if not parsed.needs_ocr and not any(block.kind in ("image", "audio") for block in parsed.blocks):
        return parsed
    enriched = enrich(parsed, language=settings.LANGUAGE_CODE)
    if enriched.text != page.text:
        page.text = enriched.text
        Page.objects.filter(pk=page.pk).update(text=enriched.text)
    return enriched


def _save_images(page: Page, parsed: ParsedPage) -> None:
    """Keep the page's pictures (embedded images, photos, video frames) for answers to show,
    stored once per picture; pictures the page no longer has are removed with their files."""
    wanted = {
        hashlib.sha256(block.image).hexdigest(): block
        for block in parsed.blocks
        if block.kind == "image" and block.image is not None
    }
    for old in PageImage.objects.filter(page=page).exclude(sha256__in=wanted):
        old.file.delete(save=False)
        old.delete()
    have = set(PageImage.objects.filter(page=page).values_list("sha256", flat=True))
    for digest, block in wanted.items():
        if digest in have:
            continue
        image = PageImage(
            page=page, sha256=digest, bbox=list(block.bbox) if block.bbox else None, t_start=block.t_start
        )
        image.file.save(f"{digest}.png", ContentFile(block.image or b""), save=False)
        image.save()
