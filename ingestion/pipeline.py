"""Ingesting one document into its collection's index versions, page by page, redoing only
what changed. No Celery here: tasks.py wraps these functions, and tests call them directly.

A page is valid in a version when its IndexedPage row matches its content hash and all its
chunks exist there with the version's dims; anything else is deleted and redone. A document
is searchable in a version only once every page is valid (IndexedDocument).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import time
import traceback
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.files.base import ContentFile
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F, Func, IntegerField, Max, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from ingestion.chunking import ChunkDraft, ChunkSettings, chunk_page
from ingestion.enrich import enrich
from ingestion.models import IngestionRun
from ingestion.parsers.base import ParsedPage, ParseError, parser_for
from ingestion.runs import enqueue_run, new_ingest_run
from ingestion.terms import terms
from knowledge.events import send_collection_event_on_commit
from knowledge.models import (
    Chunk,
    Collection,
    Document,
    IndexedDocument,
    IndexedPage,
    IndexVersion,
    Page,
    PageImage,
)
from providers.base import ImageEmbedder, ProviderError, TextEmbedder, check_dims

log = logging.getLogger(__name__)
EVENT_INTERVAL = 0.3  # seconds between progress events for one run
PARSER_VERSION = 5  # bump when parsing changes what pages contain: a new index version follows


class CancelledError(Exception):
    """The run's cancel_requested was set; stop between pages."""


@dataclass(frozen=True)
class IngestResult:
    pages: int
    pages_indexed: int
    pages_kept: int
    chunks_written: int

    def as_counts(self) -> dict[str, int]:
        return {
            "pages": self.pages,
            "pages_indexed": self.pages_indexed,
            "pages_kept": self.pages_kept,
            "chunks_written": self.chunks_written,
        }


def chunk_settings(collection: Collection) -> ChunkSettings:
    options = collection.settings or {}
    return ChunkSettings(size=int(options.get("chunk_size", 400)), overlap=int(options.get("chunk_overlap", 50)))


def version_chunk_settings(version: IndexVersion) -> ChunkSettings:
    """A version chunks with the settings it was created with, whatever the collection says now."""
    return ChunkSettings(size=int(version.config["chunk_size"]), overlap=int(version.config["chunk_overlap"]))


def version_config(collection: Collection) -> dict[str, object]:
    chunks = chunk_settings(collection)
    return {
        "chunk_size": chunks.size,
        "chunk_overlap": chunks.overlap,
        "parser_version": PARSER_VERSION,
        "page_summaries": bool((collection.settings or {}).get("page_summaries", False)),
    }


def ensure_active_version(collection: Collection, embedder: TextEmbedder) -> IndexVersion:
    """The collection's active version, creating the first one when it has none."""
    if collection.active_version_id is not None:
        return IndexVersion.objects.get(pk=collection.active_version_id)
    with transaction.atomic():
        locked = Collection.objects.select_for_update().get(pk=collection.pk)
        if locked.active_version_id is not None:
            return IndexVersion.objects.get(pk=locked.active_version_id)
        version = create_version(locked, embedder, status=IndexVersion.Status.ACTIVE)
        locked.active_version = version
        locked.save(update_fields=["active_version"])
    collection.active_version = version
    return version


def image_embedder() -> ImageEmbedder | None:
    """The configured image embedder, or None (offline there is none: docs/models.md)."""
    from providers import registry

    return registry.image_embedder() if registry.available("image_embedding") else None


def create_version(collection: Collection, embedder: TextEmbedder, status: str) -> IndexVersion:
    config = version_config(collection)
    last = IndexVersion.objects.filter(collection=collection).aggregate(n=Max("number"))["n"] or 0
    pictures = image_embedder()
    version = IndexVersion.objects.create(
        collection=collection,
        number=last + 1,
        embedder_id=embedder.model_id,
        dims=embedder.dims,
        image_embedder_id=pictures.model_id if pictures else "",
        image_dims=pictures.dims if pictures else None,
        config=config,
        config_hash=hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest(),
        status=status,
        activated_at=timezone.now() if status == IndexVersion.Status.ACTIVE else None,
    )
    _create_vector_index(version)
    return version


def _create_vector_index(version: IndexVersion) -> None:
    with connection.cursor() as cursor:
        # CREATE INDEX refuses a table with deferred FK checks pending in this transaction:
        # run those checks now (they would run at commit anyway).
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        for sql in vector_index_sql(version):
            cursor.execute(sql)


