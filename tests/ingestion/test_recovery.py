"""A worker killed mid-document: only the pages it wrote are searchable, the stale run is
noticed, and the run queued again completes it, keeping the pages already done and counting
none twice."""

from __future__ import annotations

import os
import signal
from datetime import timedelta

import psutil
import pytest
from django.utils import timezone

from ingestion import actions
from ingestion.models import IngestionRun
from knowledge.models import Chunk, Document, IndexedDocument, IndexedPage
from portal.tasks import requeue_stale_runs
from tests.conftest import celery_worker, wait_for
from tests.ingestion.runs import kept_statistics, recounted

pytestmark = [pytest.mark.stack, pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("media")]


def long_pdf(pages: int) -> bytes:
    import pymupdf

    document = pymupdf.open()
    for number in range(1, pages + 1):
        page = document.new_page()
        text = f"Chapter {number}. " + f"Rule {number} says travel costs are reimbursed with receipts. " * 12
        page.insert_textbox(pymupdf.Rect(72, 72, 520, 760), text, fontsize=10)
    data: bytes = document.tobytes()
    return data


def test_it_recovers_from_a_worker_killed_mid_document(private_collection, tmp_path, settings):
    settings.RUN_STALE_MINUTES = 10
    document, run = actions.do_add_document(private_collection, "long.pdf", long_pdf(60))
    assert run is not None
    log = tmp_path / "worker.log"
    with celery_worker(log) as worker:
        # Pages are written a batch at a time (ingestion.index.EMBED_BATCH_CHARS): wait for written ones.
        wait_for(
            lambda: IndexedPage.objects.filter(page__document=document).count() >= 3, 120, "a few pages indexed", log
        )
        for process in [psutil.Process(worker.pid), *psutil.Process(worker.pid).children(recursive=True)]:
            os.kill(process.pid, signal.SIGKILL)
        worker.wait()
    run.refresh_from_db()
    assert run.status == "running"
    assert 3 <= run.progress < 60
    assert not IndexedDocument.objects.filter(document=document).exists()  # not whole
    # The pages written before the kill stay searchable, and only those.
    searchable = set(Chunk.objects.filter(document=document, searchable=True).values_list("page__number", flat=True))
    assert 1 in searchable
    assert len(searchable) < 60
    done_before = IndexedPage.objects.filter(page__document=document).count()
    assert done_before >= 3

    IngestionRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=11))
    assert requeue_stale_runs() == 1  # beat's minute check
    again = IngestionRun.objects.get(pk=run.pk)  # the same run, queued again with its task
    assert again.status == "queued"
    assert "worker stopped" in again.error
    with celery_worker(tmp_path / "worker2.log"):
        # The run ends just after the document turns ready: wait for the run, not the document.
        wait_for(
            lambda: IngestionRun.objects.get(pk=again.pk).status not in ("queued", "running"),
            180,
            "the second run finished",
            tmp_path / "worker2.log",
        )
    again.refresh_from_db()
    assert again.status == "succeeded"
    assert Document.objects.get(pk=document.pk).status == "ready"
    assert again.counts["pages_kept"] >= done_before  # finished pages were not embedded again
    assert IndexedDocument.objects.filter(document=document).exists()
    private_collection.refresh_from_db()
    assert kept_statistics(private_collection.active_version_id) == recounted(private_collection.active_version_id)


def test_it_leaves_live_runs_alone(private_collection, settings):
    settings.RUN_STALE_MINUTES = 10
    _document, run = actions.do_add_document(private_collection, "a.md", b"# A\n\ntext", enqueue=False)
    assert run is not None
    IngestionRun.objects.filter(pk=run.pk).update(status="running", heartbeat_at=timezone.now())
    assert requeue_stale_runs() == 0
    assert IngestionRun.objects.get(pk=run.pk).status == "running"


def test_a_queued_run_whose_message_was_lost_is_sent_again_and_completes(private_collection, tmp_path):
    """Redis restarted without its data (the embedded one keeps none): the queued upload's
    task message is gone. Beat's check finds the broker's ingest queue empty and sends it
    again; a run queued a moment ago is left alone."""
    from ingestion.reconcile import queue_waiting
    from ingestion.tasks import resend_lost_runs as beat_check

    lost, lost_run = actions.do_add_document(
        private_collection, "lost.md", b"# Lost\n\nThe ferry leaves at nine.", enqueue=False
    )
    recent, recent_run = actions.do_add_document(
        private_collection, "recent.md", b"# Recent\n\nNew text.", enqueue=False
    )
    assert lost_run is not None
    assert recent_run is not None
    IngestionRun.objects.filter(pk=lost_run.pk).update(created_at=timezone.now() - timedelta(hours=1))
    log = tmp_path / "worker.log"
    with celery_worker(log) as worker:
        wait_for(lambda: b"ready." in log.read_bytes() or worker.poll() is not None, 60, "worker start", log)
        # Messages earlier tests left in this Redis database are drained first.
        wait_for(lambda: queue_waiting("ingest") == 0, 60, "ingest queue drained", log)
        assert beat_check() == 1
        wait_for(lambda: Document.objects.get(pk=lost.pk).status == Document.Status.READY, 120, "lost run done", log)
        assert beat_check() == 0  # sent once per stale period, not every minute
    assert IngestionRun.objects.get(pk=lost_run.pk).status == IngestionRun.Status.SUCCEEDED
    assert IngestionRun.objects.get(pk=recent_run.pk).status == IngestionRun.Status.QUEUED
    assert Document.objects.get(pk=recent.pk).status == Document.Status.PENDING
