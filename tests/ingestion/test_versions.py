"""Versioned indexes: a reindex builds beside the active version, flips when complete, rolls
back to the kept version, and retired versions beyond the limit go away with their index.
Searches while a new version flips in never see an empty or mixed version; a changed
embedder builds a new version while the old one serves."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from assistant.retrieval import search as search_module
from assistant.retrieval.search import search
from common.runs import claim
from ingestion import actions, versions
from ingestion.models import IngestionRun
from ingestion.pipeline import ingest_document
from knowledge.models import Chunk, Collection, IndexedDocument, IndexVersion
from providers import registry
from tests.ingestion.files import POLICY
from tests.ingestion.runs import CountingEmbedder, drain

SENTENCE = "公司的差旅报销政策规定，员工出差期间的交通、住宿和餐饮费用可以凭发票报销。"

pytestmark = pytest.mark.usefixtures("media")


@pytest.fixture(autouse=True)
def one_version_kept(settings):
    settings.KEEP_VERSIONS = 1


def served(collection: Collection) -> list[tuple[str, int]]:
    """What a query would see: chunks of searchable documents in the active version."""
    collection.refresh_from_db()
    searchable = IndexedDocument.objects.filter(index_version_id=collection.active_version_id)
    chunks = Chunk.objects.filter(
        index_version_id=collection.active_version_id, document_id__in=searchable.values("document_id")
    )
    return sorted(chunks.order_by().values_list("document__rel_path", "index_version__number").distinct())


@pytest.fixture
def indexed(db, private_collection):
    for name in ("a.md", "b.md"):
        actions.do_add_document(private_collection, name, f"# {name}\n\n{SENTENCE * 20}".encode(), enqueue=False)
    drain(private_collection)
    private_collection.refresh_from_db()  # the pipeline set its active version
    return private_collection


def test_it_builds_beside_the_active_version_then_flips(indexed):
    indexed.settings = {"chunk_size": 120, "chunk_overlap": 10}
    indexed.save()
    v2 = versions.start_reindex(indexed, registry.text_embedder(), enqueue=False)
    assert v2.status == "building"
    assert v2.config["chunk_size"] == 120
    assert served(indexed) == [("a.md", 1), ("b.md", 1)]  # still v1 while v2 builds
    first_run = IngestionRun.objects.filter(index_version=v2).first()
    assert first_run is not None
    assert claim(first_run)
    ingest_document(first_run, registry.text_embedder())
    assert served(indexed) == [("a.md", 1), ("b.md", 1)]  # half-built v2 is never served
    drain(indexed)
    assert served(indexed) == [("a.md", 2), ("b.md", 2)]
    v2.refresh_from_db()
    assert v2.status == "active"
    assert v2.built_at is not None
    assert IndexVersion.objects.get(collection=indexed, number=1).status == "retired"
    assert max(len(c.text) for c in Chunk.objects.filter(index_version=v2)) <= 120


def test_it_rolls_back_and_keeps_only_the_newest_retired(indexed):
    with pytest.raises(ValidationError, match="no earlier index version"):
        versions.rollback(indexed)
    v2 = versions.start_reindex(indexed, registry.text_embedder(), enqueue=False)
    drain(indexed)
    back = versions.rollback(indexed)
    assert back.number == 1
    assert served(indexed) == [("a.md", 1), ("b.md", 1)]
    versions.start_reindex(indexed, registry.text_embedder(), enqueue=False)  # v3
    drain(indexed)
    numbers = dict(IndexVersion.objects.filter(collection=indexed).values_list("number", "status"))
    assert numbers == {1: "retired", 3: "active"}  # v2, the older retired one, is gone
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'chunk_hnsw_v%%'")
        names = {row[0] for row in cursor.fetchall()}
    kept = set(IndexVersion.objects.values_list("pk", flat=True))
    assert {f"chunk_hnsw_v{pk}" for pk in kept} <= names
    assert f"chunk_hnsw_v{v2.pk}" not in names  # dropped with its version
    assert not Chunk.objects.filter(index_version_id=v2.pk).exists()


def test_it_puts_uploads_during_a_rebuild_into_both_versions(indexed):
    v2 = versions.start_reindex(indexed, registry.text_embedder(), enqueue=False)
    actions.do_add_document(indexed, "c.md", f"# c\n\n{SENTENCE}".encode(), enqueue=False)
    drain(indexed)
    assert IndexedDocument.objects.filter(document__rel_path="c.md").count() == 2
    v2.refresh_from_db()
    assert v2.status == "active"
    assert ("c.md", 2) in served(indexed)


def test_it_refuses_a_second_build_at_once(indexed):
    versions.start_reindex(indexed, registry.text_embedder(), enqueue=False)
    with pytest.raises(ValidationError, match="already being built"):
        versions.start_reindex(indexed, registry.text_embedder(), enqueue=False)


@pytest.mark.django_db
def test_changed_chunk_settings_build_a_new_version_and_flip_when_done(private_collection):
    _document, _run = actions.do_add_document(private_collection, "a.md", f"# A\n\n{SENTENCE}".encode(), enqueue=False)
    drain(private_collection)
    private_collection.refresh_from_db()
    first = private_collection.active_version
    assert versions.reindex_outdated(registry.text_embedder()) == []  # nothing changed: no work

    private_collection.settings = {"chunk_size": 120, "chunk_overlap": 10}
    private_collection.save(update_fields=["settings"])
    (building,) = versions.reindex_outdated(registry.text_embedder())
    assert building.config["chunk_size"] == 120
    assert served(private_collection) == [("a.md", first.number)]  # the old version serves meanwhile
    assert versions.reindex_outdated(registry.text_embedder()) == []  # one build at a time
    drain(private_collection)
    assert served(private_collection) == [("a.md", building.number)]
    assert versions.reindex_outdated(registry.text_embedder()) == []


def indexed_markdown(collection: Collection, count: int = 3) -> Collection:
    for n in range(count):
        actions.do_add_document(collection, f"policy{n}.md", f"# 政策 {n}\n\n{POLICY * 3}".encode(), enqueue=False)
    drain(collection)
    collection.refresh_from_db()
    return collection


def active_number(collection: Collection) -> int:
    collection.refresh_from_db()
    assert collection.active_version is not None
    return collection.active_version.number


def versions_of(chunk_ids: Sequence[int]) -> set[int]:
    return set(Chunk.objects.filter(pk__in=chunk_ids).values_list("index_version__number", flat=True))


# A reindex while queries run never shows an empty or mixed version.


@pytest.mark.django_db
def test_a_search_that_starts_before_a_flip_still_finds_one_whole_version(alice, private_collection, monkeypatch):
    collection = indexed_markdown(private_collection)
    versions.start_reindex(collection, registry.text_embedder(), enqueue=False)
    real_scope_for = search_module.scope_for

    def flip_after_scoping(user, collection_ids=None):  # the build completes mid-search
        scope = real_scope_for(user, collection_ids)
        drain(collection)
        return scope

    monkeypatch.setattr(search_module, "scope_for", flip_after_scoping)
    results = search(alice, "北京 住宿标准", collection_ids=[collection.pk], rerank=False)
    assert active_number(collection) == 2  # it did flip
    assert results.hits, "a search during the flip found nothing"
    assert len(versions_of([hit.chunk_id for hit in results.hits])) == 1


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_searches_running_through_a_reindex_never_see_an_empty_or_mixed_version(alice, private_collection, settings):
    settings.KEEP_VERSIONS = 5  # every version's chunks stay, to tell afterwards which one each search read
    collection = indexed_markdown(private_collection, count=4)
    found: list[list[int]] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def query_until_done() -> None:
        try:
            while not done.is_set():
                hits = search(alice, "北京 住宿标准", collection_ids=[collection.pk], rerank=False).hits
                found.append([hit.chunk_id for hit in hits])
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            connection.close()

    searcher = threading.Thread(target=query_until_done)
    searcher.start()
    try:
        versions.start_reindex(collection, registry.text_embedder(), enqueue=False)
        drain(collection)
        versions.start_reindex(collection, registry.text_embedder(), enqueue=False)
        drain(collection)
    finally:
        done.set()
        searcher.join(60)
    assert not errors, errors
    assert len(found) >= 3
    assert all(found), "a search during the reindex found nothing"
    read = [versions_of(ids) for ids in found]
    assert all(len(numbers) == 1 for numbers in read), read
    assert active_number(collection) == 3


# A changed embedder builds a new version.


class RenamedEmbedder(CountingEmbedder):
    """The same vectors under another model id: what changing PROVIDER_EMBEDDING looks like."""

    def __init__(self) -> None:
        super().__init__()
        self.model_id = "local:another-embedder"


@pytest.mark.django_db
def test_a_changed_embedder_builds_a_new_version_while_the_old_one_serves(private_collection):
    collection = indexed_markdown(private_collection, count=1)
    assert versions.reindex_outdated(registry.text_embedder()) == []
    (building,) = versions.reindex_outdated(RenamedEmbedder())
    assert (building.status, building.embedder_id) == (IndexVersion.Status.BUILDING, "local:another-embedder")
    assert active_number(collection) == 1
