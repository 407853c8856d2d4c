"""Creating and queueing ingestion runs: a run's task is sent by name once the transaction
that created it commits (common.runs). The actions (actions.py), a reindex (versions.py)
and the requeueing of stale runs share these."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction

from common.runs import send_on_commit
from common.storage import local_copy
from ingestion.models import IngestionRun
from ingestion.parsers.base import ParseError
from ingestion.parsers.formats import parser_for
from knowledge.models import Document

QUICK_PAGES = 5  # pages (slides, pictures) a document on the quick queue may have


def enqueue_run(run: IngestionRun) -> None:
    """Queue the run's task once the transaction that created it commits: a small document's
    on the quick queue (settings.QUICK_INGEST_BYTES), the rest on the ingest queue."""
    send_on_commit(IngestionRun.task_name, run.pk, queue="quick" if quick(run) else "ingest")


def quick(run: IngestionRun) -> bool:
    """Whether the run is one small document (a note, a photo, a page or two), which a person
    is waiting to search: at most settings.QUICK_INGEST_BYTES and QUICK_PAGES pages (a text
    PDF of 60 pages fits in 50 KB; formats that cannot count cheaply count as one, and text
    whose sections cost no more than their embedding, Parser.cheap_pages, any number)."""
    document = run.document
    if run.kind != IngestionRun.Kind.INGEST or document is None or document.size > settings.QUICK_INGEST_BYTES:
        return False
    try:
        parser = parser_for(document.mime)
        if parser.cheap_pages:
            return True
        with local_copy(document.file) as path:
            pages = parser.count(path)
    except (ParseError, OSError):  # unsupported or gone: the run says why, on either queue
        return False
    return (pages or 1) <= QUICK_PAGES


def new_ingest_run(document: Document, *, enqueue: bool = True) -> IngestionRun:
    """A run that ingests the document again: pages still valid are kept, the rest redone."""
    with transaction.atomic():
        run = IngestionRun.objects.create(
            collection=document.collection, document=document, kind=IngestionRun.Kind.INGEST
        )
        if enqueue:
            enqueue_run(run)
    return run
