"""Celery tasks: one sync run (queue `ingest`, beside the documents it queues), and beat's
minute check for sources that are due or whose run lost its worker."""

from __future__ import annotations

from datetime import timedelta
from functools import partial

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from sources import schedule, sync
from sources.models import Source, SyncRun


@shared_task(name="sources.sync_source", acks_late=True)
def sync_source(run_id: int) -> dict[str, int] | None:
    run = SyncRun.objects.select_related("source__collection").filter(pk=run_id).first()
    if run is None or not sync.claim(run):
        return None  # the source was removed, or another worker has the run
    return sync.execute(run).counts


@shared_task(name="sources.sync_due")
def sync_due() -> int:
    """Run by beat every minute: start the sources whose time has come, and queue again the
    runs whose worker stopped (no sign of life for PORTAL_RUN_STALE_MINUTES)."""
    from sources.actions import do_start_sync

    now = timezone.now()
    stale = now - timedelta(minutes=settings.RUN_STALE_MINUTES)
    silent = Q(heartbeat_at__lt=stale) | Q(heartbeat_at__isnull=True)
    lost = SyncRun.objects.filter(silent, status=SyncRun.Status.RUNNING)
    for run_id in lost.values_list("pk", flat=True):
        if SyncRun.objects.filter(pk=run_id, status=SyncRun.Status.RUNNING).update(status=SyncRun.Status.QUEUED):
            transaction.on_commit(partial(sync_source.delay, run_id))
    started = 0
    due = Source.objects.filter(enabled=True, credentials_cleared=False, next_sync_at__lte=now)
    for source in due.select_related("collection"):
        do_start_sync(source, trigger=SyncRun.Trigger.SCHEDULE)
        Source.objects.filter(pk=source.pk).update(next_sync_at=schedule.next_after(source.schedule, now))
        started += 1
    return started
