"""Whether the machine is doing work that people wait for: an answer that a local chat model is
writing (in any web process), or an ingestion queued or running. Memory extraction runs only
when neither is (assistant.tasks.remember_turn), so that it never slows an answer or an upload.

Answers in progress are members of a Redis sorted set scored by when they expire, so that a
process that dies mid-answer holds nobody up for longer than ANSWER_MARK_SECONDS.
"""

from __future__ import annotations

import logging
import time
import uuid
from datetime import timedelta
from functools import cache

import redis
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

log = logging.getLogger(__name__)

ANSWERING = "portal:answering"
ANSWER_MARK_SECONDS = 300  # an answer's mark lapses this long after its last event
TOUCH_SECONDS = 10  # an answer's events renew its mark at most this often


@cache
def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=2)


class Answering:
    """The mark of one answer in progress: `touch()` on every event, `end()` when done."""

    def __init__(self) -> None:
        self.token = uuid.uuid4().hex
        self.touched = 0.0
        self.touch()

    def touch(self) -> None:
        if time.monotonic() - self.touched < TOUCH_SECONDS:
            return
        self.touched = time.monotonic()
        try:
            _client(settings.REDIS_URL).zadd(ANSWERING, {self.token: time.time() + ANSWER_MARK_SECONDS})
        except redis.RedisError as exc:  # the answer matters more than its mark
            log.debug("Could not mark an answer in progress: %s", exc)

    def end(self) -> None:
        try:
            _client(settings.REDIS_URL).zrem(ANSWERING, self.token)
        except redis.RedisError as exc:
            log.debug("Could not clear an answer's mark: %s", exc)


def answers_in_progress() -> int:
    client = _client(settings.REDIS_URL)
    client.zremrangebyscore(ANSWERING, "-inf", time.time())
    return int(client.zcard(ANSWERING))


def ingestions_pending() -> int:
    """Ingestion runs queued or running, leaving out those with no sign of life for
    RUN_STALE_MINUTES (their worker died: beat queues them again)."""
    from ingestion.models import IngestionRun

    active = (IngestionRun.Status.QUEUED, IngestionRun.Status.RUNNING)
    alive = timezone.now() - timedelta(minutes=settings.RUN_STALE_MINUTES)
    recent = Q(heartbeat_at__gte=alive) | Q(heartbeat_at__isnull=True, created_at__gte=alive)
    return IngestionRun.objects.filter(recent, status__in=active).count()


def busy(*, ingestion: bool = True) -> str:
    """Why the machine is busy ("" when it is not); `ingestion=False`: answers only."""
    answering = answers_in_progress()
    if answering:
        return f"{answering} answer(s) in progress"
    pending = ingestions_pending() if ingestion else 0
    if pending:
        return f"{pending} ingestion(s) queued or running"
    return ""


def wait_until_idle(
    limit: float, *, poll: float = 1.0, ingestion: bool = True, what: str = "extract memories"
) -> float:
    """Wait while the machine is busy, at most `limit` seconds; the seconds waited.
    `ingestion=False` for a worker that serves the ingest queue itself: waiting for an
    ingestion queued behind the waiting task would wait the whole `limit`. `what` the
    waiting task does, for the log."""
    started = time.monotonic()
    reason = busy(ingestion=ingestion)
    if reason:
        log.info("Waiting to %s: %s", what, reason)
    while reason and time.monotonic() - started < limit:
        time.sleep(poll)
        reason = busy(ingestion=ingestion)
    if reason:
        log.warning("Going on to %s after waiting %.0f s, though %s", what, limit, reason)
    return time.monotonic() - started
