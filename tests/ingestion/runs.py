"""Ingestion runs done in the test process, as a worker would do them: a counting wrapper
around the real local embedder, adding a document, running one run, draining the queue; and
a version's BM25 statistics as kept and as counted again from scratch."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from common.runs import claim
from ingestion import actions
from ingestion.models import IngestionRun
from ingestion.pipeline import ingest_document
from knowledge.models import Chunk, Collection, Document, IndexVersion, TermStat
from providers import registry


class CountingEmbedder:
    """The real local embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = registry.text_embedder()
        self.model_id = self.inner.model_id
        self.texts = 0
        self.batches: list[tuple[list[str], list[list[float]]]] = []  # each call's texts and vectors

    @property
    def dims(self) -> int:
        return self.inner.dims

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts += len(texts)
        vectors = self.inner.embed_documents(texts)
        self.batches.append((list(texts), vectors))
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def add(collection: Collection, name: str, data: bytes) -> tuple[Document, IngestionRun]:
    document, run = actions.do_add_document(collection, name, data)
    assert run is not None
    return document, run


def run_it(run: IngestionRun, embedder: CountingEmbedder):
    assert claim(run)
    return ingest_document(run, embedder)


def drain(collection: Collection | None = None) -> None:
    """Run every queued run inline, as the workers would: those of `collection`, or of every
    collection. In the database's order (no ORDER BY), as test_versions was written against:
    its upload-during-a-rebuild test fails in pk order, where the new version flips before the
    upload's run."""
    queued = IngestionRun.objects.filter(status=IngestionRun.Status.QUEUED)
    if collection is not None:
        queued = queued.filter(collection=collection)
    for run in queued:
        assert claim(run)
        ingest_document(run, registry.text_embedder())


def recounted(version_id: int) -> tuple[int, int, dict[str, int]]:
    """The BM25 statistics counted again from scratch over the version's searchable chunks."""
    chunks = Chunk.objects.filter(index_version_id=version_id, searchable=True)
    df: Counter[str] = Counter()
    for terms in chunks.values_list("terms", flat=True):
        df.update(terms.keys())
    return chunks.count(), sum(chunks.values_list("length", flat=True)), dict(df)


def kept_statistics(version_id: int) -> tuple[int, int, dict[str, int]]:
    version = IndexVersion.objects.get(pk=version_id)
    df = dict(TermStat.objects.filter(index_version_id=version_id, df__gt=0).values_list("term", "df"))
    return version.chunk_count, version.total_length, df