def vector_index_sql(version: IndexVersion) -> list[str]:
    """pgvector indexes need a fixed size: one partial HNSW index per version, on the cast
    column, over its searchable chunks only, so that a search needs no other filter and the
    planner reads the graph; and one global index per dims over every version's searchable
    chunks of that size, which a search over many versions reads once, filtered by version
    (assistant.retrieval.dense). Identifiers come from integers we own, not from input."""
    pk, dims = int(version.pk), int(version.dims)
    statements = [
        f"CREATE INDEX IF NOT EXISTS chunk_hnsw_v{pk} ON knowledge_chunk "
        f"USING hnsw ((embedding::vector({dims})) vector_cosine_ops) "
        f"WHERE index_version_id = {pk} AND searchable",
        f"CREATE INDEX IF NOT EXISTS chunk_hnsw_d{dims} ON knowledge_chunk "
        f"USING hnsw ((embedding::vector({dims})) vector_cosine_ops) "
        f"WHERE vector_dims(embedding) = {dims} AND searchable",
    ]
    if version.image_dims:
        image_dims = int(version.image_dims)
        statements += [
            f"CREATE INDEX IF NOT EXISTS chunk_image_hnsw_v{pk} ON knowledge_chunk "
            f"USING hnsw ((image_embedding::vector({image_dims})) vector_cosine_ops) "
            f"WHERE index_version_id = {pk} AND searchable AND image_embedding IS NOT NULL",
            f"CREATE INDEX IF NOT EXISTS chunk_image_hnsw_d{image_dims} ON knowledge_chunk "
            f"USING hnsw ((image_embedding::vector({image_dims})) vector_cosine_ops) "
            f"WHERE vector_dims(image_embedding) = {image_dims} AND searchable",
        ]
    return statements


def target_versions(collection: Collection) -> list[IndexVersion]:
    """Where new content goes: the active version, and any version being built."""
    return list(
        IndexVersion.objects.filter(
            Q(pk=collection.active_version_id) | Q(collection=collection, status=IndexVersion.Status.BUILDING)
        ).order_by("number")
    )


def claim(run: IngestionRun) -> bool:
    """Take a queued run; False when another worker already has it (healthchecks' sendalerts)."""
    now = timezone.now()
    updated = IngestionRun.objects.filter(pk=run.pk, status=IngestionRun.Status.QUEUED).update(
        status=IngestionRun.Status.RUNNING, started_at=now, heartbeat_at=now
    )
    if updated == 1:
        run.refresh_from_db()
    return updated == 1


def ingest_document(run: IngestionRun, embedder: TextEmbedder) -> IngestResult | None:
    """Run a claimed ingest run to its end and record the outcome on it."""
    document = run.document
    assert document is not None
    try:
        result = _ingest(run, document, embedder)
    except CancelledError:
        _finish(run, IngestionRun.Status.CANCELLED, error=_("Cancelled before the end; run it again to finish."))
        return None
    except (ParseError, ProviderError) as exc:
        _fail(run, document, str(exc))
        if isinstance(exc, ProviderError) and exc.retryable:
            raise  # the task retries with backoff
        return None
    except (OperationalError, InterfaceError) as exc:  # the database went away (restarted)
        with contextlib.suppress(OperationalError, InterfaceError):  # it may still be away
            message = _("The connection to the database was lost while indexing (%(error)s); it is tried again.")
            first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            _fail(run, document, message % {"error": first_line}, traceback.format_exc())
        raise  # the task retries with backoff
    except Exception as exc:
        if disk_full(exc):  # not the document's fault, and retrying at once would not help
            _fail(run, document, disk_full_message(), traceback.format_exc())
            return None
        _fail(run, document, _("Unexpected error while indexing: %(error)s") % {"error": exc}, traceback.format_exc())
        raise
    _finish(run, IngestionRun.Status.SUCCEEDED, counts=result.as_counts())
    return result


def disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def disk_full_message() -> str:
    return _(
        "The server's disk is full, so this document's pages could not be saved. Free some space, then run it again."
    )


def _ingest(run: IngestionRun, document: Document, embedder: TextEmbedder) -> IngestResult:
    collection = document.collection
    ensure_active_version(collection, embedder)
    versions = target_versions(collection)
    for version in versions:
        check_dims(embedder, version.dims, role="embedding", provider=embedder.model_id.split(":")[0])
    complete = set(
        IndexedDocument.objects.filter(
            document=document, sha256=document.sha256, index_version__in=versions
        ).values_list("index_version_id", flat=True)
    )
    # Versions where this content is already complete keep serving it, untouched.
    pending = [version for version in versions if version.pk not in complete]
    if not pending:
        pages = document.pages.count()
        return IngestResult(pages=pages, pages_indexed=0, pages_kept=pages, chunks_written=0)
    parser = parser_for(document.mime)
    # Unsearchable in the pending versions until every page is valid there again.
    IndexedDocument.objects.filter(document=document, index_version__in=pending).delete()
    if collection.active_version_id in {version.pk for version in pending}:
        Document.objects.filter(pk=document.pk).update(status=Document.Status.PROCESSING, error="")
    numbers: list[int] = []
    indexed = kept = written = 0
    last_event = 0.0
    total = parser.count(Path(document.file.path))
    if total:
        IngestionRun.objects.filter(pk=run.pk).update(total=total)
        run.total = total
    for parsed in parser.pages(Path(document.file.path)):
        page = _save_page(document, parsed)
        numbers.append(parsed.number)
        stale = [version for version in pending if not _page_valid(page, version)]
        kept += len(pending) - len(stale)
        if stale:
            enriched = _enriched(page, parsed)
            for version in stale:
                written += _index_page(page, enriched, version, embedder, version_chunk_settings(version))
                indexed += 1
        if _progress(run, len(numbers), last_event):
            last_event = time.monotonic()
    _finish_document(document, pending, numbers)
    from ingestion.versions import complete_build_if_done

    for version in pending:
        if version.status == IndexVersion.Status.BUILDING:
            complete_build_if_done(version)
    return IngestResult(pages=len(numbers), pages_indexed=indexed, pages_kept=kept, chunks_written=written)


