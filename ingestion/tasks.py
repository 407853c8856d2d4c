"""Thin Celery wrappers (Saleor's style): ids in, the pipeline does the work, the run records it."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.db import InterfaceError, OperationalError

from common.runs import claim
from ingestion import pipeline, reconcile, versions
from ingestion.models import IngestionRun
from providers import registry
from providers.base import ProviderError

RUN_WAIT_SECONDS = 3  # a run whose document another run is reading asks again after this


@shared_task(
    name="ingestion.ingest_document",
    bind=True,
    # A model error that may pass, or the database lost mid-run (restarted): try again later.
    autoretry_for=(ProviderError, OperationalError, InterfaceError),
    retry_backoff=5,
    retry_backoff_max=300,
    max_retries=5,
    acks_late=True,
)
def ingest_document(self, run_id: int) -> dict[str, int] | None:  # type: ignore[no-untyped-def]
    run = IngestionRun.objects.select_related("document__collection").filter(pk=run_id).first()
    if run is None:
        return None  # deleted with its document meanwhile
    if self.request.retries:
        # This task's earlier try failed the run (or, with the database gone, could not even
        # record that and left it running): put it back in the queue state to claim it again.
        ended = (IngestionRun.Status.FAILED, IngestionRun.Status.RUNNING)
        IngestionRun.objects.filter(pk=run.pk, status__in=ended).update(status=IngestionRun.Status.QUEUED, error="")
    if pipeline.another_run_reading(run):
        # One document is read by one run at a time (two would write the same pages): a
        # reindex run made while the document's upload run was running waits for it.
        raise self.retry(countdown=RUN_WAIT_SECONDS, max_retries=None)
    if not claim(run):
        return None  # another worker has it, or it already finished
    result = pipeline.ingest_document(run, registry.text_embedder(), part_pages=settings.INGEST_PART_PAGES)
    return result.as_counts() if result else None


@shared_task(name="ingestion.resend_lost_runs")
def resend_lost_runs() -> int:
    """Queued runs whose message the broker lost, sent again: the reconciler's own step, which
    beat runs with the others (portal.reconcile); kept for a person to run alone."""
    if not reconcile.broker_idle():  # a message waits, so the queued runs may still have theirs
        return 0
    return len([finding for problem in reconcile.lost_runs() if (finding := reconcile.mend(problem))])


@shared_task(name="ingestion.reindex_outdated")
def reindex_outdated() -> int:
    """Run by beat every few minutes: a changed embedder or chunk settings get a new version."""
    return len(versions.reindex_outdated(registry.text_embedder()))
