from __future__ import annotations

import pytest

from common.runs import claim
from ingestion import actions
from ingestion.models import IngestionRun
from ingestion.pipeline import ingest_document
from knowledge.models import Collection, Document, IndexVersion

pytestmark = pytest.mark.usefixtures("media")


@pytest.fixture
def indexed(db, private_collection):
    from providers import registry

    _document, run = actions.do_add_document(private_collection, "a.md", "# A\n\n正文。".encode(), enqueue=False)
    assert run is not None
    assert claim(run)
    ingest_document(run, registry.text_embedder())
    private_collection.refresh_from_db()
    return private_collection


def act(admin_client, model: str, action: str, *pks: int):
    url = f"/admin/{model}/"
    return admin_client.post(url, {"action": action, "_selected_action": [str(pk) for pk in pks]}, follow=True)


def test_it_reindexes_and_rolls_back_from_the_admin(admin_client, indexed):
    page = act(admin_client, "knowledge/collection", "reindex", indexed.pk).content.decode()
    assert "Building a new index version" in page
    assert IndexVersion.objects.filter(collection=indexed, status="building").count() == 1
    assert IngestionRun.objects.filter(kind="reindex", collection=indexed).count() == 1
    again = act(admin_client, "knowledge/collection", "reindex", indexed.pk).content.decode()
    assert "already being built" in again
    refused = act(admin_client, "knowledge/collection", "roll_back", indexed.pk).content.decode()
    assert "no earlier index version" in refused


def test_it_flips_a_kept_version_from_the_admin(admin_client, indexed):
    from ingestion import versions
    from providers import registry

    v2 = versions.start_reindex(indexed, registry.text_embedder(), enqueue=False)
    for run in IngestionRun.objects.filter(index_version=v2):
        assert claim(run)
        ingest_document(run, registry.text_embedder())
    v1 = IndexVersion.objects.get(collection=indexed, number=1)
    act(admin_client, "knowledge/indexversion", "make_active", v1.pk)
    assert Collection.objects.get(pk=indexed.pk).active_version_id == v1.pk


def test_it_cancels_and_retries_runs_from_the_admin(admin_client, private_collection):
    document, run = actions.do_add_document(private_collection, "a.md", b"# A\n\ntext", enqueue=False)
    assert run is not None
    act(admin_client, "ingestion/ingestionrun", "cancel", run.pk)
    run.refresh_from_db()
    assert run.cancel_requested is True
    act(admin_client, "ingestion/ingestionrun", "retry", run.pk)
    act(admin_client, "knowledge/document", "rerun", document.pk)
    assert IngestionRun.objects.filter(document=document).count() == 3
    assert Document.objects.get(pk=document.pk).status == "pending"
