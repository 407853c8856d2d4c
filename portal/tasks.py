from __future__ import annotations

import time

from celery import shared_task

from common.runs import requeue_stale
from ingestion import reconcile as reconciler
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


@shared_task(name="portal.reconcile")
def reconcile() -> int:
    """Run by beat every minute: ingestion's reconciler (stuck documents, runs silent or lost,
    parts left behind, versions building with nothing to do: ingestion/reconcile.py), then
    the other kinds of run whose worker stopped. What was acted on."""
    mended = reconciler.reconcile(broker_idle=reconciler.broker_idle())
    return len(mended) + _requeue_other_runs()


@shared_task(name="portal.requeue_stale_runs")
def requeue_stale_runs() -> int:
    """Every kind of run whose worker stopped giving signs of life, queued again by the one
    rule of common.runs: ingestion's through the reconciler, which bounds the tries."""
    ingestion = [finding for problem in reconciler.silent_runs() if (finding := reconciler.mend(problem))]
    return len(ingestion) + _requeue_other_runs()


def _requeue_other_runs() -> int:
    syncs = requeue_stale(SyncRun.objects.all(), SyncRun.send)
    evaluations = requeue_stale(EvaluationRun.objects.all(), enqueue_evaluation)
    return len(syncs) + len(evaluations)
