"""The index: what an index version is built with (its chunk and parser settings, its
embedders), creating one with its vector indexes (the raw SQL on `knowledge_chunk`), the
versions new content goes to, and pages' chunks embedded in batches and written into a version.
Reindex, flip, rollback and pruning are versions.py's; a run that calls these, pipeline.py."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import F, Func, IntegerField, Max, Q
from django.utils import timezone

from common.text import without_leaders
from ingestion.chunking import ChunkDraft, ChunkSettings, chunk_page
from ingestion.parsers.base import ParsedPage
from ingestion.stages import stage
from ingestion.terms import terms
from knowledge.models import Chunk, Collection, IndexedPage, IndexVersion, Page
from providers.base import ImageEmbedder, ProviderError, TextEmbedder, check_dims

PARSER_VERSION = 5  # bump when parsing changes what pages contain: a new index version follows


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
    """The collection's active version as the database has it now, creating the first one when
    it has none; `collection` is told which it is, whoever made it. The runs of a new
    collection's first files start at once on several workers: the one that finds the version
    made meanwhile by another must not go on believing that there is none (it wrote nowhere,
    and called the document done while it stayed pending)."""
    current = Collection.objects.filter(pk=collection.pk).values_list("active_version_id", flat=True).first()
    if current is not None:
        version = IndexVersion.objects.get(pk=current)
    else:
        with transaction.atomic():
            locked = Collection.objects.select_for_update().get(pk=collection.pk)
            if locked.active_version_id is not None:
                version = IndexVersion.objects.get(pk=locked.active_version_id)
            else:
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
    """Where new content goes: the active version, any version being built, and one held back
    by its evaluation (so that it still covers everything when it is flipped anyway). Read
    from the database as it is now, never from the caller's copy of the collection: another
    run may have made the first version, or a flip moved the active one, since it was read."""
    pending = [IndexVersion.Status.BUILDING, IndexVersion.Status.HELD]
    active = Collection.objects.filter(pk=collection.pk).values("active_version_id")
    return list(
        IndexVersion.objects.filter(Q(pk__in=active) | Q(collection=collection, status__in=pending)).order_by("number")
    )


def page_valid(page: Page, version: IndexVersion) -> bool:
    record = IndexedPage.objects.filter(index_version=version, page=page).first()
    if record is None or record.content_sha256 != page.content_sha256:
        return False
    chunks = Chunk.objects.filter(index_version=version, page=page)
    broken = chunks.annotate(dims=Func(F("embedding"), function="vector_dims", output_field=IntegerField())).filter(
        Q(embedding__isnull=True) | ~Q(dims=version.dims) | ~Q(location__has_key="page")
    )
    return chunks.count() == record.chunk_count and not broken.exists()


EMBED_BATCH_CHARS = 6000
"""Chunks wait for the embedder until their text reaches this many characters (about a dozen
400-character chunks), then embed in one call. On a quiet machine a call's size makes no
difference (74 ms a 420-character text, one at a time or 48 together); while the other core
is busy (an answer, the quick worker) the model's two threads wait on each other once per
layer and call, and a dozen texts a call cost 29 % less each than one (bench/README.md,
"Ingestion per stage"). Larger batches delay a page's search for little more."""

EMBED_BATCH_SECONDS = 2.0
"""Nor do chunks wait longer than this from their page's end: pages slow to parse (OCR,
tables, pictures) fill a batch slowly, and a batch's pages become searchable only once it is
written. Such pages spend seconds each elsewhere, so the smaller call costs them little."""


@dataclass
class DraftedPage:
    """A page's chunks for one version, cut and waiting for their vectors."""

    page: Page
    version: IndexVersion
    drafts: list[ChunkDraft]

    @property
    def chars(self) -> int:
        return sum(len(_embedding_text(draft)) for draft in self.drafts)


def draft_page(page: Page, parsed: ParsedPage, version: IndexVersion, settings: ChunkSettings) -> DraftedPage:
    with stage("chunking"):
        drafts = chunk_page(parsed, settings)
    if version.config.get("page_summaries") and len(parsed.text) >= SUMMARY_MIN_CHARS:
        with stage("caption"):  # a model's words about the page
            drafts.append(ChunkDraft("summary", summarize(parsed.text), parsed.number, None, parsed.heading_path))
    return DraftedPage(page, version, drafts)


def write_pages(drafted: list[DraftedPage], embedder: TextEmbedder) -> int:
    """Embed the pages' chunks in one call, then write each page's chunks and its IndexedPage
    record in a transaction of its own (a page is valid or absent, never half-written)."""
    texts = [_embedding_text(draft) for item in drafted for draft in item.drafts]
    with stage("embedding"):
        vectors = embedder.embed_documents(texts) if texts else []
        pictures = [_image_vectors(item.drafts, item.version) for item in drafted]
    written = start = 0
    for item, pictured in zip(drafted, pictures, strict=True):
        end = start + len(item.drafts)
        with stage("chunking"):
            rows = _rows(item.page, item.drafts, vectors[start:end], pictured, item.version)
        start = end
        with stage("database"), transaction.atomic():
            Chunk.objects.filter(index_version=item.version, page=item.page).delete()
            IndexedPage.objects.filter(index_version=item.version, page=item.page).delete()
            Chunk.objects.bulk_create(rows)
            IndexedPage.objects.create(
                index_version=item.version,
                page=item.page,
                content_sha256=item.page.content_sha256,
                chunk_count=len(rows),
            )
        written += len(rows)
    return written


def _rows(
    page: Page,
    drafts: list[ChunkDraft],
    vectors: list[list[float]],
    pictures: dict[int, list[float]],
    version: IndexVersion,
) -> list[Chunk]:
    """The page's chunks as rows, with their terms for the lexical channel."""
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
    return rows


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
    # The headings above a chunk say what it is about; they embed with it. Dotted leaders do
    # not: a contents page embeds 8 times faster without them (bench/README.md, 2026-12-06).
    text = without_leaders(draft.embed or draft.text)
    return " > ".join(draft.heading_path) + "\n" + text if draft.heading_path else text
