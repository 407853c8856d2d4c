"""Thin tasks: the work is in operations.actions."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from operations.actions import do_backup


@shared_task(name="operations.backup")
def scheduled_backup() -> str:
    """Run by beat every PORTAL_BACKUP_EVERY_HOURS when PORTAL_BACKUP_DIR is set: one backup
    without secrets, keeping the newest PORTAL_BACKUP_KEEP."""
    if settings.BACKUP_DIR is None:
        return ""
    return str(do_backup(settings.BACKUP_DIR, keep=settings.BACKUP_KEEP).path)
