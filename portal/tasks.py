from __future__ import annotations

import time

from celery import shared_task

from common.runs import requeue_stale
from ingestion.models import IngestionRun
from ingestion.runs import enqueue_run
from portal.health import HEARTBEAT_KEY, redis_client
from quality.models import EvaluationRun
from quality.runs import enqueue as enqueue_evaluation
from sources.models import SyncRun


@shared_task(name="portal.tasks.heartbeat")
def heartbeat() -> float:
    """Run by beat every 30 s: proves a worker takes jobs off the queue, for /healthz."""
    now = time.time()
    redis_client().set(HEARTBEAT_KEY, str(now), ex=600)
    return now


@shared_task(name="portal.requeue_stale_runs")
def requeue_stale_runs() -> int:
    """Run by beat every minute: every kind of run whose worker stopped giving signs of life
    is queued again by the one rule of common.runs."""
    ingestion = requeue_stale(IngestionRun.objects.filter(document__isnull=False), enqueue_run)
    syncs = requeue_stale(SyncRun.objects.all(), SyncRun.send)
    evaluations = requeue_stale(EvaluationRun.objects.all(), enqueue_evaluation)
    return len(ingestion) + len(syncs) + len(evaluations)
