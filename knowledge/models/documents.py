from __future__ import annotations

from collections.abc import Iterator

from django.contrib.postgres.indexes import GinIndex
from django.db import models
from django.utils.translation import gettext_lazy as _
from pgvector.django import VectorField


def original_path(document: Document, filename: str) -> str:
    # Storage names are safe and unique; the original name is kept in Document.name.
    return f"collections/{document.collection_id}/originals/{document.sha256[:2]}/{document.sha256}"


def render_path(page: Page, filename: str) -> str:
    document = page.document
    return f"collections/{document.collection_id}/renders/{document.pk}/{page.number}-{page.content_sha256[:12]}.png"


class Document(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", _("Waiting")
        PROCESSING = "processing", _("Processing")
        READY = "ready", _("Ready")
        FAILED = "failed", _("Failed")

    collection = models.ForeignKey(
        "knowledge.Collection", on_delete=models.CASCADE, related_name="documents", verbose_name=_("collection")
    )
    name = models.CharField(_("name"), max_length=255)  # as uploaded, for display and citations
    rel_path = models.CharField(_("path"), max_length=1024)  # its place in the collection (folder sync key)
    file = models.FileField(_("file"), upload_to=original_path, max_length=300)
    sha256 = models.CharField(max_length=64)
    size = models.PositiveBigIntegerField(_("size"))
    mime = models.CharField(_("type"), max_length=150)
    status = models.CharField(_("status"), max_length=12, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(_("error"), blank=True)
    page_count = models.PositiveIntegerField(_("pages"), default=0)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        ordering = ["collection", "rel_path"]
        constraints = [models.UniqueConstraint(fields=["collection", "rel_path"], name="document_unique_path")]
        verbose_name = _("document")
        verbose_name_plural = _("documents")

    def __str__(self) -> str:
        return self.name


class Page(models.Model):
    """The unit of incremental work: its content hash decides whether it is redone."""

    class Kind(models.TextChoices):
        PDF_PAGE = "pdf_page", _("PDF page")
        SLIDE = "slide", _("Slide")
        SECTION = "section", _("Section")
        IMAGE = "image", _("Image")
        VIDEO_SEGMENT = "video_segment", _("Video segment")
        TEXT_BLOCK = "text_block", _("Text block")

    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="pages", verbose_name=_("document"))
    number = models.PositiveIntegerField(_("number"))
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices)
    content_sha256 = models.CharField(max_length=64)
    heading_path = models.JSONField(_("heading path"), default=list, blank=True)
    width = models.FloatField(null=True, blank=True)
    height = models.FloatField(null=True, blank=True)
    render = models.ImageField(_("render"), upload_to=render_path, null=True, blank=True, max_length=300)
    needs_ocr = models.BooleanField(_("needs OCR"), default=False)
    text = models.TextField(_("text"), blank=True)
    # EXIF date and orientation, a video segment's times, a link's URL: see ParsedPage.meta.
    meta = models.JSONField(_("details"), default=dict, blank=True)

    class Meta:
        ordering = ["document", "number"]
        constraints = [models.UniqueConstraint(fields=["document", "number"], name="page_unique_number")]
        verbose_name = _("page")
        verbose_name_plural = _("pages")

    def __str__(self) -> str:
        return f"{self.document} p.{self.number}"


def image_path(image: PageImage, filename: str) -> str:
    document = image.page.document
    return f"collections/{document.collection_id}/images/{document.pk}/{image.sha256}.png"


class PageImage(models.Model):
    """A picture on a page (an embedded image, a photo, a video frame), kept so that answers
    can show it. Image and frame chunks point at it by `location["image"]`, its hash, which
    stays the same across index versions."""

    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="images", verbose_name=_("page"))
    sha256 = models.CharField(max_length=64)
    file = models.ImageField(_("file"), upload_to=image_path, max_length=300)
    bbox = models.JSONField(_("position"), null=True, blank=True)
    t_start = models.FloatField(_("time"), null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["page", "sha256"], name="page_image_unique")]
        verbose_name = _("page image")
        verbose_name_plural = _("page images")

    def __str__(self) -> str:
        return f"{self.page} image {self.sha256[:8]}"