def _save_page(document: Document, parsed: ParsedPage) -> Page:
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


def _enriched(page: Page, parsed: ParsedPage) -> ParsedPage:
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


def _page_valid(page: Page, version: IndexVersion) -> bool:
    record = IndexedPage.objects.filter(index_version=version, page=page).first()
    if record is None or record.content_sha256 != page.content_sha256:
        return False
    chunks = Chunk.objects.filter(index_version=version, page=page)
    broken = chunks.annotate(dims=Func(F("embedding"), function="vector_dims", output_field=IntegerField())).filter(
        Q(embedding__isnull=True) | ~Q(dims=version.dims) | ~Q(location__has_key="page")
    )
    return chunks.count() == record.chunk_count and not broken.exists()


def _index_page(
    page: Page, parsed: ParsedPage, version: IndexVersion, embedder: TextEmbedder, settings: ChunkSettings
) -> int:
    drafts = chunk_page(parsed, settings)
    if version.config.get("page_summaries") and len(parsed.text) >= SUMMARY_MIN_CHARS:
        drafts.append(ChunkDraft("summary", summarize(parsed.text), parsed.number, None, parsed.heading_path))
    vectors = embedder.embed_documents([_embedding_text(d) for d in drafts]) if drafts else []
    pictures = _image_vectors(drafts, version)
    rows = []
    for ordinal, (draft, vector) in enumerate(zip(drafts, vectors, strict=True)):
        counts = terms(draft.text + " " + " ".join(draft.heading_path))
        rows.append(
            Chunk(
                index_version=version,
                document_id=page.document_id,
                page=page,
                ordinal=ordinal,
                kind=draft.kind,
                text=draft.text,
                location=draft.location,
                terms=dict(counts),
                length=sum(counts.values()),
                embedding=vector,
                image_embedding=pictures.get(ordinal),
                content_sha256=draft.content_sha256,
            )
        )
    with transaction.atomic():
        Chunk.objects.filter(index_version=version, page=page).delete()
        IndexedPage.objects.filter(index_version=version, page=page).delete()
        Chunk.objects.bulk_create(rows)
        IndexedPage.objects.create(
            index_version=version, page=page, content_sha256=page.content_sha256, chunk_count=len(rows)
        )
    return len(rows)


def _image_vectors(drafts: list[ChunkDraft], version: IndexVersion) -> dict[int, list[float]]:
    """Image and frame chunks in the image embedder's space, by ordinal, where the version has one."""
    if not version.image_dims:
        return {}
    pictured = [
        (n, d.image) for n, d in enumerate(drafts) if d.image is not None and d.kind in ("image", "picture", "frame")
    ]
    if not pictured:
        return {}
    model = image_embedder()
    if model is None or model.model_id != version.image_embedder_id:
        raise ProviderError(
            "image_embedding",
            version.image_embedder_id.split(":")[0],
            f"index version {version.number} embeds pictures with {version.image_embedder_id}, which is not "
            "configured now: configure it again, or reindex the collection.",
        )
    check_dims(model, version.image_dims, role="image_embedding", provider=model.model_id.split(":")[0])
    vectors = model.embed_images([image for _n, image in pictured if image is not None])
    return {n: vector for (n, _image), vector in zip(pictured, vectors, strict=True)}


SUMMARY_MIN_CHARS = 200  # shorter pages are their own summary
SUMMARY_PROMPTS = {
    "zh": "用两句话概括这一页的主要内容，只输出概括。",
    "en": "Summarise this page in two sentences. Output only the summary.",
}


def summarize(text: str) -> str:
    """A short summary of a page by the chat model: found by "what is this page about"
    questions that no single chunk answers (seed 000's summary recall)."""
    from common.language import language_of
    from providers import chat_model
    from providers.base import ChatMessage

    prompt = SUMMARY_PROMPTS[language_of(text)]
    result = chat_model().complete(
        [ChatMessage("system", prompt), ChatMessage("user", text[:3000])], max_tokens=120, temperature=0.0
    )
    return result.text.strip()


