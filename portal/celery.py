"""The Celery app: queues `ingest` (documents), `memory` (memory extraction, which waits for
answers and ingestion), `evaluation` (index versions measured on golden questions, which
waits for answers) and `default`, configured from Django settings."""

import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger
from django.conf import settings

from portal.redact import redact_handlers

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.conf.task_routes = {
    "ingestion.*": {"queue": "ingest"},
    "sources.*": {"queue": "ingest"},
    "assistant.remember_turn": {"queue": "memory"},
    "quality.*": {"queue": "evaluation"},
}
app.conf.beat_schedule = {
    "worker-heartbeat": {"task": "portal.tasks.heartbeat", "schedule": 30.0},
    # Stuck ingestion found and sent back, and runs of every kind whose worker stopped
    # queued again (ingestion/reconcile.py; `manage.py doctor` runs the same checks).
    "reconcile": {"task": "portal.reconcile", "schedule": 60.0},
    "sources-due": {"task": "sources.sync_due", "schedule": 60.0},
    "reindex-outdated": {"task": "ingestion.reindex_outdated", "schedule": 300.0},
    # Audit entries older than PORTAL_AUDIT_DAYS go, once a day.
    "prune-audit-log": {"task": "audit.prune", "schedule": 86400.0},
}


@app.on_after_finalize.connect
def _schedule_backups(sender: Celery, **kwargs: object) -> None:
    """With PORTAL_BACKUP_DIR, a backup (without secrets) every PORTAL_BACKUP_EVERY_HOURS,
    keeping the newest PORTAL_BACKUP_KEEP. Read once the settings are loaded."""
    if settings.BACKUP_DIR is not None:
        sender.conf.beat_schedule["backup"] = {
            "task": "operations.backup",
            "schedule": settings.BACKUP_EVERY_HOURS * 3600.0,
        }


@after_setup_logger.connect
@after_setup_task_logger.connect
def _redact_worker_logs(logger, **kwargs):  # type: ignore[no-untyped-def]
    """Celery replaces the root logger's handlers with its own: they scrub secrets too."""
    redact_handlers(logger)
