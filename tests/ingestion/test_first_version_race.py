"""The first files of a new collection run at once on several workers: each run read the
collection before any index version existed. The one that found the version another had
just made used to go on with its own copy (no active version), wrote nowhere, recorded the
run as succeeded and left its document pending for ever (ingestion.index)."""

from __future__ import annotations

import pytest

from common.runs import claim
from ingestion.index import ensure_active_version, target_versions
from ingestion.models import IngestionRun
from ingestion.pipeline import ingest_document
from knowledge.models import Collection, Document
from tests.conftest import make_collection
from tests.ingestion.runs import CountingEmbedder, add, run_it

pytestmark = pytest.mark.django_db


def test_a_run_that_read_the_collection_before_its_first_version_still_indexes(alice):
    collection = make_collection(alice, "New")
    first, first_run = add(collection, "a.md", b"# A\n\nThe first file of the collection.\n")
    second, second_run = add(collection, "b.md", b"# B\n\nThe second file, uploaded with it.\n")
    # The second worker claims its run and reads its document's collection before the first
    # worker has made the version; then the first makes it, and the second goes on.
    assert claim(second_run)
    assert second_run.document is not None
    assert second_run.document.collection.active_version_id is None
    embedder = CountingEmbedder()
    run_it(IngestionRun.objects.get(pk=first_run.pk), embedder)
    result = ingest_document(second_run, embedder)

    assert result is not None
    assert result.pages == 1
    assert result.chunks_written > 0
    assert Document.objects.get(pk=second.pk).status == Document.Status.READY
    assert Document.objects.get(pk=first.pk).status == Document.Status.READY


def test_where_content_goes_is_read_from_the_database(alice):
    """A caller's copy of the collection, read before the version was made, still finds it."""
    collection = make_collection(alice, "New")
    stale = Collection.objects.get(pk=collection.pk)
    made = ensure_active_version(Collection.objects.get(pk=collection.pk), CountingEmbedder())
    assert stale.active_version_id is None
    assert [version.pk for version in target_versions(stale)] == [made.pk]
    assert ensure_active_version(stale, CountingEmbedder()).pk == made.pk
    assert stale.active_version_id == made.pk
