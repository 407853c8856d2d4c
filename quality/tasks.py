"""Thin Celery wrappers (Saleor's style): ids in, quality.runs does the work."""

from __future__ import annotations

from celery import shared_task

from common.runs import claim
from quality import runs
from quality.models import EvaluationRun


# On the `evaluation` queue (quality.* in portal/celery.py): its own worker, so that an
# evaluation of hundreds of questions never holds up an upload; it waits for answers itself.
@shared_task(name="quality.evaluate_version", acks_late=True, ignore_result=True)
def evaluate_version(run_id: int) -> str | None:
    run = EvaluationRun.objects.select_related("collection", "version", "baseline").filter(pk=run_id).first()
    if run is None or not claim(run, progress=0):
        return None  # deleted with its collection, or another worker has it
    return runs.execute(run).status
