"""Versioned indexes: a reindex builds beside the active version, flips when complete, rolls
back to the kept version, and retired versions beyond the limit go away with their index."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.db import connection

from ingestion import actions, versions
from ingestion.models import IngestionRun
from ingestion.pipeline import claim, ingest_document
from knowledge.models import Chunk, Collection, IndexedDocument, IndexVersion
from providers import registry

SENTENCE = "公司的差旅报销政策规定，员工出差期间的交通、住宿和餐饮费用可以凭发票报销。"


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.KEEP_VERSIONS = 1


def drain(collection: Collection) -> None:
    """Run every queued run inline, as the workers would."""
    for run in IngestionRun.objects.filter(collection=collection, status=IngestionRun.Status.QUEUED):
        assert claim(run)
        ingest_document(run, registry.text_embedder())


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