class Chunk(models.Model):
    """A searchable, citable piece of a page in one index version. Its id is kept while its
    page is unchanged, so old citations still resolve."""

    class Kind(models.TextChoices):
        TEXT = "text", _("Text")
        TABLE = "table", _("Table")
        IMAGE = "image", _("Image")
        PICTURE = "picture", _("Picture description")
        SUMMARY = "summary", _("Summary")
        FRAME = "frame", _("Video frame")
        NOTES = "notes", _("Speaker notes")
        TRANSCRIPT = "transcript", _("Transcript")

    index_version = models.ForeignKey(
        "knowledge.IndexVersion", on_delete=models.CASCADE, related_name="chunks", verbose_name=_("index version")
    )
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks", verbose_name=_("document"))
    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="chunks", verbose_name=_("page"))
    ordinal = models.PositiveIntegerField(_("order on the page"))
    kind = models.CharField(_("kind"), max_length=10, choices=Kind.choices)
    text = models.TextField(_("text"))
    location = models.JSONField(_("location"), default=dict)  # page, bbox, heading_path, slide, t_start, t_end
    # Lexical index (BM25 in the retrieval feature): term frequencies and length, from jieba.
    terms = models.JSONField(_("terms"), default=dict)
    length = models.PositiveIntegerField(_("length in terms"), default=0)
    # No fixed size here: each version's dims are checked on write and indexed per version.
    embedding = VectorField(_("embedding"), null=True)
    image_embedding = VectorField(_("image embedding"), null=True)  # image and frame chunks
    weight = models.FloatField(_("weight"), default=1.0)
    # True while its page is searchable in its version: from the batch that wrote it while its
    # document is indexed, and while the document is whole there (an IndexedDocument row);
    # kept by ingestion/stats.py, so searches and the HNSW indexes need no join.
    searchable = models.BooleanField(_("searchable"), default=False)
    content_sha256 = models.CharField(max_length=64)

    class Meta:
        ordering = ["document", "page__number", "ordinal"]
        indexes = [
            models.Index(fields=["index_version", "document"], name="chunk_version_document"),
            GinIndex(fields=["terms"], name="chunk_terms_gin"),  # BM25 candidates: terms ?| query
        ]
        verbose_name = _("chunk")
        verbose_name_plural = _("chunks")

    def __str__(self) -> str:
        return f"{self.page} #{self.ordinal}"


class IndexedPage(models.Model):
    """A page complete in one index version: all its chunks written, with the version's dims,
    for the content hash recorded here. Anything else is deleted and redone."""

    index_version = models.ForeignKey("knowledge.IndexVersion", on_delete=models.CASCADE, related_name="+")
    page = models.ForeignKey(Page, on_delete=models.CASCADE, related_name="indexed")
    content_sha256 = models.CharField(max_length=64)
    chunk_count = models.PositiveIntegerField()
    indexed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["index_version", "page"], name="indexed_page_unique")]

    def __str__(self) -> str:
        return f"{self.page} in v{self.index_version_id}"


class IndexedDocument(models.Model):
    """A document whole in one index version: every page of this file content is indexed.
    While it is indexed, only the pages written so far are searchable (Chunk.searchable)."""

    index_version = models.ForeignKey("knowledge.IndexVersion", on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="indexed")
    sha256 = models.CharField(max_length=64)
    indexed_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["index_version", "document"], name="indexed_document_unique")]

    def __str__(self) -> str:
        return f"{self.document} in v{self.index_version_id}"


def stored_file_names() -> Iterator[str]:
    """The storage name of every stored file the rows name (originals, page renders, page
    pictures), as the current transaction sees them: what moving or backing up the files
    must carry."""
    for names in (
        Document.objects.values_list("file", flat=True),
        Page.objects.values_list("render", flat=True),
        PageImage.objects.values_list("file", flat=True),
    ):
        yield from (name for name in names.iterator() if name)
