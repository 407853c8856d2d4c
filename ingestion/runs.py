"""Creating and queueing ingestion runs: a run's task is sent once the transaction that
created it commits. The actions (actions.py), a reindex (versions.py) and the pipeline's
requeueing of stale runs share these; they import no action, so actions.py may import them."""

from __future__ import annotations

from django.db import transaction

from ingestion.models import IngestionRun
from knowledge.models import Document


def enqueue_run(run: IngestionRun) -> None:
    """Queue the run's task once the transaction that created it commits."""
    from ingestion.tasks import ingest_document  # tasks imports the pipeline, which imports this

    transaction.on_commit(lambda: ingest_document.delay(run.pk))


def new_ingest_run(document: Document, *, enqueue: bool = True) -> IngestionRun:
    """A run that ingests the document again: pages still valid are kept, the rest redone."""
    with transaction.atomic():
        run = IngestionRun.objects.create(
            collection=document.collection, document=document, kind=IngestionRun.Kind.INGEST
        )
        if enqueue:
            enqueue_run(run)
    return run
