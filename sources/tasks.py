"""Celery tasks: one sync run (queue `ingest`, beside the documents it queues), and beat's
minute check for sources that are due."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from common.runs import claim
from sources import schedule, sync
from sources.actions import do_start_sync
from sources.models import Source, SyncRun


@shared_task(name="sources.sync_source", acks_late=True)
def sync_source(run_id: int) -> dict[str, int] | None:
    run = SyncRun.objects.select_related("source__collection").filter(pk=run_id).first()
    if run is None or not claim(run):
        return None  # the source was removed, or another worker has the run
    return sync.execute(run).counts


@shared_task(name="sources.sync_due")
def sync_due() -> int:
    """Run by beat every minute: start the sources whose time has come (runs whose worker
    stopped are queued again by portal.reconcile, as every kind of run is)."""
    now = timezone.now()
    started = 0
    due = Source.objects.filter(enabled=True, credentials_cleared=False, next_sync_at__lte=now)
    for source in due.select_related("collection"):
        do_start_sync(source, trigger=SyncRun.Trigger.SCHEDULE)
        Source.objects.filter(pk=source.pk).update(next_sync_at=schedule.next_after(source.schedule, now))
        started += 1
    return started
