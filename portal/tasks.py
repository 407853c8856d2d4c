from __future__ import annotations

import time

from celery import shared_task

from portal.health import HEARTBEAT_KEY, redis_client


@shared_task(name="portal.tasks.heartbeat")
def heartbeat() -> float:
    """Run by beat every 30 s: proves a worker takes jobs off the queue, for /healthz."""
    now = time.time()
    redis_client().set(HEARTBEAT_KEY, str(now), ex=600)
    return now
