"""The Celery app: queues `ingest` (documents), `memory` (memory extraction, which waits for
answers and ingestion), `evaluation` (index versions measured on golden questions, which
waits for answers) and `default`, configured from Django settings."""

import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

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
    "requeue-stale-runs": {"task": "portal.requeue_stale_runs", "schedule": 60.0},
    "resend-lost-runs": {"task": "ingestion.resend_lost_runs", "schedule": 60.0},
    "sources-due": {"task": "sources.sync_due", "schedule": 60.0},
    "reindex-outdated": {"task": "ingestion.reindex_outdated", "schedule": 300.0},
    # Audit entries older than PORTAL_AUDIT_DAYS go, once a day.
    "prune-audit-log": {"task": "audit.prune", "schedule": 86400.0},
}


@after_setup_logger.connect
@after_setup_task_logger.connect
def _redact_worker_logs(logger, **kwargs):  # type: ignore[no-untyped-def]
    """Celery replaces the root logger's handlers with its own: they scrub secrets too."""
    redact_handlers(logger)
