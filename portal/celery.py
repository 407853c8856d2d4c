"""The Celery app: queues `ingest` and `default`, configured from Django settings."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
app.conf.task_routes = {"ingestion.*": {"queue": "ingest"}}
app.conf.beat_schedule = {
    "worker-heartbeat": {"task": "portal.tasks.heartbeat", "schedule": 30.0},
    "requeue-stale-runs": {"task": "ingestion.requeue_stale_runs", "schedule": 60.0},
    "reindex-outdated": {"task": "ingestion.reindex_outdated", "schedule": 300.0},
}
