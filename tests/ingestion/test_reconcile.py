"""The reconciler (ingestion/reconcile.py): each stuck state forced in the database, the
reconciler run, the state mended; the same finding sent back at most PORTAL_RECONCILE_TRIES
times, then failed with a message a person can act on."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from common.runs import claim
from ingestion import actions, pipeline, reconcile
from ingestion.models import Finding, IngestionRun
from knowledge.models import Document, IndexVersion
from providers import registry
from tests.ingestion.runs import drain
from tests.ingestion.test_recovery import long_pdf

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("media")]

LONG_AGO = timedelta(hours=1)


def uploaded(collection, name="a.md", text=b"# A\n\nThe ferry leaves at nine."):
    document, run = actions.do_add_document(collection, name, text, enqueue=False)
    assert run is not None
    return document, run


def ended_without_finishing(run: IngestionRun) -> None:
    """The race fixed in 8f248cf: the run recorded as succeeded, 0 pages, its document left pending."""
    IngestionRun.objects.filter(pk=run.pk).update(status="succeeded", finished_at=timezone.now(), counts={"pages": 0})


def silent(run: IngestionRun) -> None:
    """Claimed by a worker that was then killed: running, its heartbeat long gone."""
    IngestionRun.objects.filter(pk=run.pk).update(status="running", heartbeat_at=timezone.now() - LONG_AGO)


def test_it_finds_nothing_on_a_healthy_collection(private_collection):
    document, _run = uploaded(private_collection)
    drain(private_collection)
    assert Document.objects.get(pk=document.pk).status == "ready"
    assert reconcile.find(broker_idle=True) == []
    assert reconcile.reconcile(broker_idle=True) == []


def test_it_sends_back_a_document_whose_run_ended_without_finishing_it(private_collection):
    document, run = uploaded(private_collection)
    ended_without_finishing(run)

    [finding] = reconcile.reconcile(broker_idle=True)

    assert (finding.kind, finding.outcome, finding.attempt) == ("document_stuck", "sent_back", 1)
    assert finding.reason == "its last run ended without finishing it"
    again = IngestionRun.objects.get(document=document, status="queued")
    assert finding.run == again  # shown on the admin's runs page with the new run
    document.refresh_from_db()
    assert document.status == "pending"
    assert document.error.startswith("Re-queued at ")
    assert "after its last run ended without finishing it (try 1 of 3)" in document.error
    assert reconcile.find(broker_idle=True) == []  # sent back once: it has a live run now
    drain(private_collection)
    document.refresh_from_db()
    assert (document.status, document.error) == ("ready", "")


def test_it_fails_a_stuck_document_after_the_tries(private_collection, settings):
    settings.RECONCILE_TRIES = 2
    document, run = uploaded(private_collection)
    for attempt in (1, 2):
        ended_without_finishing(run)
        [finding] = reconcile.reconcile(broker_idle=True)
        assert (finding.outcome, finding.attempt) == ("sent_back", attempt)
        run = IngestionRun.objects.get(document=document, status="queued")
    ended_without_finishing(run)

    [finding] = reconcile.reconcile(broker_idle=True)

    assert (finding.outcome, finding.attempt) == ("failed", 3)
    document.refresh_from_db()
    assert document.status == "failed"
    assert document.error.startswith("It was queued again 2 times and no run finished it")
    assert "Run it again" in document.error
    assert not IngestionRun.objects.filter(document=document, status="queued").exists()
    assert reconcile.find(broker_idle=True) == []


def test_a_document_left_processing_by_a_cancelled_run_fails_as_the_run_says(private_collection):
    document, run = uploaded(private_collection)
    Document.objects.filter(pk=document.pk).update(status="processing")
    IngestionRun.objects.filter(pk=run.pk).update(
        status="cancelled", error="Cancelled before the end; run it again to finish.", finished_at=timezone.now()
    )

    [finding] = reconcile.reconcile(broker_idle=True)

    assert (finding.kind, finding.outcome) == ("document_stuck", "failed")
    document.refresh_from_db()
    assert (document.status, document.error) == ("failed", "Cancelled before the end; run it again to finish.")
    assert IngestionRun.objects.filter(document=document).count() == 1  # not run against the wish


def test_it_queues_a_silent_run_again_then_fails_it_after_the_tries(private_collection, settings):
    settings.RECONCILE_TRIES = 2
    document, run = uploaded(private_collection)
    for attempt in (1, 2):
        silent(run)
        [finding] = reconcile.reconcile(broker_idle=False)
        assert (finding.kind, finding.outcome, finding.attempt, finding.run) == (
            "run_silent",
            "sent_back",
            attempt,
            run,
        )
        run.refresh_from_db()
        assert run.status == "queued"  # the same run, by common.runs.requeue_stale
        assert "worker stopped" in run.error
    silent(run)

    [finding] = reconcile.reconcile(broker_idle=False)

    assert finding.outcome == "failed"
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error.startswith("Its worker stopped 3 times while working on it")
    document.refresh_from_db()
    assert (document.status, document.error) == ("failed", run.error)


def test_a_live_run_is_left_alone(private_collection):
    _document, run = uploaded(private_collection)
    IngestionRun.objects.filter(pk=run.pk).update(status="running", heartbeat_at=timezone.now())
    assert reconcile.reconcile(broker_idle=True) == []
    assert IngestionRun.objects.get(pk=run.pk).status == "running"


def test_it_sends_a_lost_run_again_once_per_period_and_fails_it_after_the_tries(private_collection, settings):
    settings.RECONCILE_TRIES = 1
    document, run = uploaded(private_collection)
    IngestionRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - LONG_AGO)
    assert reconcile.find(broker_idle=False) == []  # a message may still wait in the broker

    [finding] = reconcile.reconcile(broker_idle=True)

    assert (finding.kind, finding.outcome, finding.run) == ("run_lost", "sent_back", run)
    run.refresh_from_db()
    assert run.status == "queued"
    assert run.heartbeat_at > timezone.now() - timedelta(minutes=1)  # when it was sent again
    assert reconcile.find(broker_idle=True) == []  # not again until another period has passed
    IngestionRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - LONG_AGO)

    [finding] = reconcile.reconcile(broker_idle=True)

    assert finding.outcome == "failed"
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error.startswith("Its task was sent 2 times and no worker took it.")
    assert Document.objects.get(pk=document.pk).status == "failed"


def test_it_stops_the_parts_of_a_split_document_left_behind(private_collection):
    document, root = uploaded(private_collection, "manual.pdf", long_pdf(10))
    assert claim(root)
    pipeline.ingest_document(root, registry.text_embedder(), part_pages=4)
    first, second = IngestionRun.objects.filter(part_of=root).order_by("first_page")
    # The first part failed for good a while ago; the second was never taken.
    IngestionRun.objects.filter(pk=first.pk).update(status="failed", finished_at=timezone.now() - LONG_AGO)
    Document.objects.filter(pk=document.pk).update(status="failed", error="The part could not be read.")

    [finding] = reconcile.reconcile(broker_idle=False)

    assert (finding.kind, finding.outcome, finding.run) == ("part_left", "stopped", second)
    second.refresh_from_db()
    assert (second.status, second.cancel_requested) == ("cancelled", True)
    assert "another part of the same document failed" in second.error
    assert reconcile.find(broker_idle=True) == []


def test_it_finishes_an_index_version_building_with_nothing_left_to_do(private_collection, settings):
    settings.RECONCILE_TRIES = 1
    document, _run = uploaded(private_collection)
    drain(private_collection)
    version = actions.do_reindex(private_collection, enqueue=False)
    # Its one run ended without building it (a failure that left the document as it was).
    IngestionRun.objects.filter(index_version=version).update(status="failed", finished_at=timezone.now())

    [finding] = reconcile.reconcile(broker_idle=False)

    assert (finding.kind, finding.outcome, finding.index_version) == ("version_idle", "sent_back", version)
    assert IngestionRun.objects.filter(document=document, status="queued").exists()
    drain(private_collection)
    version.refresh_from_db()
    assert version.status == IndexVersion.Status.ACTIVE  # built, and flipped
    assert reconcile.find(broker_idle=True) == []


def test_it_fails_an_index_version_that_stays_idle_after_the_tries(private_collection, settings):
    settings.RECONCILE_TRIES = 1
    uploaded(private_collection)
    drain(private_collection)
    version = actions.do_reindex(private_collection, enqueue=False)
    for outcome in ("sent_back", "failed"):
        IngestionRun.objects.filter(collection=private_collection, status="queued").update(
            status="failed", finished_at=timezone.now()
        )
        [finding] = reconcile.reconcile(broker_idle=False)
        assert (finding.kind, finding.outcome) == ("version_idle", outcome)
    version.refresh_from_db()
    assert version.status == IndexVersion.Status.FAILED
    assert finding.reason.startswith(f"Index version {version.number} could not index 1 document(s) (a.md)")
    assert Finding.objects.filter(index_version=version).count() == 2
