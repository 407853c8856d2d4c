"""A document that failed, said in one place: its status and error, the pages it wrote but did
not finish out of search, and the collection's page told. The run that failed it (the
pipeline), the reconciler that gave up on it, and a run that ended without it ready
(IngestionRun.failed_unfinished) all fail it here."""

from __future__ import annotations

from collections.abc import Sequence

from ingestion import stats
from knowledge.events import send_collection_event_on_commit
from knowledge.models import Document


def fail_document(document: Document, message: str, run_id: int | None, *, only_from: Sequence[str] = ()) -> bool:
    """`document` failed with `message` (the run's id goes with the event); `only_from`: only
    while its status is one of these. False when it was not failed (its status had moved on)."""
    rows = Document.objects.filter(pk=document.pk)
    if only_from:
        rows = rows.filter(status__in=only_from)
    if not rows.update(status=Document.Status.FAILED, error=message):
        return False
    stats.withdraw_unfinished(document.pk)
    send_collection_event_on_commit(
        document.collection_id, {"type": "document.failed", "document": document.pk, "run": run_id, "error": message}
    )
    return True