def _embedding_text(draft: ChunkDraft) -> str:
    # The headings above a chunk say what it is about; they embed with it.
    return " > ".join(draft.heading_path) + "\n" + draft.text if draft.heading_path else draft.text


def _finish_document(document: Document, versions: list[IndexVersion], numbers: list[int]) -> None:
    with transaction.atomic():
        Page.objects.filter(document=document).exclude(number__in=numbers).delete()  # the file got shorter
        for version in versions:
            IndexedDocument.objects.update_or_create(
                index_version=version, document=document, defaults={"sha256": document.sha256}
            )
        Document.objects.filter(pk=document.pk).update(
            status=Document.Status.READY, error="", page_count=len(numbers), updated_at=timezone.now()
        )
        send_collection_event_on_commit(
            document.collection_id,
            {
                "type": "document.ready",
                "document": document.pk,
                "pages": len(numbers),
            },
        )


def _progress(run: IngestionRun, pages: int, last_event: float) -> bool:
    """Record progress and a heartbeat, stop if cancelled (one query for all three), and tell
    watchers at most a few times a second. True when an event was sent."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE ingestion_ingestionrun SET progress = %s, heartbeat_at = %s WHERE id = %s "
            "RETURNING cancel_requested",
            [pages, timezone.now(), run.pk],
        )
        row = cursor.fetchone()
    if row and row[0]:
        raise CancelledError
    if run.document_id is None or time.monotonic() - last_event < EVENT_INTERVAL:
        return False
    event = {
        "type": "document.progress",
        "document": run.document_id,
        "run": run.pk,
        "pages_done": pages,
        "pages_total": run.total,  # None when the format cannot tell before parsing
    }
    send_collection_event_on_commit(run.collection_id, event)
    return True


def _fail(run: IngestionRun, document: Document, message: str, trace: str = "") -> None:
    Document.objects.filter(pk=document.pk).update(status=Document.Status.FAILED, error=message)
    _finish(run, IngestionRun.Status.FAILED, error=message, trace=trace)
    send_collection_event_on_commit(
        run.collection_id,
        {
            "type": "document.failed",
            "document": document.pk,
            "run": run.pk,
            "error": message,
        },
    )


def _finish(
    run: IngestionRun, status: str, *, error: str = "", trace: str = "", counts: dict[str, int] | None = None
) -> None:
    IngestionRun.objects.filter(pk=run.pk).update(
        status=status, error=error, traceback=trace, counts=counts or {}, finished_at=timezone.now()
    )
    run.refresh_from_db()


def requeue_stale_runs(stale_after: timedelta) -> list[IngestionRun]:
    """Runs whose worker stopped mid-document (killed, out of memory, machine lost): mark them
    failed and queue the document again. The document stayed unsearchable meanwhile, and the
    new run keeps every page that was completed."""
    cutoff = timezone.now() - stale_after
    stale = IngestionRun.objects.filter(status=IngestionRun.Status.RUNNING, heartbeat_at__lt=cutoff)
    requeued = []
    for run in stale.select_related("document"):
        message = _("The worker stopped while indexing this document; it was queued again.")
        if (
            IngestionRun.objects.filter(pk=run.pk, status=IngestionRun.Status.RUNNING).update(
                status=IngestionRun.Status.FAILED, error=message, finished_at=timezone.now()
            )
            != 1
        ):
            continue  # it finished meanwhile
        if run.document is not None:
            requeued.append(new_ingest_run(run.document))
    return requeued


def resend_lost_runs(stale_after: timedelta) -> list[IngestionRun]:
    """Queued ingestion runs whose task message is gone: Redis restarted without keeping its
    data (the embedded one keeps none, so restarting `manage.py up` lost every queued upload),
    or a broker flushed. Call it only when the broker's ingest queue is empty: then no queued
    run has a message waiting. Each such run queued for longer than `stale_after` (and not
    sent again since) is sent again; a run a worker holds already is claimed only once, so a
    second message for it does nothing. `heartbeat_at` of a queued run: when it was resent."""
    cutoff = timezone.now() - stale_after
    lost = IngestionRun.objects.filter(
        status=IngestionRun.Status.QUEUED,
        kind=IngestionRun.Kind.INGEST,
        document__isnull=False,
        created_at__lt=cutoff,
    ).filter(Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=cutoff))
    resent = []
    for run in lost:
        if IngestionRun.objects.filter(pk=run.pk, status=IngestionRun.Status.QUEUED).update(
            heartbeat_at=timezone.now()
        ):
            enqueue_run(run)  # sent at once: no transaction is open here
            resent.append(run)
    return resent
