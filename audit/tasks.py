"""Retention: beat runs `audit.prune` daily (portal/celery.py)."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from audit.models import Entry

BATCH = 10_000


@shared_task(name="audit.prune")
def prune() -> int:
    """Delete the entries older than AUDIT_DAYS (PORTAL_AUDIT_DAYS; 0 keeps them for ever),
    a batch at a time so that no statement holds the table long. Returns how many went."""
    days = settings.AUDIT_DAYS
    if days <= 0:
        return 0
    cutoff = timezone.now() - timedelta(days=days)
    deleted = 0
    while True:
        batch = list(Entry.objects.filter(at__lt=cutoff).values_list("pk", flat=True)[:BATCH])
        if not batch:
            return deleted
        deleted += Entry.objects.filter(pk__in=batch).delete()[0]
