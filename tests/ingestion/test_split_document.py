"""A long PDF split among the ingest workers (ingestion.pipeline `_split`): the worker that
takes it reads the first pages and queues the rest in parts; whichever part ends last
finishes the document. In process here (each part run as a worker would run it), then with
two real workers sharing one document."""

from __future__ import annotations

import re

import pytest

from common.runs import claim
from ingestion import actions, pipeline
from ingestion.models import IngestionRun
from knowledge.models import Chunk, Document, IndexedDocument, Page
from portal.supervisor import worker_command
from providers import registry
from tests.ingestion.test_recovery import long_pdf
from tests.stack import process, wait_for

pytestmark = pytest.mark.usefixtures("media")


def searchable_pages(document: Document) -> set[int]:
    chunks = Chunk.objects.filter(document=document, searchable=True)
    return set(chunks.values_list("page__number", flat=True))


@pytest.mark.django_db
def test_a_long_pdf_is_read_in_parts_and_the_last_part_finishes_it(private_collection):
    document, root = actions.do_add_document(private_collection, "manual.pdf", long_pdf(10), enqueue=False)
    assert root is not None
    assert claim(root)
    embedder = registry.text_embedder()
    result = pipeline.ingest_document(root, embedder, part_pages=4)
    assert result is not None
    assert result.pages == 4  # its own range only
    root.refresh_from_db()
    assert (root.status, root.first_page, root.last_page, root.total) == ("succeeded", 1, 4, 10)
    parts = list(IngestionRun.objects.filter(part_of=root).order_by("first_page"))
    assert [(p.first_page, p.last_page, p.total, p.status) for p in parts] == [
        (5, 8, 4, "queued"),
        (9, 10, 2, "queued"),
    ]
    document.refresh_from_db()
    assert document.status == Document.Status.PROCESSING  # not whole until every part ends
    assert searchable_pages(document) == {1, 2, 3, 4}  # the first pages answer already
    assert not IndexedDocument.objects.filter(document=document).exists()

    # The parts end in any order: the one that ends last finishes the document.
    for part in reversed(parts):
        assert claim(part)
        assert pipeline.ingest_document(part, embedder, part_pages=4) is not None
        part.refresh_from_db()
        assert part.status == "succeeded", part.error
    document.refresh_from_db()
    assert (document.status, document.page_count) == (Document.Status.READY, 10)
    assert sorted(Page.objects.filter(document=document).values_list("number", flat=True)) == list(range(1, 11))
    assert searchable_pages(document) == set(range(1, 11))
    assert IndexedDocument.objects.filter(document=document, sha256=document.sha256).exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("pages", "ranges"), [(7, None), (8, [(1, 4), (5, 8)]), (13, [(1, 4), (5, 8), (9, 13)])])
def test_parts_are_whole_ranges_and_a_short_rest_joins_the_last(private_collection, pages, ranges):
    _document, root = actions.do_add_document(private_collection, "m.pdf", long_pdf(pages), enqueue=False)
    assert root is not None
    assert claim(root)
    pipeline.ingest_document(root, registry.text_embedder(), part_pages=4)
    root.refresh_from_db()
    found: list[tuple[int | None, int | None]] = [(root.first_page, root.last_page)] if root.last_page else []
    found += list(
        IngestionRun.objects.filter(part_of=root).order_by("first_page").values_list("first_page", "last_page")
    )
    assert (found or None) == ranges


@pytest.mark.django_db
def test_cancelling_a_split_document_stops_its_parts(private_collection):
    _document, root = actions.do_add_document(private_collection, "manual.pdf", long_pdf(8), enqueue=False)
    assert root is not None
    assert claim(root)
    pipeline.ingest_document(root, registry.text_embedder(), part_pages=4)
    (part,) = IngestionRun.objects.filter(part_of=root)
    root.refresh_from_db()
    assert not actions.do_cancel_run(root)  # its own pages are done ...
    part.refresh_from_db()
    assert part.cancel_requested  # ... and its queued part stops at its first page
    assert claim(part)
    assert pipeline.ingest_document(part, registry.text_embedder(), part_pages=4) is None
    part.refresh_from_db()
    assert part.status == IngestionRun.Status.CANCELLED


@pytest.mark.stack
@pytest.mark.django_db(transaction=True)
def test_two_workers_read_one_long_pdf_together(private_collection, tmp_path):
    logs = [tmp_path / "worker-1.log", tmp_path / "worker-2.log"]
    env = {"PORTAL_INGEST_PART_PAGES": "6", "PORTAL_MODEL_THREADS": "1"}
    with (
        process(worker_command("split-1@%h", 1, "ingest"), logs[0], **env),
        process(worker_command("split-2@%h", 1, "ingest"), logs[1], **env),
    ):
        document, root = actions.do_add_document(private_collection, "manual.pdf", long_pdf(30))
        assert root is not None

        def ready() -> bool:
            return Document.objects.get(pk=document.pk).status in ("ready", "failed")

        wait_for(ready, 240, "the manual indexed by two workers", logs[0])
    document.refresh_from_db()
    assert (document.status, document.page_count) == (Document.Status.READY, 30), document.error
    runs = IngestionRun.objects.filter(document=document)
    assert runs.count() == 5  # the first run and four parts of 6 pages
    assert set(runs.values_list("status", flat=True)) == {"succeeded"}
    assert searchable_pages(document) == set(range(1, 31))
    # Each worker read some of it.
    for log in logs:
        done = re.findall(r"Task ingestion\.ingest_document\[[^\]]+\] succeeded", log.read_text())
        assert done, log.read_text()[-2000:]
